"""One verdict everywhere (find/verdict.py decide()): every pair `simq dupes` reports gets the same Jaccard,
checked_by, certainty and verdict from every other surface: the library's near and explain, the CLI's
near, explain and dupes, `simq dedup --dupes`, the web pages (search and pair, through `simq serve`) and
SQL's simhash_near. On an index with stored texts, one added from JSONL without them whose file is still
there (its lines are read again: exact, as stored texts), one whose JSONL file was moved away after the add,
and one of files deleted after the add. dedup has both texts of every pair, so its drops carry the stored
index's verdicts."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import urllib.parse
from pathlib import Path

import pytest
from test_confirm import made_corpus
from typer.testing import CliRunner

from simhash_sqlite import SimhashIndex
from simhash_sqlite.analysis.explain import explain
from simhash_sqlite.cli.app import app
from simhash_sqlite.core.settings import CONFIRM_K
from simhash_sqlite.core.short_texts import short_text_data
from simhash_sqlite.find.verdict import CERTAIN

RUNNER = CliRunner()


def simq(*args: str):
    """The real CLI (typer's runner); the result's exit_code, stdout and stderr."""
    return RUNNER.invoke(app, [str(a) for a in args])


WEB = all(importlib.util.find_spec(m) for m in ("datasette", "sqlite_utils", "matplotlib"))


def _corpus() -> dict[str, str]:
    docs = made_corpus(seed=5)
    # Short texts too, where a sketch is mostly densification: pairs just either side of the line.
    base = "the quick brown fox jumps over the lazy dog while the cat sleeps on a warm mat by the door"
    docs["short"] = base
    docs["short-cut"] = base[: int(len(base) * 0.84)]
    docs["short-edit"] = base.replace("lazy", "idle")
    return docs


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    """{kind: (db, keys by name)} for an index storing texts, one of JSONL without texts ("lines": the file
    still there; "jsonl": moved away after the add), and one of files deleted after the add; and the JSONL file."""
    docs = _corpus()
    root = tmp_path_factory.mktemp("verdict")
    jsonl = root / "corpus.jsonl"
    jsonl.write_text("".join(json.dumps({"id": k, "text": t}) + "\n" for k, t in docs.items()), encoding="utf-8")
    made = {}
    stored = root / "stored.db"
    assert simq("add", str(jsonl), "--db", str(stored), "--store-text").exit_code == 0
    made["stored"] = (stored, {k: k for k in docs})
    lines = root / "lines.db"
    assert simq("add", str(jsonl), "--db", str(lines)).exit_code == 0
    made["lines"] = (lines, {k: k for k in docs})
    moved = root / "moved.jsonl"
    shutil.copy(jsonl, moved)
    bare = root / "jsonl.db"
    assert simq("add", str(moved), "--db", str(bare)).exit_code == 0
    moved.unlink()  # its lines out of reach: the sketches' estimate
    made["jsonl"] = (bare, {k: k for k in docs})
    folder = root / "files"
    folder.mkdir()
    for key, text in docs.items():
        (folder / f"{key}.txt").write_text(text, encoding="utf-8")
    gone = root / "gone.db"
    assert simq("add", str(folder), "--db", str(gone)).exit_code == 0
    with SimhashIndex(gone) as index:
        names = {Path(key).stem: key for key in index.keys()}
    shutil.rmtree(folder)
    made["gone"] = (gone, names)
    return made, docs, jsonl


def _short_pair(row: dict, names: dict[str, str], docs: dict[str, str]) -> bool:
    by_key = {v: k for k, v in names.items()}
    return all(short_text_data(docs[by_key[row[side]]]) is not None for side in ("first", "second"))


def _rounded(x):
    return None if x is None else round(x, 4)


def _key(row: dict) -> tuple:
    return (_rounded(row["jaccard"]), row["checked_by"], _rounded(row["certainty"]), row["duplicate"])


def _dupes(db: Path, *options: str) -> dict[frozenset, dict]:
    done = simq("dupes", "--db", str(db), "--format", "jsonl", *options)
    assert done.exit_code == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    return {frozenset((r["first"], r["second"])): r for r in rows}


@pytest.mark.parametrize("kind", ["stored", "lines", "jsonl", "gone"])
def test_every_surface_gives_each_dupes_pair_the_same_verdict(indexes, kind):
    made, docs, _ = indexes
    db, names = made[kind]
    pairs = _dupes(db)
    assert len(pairs) > 20
    kinds = {r["checked_by"] for r in pairs.values()}
    if kind in ("stored", "lines"):
        assert kinds == {"exact"}  # where both texts are at hand the exact Jaccard decides, sure estimate or not
    else:  # only two short texts are exact: their exact data is kept (core/short_texts.py)
        assert {r["checked_by"] for r in pairs.values() if not _short_pair(r, names, docs)} == {"estimated"}
        assert {r["checked_by"] for r in pairs.values() if _short_pair(r, names, docs)} == {"exact"}
        assert any(r["certainty"] < CERTAIN for r in pairs.values())  # the uncertain band exists here
    by_key = {v: k for k, v in names.items()}
    with SimhashIndex(db) as index:
        library = {frozenset((p.first, p.second)): p for p in index.dupes()}
        assert library.keys() == pairs.keys()
        for n, (pair, row) in enumerate(sorted(pairs.items(), key=lambda item: sorted(item[0]))):
            a, b = row["first"], row["second"]
            # The CLI for a share of the pairs and every one near the line (the library for all: it is the same call).
            cli = n % 4 == 0 or row["certainty"] < CERTAIN
            want = _key(row)
            assert row["duplicate"] is True
            p = library[pair]
            assert (_rounded(p.jaccard), p.checked_by, _rounded(p.certainty), p.keeps) == want
            # explain, in the library and the CLI
            v = explain(index, a, b).verdict
            assert (_rounded(v.jaccard), v.checked_by, _rounded(v.certainty), v.keeps) == want, (a, b)
            if cli:
                done = simq("explain", a, b, "--db", str(db), "--format", "json")
                assert done.exit_code == 0, done.stderr
                assert _key(json.loads(done.stdout)) == want
            # near from either side, with k wide enough that the pair is a candidate
            k = max(CONFIRM_K, row["distance"])
            for me, other in ((a, b), (b, a)):
                found = {m.key: m for m in index.near(key=me, k=k)}
                m = found[other]
                assert (_rounded(m.jaccard), m.checked_by, _rounded(m.certainty), m.keeps) == want
            if cli:
                done = simq("near", "--key", a, "--k", str(k), "--db", str(db), "--format", "jsonl")
                rows = {r["key"]: r for r in map(json.loads, done.stdout.splitlines())}
                assert _key({**rows[b], "duplicate": True}) == want
            # SQL: simhash_near with a's text finds b with the same verdict (the query's sketch is a's)
            got = index.conn.execute(
                "SELECT jaccard, checked_by, certainty FROM simhash_near(?, ?) WHERE key = ?",
                (docs[by_key[a]], k, b),
            ).fetchall()
            assert [(_rounded(j), c, _rounded(s), True) for j, c, s in got] == [want]


def test_dedup_drops_carry_the_verdict_dupes_gives_the_pair(indexes, tmp_path):
    made, _, jsonl = indexes
    # dedup reads both texts of every pair (its input's, and its kept ones' back), so its drops carry the
    # verdict dupes gives where both texts are at hand: on the index that stores them.
    pairs = _dupes(made["stored"][0])
    dropped = tmp_path / "dropped.jsonl"
    done = simq("dedup", str(jsonl), "-o", str(tmp_path / "kept.jsonl"), "--dupes", str(dropped))
    assert done.exit_code == 0, done.stderr
    rows = [json.loads(line) for line in dropped.read_text().splitlines()]
    assert len(rows) > 5
    for row in rows:
        pair = pairs[frozenset((row["key"], row["duplicate_of"]))]
        assert _key({**row, "duplicate": True}) == _key(pair) and row["checked_by"] == "exact"


@pytest.mark.parametrize("kind", ["stored", "lines", "jsonl"])
def test_uncertain_lists_exactly_the_unsure_verdicts(indexes, kind):
    made, _, _ = indexes
    db = made[kind][0]
    pairs = _dupes(db)
    listed = _dupes(db, "--uncertain")
    assert all(r["certainty"] is None or r["certainty"] < CERTAIN for r in listed.values())
    kept = {p for p, r in listed.items() if r["duplicate"]}
    assert kept == {p for p, r in pairs.items() if r["certainty"] < CERTAIN}
    for pair in kept:
        assert _key(listed[pair]) == _key(pairs[pair])
    if kind in ("stored", "lines"):  # texts settle every unsure estimate
        assert not listed
    else:
        assert any(not r["duplicate"] for r in listed.values())  # just below the line, listed for review


_ROW = re.compile(
    r'<tr>\s*<td><a [^>]*>([^<]*)</a></td>\s*<td class="num">(\d+)</td>\s*<td class="num">[^<]*</td>\s*'
    r'<td class="num">([^<]*)</td>\s*<td>([^<]*)</td>\s*<td class="num certainty">([^<]*)</td>'
)
_WORDS = {"exact Jaccard": "exact", "estimated Jaccard (stored sketch)": "estimated",
          "distance only (text out of reach)": "distance"}


@pytest.mark.skipif(not WEB, reason="the web pages need the [web] extra")
@pytest.mark.parametrize("kind", ["stored", "lines", "jsonl"])
def test_the_web_pages_give_each_dupes_pair_the_same_verdict(indexes, kind, tmp_path):
    from web_helpers import get, serving

    made, _, _ = indexes
    db = made[kind][0]
    pairs = _dupes(db)
    with serving(db, tmp_path) as base:
        prefix = f"{base}/{db.stem}/-/simhash"
        for row in pairs.values():
            a, b = row["first"], row["second"]
            status, html = get(f"{prefix}/pair?" + urllib.parse.urlencode({"a": a, "b": b}))
            assert status == 200
            found = re.search(r'<tr id="verdict" data-jaccard="([^"]*)" data-checked-by="([^"]*)" '
                              r'data-certainty="([^"]*)" data-keeps="(\d)"', html)
            assert found, html[:2000]
            got = (round(float(found[1]), 4), found[2], round(float(found[3]), 4), found[4] == "1")
            assert got == _key(row)
            k = max(CONFIRM_K, row["distance"])
            status, html = get(f"{prefix}/search?" + urllib.parse.urlencode({"key": a, "k": k}))
            assert status == 200
            rows = {m[0]: m for m in _ROW.findall(html)}
            m = rows[b]  # shown to 3 decimals
            assert _WORDS[m[3]] == row["checked_by"]
            assert abs(float(m[2]) - row["jaccard"]) < 6e-4 and abs(float(m[4]) - row["certainty"]) < 6e-4


@pytest.mark.parametrize("kind", ["stored", "lines", "jsonl", "gone"])
def test_near_many_clusters_the_pair_page_and_the_library_dedup_give_each_pair_the_same_verdict(indexes, kind):
    """The surfaces the test above does not walk: near_many, the cluster page's members against their
    representative and the web pair page's data (pages.pair_view); dedup() in the library: the next test."""
    from simhash_sqlite.find.chains import cluster_members
    from simhash_sqlite.find.queries import Query

    made, docs, _ = indexes
    db, names = made[kind]
    pairs = _dupes(db)
    by_key = {v: k for k, v in names.items()}
    with SimhashIndex(db) as index:
        k = max([CONFIRM_K, *(r["distance"] for r in pairs.values())])
        answers = dict(index.near_many([Query(key=key, id=key) for key in sorted(by_key)], k=k))
        for row in pairs.values():
            a, b = row["first"], row["second"]
            found = {m.key: m for m in answers[Query(key=a, id=a)].matches}
            m = found[b]
            assert (_rounded(m.jaccard), m.checked_by, _rounded(m.certainty), m.keeps) == _key(row)
            if WEB:
                from simhash_sqlite.web.pages import pair_view

                v = pair_view(index, a, b).explanation.verdict
                assert (_rounded(v.jaccard), v.checked_by, _rounded(v.certainty), v.keeps) == _key(row)
        index.clusters()
        clusters = [c for (c,) in index.conn.execute("SELECT DISTINCT cluster FROM clusters WHERE size > 1")]
        compared = 0
        for cluster in clusters:
            _, rep, members = cluster_members(index, cluster)
            for member in members:
                row = pairs.get(frozenset((rep, member.key)))
                if member.verdict is not None and row is not None:
                    v = member.verdict
                    assert (_rounded(v.jaccard), v.checked_by, _rounded(v.certainty), v.keeps) == _key(row)
                    compared += 1
        assert compared > 10


def test_the_library_dedup_drops_carry_the_verdict_of_the_index_that_stores_the_texts(indexes):
    """dedup() over the corpus in its order: it has both texts of every pair (the kept ones read back), so
    each drop carries the verdict the pair gets where both texts are at hand: the stored index's. (Once, not
    once per kind of index above: dedup reads the texts, never an index, so every kind gave the same run.)"""
    from simhash_sqlite import Document, dedup

    made, docs, _ = indexes
    with_texts = _dupes(made["stored"][0])
    decisions = list(dedup(Document(key, text) for key, text in docs.items()))
    dropped = [d for d in decisions if not d.kept]
    assert len(dropped) > 5
    for d in dropped:
        row = with_texts[frozenset((d.document.key, d.duplicate_of))]
        assert (_rounded(d.jaccard), d.checked_by, _rounded(d.certainty), True) == _key(row)
        assert d.checked_by == "exact"


def _chain_corpus() -> dict[str, str]:
    """A chain: each text the previous one's words shifted by 7 of 100 (Jaccard about 0.87 to its
    neighbour, about 0.75 two steps apart), and unrelated texts."""
    import random

    rng = random.Random(3)
    vocab = ["".join(rng.choices("abcdefghiklmnoprstuvwy", k=rng.randint(3, 9))) for _ in range(500)]
    words = [rng.choice(vocab) for _ in range(130)]
    docs = {f"link{i}": " ".join(words[7 * i : 7 * i + 100]) for i in range(3)}
    docs.update({f"other{i}": " ".join(rng.choice(vocab) for _ in range(100)) for i in range(3)})
    return docs


@pytest.mark.parametrize("store", [True, False])
def test_clusters_flag_members_below_the_line_with_the_chain_that_joined_them(tmp_path, store):
    from simhash_sqlite import Document
    from simhash_sqlite.find.chains import cluster_members

    docs = _chain_corpus()
    db = tmp_path / "chain.db"
    with SimhashIndex(db, create=True, store_text=store) as index:
        index.add(Document(k, t) for k, t in docs.items())
        report = index.clusters()
        assert report.candidates == "sketch" and report.below == 1
        ((cluster, chained),) = report.chained.items()
        assert [key for key, _ in chained] == ["link2"] and not chained[0][1].keeps
        size, rep, members = cluster_members(index, cluster)
        assert (size, rep) == (3, "link0")
        below = [m for m in members if m.below]
        assert [(m.key, m.path) for m in below] == [("link2", ("link0", "link1", "link2"))]
        # Each hop is a pair every surface calls a near-duplicate; the member and the representative are not.
        assert explain(index, "link0", "link1").verdict.keeps and explain(index, "link1", "link2").verdict.keeps
        v = explain(index, "link0", "link2").verdict
        assert (v.keeps, _rounded(v.jaccard), v.checked_by) == (False, _rounded(below[0].verdict.jaccard),
                                                               below[0].verdict.checked_by)
    done = simq("clusters", "--db", str(db), "--format", "json")
    assert done.exit_code == 0, done.stderr
    (record,) = json.loads(done.stdout)
    assert [(b["key"], b["path"], b["duplicate"]) for b in record["below"]] == [
        ("link2", ["link0", "link1", "link2"], False)]
    assert "1 members are below the Jaccard line" in done.stderr
    assert "candidates from the sketches' LSH tables" in done.stderr
    table = simq("clusters", "--db", str(db))
    assert "link2 is below the line to link0" in table.stdout and "link0 -> link1 -> link2" in table.stdout
    stats = simq("stats", "--db", str(db))
    assert "1 members below the Jaccard line" in stats.stdout and "k=12" not in stats.stdout
    assert "LSH" in stats.stdout
    if WEB:
        from web_helpers import get, serving

        with serving(db, tmp_path) as base:
            status, html = get(f"{base}/{db.stem}/-/simhash/clusters/{cluster}")
            assert status == 200 and 'class="below"' in html and "link0 → link1 → link2" in html
            status, html = get(f"{base}/{db.stem}/-/simhash/clusters")
            assert status == 200 and "LSH tables" in html and "k=" not in html and 'id="below"' in html


def test_the_spread_is_the_binomial_for_long_texts_and_wider_for_short_ones():
    import numpy as np

    from simhash_sqlite.core.sketch import DEFAULT_SCHEME, SPREAD_FACTOR, certainty, pair_spread

    m = DEFAULT_SCHEME.bins
    binomial = np.sqrt((1 - 0.8**2) / m)
    assert pair_spread(0.8, 1e7, 1e7) == pytest.approx(SPREAD_FACTOR * binomial, rel=1e-3)
    assert pair_spread(0.8, np.nan, 500) == pytest.approx(SPREAD_FACTOR * binomial, rel=1e-3)  # unknown: long
    spreads = [float(pair_spread(0.8, n, n)) for n in (30, 100, 300, 1000, 3000)]
    assert spreads == sorted(spreads, reverse=True) and spreads[0] > 1.3 * spreads[-1]
    # Symmetric in the two texts; 1/2 at the line; a size ratio below the line rules the pair out.
    assert certainty(0.85, 0.8, 200, 900) == certainty(0.85, 0.8, 900, 200)
    assert certainty(0.8, 0.8, 500, 500) == pytest.approx(0.5)
    assert certainty(0.79, 0.8, 100, 200) == 1.0 and certainty(0.79, 0.8, 190, 200) < 0.9


def test_certainty_is_calibrated_on_generated_pairs():
    """Pairs of random shingle sets of 20-6,000 shingles at J uniform in 0.6-1.0: the verdicts of each
    band of certainty are right about as often as it says, and the sure ones all but never wrong."""
    import numpy as np

    from simhash_sqlite.core.sketch import DEFAULT_SCHEME, estimate_many, sizes_of, sketch_hashes
    from simhash_sqlite.find.verdict import certainty_of

    rng = np.random.default_rng(7)
    count = 3000
    union = np.exp(rng.uniform(np.log(20), np.log(6000), count)).astype(np.int64)
    shared = np.maximum(1, np.rint(rng.uniform(0.6, 1.0, count) * union)).astype(np.int64)
    docs, hashes = [], []
    for i in range(count):
        both = rng.integers(0, 2**63, shared[i], dtype=np.uint64)
        rest = rng.integers(0, 2**63, union[i] - shared[i], dtype=np.uint64)
        cut = rng.integers(0, len(rest) + 1)
        for side, own in enumerate((rest[:cut], rest[cut:])):
            docs.append(np.full(shared[i] + len(own), 2 * i + side))
            hashes.append(np.concatenate((both, own)))
    rows, _ = sketch_hashes(np.concatenate(docs), np.concatenate(hashes), 2 * count, DEFAULT_SCHEME, distinct=True)
    a, b = rows[0::2], rows[1::2]
    truth = shared / union
    estimate = estimate_many(a, b)
    sure = certainty_of(estimate, sizes_of(a), sizes_of(b), 0.8)
    right = (estimate >= 0.8) == (truth >= 0.8)
    for lo, hi in ((0.5, 0.8), (0.8, 0.95), (0.95, CERTAIN)):
        band = (sure >= lo) & (sure < hi)
        assert band.sum() > 50
        assert abs(right[band].mean() - sure[band].mean()) < 0.08, (lo, hi)
    assert (sure >= CERTAIN).mean() > 0.5 and (~right[sure >= CERTAIN]).sum() <= 2


def test_a_threshold_of_one_leaves_identity_to_the_exact_check(tmp_path):
    import warnings

    from simhash_sqlite import Document
    from simhash_sqlite.core.sketch import certainty

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert certainty(1.0, 1.0, 300, 300) == pytest.approx(0.5)  # an estimate of 1 is no proof of identity
    text = "a text long enough to have a few dozen shingles, copied twice and once with one change"
    with SimhashIndex(tmp_path / "one.db", create=True, store_text=True) as index:
        index.add([Document("a", text), Document("b", text), Document("c", text.replace("once", "twice"))])
        pairs = {(p.first, p.second): p for p in index.dupes(threshold=1.0)}
    assert list(pairs) == [("a", "b")] and pairs["a", "b"].checked_by == "exact" and pairs["a", "b"].jaccard == 1.0


def _rule(distance, estimate, sure, exact, threshold, k):
    """The rule, one pair at a time, as written in find/verdict.py's docstring (None: missing)."""
    from simhash_sqlite.find.verdict import FILTER_CERTAIN, fallback_k

    if estimate is not None and estimate < threshold and sure >= FILTER_CERTAIN:
        return (False, estimate, "estimated", sure)
    if exact is not None:
        return (exact >= threshold, exact, "exact", 1.0)
    if estimate is not None:
        return (estimate >= threshold, estimate, "estimated", sure)
    return (distance <= fallback_k(k), None, "distance", None)


def test_decide_on_arrays_is_the_rule_one_pair_at_a_time():
    """decide() against the rule written out: the filter first, then the texts (also over a sure estimate),
    then the estimate, then the distance; exact Jaccards asked only for the pairs the filter lets through."""
    import numpy as np
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from simhash_sqlite.find.verdict import FILTER_CERTAIN, decide

    value = st.one_of(st.none(), st.sampled_from([0.0, 0.5, 0.79, 0.8, 0.81, 1.0]), st.floats(0, 1))
    certainty = st.sampled_from([0.5, 0.9, 0.999, FILTER_CERTAIN, 1.0])
    pair = st.tuples(st.integers(0, 64), value, certainty, value)

    @settings(max_examples=300, deadline=None)
    @given(st.lists(pair, max_size=12), st.sampled_from([0.5, 0.8, 1.0]), st.integers(0, 64))
    def check(pairs, threshold, k):
        asked = []

        def exact(rows):
            asked.extend(rows.tolist())
            return np.array([np.nan if pairs[i][3] is None else pairs[i][3] for i in rows.tolist()])

        distance = np.array([p[0] for p in pairs], dtype=np.int64)
        estimate = np.array([np.nan if p[1] is None else p[1] for p in pairs])
        sure = np.array([np.nan if p[1] is None else p[2] for p in pairs])
        verdicts = decide(distance, estimate, sure, exact, threshold=threshold, k=k)
        for i, (d, e, c, x) in enumerate(pairs):
            v = verdicts[i]
            assert (v.keeps, v.jaccard, v.checked_by, v.certainty) == _rule(d, e, c, x, threshold, k)
        filtered = {i for i, (_, e, c, _) in enumerate(pairs)
                    if e is not None and e < threshold and c >= FILTER_CERTAIN}
        assert sorted(asked) == [i for i in range(len(pairs)) if i not in filtered]

    check()
