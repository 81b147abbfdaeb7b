"""simq explain and simq calibrate, and the exact shingle Jaccard they rest on: checked against brute force."""

import json
import random
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import assert_clean_error, simq

from simhash_sqlite import Document, SimhashIndex, hamming
from simhash_sqlite.analysis.calibrate import calibrate
from simhash_sqlite.analysis.explain import estimated_jaccard, explain
from simhash_sqlite.core.shingles import jaccard
from simhash_sqlite.core.sketch import estimate_jaccard, sketch

BASE = (
    "SQLite is a library that implements a small, fast, self-contained SQL database engine. "
    "An entire database lives in one ordinary file, which can be copied between machines."
)
MIRROR = "Mirrored from the wiki.\n\n" + BASE


def brute_jaccard(a: str, b: str, n: int = 5) -> float:
    def grams(t):
        t = " ".join(t.split())
        return {t[i : i + n] for i in range(max(1, len(t) - n + 1))} if t else set()

    sa, sb = grams(a), grams(b)
    return 1.0 if not sa and not sb else len(sa & sb) / len(sa | sb)


@given(st.text(alphabet="ab c\n中文", max_size=40), st.text(alphabet="ab c\n中文", max_size=40))
@settings(max_examples=200, deadline=None)
def test_jaccard_equals_python_sets(a, b):
    assert jaccard(a, b) == pytest.approx(brute_jaccard(a, b))


def test_estimated_jaccard_falls_with_distance():
    values = [estimated_jaccard(d) for d in range(33)]
    assert values[0] == 1.0 and values[32] == pytest.approx(0.0, abs=1e-9) and values == sorted(values, reverse=True)


@pytest.fixture
def texts(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text(BASE, encoding="utf-8")
    (folder / "mirror.txt").write_text("Mirrored from the wiki.\n\n" + BASE, encoding="utf-8")
    (folder / "other.txt").write_text("Tea is grown on hillsides and picked by hand in spring. " * 3, encoding="utf-8")
    return folder


def test_explain_cli_reports_distance_jaccard_features_and_diff(runner, texts, db_path):
    assert simq(runner, "add", "--db", db_path, "--store-text", texts).exit_code == 0
    a, b = str(texts / "a.txt"), str(texts / "mirror.txt")
    result = simq(runner, "explain", "--db", db_path, a, b, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    with SimhashIndex(db_path) as index:
        assert data["distance"] == hamming(index.get(a).fingerprint, index.get(b).fingerprint)
    assert data["exact_jaccard"] == pytest.approx(brute_jaccard(BASE, MIRROR))
    # The estimate is the sketches', as simq dupes makes it; the verdict is the one every command gives.
    assert data["estimated_jaccard"] == pytest.approx(estimate_jaccard(sketch(BASE), sketch(MIRROR)))
    pairs = {frozenset((r["first"], r["second"])): r
             for r in map(json.loads, simq(runner, "dupes", "--db", db_path, "--format", "jsonl").stdout.splitlines())}
    row = pairs[frozenset((a, b))]
    assert [data[x] for x in ("jaccard", "checked_by", "certainty", "duplicate")] == [
        row[x] for x in ("jaccard", "checked_by", "certainty", "duplicate")]
    normalized = (" ".join(x.casefold().split()) for x in (BASE, MIRROR))
    grams = [{t[i : i + 5] for i in range(len(t) - 4)} for t in normalized]
    assert {f["feature"] for f in data["only_b"]} <= grams[1] - grams[0]
    assert {f["feature"] for f in data["shared"]} <= grams[0] & grams[1]
    assert data["only_a"] == [] and data["shared"]
    assert any(line.startswith("+Mirrored") for line in data["diff"])
    table = simq(runner, "explain", "--db", db_path, a, b)
    assert table.exit_code == 0 and "exact 5-shingle Jaccard" in table.stdout


def test_explain_reads_unchanged_files_and_says_when_there_is_no_text(runner, texts, db_path):
    assert simq(runner, "add", "--db", db_path, texts).exit_code == 0  # texts not stored
    a, b = str(texts / "a.txt"), str(texts / "other.txt")
    with SimhashIndex(db_path) as index:
        expected = brute_jaccard(BASE, (texts / "other.txt").read_text())
        assert explain(index, a, b).exact_jaccard == pytest.approx(expected)
        (texts / "other.txt").write_text("changed since it was indexed", encoding="utf-8")
        e = explain(index, a, b)
    assert e.exact_jaccard is None and e.distance is not None and any("no text" in n for n in e.notes)


def test_explain_compares_a_file_outside_the_index(runner, texts, db_path, tmp_path):
    assert simq(runner, "add", "--db", db_path, "--store-text", texts / "a.txt").exit_code == 0
    outside = tmp_path / "new.txt"
    outside.write_text(BASE.replace("small", "tiny"), encoding="utf-8")
    data = json.loads(simq(runner, "explain", "--db", db_path, str(texts / "a.txt"), str(outside), "--json").stdout)
    assert data["exact_jaccard"] == pytest.approx(brute_jaccard(BASE, BASE.replace("small", "tiny")))


def test_explain_unknown_reference_is_a_clean_error(runner, texts, db_path):
    assert simq(runner, "add", "--db", db_path, texts).exit_code == 0
    assert_clean_error(simq(runner, "explain", "--db", db_path, "nope", str(texts / "a.txt")), "neither a key")


def _family_corpus(seed: int = 3) -> list[Document]:
    """Texts and lightly edited copies, so pairs fall at many distances."""
    rng = random.Random(seed)
    vocab = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud".split()
    docs = []
    for f in range(12):
        words = [rng.choice(vocab) for _ in range(rng.randint(20, 80))]
        docs.append(Document(f"f{f}", " ".join(words)))
        for c in range(3):
            copy = [w if rng.random() > 0.04 * (c + 1) else rng.choice(vocab) for w in words]
            docs.append(Document(f"f{f}c{c}", " ".join(copy)))
    return docs


def test_calibrate_with_every_pair_sampled_equals_brute_force(tmp_path):
    docs = _family_corpus()
    with SimhashIndex(tmp_path / "c.db", create=True, store_text=True) as index:
        index.add(docs)
        result = calibrate(index, max_k=16, per_distance=10_000, max_queries=10_000)
        fps = {d.key: index.get(d.key).fingerprint for d in docs}
    by_distance = {}
    for x, y in combinations(docs, 2):
        d = hamming(fps[x.key], fps[y.key])
        if d <= 16:
            by_distance.setdefault(d, []).append(brute_jaccard(x.text, y.text))
    for row in result.rows:
        values = by_distance.get(row.distance, [])
        assert row.pairs == len(values)
        if values:
            assert row.mean == pytest.approx(sum(values) / len(values))
            assert row.share_similar == pytest.approx(sum(v >= 0.8 for v in values) / len(values))
    assert result.pairs > 20


def test_calibrate_cli_table_and_json(runner, tmp_path):
    db = tmp_path / "c.db"
    with SimhashIndex(db, create=True, store_text=True) as index:
        index.add(_family_corpus())
    table = simq(runner, "calibrate", "--db", db)
    assert table.exit_code == 0, table.output
    assert "Sampled pairs by distance" in table.stdout and "suggested k" in table.stdout
    data = json.loads(simq(runner, "calibrate", "--db", db, "--json", "--max-k", "8").stdout)
    assert [row["distance"] for row in data["rows"]] == list(range(9))


def test_calibrate_without_texts_is_a_clean_error(runner, tmp_path):
    db = tmp_path / "c.db"
    with SimhashIndex(db, create=True) as index:
        index.add(_family_corpus())  # keys are not files, texts not stored
    assert_clean_error(simq(runner, "calibrate", "--db", db), "--store-text")
    assert_clean_error(simq(runner, "calibrate", "--db", db, "--max-k", "40"), "--max-k", 2)


def test_stats_shows_the_recommended_k(runner, texts, db_path):
    assert simq(runner, "add", "--db", db_path, texts).exit_code == 0
    data = json.loads(simq(runner, "stats", "--db", db_path, "--json").stdout)
    assert data["recommended k"].startswith("9 ")


def test_add_warns_when_most_texts_are_short(runner, tmp_path):
    folder = tmp_path / "short"
    folder.mkdir()
    for i in range(3):
        (folder / f"{i}.txt").write_text(f"a short note number {i}", encoding="utf-8")
    result = simq(runner, "add", "--db", tmp_path / "s.db", folder)
    assert result.exit_code == 0 and "shorter than 200 characters" in result.stderr


def test_explain_notes_short_texts(tmp_path):
    with SimhashIndex(tmp_path / "s.db", create=True, store_text=True) as index:
        index.add([Document("a", "a short note"), Document("b", "a short note!")])
        assert any("shorter than" in note for note in explain(index, "a", "b").notes)


def test_near_confirmed_keeps_exactly_the_pairs_at_the_threshold(tmp_path):
    from simhash_sqlite.find.check import confirm_pairs

    docs = _family_corpus(seed=5)
    with SimhashIndex(tmp_path / "c.db", create=True, store_text=True) as index:
        index.add(docs)
        texts = {d.key: d.text for d in docs}
        for query in ("f0", "f3c1", "f7"):
            found = index.near(key=query, k=12)
            candidates = [m.key for m in index.near(key=query, k=12, check=False)]
            want = {k: brute_jaccard(texts[query], texts[k]) for k in candidates}
            assert {m.key for m in found} == {k for k, j in want.items() if j >= 0.8}
            for m in found:  # exact where the estimate was unsure; else a sure estimate near the truth
                if m.checked_by == "exact":
                    assert m.jaccard == pytest.approx(want[m.key])
                else:
                    assert m.checked_by == "estimated" and m.certainty >= 0.999 and abs(m.jaccard - want[m.key]) < 0.1
        pairs = list(combinations(sorted(texts), 2))[:300]
        kept = confirm_pairs(index, pairs, 0.7)
        assert [(a, b) for a, b, _ in kept] == [(a, b) for a, b in pairs if brute_jaccard(texts[a], texts[b]) >= 0.7]
