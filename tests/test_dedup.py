"""Keep-first dedup: the kept-set search against brute force, keep-first order, pass-through, CLI."""

import json
import random

import numpy as np
from conftest import integrity_ok
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import assert_clean_error, simq

from simhash_sqlite import Document, SimhashIndex, dedup, hamming, simhash
from simhash_sqlite.dedup import KeptSet

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


def test_keep_first_equals_a_sequential_brute_force_across_batches():
    rng = random.Random(5)
    originals = [text(rng) for _ in range(40)]
    texts = []
    for _ in range(150):
        body = rng.choice(originals)
        texts.append(edit(rng, body, rng.choice([0, 0, 1, 2, 8])))
    texts.insert(17, "")  # no features: kept, never a duplicate
    for k in (0, 3, 8):
        decisions = list(dedup((Document(str(i), t) for i, t in enumerate(texts)), k))
        # Tiny batches too: decisions must not depend on where batches end.
        from simhash_sqlite import Deduplicator

        small = list(Deduplicator(k, batch_size=7).run((Document(str(i), t), None) for i, t in enumerate(texts)))
        expected = brute_keep_first(texts, k)
        for got in (decisions, small):
            assert [d.document.key for d in got] == [str(i) for i in range(len(texts))]  # input order
            assert [(d.kept, None if d.kept else int(d.duplicate_of), d.distance) for d in got] == expected


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
    result = simq(runner, "dedup", data, "--out", out, "--dupes", side, "--k", "3", "--text-field", "body", "--id-field", "url")
    assert result.exit_code == 0, result.output
    lines = out.read_text(encoding="utf-8").splitlines()
    raw = data.read_text(encoding="utf-8").splitlines()
    expected = brute_keep_first([r["body"] for r in records], 3)
    assert lines == [line for line, (kept, _, _) in zip(raw, expected) if kept]  # byte for byte, in order
    dropped = [json.loads(line) for line in side.read_text().splitlines()]
    assert [(d["key"], d["duplicate_of"], d["distance"]) for d in dropped] == [
        (f"u{i}", f"u{j}", dist) for i, (kept, j, dist) in enumerate(expected) if not kept
    ]
    assert f"{len(lines)} kept, {len(dropped)} dropped" in result.stderr
    # Running the filter on its own output drops nothing.
    again = tmp_path / "again.jsonl"
    assert simq(runner, "dedup", out, "--out", again, "--text-field", "body", "--id-field", "url").exit_code == 0
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
    result = simq(runner, "dedup", folder, "--out", out, "--against", db, "--dupes", side, "--k", "6")
    assert result.exit_code == 0, result.output
    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in kept] == [str(folder / "b.txt")] and kept[0]["text"] == (folder / "b.txt").read_text()
    assert {json.loads(line)["duplicate_of"] for line in side.read_text().splitlines()} == {"old0", "old1"}
    assert integrity_ok(db) and len(SimhashIndex(db)) == 5  # --against only reads
    assert_clean_error(simq(runner, "dedup", folder, "--out", out, "--against", db, "--features", "words"), "features")
    assert_clean_error(simq(runner, "dedup", folder, "--out", out, "--against", tmp_path / "none.db"), "no index")
    assert_clean_error(simq(runner, "dedup", out, "--out", out), "also an input")
    assert_clean_error(simq(runner, "dedup", folder, "--out", side, "--dupes", side), "same file")
    assert_clean_error(simq(runner, "dedup", folder, "--out", out, "--k", "65"), "k must be")


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
    assert sorted((r["first"], r["second"], r["distance"]) for r in map(json.loads, result.stdout.splitlines())) == expected
    csv_out = simq(runner, "dupes", "--db", db, "--k", "6", "--format", "csv").stdout.splitlines()
    assert csv_out[0] == "first,second,distance,similarity,jaccard,checked,checked_by"
    assert len(csv_out) == len(expected) + 1
    assert "a3" in simq(runner, "dupes", "--db", db, "--k", "6").stdout
    export = tmp_path / "clusters.jsonl"
    result = simq(runner, "clusters", "--db", db, "--k", "6", "--format", "jsonl", "--out", export)
    assert result.exit_code == 0, result.output
    assert [json.loads(line) for line in export.read_text().splitlines()] == [
        {"cluster": 1, "size": 3, "representative": "a", "members": ["a", "a2", "a3"]}
    ]
    assert "drop 2" in result.stderr
    rows = simq(runner, "clusters", "--db", db, "--k", "6", "--format", "csv", "--representative", "last").stdout
    assert rows.splitlines()[1:] == ["1,3,a3,a", "1,3,a3,a2", "1,3,a3,a3"]
    assert "a2" in simq(runner, "clusters", "--db", db, "--k", "6").stdout
    assert_clean_error(simq(runner, "dupes", "--db", db, "--format", "xml"), "--format")
    assert_clean_error(simq(runner, "clusters", "--db", db, "--representative", "best"), "representative")
    assert_clean_error(simq(runner, "dupes", "--db", tmp_path / "missing.db"), "no index")
