"""Exact checking of near-duplicates (confirm.py, simq near/dupes/clusters --confirm): real index files,
the real CLI, and a brute-force Jaccard over all pairs of a made corpus as the reference."""

import csv
import io
import json
import random
import string
from itertools import combinations
from pathlib import Path

import apsw
import pytest
from test_cli import assert_clean_error, simq
from test_explain_calibrate import brute_jaccard

from simhash_sqlite import Document, SimhashIndex, hamming
from simhash_sqlite.analysis.explain import explain
from simhash_sqlite.core.settings import CONFIRM_K, RECOMMENDED_K
from simhash_sqlite.core.sketch import estimate_jaccard, sketch
from simhash_sqlite.find.check import ENTRY_BYTES, DuplicateSearch, ShingleCache
from simhash_sqlite.find.verdict import CERTAIN


def made_corpus(seed: int = 11) -> dict[str, str]:
    """Families of a random text with prefixes of 95% ... 75% of it (Jaccard close to the share, so
    pairs fall just above and just below 0.8) and copies with a few words replaced."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 8))) for _ in range(400)]
    docs = {}
    for f in range(6):
        # 300 words: longer than the short texts whose exact data an index keeps (core/short_texts.py), so
        # that pairs without stored texts are estimated (test_short_texts.py has the short ones).
        base = " ".join(rng.choice(vocab) for _ in range(300))
        docs[f"f{f}"] = base
        for i, share in enumerate((0.95, 0.86, 0.815, 0.785, 0.75)):
            docs[f"f{f}t{i}"] = base[: int(len(base) * share)]
        for i, edits in enumerate((1, 3, 6)):
            words = base.split()
            for _ in range(edits):
                words[rng.randrange(len(words))] = rng.choice(vocab)
            docs[f"f{f}e{i}"] = " ".join(words)
    return docs


_EVERY: dict[tuple, dict] = {}


def reference(docs: dict[str, str], fingerprints: dict[str, int], k: int, threshold: float = 0.8):
    """{frozenset pair: Jaccard} for every pair within k whose brute-force Jaccard is >= threshold,
    and every pair's (distance, Jaccard). The brute force over all pairs (about 1 s for the made corpus) runs
    once for the same texts and fingerprints: the tests ask for it nine times, at other k and thresholds."""
    key = (tuple(docs.items()), tuple(fingerprints[name] for name in docs))
    if key not in _EVERY:
        _EVERY[key] = {frozenset((a, b)): (hamming(fingerprints[a], fingerprints[b]), brute_jaccard(docs[a], docs[b]))
                       for a, b in combinations(docs, 2)}
    every = dict(_EVERY[key])
    kept = {pair: j for pair, (d, j) in every.items() if d <= k and j >= threshold}
    return kept, every


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """An index that stores its texts, the texts, and their fingerprints."""
    docs = made_corpus()
    db = tmp_path_factory.mktemp("confirm") / "stored.db"
    with SimhashIndex(db, create=True, store_text=True) as index:
        index.add(Document(key, text) for key, text in docs.items())
        fingerprints = {key: index.get(key).fingerprint for key in docs}
    return db, docs, fingerprints


def _pairs(rows) -> dict:
    return {frozenset((r["first"], r["second"])): r["jaccard"] for r in rows}


def assert_judged(got: dict, how: dict, sure: dict, truth: dict, every: dict | None = None) -> None:
    """The check's answers against the brute force: the same pairs; an exact Jaccard equal to the
    truth's; an estimate only where it was sure (and close to the truth). got, how, sure: the Jaccard,
    checked_by and certainty by pair; truth: the brute-force Jaccard of the pairs that should be kept."""
    assert set(got) == set(truth)
    for pair, j in got.items():
        if how[pair] == "exact":
            assert j == pytest.approx(truth[pair], abs=1e-4) and sure[pair] == 1.0
        else:
            assert how[pair] == "estimated" and sure[pair] >= CERTAIN
            assert abs(j - truth[pair]) < 0.1


def test_confirmed_dupes_equal_brute_force_jaccard_at_the_boundary(runner, stored):
    db, docs, fps = stored
    want, every = reference(docs, fps, CONFIRM_K)
    # The default takes its candidates from the sketches, at any distance: every pair with J >= 0.8.
    want_all, _ = reference(docs, fps, 64)
    assert len(want_all) > len(want)  # this corpus has such pairs beyond distance 12
    candidates = {p: j for p, (d, j) in every.items() if d <= CONFIRM_K}
    # The corpus really tests the boundary: candidates just above 0.8 kept, just below dropped.
    assert any(0.8 <= j < 0.82 for j in candidates.values()) and any(0.78 <= j < 0.8 for j in candidates.values())
    with SimhashIndex(db) as index:
        checker = index.dupes()
        found = list(checker)
        got = {frozenset((p.first, p.second)): p.jaccard for p in found}
        how = {frozenset((p.first, p.second)): p.checked_by for p in found}
        sure = {frozenset((p.first, p.second)): p.certainty for p in found}
        assert checker.report.unchecked == 0 and checker.report.checked + checker.report.estimated == len(want_all)
        # The texts are at hand: every reported pair is exact; only candidates the sketch filter is sure are
        # below the line are decided without reading them.
        assert checker.report.checked == len(want_all) and checker.report.estimated == 0
        assert checker.report.estimate_rejected == checker.report.sure > 0
        assert checker.report.uncertain == 0  # every unsure verdict was settled by the texts
        assert checker.report.candidates_from == "sketch"
        assert_judged(got, how, sure, want_all)
        # The pairs near the line were all checked exactly.
        assert all(how[p] == "exact" for p, j in want_all.items() if j < 0.82)
        # An explicit k: the pairs within it, each judged the same way.
        within = list(index.dupes(CONFIRM_K))
        assert_judged({frozenset((p.first, p.second)): p.jaccard for p in within},
                      {frozenset((p.first, p.second)): p.checked_by for p in within},
                      {frozenset((p.first, p.second)): p.certainty for p in within}, want)
        # A cache too small for two texts recomputes, with the same answer.
        assert {frozenset((p.first, p.second)) for p in DuplicateSearch(index, cache_bytes=1)} == set(want_all)
    result = simq(runner, "dupes", "--db", db, "--format", "jsonl")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert _pairs(rows) == pytest.approx({p: round(j, 4) for p, j in got.items()}, abs=1e-4)
    assert all(r["checked"] is True and r["checked_by"] in ("exact", "estimated") for r in rows)
    assert f"{len(want_all)} pairs: {checker.report.checked} checked exactly" in result.stderr
    assert "hint" not in result.stderr
    # Another threshold and an explicit k: the same rule.
    want7, _ = reference(docs, fps, 10, 0.7)
    rows = simq(runner, "dupes", "--db", db, "--format", "jsonl", "--k", "10", "--threshold", "0.7").stdout.splitlines()
    assert set(_pairs(map(json.loads, rows))) == set(want7)
    table = simq(runner, "dupes", "--db", db)
    assert "jaccard" in table.stdout and "checked exactly" in table.stdout
    rows = list(csv.DictReader(io.StringIO(simq(runner, "dupes", "--db", db, "--format", "csv").stdout)))
    from_csv = {frozenset((r["first"], r["second"])): float(r["jaccard"]) for r in rows}
    assert from_csv == pytest.approx(got, abs=1e-4)
    assert {r["checked"] for r in rows} == {"true"} and {r["checked_by"] for r in rows} == {"exact"}


def test_confirmed_near_equals_brute_force(runner, stored):
    db, docs, fps = stored
    want, _ = reference(docs, fps, CONFIRM_K)
    for query in ("f0", "f1t2", "f2e2", "f4t3"):
        expected = {next(iter(p - {query})): j for p, j in want.items() if query in p}
        result = simq(runner, "near", "--db", db, "--key", query, "--json")
        assert result.exit_code == 0, result.output
        matches = json.loads(result.stdout)
        assert_judged({m["key"]: m["jaccard"] for m in matches}, {m["key"]: m["checked_by"] for m in matches},
                      {m["key"]: m["certainty"] for m in matches}, expected)
        assert all(m["checked"] for m in matches)
        assert [m["distance"] for m in matches] == sorted(m["distance"] for m in matches)
        # The same through a text: the query's own document is found too, at Jaccard 1.
        with SimhashIndex(db) as index:
            by_text = index.near(docs[query])
        assert_judged({m.key: m.jaccard for m in by_text}, {m.key: m.checked_by for m in by_text},
                      {m.key: m.certainty for m in by_text}, {**expected, query: 1.0})
    limited = json.loads(simq(runner, "near", "--db", db, "--key", "f0", "--json", "--limit", "2").stdout)
    assert len(limited) == 2 and all(m["checked"] for m in limited)


def test_confirmed_clusters_are_components_of_the_checked_pairs(runner, stored, tmp_path):
    db, docs, fps = stored
    copy = tmp_path / "clusters.db"
    copy.write_bytes(db.read_bytes())
    want, _ = reference(docs, fps, 64)  # the default: candidates from the sketches, at any distance
    # Components by brute force: merge sets until no pair joins two of them.
    groups = {key: {key} for key in docs}
    for pair in want:
        a, b = tuple(pair)
        if groups[a] is not groups[b]:
            merged = groups[a] | groups[b]
            for key in merged:
                groups[key] = merged
    expected = sorted({tuple(sorted(g)) for g in groups.values() if len(g) > 1})
    out = tmp_path / "c.jsonl"
    result = simq(runner, "clusters", "--db", copy, "--format", "jsonl", "--out", out)
    assert result.exit_code == 0, result.output
    assert sorted(tuple(sorted(json.loads(line)["members"])) for line in out.read_text().splitlines()) == expected
    assert "checked exactly" in result.stderr
    with SimhashIndex(copy) as index:
        report = index.clusters()
    checks = report.check
    assert checks.kept == len(want) and report.clustered == sum(len(g) for g in expected)


def test_no_confirm_is_the_plain_distance_search(runner, stored):
    db, docs, fps = stored
    with SimhashIndex(db) as index:
        plain_near = [(m.key, m.distance) for m in index.near(key="f3", k=RECOMMENDED_K, check=False)]
        plain_pairs = {frozenset((p.first, p.second)): p.distance for p in index.dupes(RECOMMENDED_K, check=False)}
        plain_pairs5 = {frozenset((p.first, p.second)) for p in index.dupes(5, check=False)}
    near = json.loads(simq(runner, "near", "--db", db, "--key", "f3", "--json", "--no-check").stdout)
    assert [(m["key"], m["distance"]) for m in near] == plain_near
    assert all(m["jaccard"] is None and m["checked"] is False for m in near)
    result = simq(runner, "dupes", "--db", db, "--no-check", "--format", "jsonl")
    rows = [json.loads(x) for x in result.stdout.splitlines()]
    assert {frozenset((r["first"], r["second"])): r["distance"] for r in rows} == plain_pairs
    rows = simq(runner, "dupes", "--db", db, "--no-check", "--k", "5", "--format", "jsonl").stdout.splitlines()
    assert {frozenset((r["first"], r["second"])) for r in map(json.loads, rows)} == plain_pairs5
    table = simq(runner, "dupes", "--db", db, "--no-check")
    assert f"{len(plain_pairs)} pairs within distance {RECOMMENDED_K}" in table.stdout and "jaccard" not in table.stdout


def _forget_sketches(db, keys) -> None:
    """Make documents look as if indexed before sketches, their texts gone: a NULL sketch."""
    conn = apsw.Connection(str(db))
    with conn:
        conn.execute("UPDATE documents SET sketch = NULL WHERE key IN carray(?)", (apsw.carray(tuple(keys)),))
    conn.close()


def test_files_edited_or_gone_after_add_are_judged_by_their_sketches(runner, tmp_path):
    """(Before sketches this test asserted the distance fallback for these pairs; that fallback is now
    for documents without a sketch, tested below on the same files.)"""
    docs = made_corpus(seed=3)
    folder = tmp_path / "docs"
    folder.mkdir()
    for key, text in docs.items():
        (folder / f"{key}.txt").write_text(text, encoding="utf-8")
    db = tmp_path / "files.db"
    assert simq(runner, "add", "--db", db, folder).exit_code == 0
    with SimhashIndex(db) as index:
        fps = {key: index.get(str(folder / f"{key}.txt")).fingerprint for key in docs}
    edited, gone = "f0t1", "f1"
    (folder / f"{edited}.txt").write_text(docs[edited] + " changed after the add", encoding="utf-8")
    (folder / f"{gone}.txt").unlink()
    rows = [json.loads(x) for x in simq(runner, "dupes", "--db", db, "--format", "jsonl").stdout.splitlines()]
    got = {frozenset((r["first"], r["second"])): r for r in rows}
    sketches = {key: sketch(text) for key, text in docs.items()}  # as indexed
    _, every = reference(docs, fps, 64)
    expected = {}
    for pair, (_d, j) in every.items():
        paths = frozenset(str(folder / f"{key}.txt") for key in pair)
        if pair & {edited, gone}:
            estimate = estimate_jaccard(*(sketches[key] for key in pair))
            if estimate >= 0.8:  # text out of reach: judged by the sketches
                expected[paths] = ("estimated", estimate)
        elif j >= 0.8:
            expected[paths] = ("exact", j)
    assert set(got) == set(expected) and any(kind == "estimated" for kind, _ in expected.values())
    for pair, (kind, j) in expected.items():
        assert got[pair]["checked"] is True
        if kind == "exact" and got[pair]["checked_by"] == "estimated":  # sure from the sketches: no text read
            assert got[pair]["certainty"] >= CERTAIN and abs(got[pair]["jaccard"] - j) < 0.1
            continue
        assert got[pair]["checked_by"] == kind
        assert got[pair]["jaccard"] == pytest.approx(j, abs=1e-4)
    result = simq(runner, "dupes", "--db", db)
    estimated = sum(r["checked_by"] == "estimated" for r in rows)
    assert f"{estimated} by the sketches' estimate" in result.stdout and "distance alone" not in result.stderr
    near = json.loads(simq(runner, "near", "--db", db, "--file", folder / f"{edited}.txt", "--json").stdout)
    own = next(m for m in near if m["key"] == str(folder / f"{edited}.txt"))  # its own, edited file
    assert own["checked_by"] == "estimated"

    # Documents without a sketch either (indexed before sketches, texts gone): the distance rule for
    # their pairs (candidates within CONFIRM_K), the sketches' candidates for the others.
    _forget_sketches(db, [str(folder / f"{key}.txt") for key in (edited, gone)])
    rows = [json.loads(x) for x in simq(runner, "dupes", "--db", db, "--format", "jsonl").stdout.splitlines()]
    got = {frozenset((r["first"], r["second"])): r for r in rows}
    expected = {}
    for pair, (d, j) in every.items():
        paths = frozenset(str(folder / f"{key}.txt") for key in pair)
        if pair & {edited, gone}:
            if d <= RECOMMENDED_K:  # neither text nor sketch: kept by distance alone, unchecked
                expected[paths] = None
        elif j >= 0.8:
            expected[paths] = j
    assert set(got) == set(expected) and any(v is None for v in expected.values())
    for pair, j in expected.items():
        assert got[pair]["checked"] is (j is not None)
        if j is None:
            assert got[pair]["checked_by"] == "distance" and got[pair]["jaccard"] is None
        elif got[pair]["checked_by"] == "exact":
            assert got[pair]["jaccard"] == pytest.approx(j, abs=1e-4)
        else:  # sure from the sketches
            assert got[pair]["certainty"] >= CERTAIN and abs(got[pair]["jaccard"] - j) < 0.1
    result = simq(runner, "dupes", "--db", db)
    unchecked = sum(j is None for j in expected.values())
    assert f"{unchecked} by distance only (<= {RECOMMENDED_K})" in result.stdout
    assert "--store-text" in result.stderr and "hint" in result.stderr
    near = json.loads(simq(runner, "near", "--db", db, "--file", folder / f"{edited}.txt", "--json").stdout)
    stored_copy = str(folder / f"{edited}.txt")
    assert next(m for m in near if m["key"] == stored_copy)["checked"] is False  # its own, edited file
    table = simq(runner, "near", "--db", db, "--key", str(folder / "f0.txt"))
    assert table.exit_code == 0 and " - " in table.stdout  # the unchecked row's jaccard cell


def test_jsonl_without_store_text_is_checked_from_its_lines_then_by_the_sketches(runner, stored, tmp_path):
    """(Before sketches this test asserted that such an index is judged by distance alone; before migration 0006,
    by the sketches.) The JSONL file's lines are read again: exact; once it is gone, the estimate."""
    _, docs, fps = stored
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": k, "text": t}) + "\n" for k, t in docs.items()), encoding="utf-8")
    db = tmp_path / "plain.db"
    assert simq(runner, "add", "--db", db, source).exit_code == 0
    at_hand = [json.loads(x) for x in simq(runner, "dupes", "--db", db, "--format", "jsonl").stdout.splitlines()]
    want_all, _ = reference(docs, fps, 64)
    assert {r["checked_by"] for r in at_hand} == {"exact"}
    for r in at_hand:
        assert r["jaccard"] == pytest.approx(brute_jaccard(docs[r["first"]], docs[r["second"]]), abs=1e-4)
    source.unlink()
    confirmed = simq(runner, "dupes", "--db", db, "--format", "jsonl")
    rows = [json.loads(x) for x in confirmed.stdout.splitlines()]
    sketches = {key: sketch(text) for key, text in docs.items()}
    for r in rows:
        assert r["checked_by"] == "estimated" and r["checked"] is True
        assert r["jaccard"] == pytest.approx(estimate_jaccard(sketches[r["first"]], sketches[r["second"]]), abs=1e-4)
    # The estimate is close to the exact Jaccard: most pairs agree with the exact answer.
    found = {frozenset((r["first"], r["second"])) for r in rows}
    assert len(found & set(want_all)) >= 0.85 * len(want_all) and len(found - set(want_all)) <= 0.15 * len(found)
    assert "0 checked exactly" in confirmed.stderr and "distance alone" not in confirmed.stderr
    near = json.loads(simq(runner, "near", "--db", db, "--key", "f2", "--json").stdout)
    assert near and all(m["checked_by"] == "estimated" for m in near)
    # A bare fingerprint has no text and no sketch, whatever the index stores.
    with SimhashIndex(db) as index:
        fp = index.get("f2").fingerprint
    by_hash = simq(runner, "near", "--db", db, "--hash", f"{fp:016x}")
    assert by_hash.exit_code == 0 and "--hash query has no text" in by_hash.stderr


def test_batch_answers_are_checked(runner, stored, tmp_path):
    db, docs, fps = stored
    want, _ = reference(docs, fps, CONFIRM_K)
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        json.dumps({"id": "k", "key": "f5"}) + "\n" + json.dumps({"id": "t", "text": docs["f5e1"]}) + "\n"
        + json.dumps({"id": "h", "hash": f"{fps['f5']:016x}"}) + "\n"
        + json.dumps({"id": "x", "key": "missing"}) + "\n",
        encoding="utf-8",
    )
    result = simq(runner, "near", "--db", db, "--batch", queries)
    assert result.exit_code == 1  # the missing key
    lines = {line["id"]: line for line in map(json.loads, result.stdout.splitlines())}
    expected = {next(iter(p - {"f5"})) for p in want if "f5" in p}
    assert {m["key"] for m in lines["k"]["matches"]} == expected and all(m["checked"] for m in lines["k"]["matches"])
    assert all(m["checked"] for m in lines["t"]["matches"]) and "f5e1" in {m["key"] for m in lines["t"]["matches"]}
    by_hash = lines["h"]["matches"]
    assert by_hash and all(not m["checked"] and m["distance"] <= RECOMMENDED_K for m in by_hash)
    assert "error" in lines["x"] and "checked exactly" in result.stderr


@pytest.mark.parametrize("value", ["0", "1.5", "-0.2", "nan"])
@pytest.mark.parametrize("command", ["near", "dupes", "clusters"])
def test_a_bad_jaccard_is_one_clean_error(runner, stored, command, value):
    db, _, _ = stored
    args = [command, "--db", db, "--threshold", value] + (["--key", "f0"] if command == "near" else [])
    assert_clean_error(simq(runner, *args), "Jaccard threshold", 2)


def test_the_shingle_cache_stays_within_its_budget(stored):
    db, docs, _ = stored
    with SimhashIndex(db) as index:
        cache = ShingleCache(index, max_bytes=60_000)
        for key in docs:
            assert cache(key) is not None
            assert cache.bytes <= 60_000 or len(cache.entries) == 1
        assert 1 < len(cache.entries) < len(docs)
        assert cache("no such key") is None
        assert cache.bytes == sum(ENTRY_BYTES + (0 if v is None else v.nbytes) for v in cache.entries.values())
        for i in range(200):  # keys without a text are bounded too
            assert cache(f"missing {i}") is None
        assert cache.bytes <= 60_000 and len(cache.entries) <= 60_000 // ENTRY_BYTES


def test_the_shingle_cache_gives_way_to_the_process_budget(stored):
    """Within a ceiling (dupes --memory: the whole process's), the cache's budget is what the process leaves
    of it: nothing past CACHE_FLOOR where the process already holds the ceiling, its own budget where there
    is room; the sets it gives are the same either way."""
    import numpy as np

    from simhash_sqlite.find import check
    from simhash_sqlite.find.bounded_pairs import resident_memory

    db, docs, _ = stored
    keys = list(docs)
    with SimhashIndex(db) as index:
        free = ShingleCache(index, max_bytes=1 << 30)
        free.prefetch(keys)
        tight = ShingleCache(index, max_bytes=1 << 30, ceiling=1)  # (resident memory may drop: fit() trims it)
        roomy = ShingleCache(index, max_bytes=200_000, ceiling=resident_memory() + (1 << 30))
        for cache in (tight, roomy):
            for lo in range(0, len(keys), 7):
                cache.prefetch(keys[lo : lo + 7])
                for key in keys[lo : lo + 7]:
                    assert np.array_equal(cache(key), free(key))
        assert tight.max_bytes == check.CACHE_FLOOR and tight.bytes <= check.CACHE_FLOOR
        assert roomy.max_bytes == 200_000 and roomy.bytes <= 200_000 < free.bytes


def test_explain_gives_the_checked_verdict(runner, stored):
    db, docs, fps = stored
    _, every = reference(docs, fps, CONFIRM_K)
    below = next(tuple(sorted(p)) for p, (d, j) in every.items() if d <= CONFIRM_K and 0.7 <= j < 0.8)
    above = next(tuple(sorted(p)) for p, (d, j) in every.items() if d <= CONFIRM_K and 0.8 <= j < 0.9)
    with SimhashIndex(db) as index:
        verdicts = {p: (v.keeps, v.checked_by) for p in (below, above) for v in [explain(index, *p).verdict]}
    for pair, keeps in ((below, False), (above, True)):
        result = simq(runner, "explain", "--db", db, *pair)
        assert result.exit_code == 0, result.output
        row = next(line for line in result.stdout.splitlines() if "as simq dupes" in line)
        assert ("not near-duplicates" in row) == (not keeps) and "near-duplicates" in row
        assert verdicts[pair][0] is keeps and f"{verdicts[pair][1]} Jaccard" in row


def test_dupes_with_identical_texts_and_a_bare_fingerprint(runner, tmp_path):
    """Identical texts fold to one sketch; a document added by fingerprint alone has none. A chunk of
    pairs that comes out empty must not reach the key lookup (carray refuses empty arrays)."""
    import shutil

    examples = Path(__file__).resolve().parent.parent / "examples"
    for name in ("docs", "copy"):
        shutil.copytree(examples, tmp_path / name)
    db = tmp_path / "s.db"
    assert simq(runner, "add", "--db", db, tmp_path / "docs", tmp_path / "copy").exit_code == 0
    garden = str(tmp_path / "docs" / "garden.txt")
    with SimhashIndex(db) as index:
        fp = index.get(garden).fingerprint
        index.add_fingerprints([("bare", fp ^ 0b111), ("far", 0x59E111D408338701)])
    result = simq(runner, "dupes", "--db", db, "--format", "jsonl")
    assert result.exit_code == 0, result.output
    pairs = {frozenset((r["first"], r["second"])): r["checked_by"] for r in map(json.loads, result.stdout.splitlines())}
    # identical short texts: checked exactly from the exact data the index keeps (core/short_texts.py)
    assert pairs[frozenset((garden, str(tmp_path / "copy" / "garden.txt")))] == "exact"
    assert pairs[frozenset((garden, "bare"))] == "distance"  # no text, no sketch: distance 3 alone


def test_iterating_dupes_twice_counts_once(runner, stored):
    db, _, _ = stored
    with SimhashIndex(db) as index:
        found = index.dupes()
        first = sorted((p.first, p.second) for p in found)
        counts = (found.report.candidates, found.report.kept)
        assert sorted((p.first, p.second) for p in found) == first
        assert (found.report.candidates, found.report.kept) == counts and counts[1] == len(first)
