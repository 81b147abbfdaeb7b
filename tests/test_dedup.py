"""Keep-first dedup: the kept-set search against brute force, keep-first order, pass-through, CLI."""

import json
import random
import sys

import apsw
import numpy as np
import pytest
from conftest import integrity_ok
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_cli import assert_clean_error, simq

from simhash_sqlite import Document, SimhashIndex, hamming, simhash
from simhash_sqlite.core.settings import FingerprintSettings
from simhash_sqlite.core.shingles import jaccard, jaccard_of_sets, shingle_set
from simhash_sqlite.core.sketch import DEFAULT_SCHEME, certainty, sharpened, sizes_of, sketch
from simhash_sqlite.find.check import EXACT_MARGIN
from simhash_sqlite.find.sketch_pairs import sketch_pairs
from simhash_sqlite.find.verdict import FILTER_CERTAIN
from simhash_sqlite.pipeline.dedup import (
    BATCH,
    KeptSet,
    KeptSketches,
    codes_of_some,
    pairs_of_codes,
    sorted_codes,
)

dedup_module = sys.modules["simhash_sqlite.pipeline.dedup"]  # (the package exports a function of that name)
MASK = (1 << 64) - 1
WORDS = "sqlite stores tables in one file and answers queries with an index of the rows it keeps".split()


def text(rng: random.Random, n: int = 60) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(n))


def edit(rng: random.Random, body: str, changes: int) -> str:
    words = body.split()
    for _ in range(changes):
        words[rng.randrange(len(words))] = "changed"
    return " ".join(words)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, MASK), min_size=1, max_size=60),
    st.lists(st.integers(0, MASK), min_size=1, max_size=30),
    st.integers(0, 64),
    st.integers(1, 20),
)
def test_kept_set_finds_the_closest_within_k(kept, queries, k, batch):
    rng = random.Random(len(kept))
    queries = queries + [kept[0] ^ (1 << b) for b in rng.sample(range(64), 3)] + [kept[-1]]
    found = KeptSet(k)
    for lo in range(0, len(kept), batch):  # several runs, merged as they grow
        found.add(np.array(kept[lo : lo + batch], dtype=np.uint64), np.arange(lo, min(lo + batch, len(kept))))
    labels, distances = found.closest(np.array(queries, dtype=np.uint64))
    for q, label, d in zip(queries, labels.tolist(), distances.tolist()):
        within = sorted((hamming(q, f), i) for i, f in enumerate(kept) if hamming(q, f) <= k)
        assert (d, label) == within[0] if within else d == k + 1


def brute_keep_first(texts: list[str], k: int) -> list[tuple[bool, int | None, int | None]]:
    """Keep-first by distance alone (--no-check): the closest kept document within k, ties to the earliest."""
    kept: list[tuple[int, int]] = []
    out = []
    for i, body in enumerate(texts):
        fp = simhash(body)
        near = sorted((hamming(fp, f), j) for j, f in kept if fp is not None and hamming(fp, f) <= k)
        if near:
            out.append((False, near[0][1], near[0][0]))
        else:
            out.append((True, None, None))
            if fp is not None:
                kept.append((i, fp))
    return out


def bits_of(blob: bytes) -> np.ndarray:
    """The bins' bits (the distinct-shingle count that follows them is not a bin)."""
    return np.unpackbits(np.frombuffer(blob[: DEFAULT_SCHEME.bin_bytes], dtype=np.uint8), bitorder="little")


def shares_a_window(a: np.ndarray, b: np.ndarray) -> bool:
    """The LSH rule, from the bits: some window of 24 bits starting at a multiple of 12 is equal."""
    return any((a[s : s + 24] == b[s : s + 24]).all() for s in range(0, len(a) - 23, 12))


def estimate(a: bytes, b: bytes) -> float:
    """1-bit bins agree with probability (1 + J) / 2; then the size rule (sketch.sharpened, tested on its own)."""
    bins = max(0.0, min(1.0, 2 * float(np.mean(bits_of(a) == bits_of(b))) - 1))
    x, y = (float(sizes_of(np.frombuffer(blob, np.uint8)[None])[0]) for blob in (a, b))
    return float(sharpened(np.array([bins]), np.array([min(x, y) / max(x, y)]), DEFAULT_SCHEME)[0])


def kept_matches(found: KeptSketches, rows: np.ndarray) -> list[tuple[int, int, float]]:
    """found.matches(rows) as sorted (query, label, estimate) triples."""
    q, label, got_estimate = found.matches(rows)
    return sorted(zip(q.tolist(), label.tolist(), np.round(got_estimate, 9).tolist()))


def brute_force_matches(rows: np.ndarray, kept: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    """What kept_matches must give, pair by pair, for kept rows labelled 10 * their position."""
    want = []
    for i, row in enumerate(rows):
        for j, other in enumerate(kept):
            a, b = row.tobytes(), other.tobytes()
            if shares_a_window(bits_of(a), bits_of(b)) and estimate(a, b) >= threshold:
                want.append((i, 10 * j, round(estimate(a, b), 9)))
    return sorted(want)


def brute_force_candidates(rows: np.ndarray, kept: np.ndarray) -> set[tuple[int, int]]:
    """The (query, kept position) pairs sharing a window: what KeptSketches.matches must estimate, each once."""
    return {(i, j) for i, row in enumerate(rows) for j, other in enumerate(kept)
            if shares_a_window(bits_of(row.tobytes()), bits_of(other.tobytes()))}


def brute_checked_keep_first(texts: list[str], k: int | None = None):
    """Keep-first with the check, both texts at hand: a kept document is a duplicate's partner when it is a
    candidate (shares a window and the estimate reaches 0.8 - EXACT_MARGIN, or with k: within k), the sketch
    filter does not rule it out (an estimate below 0.8 at least FILTER_CERTAIN sure) and the exact Jaccard of
    the two texts reaches 0.8; the highest Jaccard wins, then the earliest. Rows: (kept, partner, distance,
    Jaccard, how)."""
    kept: list[tuple[int, int, bytes]] = []
    out = []
    for i, body in enumerate(texts):
        fp, blob = simhash(body), sketch(body)
        near = []
        if blob is not None:
            mine = bits_of(blob)
            for j, f, theirs in kept:
                e = estimate(blob, theirs)
                if k is None and not (shares_a_window(mine, bits_of(theirs)) and e >= 0.8 - EXACT_MARGIN):
                    continue
                if k is not None and hamming(fp, f) > k:
                    continue
                sizes = [float(sizes_of(np.frombuffer(b, np.uint8)[None])[0]) for b in (blob, theirs)]
                sure = float(certainty(np.array([e]), 0.8, *sizes)[0])
                if e < 0.8 and sure >= FILTER_CERTAIN:
                    continue
                if (x := jaccard(body, texts[j])) >= 0.8:
                    near.append((-x, j, hamming(fp, f), "exact"))
        if near:
            e, j, d, how = min(near)
            out.append((False, j, d, -e, how))
        else:
            out.append((True, None, None, None, None))
            if blob is not None:
                kept.append((i, fp, blob))
    return out


def brute_keep_first_by_jaccard(texts: list[str]) -> list[int | None]:
    """Keep-first by the exact Jaccard alone, every pair: each document's partner (the earlier kept document
    of the highest Jaccard >= 0.8, then the earliest), None where it is kept."""
    sets = [shingle_set(t) for t in texts]
    kept: list[int] = []
    out: list[int | None] = []
    for i, mine in enumerate(sets):
        scored = [(-jaccard_of_sets(mine, sets[j]), j) for j in kept] if simhash(texts[i]) is not None else []
        best = min((x for x in scored if -x[0] >= 0.8), default=None)
        out.append(None if best is None else best[1])
        if best is None and simhash(texts[i]) is not None:
            kept.append(i)
    return out


def near_copies(seed: int, originals: int = 40, copies: int = 150) -> list[str]:
    rng = random.Random(seed)
    bodies = [text(rng, 60 if n % 2 else 300) for n in range(originals)]  # short texts (exact) and longer
    texts = [edit(rng, rng.choice(bodies), rng.choice([0, 0, 1, 2, 3, 5, 8])) for _ in range(copies)]
    texts.insert(17, "")  # no features: kept, never a duplicate
    texts.insert(40, "!!! ...")
    return texts


def decisions_of(texts, batch_size=BATCH, **options):
    from simhash_sqlite import Deduplicator

    entries = ((Document(str(i), t), None) for i, t in enumerate(texts))
    got = list(Deduplicator(batch_size=batch_size, **options).run(entries))
    assert [d.document.key for d in got] == [str(i) for i in range(len(texts))]  # input order
    return got


def test_checked_keep_first_equals_a_sequential_brute_force_across_batches():
    texts = near_copies(5)
    expected = brute_checked_keep_first(texts)
    assert 20 < sum(not kept for kept, *_ in expected) < len(texts) - 40  # both verdicts, many times
    assert {row[4] for row in expected} == {None, "exact"}  # short texts and longer ones: both texts at hand
    for batch_size in (BATCH, 7, 1):  # decisions must not depend on where batches end
        got = decisions_of(texts, batch_size)
        assert [(d.kept, None if d.kept else int(d.duplicate_of), d.distance) for d in got] == [
            row[:3] for row in expected
        ]
        for d, row in zip(got, expected):
            if not d.kept:
                assert (d.checked_by, d.jaccard) == (row[4], pytest.approx(row[3], abs=1e-9))
    # Far copies (8 of 60 words changed) are not near-duplicates under the check, though within k = 12 or so.
    assert any(kept for (kept, *_), t in zip(expected, texts) if t.count("changed") >= 8)


def test_checked_keep_first_with_an_explicit_k():
    texts = near_copies(6)
    for k in (3, 12):
        expected = brute_checked_keep_first(texts, k)
        got = decisions_of(texts, 11, k=k)
        assert [(d.kept, None if d.kept else int(d.duplicate_of), d.distance) for d in got] == [r[:3] for r in expected]


def test_keep_first_by_distance_alone_equals_a_sequential_brute_force():
    texts = near_copies(7)
    for k in (0, 3, 8):
        expected = brute_keep_first(texts, k)
        for batch_size in (BATCH, 7):
            got = decisions_of(texts, batch_size, k=k, check=False)
            assert [(d.kept, None if d.kept else int(d.duplicate_of), d.distance) for d in got] == expected
            assert all(d.checked_by is None for d in got)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 30), st.sampled_from([0.5, 0.8, 0.95]),
    st.sampled_from([(16, 30), (8, 14), (8, 9)]),
)
def test_kept_sketches_find_every_near_duplicate_sharing_a_window(seed, kept_count, queries, threshold, seen):
    # seen: the bit map's first and largest sizes (SEEN_FIRST, SEEN_MOST): as shipped (these few codes keep
    # it at its first size), one that grows with every few runs, one nearly full (it must only ever
    # pass codes that are in no run, never drop one that is)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dedup_module, "SEEN_FIRST", seen[0])
        patch.setattr(dedup_module, "SEEN_MOST", seen[1])
        kept_sketches_against_brute_force(seed, kept_count, queries, threshold)


def kept_sketches_against_brute_force(seed, kept_count, queries, threshold):
    rng = np.random.default_rng(seed)
    kept = rng.integers(0, 256, (kept_count, DEFAULT_SCHEME.nbytes), dtype=np.uint8)
    # Queries: copies of kept rows with 0 to 150 of their 944 bits flipped and a count of the same, a
    # nearby (1.5% steps, size code steps of 44) or any size; and unrelated rows.
    rows = []
    for _ in range(queries):
        source = kept[rng.integers(kept_count)]
        bits = bits_of(source.tobytes())
        bits[rng.choice(len(bits), int(rng.integers(0, 150)), replace=False)] ^= 1
        code = int(source[DEFAULT_SCHEME.bin_bytes :].view("<u2")[0])
        nearby = max(1, code - 44 * int(rng.integers(0, 20)))
        code = rng.choice([code, nearby, int(rng.integers(0, 2**16))])
        copy = np.concatenate([np.packbits(bits, bitorder="little"), np.array([code], "<u2").view(np.uint8)])
        unrelated = rng.integers(0, 256, DEFAULT_SCHEME.nbytes, dtype=np.uint8)
        rows.append(copy if rng.random() < 0.8 else unrelated)
    rows = np.array(rows, dtype=np.uint8)
    found = KeptSketches(threshold)
    for lo in range(0, kept_count, 7):  # several runs, merged as they grow
        found.add(kept[lo : lo + 7], np.arange(lo, min(lo + 7, kept_count)) * 10)
    assert kept_matches(found, rows) == brute_force_matches(rows, kept, threshold)
    # Its counts (bench/scale.py candidates): every pair sharing a window estimated once, nothing read from disk.
    assert found.candidates == found.estimated == len(brute_force_candidates(rows, kept)) and found.rows_read == 0


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def test_cli_dedup_passes_records_through_and_writes_a_side_file(runner, tmp_path):
    rng = random.Random(9)
    bodies = [text(rng) for _ in range(30)]
    records = []
    for i in range(120):
        src = i % 45
        body = bodies[src] if src < 30 else edit(rng, bodies[src - 30], 1)
        records.append({"url": f"u{i}", "body": body, "meta": {"n": i, "tags": ["ü", None]}, "score": 0.5})
    data = tmp_path / "crawl.jsonl"
    write_jsonl(data, records)
    out, side = tmp_path / "out.jsonl", tmp_path / "dupes.jsonl"
    raw = data.read_text(encoding="utf-8").splitlines()
    bodies = [r["body"] for r in records]
    for options, expected in (
        ([], brute_checked_keep_first(bodies)),  # the default: short texts, checked by their exact Jaccard
        (["--no-check", "--k", "3"], brute_keep_first(bodies, 3)),
    ):
        result = simq(runner, "dedup", data, "--out", out, "--dupes", side, "--text-field", "body", "--id-field", "url",
                      *options)
        assert result.exit_code == 0, result.output
        lines = out.read_text(encoding="utf-8").splitlines()
        assert lines == [line for line, (kept, *_) in zip(raw, expected) if kept]  # byte for byte, in order
        dropped = [json.loads(line) for line in side.read_text().splitlines()]
        assert [(d["key"], d["duplicate_of"], d["distance"]) for d in dropped] == [
            (f"u{i}", f"u{j}", dist) for i, (kept, j, dist, *_) in enumerate(expected) if not kept
        ]
        assert {d["checked_by"] for d in dropped} == ({"exact"} if not options else {None})
        assert all((d["jaccard"] >= 0.8) if not options else d["jaccard"] is None for d in dropped)
        assert f"{len(lines)} kept, {len(dropped)} dropped" in result.stderr
        # Running the filter on its own output drops nothing.
        again = tmp_path / "again.jsonl"
        assert simq(runner, "dedup", out, "--out", again, "--text-field", "body", "--id-field", "url",
                    *options).exit_code == 0
        assert again.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")


def test_cli_dedup_against_an_index_and_folders(runner, tmp_path):
    rng = random.Random(2)
    old = [text(rng) for _ in range(5)]
    db = tmp_path / "old.db"
    with SimhashIndex(db, create=True) as index:
        index.add(Document(f"old{i}", t) for i, t in enumerate(old))
    folder = tmp_path / "crawl"
    folder.mkdir()
    (folder / "a.txt").write_text(old[0])  # already indexed
    (folder / "b.txt").write_text(text(rng))  # new
    (folder / "c.txt").write_text(edit(rng, old[1], 1))  # near an indexed one
    out, side = tmp_path / "new.jsonl", tmp_path / "side.jsonl"
    for options in ([], ["--k", "6"], ["--no-check", "--k", "6"]):
        result = simq(runner, "dedup", folder, "--out", out, "--against", db, "--dupes", side, *options)
        assert result.exit_code == 0, result.output
        kept = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["id"] for r in kept] == [str(folder / "b.txt")] and kept[0]["text"] == (folder / "b.txt").read_text()
        dropped = [json.loads(line) for line in side.read_text().splitlines()]
        assert {d["duplicate_of"] for d in dropped} == {"old0", "old1"}
        # (short texts: the index keeps their exact data, so the check is exact)
        assert {d["checked_by"] for d in dropped} == ({None} if "--no-check" in options else {"exact"})
        assert "no sketch" not in result.stderr
    assert integrity_ok(db) and len(SimhashIndex(db)) == 5  # --against only reads
    # A document without a sketch whose short text's exact data is kept: still exact (its text is at hand).
    conn = apsw.Connection(str(db))
    conn.execute("UPDATE documents SET sketch = NULL WHERE key = 'old1'")
    result = simq(runner, "dedup", folder, "--out", out, "--against", db, "--dupes", side)
    assert result.exit_code == 0, result.output
    dropped = {d["duplicate_of"]: d for d in map(json.loads, side.read_text().splitlines())}
    assert dropped["old1"]["checked_by"] == "exact" and dropped["old0"]["checked_by"] == "exact"
    # An index made before sketches whose texts are gone: its documents are matched by distance, and it says
    # so; a verdict by distance is uncertain, so it drops nothing unless asked (--drop-uncertain).
    conn.execute("UPDATE documents SET short_text = NULL WHERE key = 'old1'")
    conn.close()
    result = simq(runner, "dedup", folder, "--out", out, "--against", db, "--dupes", side)
    assert result.exit_code == 0, result.output
    assert "1 of 5 documents have no sketch" in result.stderr and "judged by distance" in result.stderr
    dropped = {d["duplicate_of"]: d for d in map(json.loads, side.read_text().splitlines())}
    assert "old1" not in dropped
    assert dropped["old0"]["checked_by"] == "exact" and dropped["old0"]["jaccard"] == 1.0
    result = simq(runner, "dedup", folder, "--out", out, "--against", db, "--dupes", side, "--drop-uncertain")
    assert result.exit_code == 0, result.output
    dropped = {d["duplicate_of"]: d for d in map(json.loads, side.read_text().splitlines())}
    assert dropped["old1"]["checked_by"] == "distance" and dropped["old1"]["jaccard"] is None
    assert_clean_error(simq(runner, "dedup", folder, "--out", out, "--against", db, "--features", "words"), "features")
    assert_clean_error(simq(runner, "dedup", folder, "--out", out, "--against", tmp_path / "none.db"), "no index")
    assert_clean_error(simq(runner, "dedup", out, "--out", out), "also an input")
    assert_clean_error(simq(runner, "dedup", folder, "--out", side, "--dupes", side), "same file")
    assert_clean_error(simq(runner, "dedup", folder, "--out", out, "--k", "65"), "k must be", 2)


def test_cli_dupes_and_clusters(runner, tmp_path):
    rng = random.Random(4)
    a = text(rng)
    db = tmp_path / "c.db"
    with SimhashIndex(db, create=True) as index:
        index.add([Document("a", a), Document("a2", edit(rng, a, 1)), Document("b", text(rng)), Document("a3", a)])
        expected = sorted((p.first, p.second, p.distance) for p in index.dupes(6, check=False))
    assert ("a", "a3", 0) in expected
    result = simq(runner, "dupes", "--db", db, "--k", "6", "--format", "jsonl")
    assert result.exit_code == 0, result.output
    rows = map(json.loads, result.stdout.splitlines())
    assert sorted((r["first"], r["second"], r["distance"]) for r in rows) == expected
    csv_out = simq(runner, "dupes", "--db", db, "--k", "6", "--format", "csv").stdout.splitlines()
    assert csv_out[0] == "first,second,distance,similarity,jaccard,checked,checked_by,certainty,duplicate"
    assert len(csv_out) == len(expected) + 1
    assert "a3" in simq(runner, "dupes", "--db", db, "--k", "6").stdout
    export = tmp_path / "clusters.jsonl"
    result = simq(runner, "clusters", "--db", db, "--k", "6", "--format", "jsonl", "--out", export)
    assert result.exit_code == 0, result.output
    assert [json.loads(line) for line in export.read_text().splitlines()] == [
        {"cluster": 1, "size": 3, "representative": "a", "members": ["a", "a2", "a3"], "below": []}
    ]
    assert "drop 2" in result.stderr
    rows = simq(runner, "clusters", "--db", db, "--k", "6", "--format", "csv", "--representative", "last").stdout
    assert rows.splitlines()[1:] == ["1,3,a3,a,false", "1,3,a3,a2,false", "1,3,a3,a3,false"]
    assert "a2" in simq(runner, "clusters", "--db", db, "--k", "6").stdout
    assert_clean_error(simq(runner, "dupes", "--db", db, "--format", "xml"), "--format", 2)
    assert_clean_error(simq(runner, "clusters", "--db", db, "--representative", "best"), "representative", 2)
    assert_clean_error(simq(runner, "dupes", "--db", tmp_path / "missing.db"), "no index")


def near_rows(rng: np.random.Generator, count: int) -> np.ndarray:
    """Sketch rows: random ones, copies with 0 to 150 of their bins' bits flipped, and exact copies."""
    rows = [rng.integers(0, 256, DEFAULT_SCHEME.nbytes, dtype=np.uint8)]
    for _ in range(count - 1):
        pick = rng.random()
        if pick < 0.3:
            rows.append(rng.integers(0, 256, DEFAULT_SCHEME.nbytes, dtype=np.uint8))
        elif pick < 0.5:
            rows.append(rows[rng.integers(len(rows))].copy())
        else:
            source = rows[rng.integers(len(rows))]
            bits = bits_of(source.tobytes())
            bits[rng.choice(len(bits), int(rng.integers(0, 150)), replace=False)] ^= 1
            # The bins with some bits flipped; the size field after them as it was.
            rows.append(np.concatenate((np.packbits(bits, bitorder="little"), source[DEFAULT_SCHEME.bin_bytes :])))
    return np.array(rows, dtype=np.uint8)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 80), st.sampled_from([0.5, 0.8, 0.95]))
def test_batch_pairs_from_codes_equal_sketch_pairs(seed, count, threshold):
    rows = near_rows(np.random.default_rng(seed), count) if count else np.zeros((0, DEFAULT_SCHEME.nbytes), np.uint8)
    codes = sorted_codes(rows)
    left, right, estimate = pairs_of_codes(rows, codes, threshold)
    got = sorted(zip(left.tolist(), right.tolist(), estimate.tolist()))
    want = sorted((a, b, e) for part in sketch_pairs(rows, threshold) for a, b, e in zip(*map(np.ndarray.tolist, part)))
    assert got == want
    # The codes of some of the rows, from those of all: what sorted_codes makes of those rows alone.
    chosen = np.flatnonzero(np.random.default_rng(seed + 1).random(count) < 0.5)
    assert (codes_of_some(codes, chosen, count) == sorted_codes(rows[chosen])).all()


def test_checked_keep_first_is_the_same_when_batch_pairs_come_from_sketch_pairs(monkeypatch):
    """A batch whose codes would pair too many rows (many copies of one text) takes sketch_pairs: the
    decisions are the same either way."""
    texts = near_copies(8) + [near_copies(8)[3]] * 30
    expected = [(d.kept, d.duplicate_of, d.distance, d.jaccard) for d in decisions_of(texts, 50)]
    monkeypatch.setattr(dedup_module, "BATCH_CODE_PAIRS", 0)
    assert [(d.kept, d.duplicate_of, d.distance, d.jaccard) for d in decisions_of(texts, 50)] == expected


def around_the_line(seed: int, originals: int = 12, copies: int = 90) -> list[str]:
    """Long texts (not short: no exact data) and copies with 2-14% of their words changed: exact Jaccards on
    both sides of 0.8, many near it, where the sketches' estimate is unsure."""
    rng = random.Random(seed)
    bodies = [text(rng, 240) for _ in range(originals)]
    return [edit(rng, rng.choice(bodies), rng.choice([0, 5, 10, 14, 17, 20, 24, 28, 34])) for _ in range(copies)]


def candidate_pairs(texts: list[str]) -> set[tuple[int, int]]:
    """The pairs dedup may compare: sharing a window of the sketches' LSH tables, estimate >= 0.8 - EXACT_MARGIN."""
    rows = np.array([np.frombuffer(sketch(t), np.uint8) for t in texts])
    found = set()
    for left, right, _ in sketch_pairs(rows, 0.8 - EXACT_MARGIN, width=24, step=12):
        found |= set(zip(left.tolist(), right.tolist()))
    return found


@pytest.mark.slow  # about 2 s an example
@settings(max_examples=6, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_default_keeps_what_keep_first_by_the_exact_jaccard_keeps(tmp_path_factory, seed):
    """Both texts at hand (documents, or JSONL lines read back from the kept texts), every pair the sketches
    make a candidate is judged by its exact Jaccard, so the kept set is keep-first by the exact Jaccard over
    all pairs wherever every true pair is a candidate: in any batches, at any budget, from text or JSONL."""
    texts = around_the_line(seed)
    want = brute_keep_first_by_jaccard(texts)
    sets = [shingle_set(t) for t in texts]
    true_pairs = {(i, j) for j in range(len(texts)) for i in range(j) if jaccard_of_sets(sets[i], sets[j]) >= 0.8}
    assume(true_pairs <= {tuple(sorted(p)) for p in candidate_pairs(texts)})
    # The estimate alone would judge some of these pairs otherwise: the test is of the exact check.
    rows = {i: sketch(t) for i, t in enumerate(texts)}
    assert any((estimate(rows[i], rows[j]) >= 0.8) != ((i, j) in true_pairs)
               for i, j in candidate_pairs(texts))
    data = tmp_path_factory.mktemp("exact") / "data.jsonl"
    write_jsonl(data, [{"id": str(i), "text": t} for i, t in enumerate(texts)])
    from simhash_sqlite import Deduplicator
    from simhash_sqlite.pipeline.sources import Reader

    for batch_size, memory, jsonl in ((BATCH, None, False), (7, None, True), (5, 20_000, True), (1, 20_000, False)):
        if jsonl:
            reader = Reader(jsonl=True)
            entries = reader.entries(reader.expand([str(data)]), FingerprintSettings())
        else:
            entries = ((Document(str(i), t), None) for i, t in enumerate(texts))
        deduplicator = Deduplicator(batch_size=batch_size, memory=memory)
        got = list(deduplicator.run(entries))
        deduplicator.close()
        assert [None if d.kept else int(d.duplicate_of) for d in got] == want
        assert {d.checked_by for d in got if not d.kept} == {"exact"}
        assert deduplicator.report.exact == deduplicator.report.dropped == sum(j is not None for j in want)
        if batch_size < len(texts):
            assert deduplicator.texts.read_count > 0  # kept texts were read back (else: all within one batch)
        if memory is not None:
            assert deduplicator.labels.base > 0  # the offsets spilled with the labels, and were read there


def test_against_an_index_that_stores_its_texts_is_exact_without_sketches_or_short_texts(tmp_path):
    """An indexed document's text is read as dupes reads it (its stored text): exact, where before its
    pairs fell to the estimate, or to distance without a sketch."""
    from simhash_sqlite import Deduplicator

    rng = random.Random(4)
    old = [text(rng, 240) for _ in range(3)]
    db = tmp_path / "old.db"
    with SimhashIndex(db, create=True, store_text=True) as index:
        index.add(Document(f"old{i}", t) for i, t in enumerate(old))
    conn = apsw.Connection(str(db))
    conn.execute("UPDATE documents SET sketch = NULL, short_text = NULL WHERE key = 'old1'")
    conn.close()
    new = [edit(rng, old[0], 12), edit(rng, old[1], 3), edit(rng, old[2], 60), text(rng, 240)]
    with SimhashIndex(db, readonly=True) as index:
        deduplicator = Deduplicator(against=index)
        got = list(deduplicator.run((Document(f"new{i}", t), None) for i, t in enumerate(new)))
        deduplicator.close()
    want = [jaccard(n, o) for n, o in zip(new, old)]
    assert want[0] >= 0.8 and want[1] >= 0.8 and want[2] < 0.8  # (the test's own premise)
    assert [(d.duplicate_of, d.checked_by) for d in got] == [("old0", "exact"), ("old1", "exact"), (None, None),
                                                            (None, None)]
    assert [d.jaccard for d in got[:2]] == pytest.approx(want[:2])


@pytest.mark.parametrize("batch_size", [BATCH, 7, 1])
def test_a_batch_s_lines_are_its_decisions_lines_joined(tmp_path, batch_size):
    """simq dedup writes a batch at a time (DecidedBatch.output, dupe_lines, kept_flags): the same bytes as each
    document's Decision.output_line / dupe_line in order, whatever the lines end in (a last line without a
    newline, CRLF, blank lines between) and for documents without a line (a text file's: a JSON object)."""
    from simhash_sqlite.pipeline.dedup import DecidedBatch, Deduplicator
    from simhash_sqlite.pipeline.sources import Reader

    texts = near_copies(8, copies=60)
    ends = [b"\n", b"\r\n", b"\n\n", b"\r\n"]
    data = tmp_path / "mixed.jsonl"
    data.write_bytes(b"".join(json.dumps({"doc": str(i), "body": t}).encode() + ends[i % 4]
                              for i, t in enumerate(texts)).rstrip(b"\r\n"))
    reader = Reader(jsonl=True, text_field="body", id_field="doc", keep_repeats=True)
    jsonl = list(reader.entries(reader.expand([str(data)]), FingerprintSettings()))
    plain = [(Document(f"t{i}", t + " \u00e9\u4e2d"), None) for i, t in enumerate(texts)]
    for entries in (jsonl, plain, jsonl[:40] + plain[40:]):
        deduplicator = Deduplicator(batch_size=batch_size, line_text=reader.text_of_line)
        batches = list(deduplicator.run_batches(entries))
        deduplicator.close()
        assert all(isinstance(decided, DecidedBatch) for decided in batches)
        decisions = [decision for decided in batches for decision in decided.decisions()]
        assert [d.document.key for d in decisions] == [document.key for document, _ in entries]
        assert 10 < sum(not d.kept for d in decisions) < len(entries) - 10
        assert b"".join(decided.output("body", "doc") for decided in batches) == b"".join(
            d.output_line("body", "doc") for d in decisions if d.kept)
        assert b"".join(decided.dupe_lines() for decided in batches) == b"".join(
            d.dupe_line() for d in decisions if not d.kept)
        assert b"".join(decided.kept_flags() for decided in batches) == bytes(d.kept for d in decisions)
        assert deduplicator.report.kept == sum(d.kept for d in decisions)


@pytest.mark.parametrize("batch_size", [BATCH, 7])
def test_the_exact_check_reads_texts_in_c_with_the_same_decisions(tmp_path, batch_size, monkeypatch):
    """With the reader's rules (line_rules) the exact check makes its shingle sets in C (native/documents.c
    shc_docs_shingle_sets: a line's text found, normalized and shingled in one call); the lines and texts it leaves
    (an escaped field name; a lone surrogate's line is skipped by the reader) are made the Python way: the same
    decisions, by the same exact Jaccards, as the Python way throughout (line_text alone)."""
    from simhash_sqlite.native import documents as native_documents
    from simhash_sqlite.pipeline.dedup import Deduplicator
    from simhash_sqlite.pipeline.sources import Reader

    if native_documents.library() is None:
        pytest.skip("the C core's document path is not built")
    texts = near_copies(11, copies=120)
    lines = []
    for i, t in enumerate(texts):
        line = json.dumps({"doc": str(i), "body": t + (" \ud800" if i % 17 == 5 else "")}, ensure_ascii=i % 3 == 0)
        lines.append((line.replace('"body"', '"bo\\u0064y"') if i % 13 == 4 else line).encode("utf-8", "surrogatepass"))
    data = tmp_path / "mixed.jsonl"
    data.write_bytes(b"\n".join(lines) + b"\n")
    reader = Reader(jsonl=True, text_field="body", id_field="doc", keep_repeats=True)
    jsonl = list(reader.entries(reader.expand([str(data)]), FingerprintSettings()))
    plain = [(Document(f"t{i}", t + (" \uff21\u00df" if i % 11 == 3 else "")), None) for i, t in enumerate(texts)]
    made = []
    shingle_sets = native_documents.shingle_sets
    monkeypatch.setattr(native_documents, "shingle_sets", lambda *a: made.append(len(a[1])) or shingle_sets(*a))
    for entries in (jsonl, plain, jsonl[:60] + plain[60:]):
        runs = []
        for options in ({"line_rules": reader.line_rules()}, {"line_text": reader.text_of_line}):
            deduplicator = Deduplicator(batch_size=batch_size, **options)
            runs.append([(d.document.key, d.duplicate_of, d.jaccard, d.checked_by)
                         for d in deduplicator.run(entries)])
            deduplicator.close()
        assert runs[0] == runs[1]
        assert 10 < sum(d[1] is not None and d[3] == "exact" for d in runs[0])
    assert sum(made) > 100  # (the C calls were made: by the first run of each)


def test_line_batches_are_the_entries_records_and_a_resume_cuts_one(tmp_path, monkeypatch):
    """Reader.entry_batches gives a chunk the C path read whole as one LineBatch: its records are the ones entries()
    gives, document for document. A resumed run (resume.ResumableOutput.kept_before) takes the decided records'
    kept ones, and where the decided ones end inside a LineBatch (a run committed by the Python path, whose batches
    do not end where chunks do) leaves its undecided records to the run (rest()), in order."""
    from simhash_sqlite.native import documents as native_documents
    from simhash_sqlite.pipeline import sources
    from simhash_sqlite.pipeline.resume import ResumableOutput
    from simhash_sqlite.pipeline.sources import LineBatch, Reader

    if native_documents.library() is None:
        pytest.skip("the C core's document path is not built")
    monkeypatch.setattr(sources, "CHUNK_BYTES", 4096)  # many chunks
    texts = near_copies(5, copies=150)
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"k{i}", "text": t}) + ("\n\n" if i % 9 == 0 else "\n")
                            for i, t in enumerate(texts)) + '{"text": "no id"}')
    reader = Reader(jsonl=True, keep_repeats=True)
    paths = reader.expand([str(data)])
    items = list(reader.entry_batches(paths, FingerprintSettings()))
    assert len(items) > 5 and all(type(item) is LineBatch for item in items)
    expected = list(Reader(jsonl=True, keep_repeats=True).entries(paths, FingerprintSettings()))
    assert [entry for item in items for entry in item.entries()] == expected
    rng = random.Random(2)
    flags = bytes(rng.random() < 0.7 for _ in expected)
    for decided in (len(items[0]) + 3, len(items[0]) + len(items[1]), len(expected)):
        (tmp_path / "kept").write_bytes(flags)
        resumed = object.__new__(ResumableOutput)  # (the state kept_before reads: the committed kept flags)
        resumed.kept_path, resumed.decided = str(tmp_path / "kept"), decided
        batches = iter(reader.entry_batches(paths, FingerprintSettings()))
        kept = [entry for item in resumed.kept_before(batches) for entry in item.entries()]
        assert kept == [entry for entry, flag in zip(expected[:decided], flags) if flag]
        rest = [entry for item in resumed.rest(batches) for entry in item.entries()]
        assert rest == expected[decided:]


@pytest.mark.parametrize("batch_size", [BATCH, 7])
def test_line_batches_are_decided_as_their_entries(tmp_path, monkeypatch, batch_size):
    """Deduplicator.run over LineBatches (with entries between them: a text file's) gives the Decisions, the
    batches' output (lines ending in CRLF, blank lines between, a last line without its newline), dupes lines and
    kept flags, and the report that it gives over the same entries one by one."""
    from simhash_sqlite.native import documents as native_documents
    from simhash_sqlite.pipeline import sources
    from simhash_sqlite.pipeline.dedup import Deduplicator
    from simhash_sqlite.pipeline.sources import LineBatch, Reader

    if native_documents.library() is None:
        pytest.skip("the C core's document path is not built")
    monkeypatch.setattr(sources, "CHUNK_BYTES", 8192)
    texts = near_copies(9, copies=200)
    data = tmp_path / "in.jsonl"
    ends = ["\n"] * 5 + ["\r\n", "\n\n", "\n \n"]  # (written as they are where a line ends in one newline)
    data.write_bytes("".join(json.dumps({"doc": f"k{i}", "body": t}) + (ends[i % 8] if i < 150 else "\n")
                             for i, t in enumerate(texts)).rstrip("\n").encode())
    reader = Reader(jsonl=True, text_field="body", id_field="doc", keep_repeats=True)
    paths = reader.expand([str(data)])
    items: list = list(reader.entry_batches(paths, FingerprintSettings()))
    items[2:2] = [(Document(f"t{i}", t), None) for i, t in enumerate(texts[:30])]
    entries = [entry for item in items for entry in (item.entries() if type(item) is LineBatch else [item])]
    runs = []
    for fed in (items, entries):
        deduplicator = Deduplicator(batch_size=batch_size, line_rules=reader.line_rules())
        batches = list(deduplicator.run_batches(fed))
        runs.append(([d for b in batches for d in b.decisions()], b"".join(b.output("body", "doc") for b in batches),
                     b"".join(b.dupe_lines() for b in batches), b"".join(b.kept_flags() for b in batches),
                     {name: value for name, value in vars(deduplicator.report).items() if "seconds" not in name
                      and name != "started"}))
        deduplicator.close()
    assert runs[0] == runs[1]
    assert 30 < sum(not d.kept for d in runs[0][0]) < len(entries) - 30


def test_a_batch_slices_its_lines_from_their_chunks_as_a_list_of_them_would_give_them(tmp_path, monkeypatch):
    """_Lines (a batch's raw lines, a LineBatch's sliced from its chunk when asked for) gives by place, by slice,
    by take() of any ascending places and in order the lines a list made up front gives; and a batch stops at
    its byte bound once it has its least documents (_parts)."""
    from simhash_sqlite.native import documents as native_documents
    from simhash_sqlite.pipeline import sources
    from simhash_sqlite.pipeline.dedup import BATCH_DOCUMENT_BYTES, _Lines, _parts
    from simhash_sqlite.pipeline.sources import LineBatch, Reader

    if native_documents.library() is None:
        pytest.skip("the C core's document path is not built")
    monkeypatch.setattr(sources, "CHUNK_BYTES", 2048)
    texts = near_copies(4, copies=60)
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"k{i}", "text": t}) + ("\r\n" if i % 7 == 0 else "\n")
                            for i, t in enumerate(texts)))
    reader = Reader(jsonl=True, keep_repeats=True)
    items: list = list(reader.entry_batches(reader.expand([str(data)]), FingerprintSettings()))
    assert len(items) > 4 and all(type(item) is LineBatch for item in items)
    parts: list = [items[0], [(Document("a", "x"), None), (Document("b", "y"), b"raw b\n")], *items[1:], []]
    expected = [line for part in parts for line in (part.lines() if type(part) is LineBatch else [r for _, r in part])]
    lines = _Lines()
    for part in parts:
        lines.add(part if type(part) is LineBatch else [raw for _, raw in part])
    assert len(lines) == len(expected) and list(lines) == expected
    assert [lines[i] for i in range(len(expected))] == expected
    assert lines[3:len(expected) - 2] == expected[3:-2] and lines[5:5] == []
    rng = random.Random(4)
    for _ in range(20):
        places = sorted(rng.sample(range(len(expected)), rng.randrange(len(expected) + 1)))
        assert lines.take(places) == [expected[i] for i in places]
    with pytest.raises(IndexError):
        lines[len(expected)]
    # The byte bound: whole LineBatches until their lines and BATCH_DOCUMENT_BYTES a record reach it, but never
    # fewer documents than least.
    size = [len(item.data) + BATCH_DOCUMENT_BYTES * len(item) for item in items]
    taken = _parts(iter(items), 10**9, size[0] + size[1])
    assert taken == items[:2]
    assert _parts(iter(items), 10**9, 1, least=len(items[0]) + 1) == items[:2]
    assert _parts(iter(items), len(items[0]), None) == items[:1]


def test_a_not_duplicate_label_of_the_against_index_is_honoured_within_a_batch(tmp_path):
    """Labels of the against index name keys of this batch's members: x1 is "not a duplicate" of zzz, so it is
    dropped as its copy x0's, earlier in the same batch; x2 is "not a duplicate" of x0, so it is kept. The key
    of a member kept in this batch is read from the batch (it had no label in the kept set yet: an IndexError
    before)."""
    from simhash_sqlite.pipeline.dedup import dedup
    from simhash_sqlite.store.labels import set_label

    words = " ".join(f"word{i} alpha beta gamma delta" for i in range(200))
    db = tmp_path / "labels.db"
    with SimhashIndex(db, create=True, store_text=True) as index:
        index.add([Document(key, f"completely different text number {n} here " * 20)
                   for n, key in enumerate(["x0", "x1", "x2", "zzz"])])
        set_label(index.conn, "x1", "zzz", "not_duplicate", "ann")
        set_label(index.conn, "x2", "x0", "not_duplicate", "ann")  # x2 stays apart from x0, though its copy
    incoming = [Document("x0", words), Document("x1", words + " tail"), Document("x2", words + " end")]
    with SimhashIndex(db, readonly=True) as index:
        got = [(d.document.key, d.duplicate_of) for d in dedup(incoming, against=index)]
    assert got == [("x0", None), ("x1", "x0"), ("x2", None)]  # (x1 is dropped: x2's only other option)
