"""All pairs within k and clusters: exactness against brute force, hot groups, chains, write-back."""

import random
from math import comb

import numpy as np
import pytest
from conftest import integrity_ok
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_sqlite import Document, InvalidInput, hamming
from simhash_sqlite.find import pairs as pairs_module
from simhash_sqlite.find.block_tables import MAX_BLOCKS, BlockTables, choose_tables
from simhash_sqlite.find.clusters import component_labels
from simhash_sqlite.find.pairs import near_pairs

MASK = (1 << 64) - 1


def brute(fps: list[int], k: int) -> list[tuple[int, int, int]]:
    return sorted(
        (i, j, hamming(fps[i], fps[j]))
        for i in range(len(fps))
        for j in range(i + 1, len(fps))
        if hamming(fps[i], fps[j]) <= k
    )


def brute_numpy(fps: list[int], k: int) -> list[tuple[int, int, int]]:
    """The same reference for a few thousand fingerprints: the full distance matrix."""
    values = np.array(fps, dtype=np.uint64)
    d = np.bitwise_count(values[:, None] ^ values[None, :])
    i, j = np.nonzero(np.triu(d <= k, 1))
    return sorted(zip(i.tolist(), j.tolist(), d[i, j].tolist()))


def found(fps, k) -> list[tuple[int, int, int]]:
    out = []
    for part in near_pairs(np.array(fps, dtype=np.uint64), k):
        out.extend(zip(part.left.tolist(), part.right.tolist(), part.distance.tolist()))
    return sorted(out)  # duplicates would survive the sort and fail the comparison


def flip(fp: int, bits) -> int:
    for b in bits:
        fp ^= 1 << b
    return fp


@st.composite
def planted(draw):
    """Centres (all-zero and all-one among them), copies, and variants at chosen distances, some
    confined to one block of the layout (the case pigeonhole arguments hinge on)."""
    centres = [0, MASK] + draw(st.lists(st.integers(0, MASK), min_size=1, max_size=5))
    fps = []
    for c in centres:
        fps.append(c)
        for _ in range(draw(st.integers(0, 6))):
            d = draw(st.integers(0, 12))
            fps.append(flip(c, draw(st.lists(st.integers(0, 63), min_size=d, max_size=d, unique=True))))
        start = draw(st.integers(0, 56))
        fps.append(flip(c, draw(st.lists(st.integers(start, start + 7), min_size=1, max_size=8, unique=True))))
    draw(st.randoms()).shuffle(fps)
    return fps


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted(), st.integers(0, 64))
def test_pairs_equal_brute_force_for_any_k(fps, k):
    assert found(fps, k) == brute(fps, k)


@settings(max_examples=25, deadline=None)
@given(planted(), st.integers(0, 14))
def test_every_layout_is_exact_and_emits_each_pair_once(fps, k):
    """Force each possible block count (not only the cheapest) through the table search."""
    values = np.array(fps, dtype=np.uint64)
    if len(np.unique(values)) != len(values):
        values = np.unique(values)
    expected = brute(values.tolist(), k)
    original = pairs_module.choose_tables
    for m in range(k + 1, min(64, MAX_BLOCKS) + 1):
        if comb(m, k) > 40:
            break  # more tables only repeat the same code path, slower
        tables = BlockTables.split(k, m, max_tables=40)
        pairs_module.choose_tables = lambda w, k_, n, tables=tables, original=original: (
            tables if w == 64 else original(w, k_, n)
        )
        try:
            got = sorted(
                t
                for part in pairs_module.distinct_pairs(values, k)
                for t in zip(part.left.tolist(), part.right.tolist(), part.distance.tolist())
            )
        finally:
            pairs_module.choose_tables = original
        assert got == expected, m


def test_random_sets_with_planted_clusters_at_several_k():
    rng = random.Random(7)
    fps = [rng.getrandbits(64) for _ in range(3000)]
    for _ in range(400):
        fps.append(flip(rng.choice(fps), rng.sample(range(64), rng.randint(0, 6))))
    for k in (0, 1, 3, 4, 6, 9):
        assert found(fps, k) == brute_numpy(fps, k), k
    assert choose_tables(64, 3, 1_000_000) is not None  # large inputs use the tables, not all pairs


def test_hot_groups_are_searched_on_their_remaining_bits(monkeypatch):
    """Thousands sharing their top 32 bits (a template) and many identical copies (boilerplate)."""
    monkeypatch.setattr(pairs_module, "HOT_GROUP", 16)
    rng = random.Random(3)
    template = rng.getrandbits(32) << 32
    fps = [template | rng.getrandbits(32) for _ in range(600)]
    fps += [flip(f, rng.sample(range(32), rng.randint(1, 4))) for f in fps[:200]]
    fps += [fps[0]] * 150 + [rng.getrandbits(64) for _ in range(300)]
    rng.shuffle(fps)
    for k in (0, 2, 3, 5, 8):
        assert found(fps, k) == brute_numpy(fps, k), k


def test_chunks_stay_bounded_and_copies_expand_completely(monkeypatch):
    fps = [5] * 300 + [4] * 200 + [1 << 40]
    biggest = max(len(p.left) for p in near_pairs(np.array(fps, dtype=np.uint64), 1, chunk=1000))
    assert biggest <= 1000
    assert len(found(fps, 1)) == 300 * 299 // 2 + 200 * 199 // 2 + 300 * 200


def test_signed_input_and_bad_k():
    signed = np.array([-1, -2, 0], dtype=np.int64)  # 0xff..ff and 0xff..fe are 1 apart
    assert found(signed.view(np.uint64).tolist(), 1) == [(0, 1, 1)]
    for bad in (-1, 65, 2.5, True):
        with pytest.raises(InvalidInput):
            list(near_pairs(signed, bad))


def brute_components(fps, k):
    label = list(range(len(fps)))

    def root(x):
        while label[x] != x:
            x = label[x]
        return x

    for i, j, _ in brute(fps, k):
        a, b = root(i), root(j)
        label[max(a, b)] = min(a, b)
    return [root(i) for i in range(len(fps))]


@settings(max_examples=60, deadline=None)
@given(planted(), st.integers(0, 20))
def test_components_equal_brute_force(fps, k):
    assert component_labels(np.array(fps, dtype=np.uint64), k).tolist() == brute_components(fps, k)


def test_a_chain_is_one_component_though_its_ends_are_far_apart():
    a = 0
    b = flip(a, range(3))  # 3 from a
    c = flip(b, range(3, 6))  # 3 from b, 6 from a
    far = MASK
    labels = component_labels(np.array([far, c, a, b], dtype=np.uint64), 3).tolist()
    assert labels == [0, 1, 1, 1]
    assert found([a, c], 3) == []
    long_chain = [flip(0, range(i)) for i in range(64)]  # each 1 from the next
    assert set(component_labels(np.array(long_chain[::-1], dtype=np.uint64), 1).tolist()) == {0}


# -- the index: dupes, clusters written back -----------------------------------------------------


@pytest.fixture
def filled(index):
    rng = random.Random(11)
    items = []
    for c in range(30):
        centre = rng.getrandbits(64)
        items.append((f"c{c}", centre))
        for v in range(c % 4):
            items.append((f"c{c}v{v}", flip(centre, rng.sample(range(64), 2))))
    items.append(("copy", items[0][1]))
    index.add_fingerprints(items)
    index.add([Document("empty", "...")])  # no features: never pairs, a cluster of its own
    return index, items


def test_index_dupes_match_brute_force(filled):
    index, items = filled
    keys = [key for key, _ in items]
    for k in (0, 3, 6):
        expected = {(keys[i], keys[j], d) for i, j, d in brute([fp for _, fp in items], k)}
        got = [(p.first, p.second, p.distance) for p in index.dupes(k, check=False)]
        assert sorted(got) == sorted(expected) and len(set(got)) == len(got)
    assert ("c0", "copy", 0) in {(p.first, p.second, p.distance) for p in index.dupes(0, check=False)}


def test_clusters_are_written_back_and_reruns_are_idempotent(filled, db_path):
    index, items = filled
    report = index.clusters(4, check=False)
    fps = [fp for _, fp in items]
    expected_groups = {}
    for i, label in enumerate(brute_components(fps, 4)):
        expected_groups.setdefault(label, []).append(items[i][0])
    multi = sorted(tuple(g) for g in expected_groups.values() if len(g) > 1)
    assert sorted(c.members for c in index.cluster_list()) == multi
    assert report.documents == len(items) + 1 and report.clusters == len(expected_groups) + 1
    assert report.duplicates == len(items) - len(expected_groups)
    first = index.conn.execute("SELECT * FROM clusters ORDER BY id").fetchall()
    assert index.clusters(4, check=False) == report
    assert index.conn.execute("SELECT * FROM clusters ORDER BY id").fetchall() == first
    # SQL over the written clusters: sizes agree with GROUP BY, one representative each.
    grouped = index.conn.execute(
        "SELECT cluster, count(*), max(size), sum(id = representative) FROM clusters GROUP BY cluster"
    ).fetchall()
    assert all(count == size and reps == 1 for _, count, size, reps in grouped)
    assert integrity_ok(db_path)


def test_clusters_are_marked_stale_by_any_change_to_the_documents(index, runner, db_path):
    from simhash_sqlite.cli.app import app

    index.add([Document("a", "alpha beta gamma delta " * 20), Document("b", "alpha beta gamma delta " * 20 + "!")])
    assert index.stats().clusters is None  # never clustered: nothing to be stale
    index.clusters(10, check=False)
    assert index.stats().clusters["documents"] == 2 and not index.stats().clusters.get("stale")
    index.add([Document("a", "alpha beta gamma delta " * 20)])  # unchanged: nothing written
    assert not index.stats().clusters.get("stale")
    for change in (
        lambda: index.add([Document("c", "something else entirely, long enough to count")]),
        lambda: index.remove(["c"]),
        lambda: index.remove_glob("b*"),
        lambda: index.add_fingerprints([("d", 12345)]),
    ):
        index.clusters(10, check=False)
        change()
        assert index.stats().clusters["stale"] is True
    shown = runner.invoke(app, ["stats", "--db", str(db_path)])
    assert shown.exit_code == 0 and "STALE" in shown.output and "run simq clusters again" in shown.output
    index.clusters(10, check=False)
    assert "STALE" not in runner.invoke(app, ["stats", "--db", str(db_path)]).output


def test_representative_rules(index):
    # One character apart: 8 bits with binary weights (the default), so k=10 joins them.
    index.add([
        Document("short", "alpha beta gamma delta " * 20), Document("long", "alpha beta gamma delta " * 20 + "!")
    ])
    assert [c.representative for c in index.cluster_list()] == []  # nothing written yet
    index.clusters(10, check=False)
    assert [c.representative for c in index.cluster_list()] == ["short"]
    index.clusters(10, representative="longest", check=False)
    assert [c.representative for c in index.cluster_list()] == ["long"]
    index.clusters(10, representative="last", check=False)
    assert [(c.representative, c.size, c.members) for c in index.cluster_list()] == [("long", 2, ("short", "long"))]
    with pytest.raises(InvalidInput):
        index.clusters(10, representative="best", check=False)
