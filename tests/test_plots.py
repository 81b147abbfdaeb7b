"""Charts: the distance distribution behind simq calibrate (terminal and --plot image) and the cluster
sizes in simq stats, checked against the data they draw."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from test_cli import assert_clean_error, simq
from web_helpers import stored_index

from simhash_sqlite import SimhashIndex
from simhash_sqlite.analysis.calibrate import calibrate
from simhash_sqlite.web.plots import distance_distribution, random_pair_distances

has_matplotlib = importlib.util.find_spec("matplotlib") is not None


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("plots") / "index.db"
    stored_index(path)
    return path


def test_distribution_splits_the_calibration_and_counts_random_pairs(db):
    with SimhashIndex(db, readonly=True) as index:
        result = calibrate(index, max_k=16, per_distance=10)
        dist = distance_distribution(index, result, per_distance=10, random_pairs=12)
        documents = len(index)
    for row in result.rows:
        assert dist.similar[row.distance] + dist.dissimilar[row.distance] == row.pairs
        if row.pairs:
            assert dist.similar[row.distance] == pytest.approx(row.share_similar * row.pairs)
    assert sum(dist.similar[17:]) == sum(dist.dissimilar[17:]) == 0
    assert dist.random_pairs == min(12, documents // 2) and dist.suggested_k == result.suggested_k


def test_random_pairs_are_pairs_of_distinct_documents(tmp_path):
    """Every document holds a fingerprint with a different single bit set, so two distinct documents
    are always exactly 2 bits apart, and a document paired with itself would be 0."""
    with SimhashIndex(tmp_path / "bits.db", create=True) as index:
        index.add_fingerprints((f"d{i}", 1 << i) for i in range(64))
        distances = random_pair_distances(index.conn, 20, seed=4)
        everything = random_pair_distances(index.conn, 1000, seed=5)
    assert distances.tolist() == [2] * 20
    assert len(everything) == 32 and set(everything.tolist()) == {2}  # 64 documents: at most 32 pairs


@pytest.mark.skipif(not has_matplotlib, reason="no matplotlib: pip install '.[web]'")
def test_calibrate_draws_the_chart_and_writes_the_image(runner, db, tmp_path):
    image = tmp_path / "calibration.png"
    result = simq(runner, "calibrate", "--db", db, "--plot", image)
    assert result.exit_code == 0, result.output
    assert "Pairs by Hamming distance" in result.stdout
    suggested = [line for line in result.stdout.splitlines() if "◀" in line]
    assert any("suggested k" in line for line in suggested) and any("default k" in line for line in suggested)
    k = int(result.stdout.split("suggested k: ")[1].split()[0])
    assert any(line.split()[0] == str(k) for line in suggested if "suggested k" in line)
    data = image.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_calibrate_plot_without_matplotlib_is_one_clean_line(db, tmp_path):
    image = tmp_path / "no.png"
    code = (
        "import sys; sys.modules['matplotlib'] = None; sys.modules['matplotlib.figure'] = None; "
        "sys.argv = ['simq', 'calibrate', '--db', sys.argv[1], '--plot', sys.argv[2]]; "
        "from simhash_sqlite.cli.app import main; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(db), str(image)], check=False, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: drawing an image needs matplotlib: pip install 'simhash-sqlite[web]'"
    ]
    assert not image.exists()


def test_stats_shows_the_cluster_sizes(runner, db):
    with SimhashIndex(db, readonly=True) as index:
        brute = Counter(Counter(c for (c,) in index.conn.execute("SELECT cluster FROM clusters")).values())
    data = json.loads(simq(runner, "stats", "--db", db, "--json").stdout)
    assert {row["size"]: row["clusters"] for row in data["cluster_sizes"]} == dict(brute)
    table = simq(runner, "stats", "--db", db)
    assert table.exit_code == 0 and "Cluster sizes" in table.stdout
    for size in sorted(brute):
        if size > 2:
            low = 2 ** (int(np.ceil(np.log2(size))) - 1) + 1
            assert f"{low}-" in table.stdout


def test_stats_without_clusters_has_no_size_chart(runner, tmp_path):
    db = tmp_path / "bare.db"
    with SimhashIndex(db, create=True) as index:
        index.add_fingerprints([("a", 1), ("b", 3)])
    result = simq(runner, "stats", "--db", db)
    assert result.exit_code == 0 and "Cluster sizes" not in result.stdout
    assert json.loads(simq(runner, "stats", "--db", db, "--json").stdout)["cluster_sizes"] == []


def test_bad_plot_path_is_a_clean_error(runner, db, tmp_path):
    if not has_matplotlib:
        pytest.skip("no matplotlib: pip install '.[web]'")
    assert_clean_error(simq(runner, "calibrate", "--db", db, "--plot", tmp_path / "missing" / "x.png"), "missing")
