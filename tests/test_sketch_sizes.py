"""Version 2 sketches carry the text's distinct-shingle count, which sharpens the estimate (sketch.sharpened);
an index made with version 1 sketches keeps its scheme and keeps working."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import assert_clean_error, simq

from simhash_sqlite import SimhashIndex
from simhash_sqlite.core import pool as parallel
from simhash_sqlite.core.features import char_units, ngram_hashes
from simhash_sqlite.core.fingerprint import simhash_and_sketch_many
from simhash_sqlite.core.shingles import jaccard
from simhash_sqlite.core.sketch import (
    DEFAULT_SCHEME,
    SCHEME_V1,
    SketchScheme,
    estimate_jaccard,
    estimate_many,
    estimate_spread,
    sharpened,
    size_codes,
    sizes_of,
    sketch,
    sketch_many,
)
from simhash_sqlite.index import Document
from simhash_sqlite.pipeline import sources
from simhash_sqlite.pipeline.dedup import Deduplicator

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randrange(100)) for _ in range(words))


def _distinct_shingles(text: str) -> int:
    return len(np.unique(ngram_hashes(char_units(text), 5)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=400), max_size=10))
def test_the_recorded_size_is_the_distinct_shingle_count(texts):
    rows, present = sketch_many(texts)
    sizes = sizes_of(rows)
    for text, there, size in zip(texts, present.tolist(), sizes.tolist()):
        if there:  # brute force: the distinct 5-shingles of the normalized text (fewer than 3,000: exact)
            assert size == _distinct_shingles(text)
        else:
            assert np.isnan(size)


def test_the_add_path_records_the_same_sketch_as_sketch():
    """`add` takes the count from the binary weights' distinct features, sketch() from a sort: the same."""
    rng = random.Random(3)
    texts = [_text(rng, rng.randrange(1, 300)) + " " + _text(rng, 5) * 3 for _ in range(30)] + ["ab", "?!", ""]
    for weights in ("binary", "log", "count"):
        from simhash_sqlite.core.settings import FingerprintSettings

        _, blobs = simhash_and_sketch_many(texts, FingerprintSettings(weights=weights))
        assert blobs == [sketch(t) for t in texts]


def test_size_codes_round_trip_within_a_step():
    counts = np.array([1, 2, 5, 999, 2950, 10_000, 123_456, 2**31])
    rows = np.zeros((len(counts), DEFAULT_SCHEME.nbytes), np.uint8)
    rows[:, DEFAULT_SCHEME.bin_bytes :] = size_codes(counts).view(np.uint8).reshape(-1, 2)
    decoded = sizes_of(rows)
    assert (decoded[:5] == counts[:5]).all()  # small counts exactly
    assert np.allclose(decoded, counts, rtol=2.0 ** (1 / 2048) - 1)
    assert size_codes(np.array([0]))[0] == 0 and np.isnan(sizes_of(np.zeros((1, 120), np.uint8))[0])


def test_a_cut_copy_is_estimated_by_its_size_ratio():
    """A cut copy's shingles are a subset: J = |A| / |B| exactly, which the estimate snaps to."""
    rng = random.Random(11)
    hits = 0
    for _ in range(40):
        text = _text(rng, rng.randrange(200, 800))
        cut = text[: int(len(text) * rng.uniform(0.7, 0.95))]
        exact = jaccard(text, cut)
        if estimate_jaccard(sketch(text), sketch(cut)) == pytest.approx(exact, abs=1e-3):
            hits += 1
        # Never above the ratio, and never further from the truth than the bins' estimate alone.
        assert estimate_jaccard(sketch(text), sketch(cut)) <= exact + 1e-3
    assert hits >= 34  # within 2 standard deviations: about 95% of cut copies


def test_sharpened_against_brute_force():
    """The rule itself: the ratio within CONTAINMENT_SDS spreads of it, else min(estimate, ratio); unknown stays."""
    rng = np.random.default_rng(5)
    estimate, ratio = rng.uniform(0.5, 1, 2000), rng.uniform(0.5, 1, 2000)
    ratio[::7] = np.nan
    got = sharpened(estimate, ratio, DEFAULT_SCHEME)
    for e, r, g in zip(estimate, ratio, got):
        if np.isnan(r):
            assert g == e
        elif abs(e - r) <= 2 * float(estimate_spread(r, DEFAULT_SCHEME)):
            assert g == r
        else:
            assert g == min(e, r)


def test_estimates_stay_unbiased_where_sizes_are_equal():
    """Edits that keep the size (r near 1) leave the estimate as the bins give it."""
    rng = random.Random(8)
    errors = []
    for _ in range(150):
        a = _text(rng, rng.randrange(100, 400))
        b = " ".join(w if rng.random() > 0.05 else rng.choice(WORDS) + "0" for w in a.split())
        errors.append(estimate_jaccard(sketch(a), sketch(b)) - jaccard(a, b))
    assert abs(np.mean(errors)) < 0.01 and np.sqrt(np.mean(np.square(errors))) < 0.04


def test_schemes_read_back_from_their_json():
    assert SketchScheme.from_json('{"bins": 960, "bits": 1, "ngram": 5, "version": 1}') == SCHEME_V1
    assert SCHEME_V1.to_json() == '{"bins": 960, "bits": 1, "ngram": 5, "version": 1}'  # as version 1 wrote it
    assert SketchScheme.from_json(DEFAULT_SCHEME.to_json()) == DEFAULT_SCHEME
    assert DEFAULT_SCHEME.nbytes == SCHEME_V1.nbytes == 120


BASE = " ".join(f"word{i} of a sentence that goes on" for i in range(80))
TEXTS = {"a": BASE, "cut": BASE[: int(len(BASE) * 0.85)], "edit": BASE.replace("word7 ", "other "),
         "z": "unrelated " * 40}
LATE = BASE + " and a tail"


def as_version_1(path) -> None:
    """Rewrite an index as the previous version wrote it: version 1 sketches and scheme."""
    with SimhashIndex(path) as index:
        index.conn.execute("UPDATE simhash_meta SET value = ? WHERE key = 'sketch'", (SCHEME_V1.to_json(),))
        for key, text in TEXTS.items():
            index.conn.execute("UPDATE documents SET sketch = ? WHERE key = ?", (sketch(text, SCHEME_V1), key))


def test_a_version_1_index_keeps_its_scheme(runner, tmp_path):
    db = tmp_path / "v1.db"
    with SimhashIndex(db, create=True) as index:
        index.add(Document(k, t) for k, t in TEXTS.items())
        assert index.sketch_scheme == DEFAULT_SCHEME  # a new index: the new default
        stored = dict(index.conn.execute("SELECT key, sketch FROM documents"))
        assert stored == {k: sketch(t) for k, t in TEXTS.items()}  # the count is stored
    as_version_1(db)
    with SimhashIndex(db) as index:
        assert index.sketch_scheme == SCHEME_V1
        index.add([Document("late", LATE)])  # sketched with the index's own scheme
        late = index.conn.execute("SELECT sketch FROM documents WHERE key = 'late'").get
        assert late == sketch(LATE, SCHEME_V1)
        pairs = {frozenset((p.first, p.second)): p for p in index.dupes()}
        rows = {k: np.frombuffer(sketch(t, SCHEME_V1), np.uint8)[None] for k, t in {**TEXTS, "late": LATE}.items()}
        for pair, found in pairs.items():
            a, b = sorted(pair)
            assert found.checked_by == "estimated"
            assert found.jaccard == pytest.approx(float(estimate_many(rows[a], rows[b], SCHEME_V1)[0]))
        assert frozenset(("a", "edit")) in pairs
        [match] = [m for m in index.near(BASE, k=3) if m.key == "a"]
        assert match.jaccard == pytest.approx(1.0)
    result = simq(runner, "integrity", "--db", db)
    assert result.exit_code == 0, result.output


def test_dupes_without_texts_use_the_sizes(tmp_path):
    db = tmp_path / "v2.db"
    with SimhashIndex(db, create=True) as index:
        index.add(Document(k, t) for k, t in TEXTS.items())
        pairs = {frozenset((p.first, p.second)): p for p in index.dupes()}
    cut = pairs[frozenset(("a", "cut"))]
    assert cut.checked_by == "estimated" and cut.jaccard == pytest.approx(jaccard(BASE, TEXTS["cut"]), abs=1e-3)


def test_dedup_against_a_version_1_index_judges_by_distance(tmp_path):
    """dedup sketches its input with the default scheme: an index of another scheme is matched by distance
    (an uncertain verdict: when unsure, keep)."""
    db = tmp_path / "index.db"
    with SimhashIndex(db, create=True) as index:
        index.add(Document(k, t) for k, t in TEXTS.items())
    for version in (2, 1):
        if version == 1:
            as_version_1(db)
        with SimhashIndex(db) as index:
            [decision] = Deduplicator(against=index).run([(Document("again", BASE), None)])
            [asked] = Deduplicator(against=index, drop_uncertain=True).run([(Document("again", BASE), None)])
        if version == 2:
            assert decision.duplicate_of in ("a", "edit") and decision.checked_by == "estimated"
        else:  # distance alone is uncertain: kept unless asked to drop on it
            assert decision.kept
            assert asked.duplicate_of in ("a", "edit") and asked.checked_by == "distance"


@pytest.mark.parametrize("workers", ["1", "2"])
def test_jsonl_added_to_a_version_1_index_gets_version_1_sketches(runner, tmp_path, monkeypatch, workers):
    """JSONL is read and sketched in the pool's workers: they must use the index's own scheme too."""
    monkeypatch.setenv("SIMQ_WORKERS", workers)
    monkeypatch.setattr(parallel, "POOL_AFTER_BYTES", 1)  # the pool starts at once,
    monkeypatch.setattr(sources, "CHUNK_BYTES", 2048)  # and gets many chunks
    db = tmp_path / "v1.db"
    with SimhashIndex(db, create=True) as index:
        index.add(Document(k, t) for k, t in TEXTS.items())
    as_version_1(db)
    lines = tmp_path / "late.jsonl"
    lines.write_text("".join(json.dumps({"id": f"late{i}", "text": f"{LATE} {i}"}) + "\n" for i in range(40)))
    assert lines.stat().st_size > 10 * sources.CHUNK_BYTES
    result = simq(runner, "add", "--db", db, lines)
    assert result.exit_code == 0, result.output
    with SimhashIndex(db) as index:
        stored = dict(index.conn.execute("SELECT key, sketch FROM documents WHERE key LIKE 'late%'"))
    assert stored == {f"late{i}": sketch(f"{LATE} {i}", SCHEME_V1) for i in range(40)}


def test_an_unreadable_sketch_scheme_is_one_clear_error(runner, tmp_path):
    """A scheme this version cannot read (a newer one, say): the index is refused with one line, and
    `simq check` names the problem instead of failing."""
    db = tmp_path / "odd.db"
    with SimhashIndex(db, create=True) as index:
        index.add(Document(k, t) for k, t in TEXTS.items())
        index.conn.execute("UPDATE simhash_meta SET value = '{\"bins\": 944, \"shape\": 3}' WHERE key = 'sketch'")
    assert_clean_error(simq(runner, "near", "--db", db, BASE), "simhash_meta 'sketch' is not valid")
    result = simq(runner, "integrity", "--db", db, "--json")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "the sketch scheme in simhash_meta cannot be read" in result.output
