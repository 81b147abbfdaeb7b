"""Labels and keepers (simq serve --review's decisions) in the index file: stored, refused on keys the
index lacks, honoured by dupes, clusters and dedup --against, turned into a threshold (calibrate
--labels) and into a deletion list that simq rm takes back; an older index without the tables."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import random
from collections import Counter

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import assert_clean_error, simq
from test_jsonl_sources import WITHOUT_SOURCES
from unprivileged import run_unprivileged
from web_helpers import corpus, stored_index, web_extra

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.errors import InvalidInput
from simhash_sqlite.find.review import (
    Population,
    ScoredPair,
    allocate,
    binomial_interval,
    calibrate_labels,
    deletions,
    draw_sample,
    population,
    read_decisions,
)
from simhash_sqlite.pipeline.dedup import dedup
from simhash_sqlite.store.database import schema_version
from simhash_sqlite.store.integrity import integrity_check
from simhash_sqlite.store.labels import Label, keep, keeper_keys, label_of, read_labels, set_label


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "index.db"
    stored_index(path)
    return path


def members(index, key):
    cluster = index.conn.execute("SELECT cluster FROM clusters JOIN documents USING (id) WHERE key = ?", (key,)).get
    return {k for (k,) in index.conn.execute(
        "SELECT key FROM clusters JOIN documents USING (id) WHERE cluster = ?", (cluster,))}


def test_a_label_is_stored_replaced_and_refused_on_keys_not_in_the_index(db):
    with SimhashIndex(db) as index:
        saved = set_label(index.conn, "family1/copy0.txt", "family1/original.txt", "duplicate", "ann")
        assert (saved.first, saved.second) == ("family1/copy0.txt", "family1/original.txt")
        set_label(index.conn, "family1/original.txt", "family1/copy0.txt", "unsure", "bob")  # same pair
        labels = read_labels(index.conn)
        assert [(x.first, x.second, x.label, x.reviewer) for x in labels] == [
            ("family1/copy0.txt", "family1/original.txt", "unsure", "bob")]
        for a, b, label, why in [
            ("family1/original.txt", "nowhere.txt", "duplicate", "not a key in this index"),
            ("family1/original.txt", "family1/original.txt", "duplicate", "two different documents"),
            ("family1/original.txt", "family1/copy0.txt", "maybe", "a label is one of"),
        ]:
            with pytest.raises(InvalidInput, match=why):
                set_label(index.conn, a, b, label, "ann")
        with pytest.raises(InvalidInput, match="not a key"):
            keep(index.conn, "nowhere.txt", "ann")
        assert len(read_labels(index.conn)) == 1 and keeper_keys(index.conn) == set()


def test_dupes_and_clusters_never_join_documents_labelled_not_duplicates(db):
    with SimhashIndex(db) as index:
        family = members(index, "family2/original.txt")
        assert family == {"family2/original.txt", "family2/copy0.txt", "family2/copy1.txt", "family2/copy2.txt"}
        before = {(p.first, p.second) for p in index.dupes()}
        apart = [("family2/copy0.txt", "family2/original.txt"), ("family2/copy2.txt", "family2/original.txt")]
        for a, b in apart:
            assert (a, b) in before or (b, a) in before
            set_label(index.conn, a, b, "not_duplicate", "ann")
        found = index.dupes()
        after = {(p.first, p.second) for p in found}
        assert after == {p for p in before if tuple(sorted(p)) not in apart} and found.apart == 2
        index.clusters()
        # Chains through the other copies must not bring them back together either.
        for a, b in apart:
            assert b not in members(index, a)
        # The rest of the index is clustered as before.
        assert members(index, "family1/original.txt") == {"family1/original.txt", "family1/copy0.txt",
                                                          "family1/copy1.txt"}


def test_a_chosen_keeper_represents_its_cluster_and_is_never_deleted(db, runner, tmp_path):
    with SimhashIndex(db) as index:
        others = members(index, "family1/original.txt") - {"family1/copy1.txt"}
        written = keep(index.conn, "family1/copy1.txt", "ann", others=others, duplicates=True)
        assert written == 2
        set_label(index.conn, "family4/original.txt", "family4/copy1.txt", "not_duplicate", "ann")
    assert simq(runner, "clusters", "--db", db).exit_code == 0
    out = tmp_path / "decisions.jsonl"
    run = simq(runner, "decisions", "--db", db, "-o", out)
    assert run.exit_code == 0, run.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    deleted = {row["key"]: row for row in rows}
    assert "family1/copy1.txt" not in deleted
    assert deleted["family1/original.txt"]["kept"] == "family1/copy1.txt"
    assert deleted["family1/original.txt"]["label"] == "duplicate"
    assert "family4/copy1.txt" not in deleted and "family4/original.txt" not in deleted
    assert all(row["checked_by"] in ("exact", "estimated") and row["jaccard"] >= 0.8 for row in rows)
    with SimhashIndex(db, readonly=True) as index:  # the verdict dupes gives each pair, where it lists it
        said = {tuple(sorted((p.first, p.second))): (round(p.jaccard, 4), p.checked_by) for p in index.dupes()}
    for row in rows:
        pair = tuple(sorted((row["key"], row["kept"])))
        assert pair not in said or said[pair] == (row["jaccard"], row["checked_by"])
    with SimhashIndex(db, readonly=True) as index:
        expected = sum(len(c.members) - 1 for c in index.cluster_list())
        kept_keys = {c.representative for c in index.cluster_list()}
    assert len(rows) == expected and "family1/copy1.txt" in kept_keys
    as_csv = simq(runner, "decisions", "--db", db, "--format", "csv")
    table = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [r["key"] for r in table] == [r["key"] for r in rows] and set(table[0]) >= {"key", "kept", "jaccard",
                                                                                        "checked_by", "label"}
    # simq rm takes the list back: exactly those keys go, the kept ones stay.
    run = simq(runner, "rm", "--db", db, "--decisions", out)
    assert run.exit_code == 0, run.output
    with SimhashIndex(db, readonly=True) as index:
        keys = set(index.keys())
    assert not keys & set(deleted) and {row["kept"] for row in rows} <= keys
    assert integrity_check(db).ok


def test_rm_refuses_a_decisions_list_that_would_lose_the_kept_copy(db, runner, tmp_path):
    assert simq(runner, "decisions", "--db", db, "-o", tmp_path / "d.jsonl").exit_code == 0
    rows = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]
    gone = dict(rows[0], kept="not/indexed.txt")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(json.dumps(r) for r in [gone, *rows[1:]]) + "\n")
    with SimhashIndex(db, readonly=True) as index:
        before = len(index)
    assert_clean_error(simq(runner, "rm", "--db", db, "--decisions", bad), "is not in the index")
    both = tmp_path / "both.jsonl"
    both.write_text(json.dumps(rows[0]) + "\n" + json.dumps({"key": rows[0]["kept"], "kept": rows[0]["key"]}) + "\n")
    assert_clean_error(simq(runner, "rm", "--db", db, "--decisions", both), "both kept")
    with SimhashIndex(db) as index:
        keep(index.conn, rows[1]["key"], "ann")
    assert_clean_error(simq(runner, "rm", "--db", db, "--decisions", tmp_path / "d.jsonl"), "chosen to keep")
    assert_clean_error(simq(runner, "rm", "--db", db, "--decisions", db), "")  # not a decisions list
    with SimhashIndex(db, readonly=True) as index:
        assert len(index) == before
    with pytest.raises(InvalidInput, match="no key"):
        read_decisions('{"kept": "a"}\n')


def test_dedup_against_an_index_honours_its_labels(tmp_path):
    docs = corpus()
    db = tmp_path / "against.db"
    with SimhashIndex(db, create=True, store_text=True) as index:
        index.add(docs)
        set_label(index.conn, "family3/original.txt", "family3/copy0.txt", "not_duplicate", "ann")
        keep(index.conn, "family5/copy0.txt", "ann")
        index.remove(["family3/copy0.txt"])  # indexed once, labelled, then removed: it comes back in the input
    text = {d.key: d.text for d in docs}
    incoming = [Document("family3/copy0.txt", text["family3/copy0.txt"]),
                Document("family5/copy0.txt", text["family5/copy0.txt"]),
                Document("family5/copy1.txt", text["family5/copy1.txt"])]
    with SimhashIndex(db, readonly=True) as index:
        decided = {d.document.key: d.duplicate_of for d in dedup(incoming, against=index)}
    assert decided["family3/copy0.txt"] is None  # labelled not a duplicate of the only indexed match
    assert decided["family5/copy0.txt"] is None  # a chosen keeper: kept, though indexed under its own key
    assert decided["family5/copy1.txt"] is not None  # unlabelled: dropped as before
    with SimhashIndex(tmp_path / "plain.db", create=True, store_text=True) as plain:
        plain.add(d for d in docs if d.key != "family3/copy0.txt")
        unlabelled = {d.document.key: d.duplicate_of for d in dedup(incoming, against=plain)}
    assert unlabelled["family3/copy0.txt"] == "family3/original.txt" and unlabelled["family5/copy0.txt"]


def test_the_sample_spreads_over_strata_and_calibration_follows_the_labels(db, runner):
    with SimhashIndex(db) as index:
        pop = population(index)
        assert pop.pairs and all(p.jaccard >= 0.5 and p.first < p.second for p in pop.pairs)
        strata = {p.stratum for p in pop.pairs}
        assert 2 < len(strata) < len(pop.pairs)
        sample = draw_sample(pop, len(strata))
        assert sample == draw_sample(pop, len(strata)) and len(set(sample)) == len(strata)
        assert {p.stratum for p in sample} == strata  # one from each
        assert len(draw_sample(pop, 1000)) == len(pop.pairs)
        empty = json.loads(simq(runner, "calibrate", "--db", db, "--labels", "--json").stdout)
        assert empty["labels"] == 0 and empty["recommended"] is None
        # Say the person calls only pairs above 0.9 duplicates: the recommendation moves up to it.
        for pair in pop.pairs:
            set_label(index.conn, pair.first, pair.second, "duplicate" if pair.jaccard >= 0.9 else "not_duplicate", "a")
        # (this small index has fewer labels of a kind than a recommendation needs: least=1 to see one)
        stepwise = calibrate_labels(index, pop, method="isotonic", least=1)
        strict = calibrate_labels(index, pop, least=1)  # logistic: an S curve, never quite 0 or 1
        default = calibrate_labels(index, pop)
    cutoff = min(p.jaccard for p in pop.pairs if p.jaccard >= 0.9)
    below = max(p.jaccard for p in pop.pairs if p.jaccard < 0.9)
    assert below < stepwise.recommended <= cutoff and stepwise.precision == 1.0 and stepwise.recall == 1.0
    assert below < strict.recommended <= cutoff and strict.precision > 0.95 and strict.recall > 0.95
    assert default.recommended is None and default.interval is None and "more" in default.missing
    with pytest.raises(InvalidInput, match="method"):
        calibrate_labels(None, pop, method="guess")
    run = json.loads(simq(runner, "calibrate", "--db", db, "--labels", "--json").stdout)
    assert run["recommended"] is None and run["missing"] == default.missing
    assert run["labels"] == len(pop.pairs) and run["duplicates"] == default.duplicates
    table = simq(runner, "calibrate", "--db", db, "--labels")
    assert "recommended Jaccard threshold" not in table.stdout and "no threshold recommended yet" in table.stdout


def _synthetic(n: int, seed: int = 3) -> tuple[Population, list[ScoredPair]]:
    """A population of n candidate pairs with Jaccards spread over 0.5-1 (the keys need not be indexed:
    labels of pairs the population holds are never scored again)."""
    rng = random.Random(seed)
    pairs = [ScoredPair(f"a{i:04d}", f"b{i:04d}", rng.randint(0, 12), round(rng.uniform(0.5, 1.0), 3), "exact")
             for i in range(n)]
    return Population(sorted(pairs, key=lambda p: (p.first, p.second)), 0, Counter()), pairs


def _labels(pairs, line: float = 0.8) -> list[Label]:
    """A person who says duplicate at Jaccard >= line."""
    return [Label(p.first, p.second, "duplicate" if p.jaccard >= line else "not_duplicate", "t", "2026-01-01T00:00:00Z")
            for p in pairs]


def test_no_threshold_from_too_few_labels_and_intervals_that_count_the_labels(db):
    pop, pairs = _synthetic(400)
    dup = [p for p in pairs if p.jaccard >= 0.8]
    non = [p for p in pairs if p.jaccard < 0.8]
    with SimhashIndex(db, readonly=True) as index:
        # 16 labels, all duplicate: once "threshold 0.50 (90% interval 0.50-0.50)"; now none, and what is missing
        sixteen = calibrate_labels(index, pop, labels=_labels(dup[:16]))
        assert sixteen.recommended is None and sixteen.interval is None and sixteen.precision_interval is None
        assert sixteen.labels == 16 and sixteen.duplicates == 16 and "10 more not a duplicate" in sixteen.missing
        assert calibrate_labels(index, pop, labels=_labels(dup[:9] + non[:30])).recommended is None
        few = calibrate_labels(index, pop, labels=_labels(dup[:10] + non[:10]))
        every = calibrate_labels(index, pop, labels=_labels(pairs))
    assert few.recommended is not None and few.missing is None
    # the threshold interval holds every threshold the labels cannot tell apart: the gap between the highest
    # Jaccard labelled not a duplicate and the lowest labelled duplicate
    gap = (max(p.jaccard for p in non[:10]), min(p.jaccard for p in dup[:10]))
    assert few.interval[0] <= few.recommended <= few.interval[1]
    assert few.interval[0] <= gap[0] + 0.01 and few.interval[1] >= gap[1] - 0.01
    # precision and recall: never surer than the exact binomial bounds over the labels they rest on
    above = sum(1 for p in dup[:10] + non[:10] if p.jaccard >= few.recommended)
    assert few.precision_interval[0] <= binomial_interval(above, above)[0] + 1e-9
    assert few.recall_interval[0] <= binomial_interval(10, 10)[0] + 1e-9
    assert few.precision_interval[0] <= few.precision <= few.precision_interval[1]
    # 400 labels: the line found, the intervals narrower
    assert abs(every.recommended - 0.8) <= 0.02
    for name in ("interval", "precision_interval", "recall_interval"):
        wide, narrow = getattr(few, name), getattr(every, name)
        assert narrow[1] - narrow[0] < wide[1] - wide[0], name


@given(st.integers(0, 60), st.integers(1, 60))
@settings(max_examples=60, deadline=None)
def test_binomial_interval_against_brute_force(successes, trials):
    """Clopper-Pearson: at the bounds, the tail probabilities are 5% (brute force over every outcome)."""
    successes = min(successes, trials)
    low, high = binomial_interval(successes, trials)

    def pmf(i, p):
        return math.comb(trials, i) * p**i * (1 - p) ** (trials - i)

    if successes > 0:
        assert abs(sum(pmf(i, low) for i in range(successes, trials + 1)) - 0.05) < 1e-6
    else:
        assert low == 0.0
    if successes < trials:
        assert abs(sum(pmf(i, high) for i in range(successes + 1)) - 0.05) < 1e-6
    else:
        assert high == 1.0
    assert 0 <= low <= successes / trials <= high <= 1


def test_allocation_over_samples_near_the_threshold_and_takes_every_small_stratum():
    counts = {(0, 0): 10_000, (4, 0): 10_000, (4, 1): 1, (7, 2): 3}
    take = allocate(counts, 200, 0.8)
    assert sum(take.values()) == 200
    assert take[(4, 0)] > 2 * take[(0, 0)] and take[(4, 1)] == 1 and take[(7, 2)] == 2
    assert ScoredPair("a", "b", 3, 0.79, "exact").stratum == (3, 0)


@web_extra  # simq serve --review is the [web] extra's
def test_an_older_index_without_the_labels_tables_is_refused_read_only_in_one_line_and_upgraded(tmp_path):
    db = tmp_path / "old.db"
    stored_index(db)
    conn = apsw.Connection(str(db))  # a version-3 file, as simq made it before labels and short texts
    conn.execute("DROP TABLE labels; DROP TABLE keepers; ALTER TABLE documents DROP COLUMN short_text; "
                 f"{WITHOUT_SOURCES} PRAGMA user_version = 3")
    conn.close()
    assert integrity_check(db).ok
    folder = tmp_path / "locked"
    folder.mkdir()
    locked = folder / "old.db"
    locked.write_bytes(db.read_bytes())
    os.chmod(locked, 0o444)
    os.chmod(folder, 0o555)
    try:
        run = run_unprivileged(["serve", "--db", locked, "--review", "--port", "0"], cwd=tmp_path)
    finally:
        os.chmod(folder, 0o755)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "read-only" in lines[0], run.stderr
    with SimhashIndex(db) as index:  # written: migrated
        assert index.conn.pragma("user_version") == schema_version()
        set_label(index.conn, "family1/copy0.txt", "family1/original.txt", "duplicate", "ann")
        assert label_of(index.conn, "family1/original.txt", "family1/copy0.txt").label == "duplicate"


def test_simq_check_reports_labels_that_break_the_rules(db):
    with SimhashIndex(db) as index:
        set_label(index.conn, "family1/copy0.txt", "family1/original.txt", "duplicate", "ann")
        index.remove(["family1/copy0.txt"])
    report = integrity_check(db)
    assert report.ok and "ignored" in next(r.detail for r in report.results if r.name == "labels")
    conn = apsw.Connection(str(db))
    conn.pragma("ignore_check_constraints", 1)
    conn.execute("INSERT INTO labels VALUES ('z', 'a', 'perhaps', 'x', 'now')")
    conn.close()
    report = integrity_check(db)
    failed = {r.name: r.detail for r in report.failed}
    assert "break the table's rules" in failed["labels"]  # (SQLite's integrity_check sees the CHECK broken too)


def test_deletions_need_clusters(tmp_path):
    db = tmp_path / "bare.db"
    with SimhashIndex(db, create=True, store_text=True) as index:
        index.add(corpus()[:3])
        with pytest.raises(InvalidInput, match="simq clusters"):
            deletions(index)


def test_components_kept_apart_against_brute_force():
    """pair_components with pairs kept apart, on random graphs: no such pair shares a component, every
    component is connected by the given edges, and an edge is left unjoined only where joining it would
    bring a pair kept apart together."""
    import random

    import numpy as np

    from simhash_sqlite.find.clusters import pair_components

    rng = random.Random(5)
    for _ in range(200):
        n = rng.randint(2, 30)
        ids = np.array(sorted(rng.sample(range(1, 1000), n)), dtype=np.int64)
        edges = {tuple(sorted(rng.sample(ids.tolist(), 2))) for _ in range(rng.randint(0, 3 * n))}
        apart = {tuple(sorted(rng.sample(ids.tolist(), 2))) for _ in range(rng.randint(0, 4))}
        chunks = [(np.array([a for a, _ in edges], dtype=np.int64), np.array([b for _, b in edges], dtype=np.int64))]
        labels = dict(zip(ids.tolist(), pair_components(ids, chunks, apart).tolist()))
        for a, b in apart:
            assert labels[a] != labels[b]
        for component in set(labels.values()):
            members = {i for i, c in labels.items() if c == component}
            assert component == min(members)
            reached, frontier = {component}, [component]  # connected through edges inside it
            while frontier:
                x = frontier.pop()
                for a, b in edges:
                    for u, v in ((a, b), (b, a)):
                        if u == x and v in members and v not in reached:
                            reached.add(v)
                            frontier.append(v)
            assert reached == members
        for a, b in edges:  # an edge left out would have joined a pair kept apart
            if labels[a] != labels[b]:
                ca = {i for i, c in labels.items() if c == labels[a]}
                cb = {i for i, c in labels.items() if c == labels[b]}
                assert any((x in ca and y in cb) or (x in cb and y in ca) for x, y in apart)
