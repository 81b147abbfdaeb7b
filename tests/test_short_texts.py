"""Short texts are checked exactly without stored texts: the index, dedup's kept set and the integrity
check keep what an exact 5-shingle Jaccard needs (core/short_texts.py); an older index keeps working
and says what it lacks."""

from __future__ import annotations

import json
import random

import apsw
import pytest
from test_cli import simq
from test_jsonl_sources import WITHOUT_SOURCES

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.core.shingles import fold_space, jaccard, shingle_set
from simhash_sqlite.core.short_texts import (
    SHORT_TEXT_BYTES,
    SHORT_TEXT_DEFLATED_MOST,
    SHORT_TEXT_MOST,
    SHORT_TEXT_READ_MOST,
    encoded,
    short_text_data,
    short_text_of,
    short_text_shingles,
)
from simhash_sqlite.store.database import migrations

ZH = "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。床前明月光，疑是地上霜。举头望明月，低头思故乡。"
EN = "The quick brown fox jumps over the lazy dog while the cat sleeps in the warm afternoon sun."


def typos(text: str, count: int, seed: int) -> str:
    rng = random.Random(seed)
    chars = list(text)
    for _ in range(count):
        at = rng.randrange(len(chars))
        chars[at] = rng.choice("xyzqjk" if text.isascii() else "山水云天风雨")
    return "".join(chars)


def family(seed: int, base: str) -> dict[str, str]:
    """A short original and copies with 1-4 characters changed: Jaccard from about 0.9 down to under 0.8."""
    return {f"{seed}-{n}": typos(base, n, seed * 10 + n) if n else base for n in range(5)}


def short_corpus() -> dict[str, str]:
    texts = {}
    for seed, base in enumerate((EN, ZH, EN.upper(), ZH[::-1])):
        texts.update(family(seed, base))
    return texts


def brute_pairs(texts: dict[str, str], threshold: float = 0.8) -> dict[frozenset, float]:
    keys = sorted(texts)
    out = {}
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            if (j := jaccard(texts[a], texts[b])) >= threshold:
                out[frozenset((a, b))] = j
    return out


@pytest.mark.parametrize("text", [EN, ZH, "  a  b\tc \n d  ", "x" * 5000, EN + " " + ZH])
def test_stored_data_gives_back_the_folded_text(text):
    data = short_text_data(text)
    if data is None:
        folded = fold_space(text)
        plain = folded.encode("utf-16-le" if len(folded.encode()) > 2 * len(folded) else "utf-8")
        assert len(text) > SHORT_TEXT_MOST or len(folded.encode()) > SHORT_TEXT_MOST or (
            len(plain) > SHORT_TEXT_DEFLATED_MOST)
        return
    assert len(data) <= SHORT_TEXT_BYTES
    assert short_text_of(data) == fold_space(text)
    assert (short_text_shingles(data) == shingle_set(text)).all()


def test_chinese_is_kept_in_the_smaller_encoding_and_long_texts_not_at_all():
    assert short_text_data(ZH)[0] == 1  # UTF-16: 2 bytes a character before deflate, not 3
    assert short_text_data(EN)[0] == 0
    assert short_text_data("   ") is None
    rng = random.Random(3)
    long_text = " ".join("".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(200))
    assert short_text_data(long_text) is None  # 1,400 characters: not tried
    assert short_text_data(long_text[:1000]) is None  # 1,000 characters of random words deflate to over 384 bytes
    assert short_text_data("ab " * 250) is not None  # repetitive: 749 bytes deflate to a few
    assert short_text_data("ab " * 300) is None  # and so would 899, but more than 768 bytes are not deflated


def test_damaged_data_is_no_exact_data():
    data = short_text_data(EN)
    for bad in (b"", b"\x07" + data[1:], data[:-3], data[:1] + b"\xff" * 20):
        assert short_text_shingles(bad) is None
        with pytest.raises(ValueError):
            short_text_of(bad)


def test_no_stored_form_inflates_past_the_read_limit_and_readers_refuse_what_does():
    """The worst text within SHORT_TEXT_MOST UTF-8 bytes for UTF-16 (astral characters, ASCII just below the
    switch to UTF-16), which an index made before SHORT_TEXT_DEFLATED_MOST may hold, inflates within
    SHORT_TEXT_READ_MOST; a stream inflating one byte more is refused, and so is one that does not end.
    Bytes after a stream's end are ignored (zlib's unused_data)."""
    import zlib

    worst = "\U0001F600" * 170 + "a" * 339  # 1,019 UTF-8 bytes, 1,358 in UTF-16: the most UTF-16 takes
    assert encoded(worst) is None  # more than SHORT_TEXT_DEFLATED_MOST bytes: no longer tried
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = bytes((1,)) + packer.compress(worst.encode("utf-16-le", "surrogatepass")) + packer.flush()
    assert len(zlib.decompress(data[1:], -15)) == 1358 <= SHORT_TEXT_READ_MOST
    assert short_text_of(data) == worst

    def raw(payload: bytes) -> bytes:
        packer = zlib.compressobj(9, zlib.DEFLATED, -15)
        return bytes((0,)) + packer.compress(payload) + packer.flush()

    assert short_text_of(raw(b"a" * SHORT_TEXT_READ_MOST)) == "a" * SHORT_TEXT_READ_MOST
    for bad in (raw(b"a" * (SHORT_TEXT_READ_MOST + 1)), raw(b"a" * (1 << 20)), raw(b"abc")[:-1]):
        with pytest.raises(ValueError, match="does not end within"):
            short_text_of(bad)
    assert short_text_of(raw(b"abc def") + b"\xff trailing") == "abc def"


def test_dupes_without_stored_texts_checks_short_pairs_exactly(tmp_path):
    texts = short_corpus()
    long_base = " ".join(f"sentence {i} of a much longer page that goes on and on" for i in range(150))
    texts["long-a"], texts["long-b"] = long_base, long_base + " and one more line at the end"
    with SimhashIndex(tmp_path / "x.db", create=True) as index:
        index.add(Document(key, text) for key, text in texts.items())
        stored = dict(index.conn.execute("SELECT key, short_text FROM documents"))
        pairs = {frozenset((p.first, p.second)): p for p in index.dupes()}
    assert stored["long-a"] is None and all(stored[key] is not None for key in texts if not key.startswith("long"))
    truth = brute_pairs(texts)
    assert set(pairs) == set(truth)
    for pair, found in pairs.items():
        if "long-a" in pair:
            assert found.checked_by == "estimated"
        else:
            assert found.checked_by == "exact" and found.jaccard == pytest.approx(truth[pair], abs=1e-12)
    # Without the exact data the same pairs are estimated: some verdicts differ (the reason for it).
    assert any(0.75 < j < 0.85 for j in truth.values())


def test_an_index_that_stores_texts_keeps_no_second_copy(tmp_path):
    with SimhashIndex(tmp_path / "x.db", create=True, store_text=True) as index:
        index.add([Document("a", EN), Document("b", typos(EN, 1, 1))])
        assert index.conn.execute("SELECT count(*) FROM documents WHERE short_text IS NOT NULL").get == 0
        # (judged by the verdict's rule for stored texts: a sure estimate, else the texts)
        assert [(p.first, p.second) for p in index.dupes()] == [("a", "b")]


def test_jsonl_added_without_texts_is_checked_exactly_through_the_cli(runner, tmp_path):
    texts = short_corpus()
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"id": k, "text": t}, ensure_ascii=False) + "\n" for k, t in texts.items()),
                      encoding="utf-8")
    db = tmp_path / "x.db"
    assert simq(runner, "add", "--db", db, source).exit_code == 0
    result = simq(runner, "dupes", "--db", db, "--format", "jsonl")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert {r["checked_by"] for r in rows} == {"exact"}
    assert {frozenset((r["first"], r["second"])) for r in rows} == set(brute_pairs(texts))


def test_the_integrity_check_names_damaged_short_texts(runner, tmp_path):
    db = tmp_path / "x.db"
    with SimhashIndex(db, create=True) as index:
        index.add([Document("a", EN), Document("b", ZH)])
    assert simq(runner, "integrity", "--db", db).exit_code == 0
    conn = apsw.Connection(str(db))
    conn.execute("UPDATE documents SET short_text = x'07ffff' WHERE key = 'b'")
    conn.close()
    result = simq(runner, "integrity", "--db", db)
    assert result.exit_code != 0
    assert "short text" in result.output and "b" in result.output


def older_index(path, texts: dict[str, str]) -> None:
    """A file as simhash-sqlite wrote it before migration 0005 (no short_text column), texts not stored."""
    with SimhashIndex(path, create=True) as index:
        index.add(Document(key, text) for key, text in texts.items())
    conn = apsw.Connection(str(path))
    last = max(number for number, _, _ in migrations() if number < 5)
    conn.execute(WITHOUT_SOURCES + "ALTER TABLE documents DROP COLUMN short_text")
    conn.execute("DELETE FROM simhash_meta WHERE key = 'short_texts'")
    conn.pragma("user_version", last)
    conn.close()


def test_an_older_index_keeps_working_and_says_its_short_texts_are_estimated(runner, tmp_path):
    texts = short_corpus()
    db = tmp_path / "old.db"
    older_index(db, texts)
    check = simq(runner, "integrity", "--db", db, "--format", "json")
    assert check.exit_code == 0, check.output
    assert "made before exact short texts" in {c["name"]: c["detail"] for c in json.loads(check.stdout)["checks"]}[
        "short texts"]
    # A search does not migrate it (it never writes) but says how; opened for writing it is migrated (as
    # any older schema); its texts are out of reach, so it says what they lack.
    refused = simq(runner, "dupes", "--db", db, "--format", "jsonl")
    assert refused.exit_code == 1 and "simq vacuum --db" in refused.stderr
    assert simq(runner, "vacuum", "--db", db).exit_code == 0
    result = simq(runner, "dupes", "--db", db, "--format", "jsonl")
    assert result.exit_code == 0, result.output
    assert {json.loads(line)["checked_by"] for line in result.stdout.splitlines()} == {"estimated"}
    for command in (("stats",), ("integrity", "--format", "json")):
        said = simq(runner, *command, "--db", db)
        assert said.exit_code == 0 and f"{len(texts)} document(s)" in said.stdout and "made before exact" in said.stdout
    with SimhashIndex(db) as index:
        assert index.short_texts.kept and index.stats().short_texts.lacking == len(texts)
        index.add([Document("new-1", EN), Document("new-2", typos(EN, 1, 7))])
        kinds = {frozenset((p.first, p.second)): p.checked_by for p in index.dupes()}
    assert kinds[frozenset(("new-1", "new-2"))] == "exact"
    assert kinds[frozenset(("0-0", "0-1"))] == "estimated"


def test_dedup_checks_short_pairs_exactly_and_drops_by_the_exact_jaccard(runner, tmp_path):
    texts = short_corpus()
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"id": k, "text": t}, ensure_ascii=False) + "\n" for k, t in texts.items()),
                      encoding="utf-8")
    result = simq(runner, "dedup", source, "-o", tmp_path / "kept.jsonl", "--dupes", tmp_path / "dupes.jsonl")
    assert result.exit_code == 0, result.output
    dropped = [json.loads(line) for line in (tmp_path / "dupes.jsonl").read_text().splitlines()]
    assert dropped and {d["checked_by"] for d in dropped} == {"exact"}
    for d in dropped:
        assert d["jaccard"] == pytest.approx(jaccard(texts[d["key"]], texts[d["duplicate_of"]]), abs=1e-4)
        assert d["jaccard"] >= 0.8
    # Greedy keep-first over the exact pairs, in input order: what a brute force keeps.
    kept, order = [], list(texts)
    for key in order:
        if not any(jaccard(texts[key], texts[k]) >= 0.8 for k in kept):
            kept.append(key)
    out = [json.loads(line)["id"] for line in (tmp_path / "kept.jsonl").read_text().splitlines()]
    assert out == kept
