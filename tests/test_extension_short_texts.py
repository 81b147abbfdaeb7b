"""The loadable extension checks short texts as the package does: two short texts of an index without
stored texts are compared by their exact 5-shingle Jaccard from the index's short_text data
(core/short_texts.py, inflated with zlib inside sqlite_extension.c), so simhash_near gives every pair the
verdict, Jaccard, checked_by and certainty that simq near gives it. Data that cannot be read (damaged,
hostile, inflating past the limit) is judged as the package judges it, by the sketches; never a crash.
A build without zlib still works and says what it lacks."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_extension import (
    BUILT,
    EXTENSION,
    MARK,
    NEAR,
    WHY_NOT,
    _literal,
    extension_connection,
    needs_shell,
    package_near,
    rows_of,
    shell,
)

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.core.shingles import jaccard
from simhash_sqlite.core.short_texts import (
    SHORT_TEXT_BYTES,
    SHORT_TEXT_DEFLATED_MOST,
    SHORT_TEXT_READ_MOST,
    short_text_data,
    short_text_shingles,
)
from simhash_sqlite.native import extension

pytestmark = pytest.mark.skipif(EXTENSION is None, reason=WHY_NOT)


def links_zlib(library) -> bool:
    """Whether an extension library was built with zlib (it then calls inflateInit2_)."""
    return b"inflateInit2_" in Path(library).read_bytes()


WITH_ZLIB = EXTENSION is not None and links_zlib(EXTENSION)
needs_zlib = pytest.mark.skipif(not WITH_ZLIB, reason="the extension was built without zlib (simq extension says so)")

WORDS = ("the of and to in is was for on that with as by at from his her be it an are this which or had but not "
         "they have one you were all she there their been when more would who will so can no what up out into two "
         "some time could them other than then only its new over most made after first also did many before "
         "through years where such way well down should because each just those people how too little state good "
         "very make world still own see men work long here get both between life being under never day same another "
         "know while last might us great old year off come since against go came right used take three").split()
HAN = [chr(c) for c in range(0x4E00, 0x4E00 + 600)]  # common Han characters: a vocabulary of 600


def _edited(rng: random.Random, units: list[str], alphabet, rate: float) -> list[str]:
    out = []
    for unit in units:
        roll = rng.random()
        if roll < rate / 3:
            continue
        if roll < 2 * rate / 3:
            out.append(rng.choice(alphabet))
            continue
        out.append(unit)
        if roll < rate:
            out.append(rng.choice(alphabet))
    return out


def short_families(seed: int, count: int = 16) -> dict[str, str]:
    """Families of short texts (50-500 characters), English-like and Chinese, with light edits: many pairs
    near the threshold, where the sketch's estimate of a short text is least sure."""
    rng = random.Random(seed)
    texts = {}
    for f in range(count):
        chinese = f % 2 == 1
        alphabet, join = (HAN, "".join) if chinese else (WORDS, " ".join)
        base = [rng.choice(alphabet) for _ in range(rng.randint(30, 160) if chinese else rng.randint(12, 80))]
        for v, rate in enumerate((0.0, 0.01, 0.02, 0.03, 0.05, 0.08)):
            text = join(_edited(rng, base, alphabet, rate))
            if v == 2 and not chinese:
                text = text.replace(" ", "  \n", 3)  # whitespace runs: folded by the check
            texts[f"{'zh' if chinese else 'en'}{f:02}/v{v}"] = text
    # a long text beside them: its pairs with short ones are estimated, or exact from their short data
    texts["long/en"] = " ".join(rng.choice(WORDS) for _ in range(600))
    texts["long/en-copy"] = texts["long/en"][:2000] + " extra words here " + texts["long/en"][2000:]
    return texts


def build(path: Path, texts: dict[str, str]) -> Path:
    with SimhashIndex(path, create=True) as index:  # texts not stored: short texts keep their exact data
        index.add(Document(key, text) for key, text in texts.items())
    return path


@pytest.fixture(scope="module")
def short_index(tmp_path_factory):
    texts = short_families(23)
    path = build(tmp_path_factory.mktemp("short") / "short.db", texts)
    return {"texts": texts, "path": path}


# -- every pair the same on both surfaces ---------------------------------------------------------------

@needs_zlib
def test_every_pair_of_a_short_text_index_gets_the_package_verdict(short_index):
    """Each stored text as the query at k = 64 (every document is a candidate): the extension's rows are
    the package's, row for row (key, distance, Jaccard, checked_by, certainty; the kept ones)."""
    texts, path = short_index["texts"], short_index["path"]
    conn = extension_connection(path)
    with SimhashIndex(path, readonly=True) as index:
        assert index.short_texts.column and not index.store_text
        assert index.conn.execute("SELECT count(short_text) FROM documents").get == len(texts) - 2
    how: dict[str, int] = {}
    near_line = dropped = 0
    for key, query in texts.items():
        expected = package_near(path, query, 64, 1)
        got = rows_of(conn.execute(NEAR, (query, 64, 1)))
        assert got == expected, key
        for row in got:
            how[row[5]] = how.get(row[5], 0) + 1
            near_line += row[5] == "exact" and 0.8 <= row[4] < 0.85
        # every document is a candidate; those not kept were dropped by the same verdicts
        assert conn.execute("SELECT count(*) FROM simhash_near(?, 64, 0)", (query,)).get == len(texts)
        dropped += len(texts) - len(got)
    # Short pairs were measured (exact), the pair of long texts was estimated, and many sat near the line.
    assert how.get("exact", 0) > 100 and how.get("estimated", 0) >= 2 and near_line >= 10, how
    assert dropped > len(texts)  # the check dropped pairs: verdicts, not a pass-through


@needs_zlib
def test_edited_queries_at_every_k(short_index):
    """Queries that are not stored (new edits of the stored texts, English and Chinese), at several k."""
    texts, path = short_index["texts"], short_index["path"]
    conn = extension_connection(path)
    rng = random.Random(4)
    exact = 0
    for key in list(texts)[::3]:
        chinese = key.startswith("zh")
        alphabet, join = (HAN, "".join) if chinese else (WORDS, " ".join)
        units = list(texts[key]) if chinese else texts[key].split()
        query = join(_edited(rng, units, alphabet, rng.choice((0.02, 0.05, 0.1))))
        for k in (3, 7, 12, 20):
            got = rows_of(conn.execute(NEAR, (query, k, 1)))
            assert got == package_near(path, query, k, 1), (key, k)
            exact += sum(row[5] == "exact" for row in got)
    assert exact > 20


@needs_zlib
@needs_shell
def test_the_stock_shell_gives_the_package_verdicts_on_short_texts(short_index):
    texts, path = short_index["texts"], short_index["path"]
    queries = list(texts.values())[::4]
    columns = "key, distance, iif(jaccard IS NULL, 'NULL', printf('%.12f', jaccard)), coalesce(checked_by, 'NULL')"
    script = f".load {EXTENSION}\n.mode list\n" + "".join(
        f"SELECT {columns} FROM simhash_near({_literal(q)}, 12);\nSELECT '{MARK}';\n" for q in queries
    )
    blocks = shell(path, script).split(MARK + "\n")[:-1]
    assert len(blocks) == len(queries)
    seen = set()
    for query, block in zip(queries, blocks):
        expected = [
            f"{key}|{d}|{'NULL' if j is None else f'{j:.12f}'}|{how or 'NULL'}"
            for key, d, _, _, j, how, _ in package_near(path, query, 12, 1)
        ]
        assert block.splitlines() == expected
        seen |= {line.rsplit("|", 1)[1] for line in expected}
    assert "exact" in seen


def _text_of_stored_size(rng: random.Random, target: int, chinese: bool) -> str | None:
    """A text whose stored form takes exactly `target` bytes (short_text_data), grown a unit at a time."""
    alphabet, join = (HAN, "".join) if chinese else (WORDS, " ".join)
    units: list[str] = []
    for _ in range(2000):
        units.append(rng.choice(alphabet))
        text = join(units)
        data = short_text_data(text, limit=1 << 20)
        if data is None:
            return None
        if len(data) == target:
            return text
        if len(data) > target:
            units = units[: len(units) // 2]
    return None


def _verdicts_of_queries(path, queries: list[tuple[str, bool]]) -> dict[bool, set[str]]:
    """Each (query, short) searched in the extension and the package, which must agree, and short as the
    package says; the checked_by values of the short queries' matches and of the others'."""
    conn = extension_connection(path)
    kinds: dict[bool, set[str]] = {True: set(), False: set()}
    for query, short in queries:
        assert (short_text_data(query) is not None) == short
        got = rows_of(conn.execute(NEAR, (query, 64, 1)))
        assert got == package_near(path, query, 64, 1)
        kinds[short] |= {row[5] for row in got}
    return kinds


@needs_zlib
def test_the_query_is_short_exactly_where_the_package_says_so(tmp_path):
    """At SHORT_TEXT_BYTES a query is a short text, one byte over it is not, in both encodings; each
    query's near-identical copy is stored as a short text. Whether the query is short or not no longer
    matters (issue 33): its text is at hand, the copy's exact data too, so every pair is checked exactly,
    a sure estimate notwithstanding, in the extension as in the package."""
    rng = random.Random(8)
    texts, queries = {}, []
    for chinese in (False, True):
        for target in (SHORT_TEXT_BYTES - 1, SHORT_TEXT_BYTES, SHORT_TEXT_BYTES + 1):
            for n in range(3):
                query = _text_of_stored_size(rng, target, chinese)
                assert query is not None
                queries.append((query, target <= SHORT_TEXT_BYTES))
                stored = query[:-3] if chinese else query.rsplit(" ", 1)[0]  # a copy, one unit shorter: short
                texts[f"{'zh' if chinese else 'en'}/{target}/{n}"] = stored
    kinds = _verdicts_of_queries(build(tmp_path / "edge.db", texts), queries)
    assert kinds[True] == kinds[False] == {"exact"}


@needs_zlib
def test_texts_of_more_bytes_to_deflate_than_the_cut_are_not_short_in_either(tmp_path):
    """SHORT_TEXT_DEFLATED_MOST: a text of that many bytes to deflate (UTF-8, or UTF-16 where it is
    chosen) is tried, and short where it deflates within SHORT_TEXT_BYTES; one byte more is not tried, in
    the package and in the extension alike. Each query has a few hundred distinct shingles (a varied
    head, a repeated tail that deflates well) and a copy stored one character shorter, a short text: every
    pair is checked exactly, the query short or not (its text is at hand: issue 33)."""
    rng = random.Random(5)
    cut = SHORT_TEXT_DEFLATED_MOST
    head = " ".join(rng.choice(WORDS) for _ in range(60))
    body = head + " " + "spam and eggs " * 60
    body = next("x" * k + body for k in range(4) if " " not in ("x" * k + body)[cut - 1 : cut + 1])
    english = body[: cut + 1]  # 768 characters and 769, neither ending in a space (folding would cut it)
    emoji = [chr(0x1F600 + i) for i in range(80)]
    astral = "".join(rng.choice(emoji) for _ in range(100)) + "\U0001F600" * 100  # 4 UTF-16 bytes each
    queries = [(english[:cut], True), (english, False), (astral[: cut // 4], True), (astral[: cut // 4 + 1], False)]
    assert all(not query.endswith(" ") for query, _ in queries)
    texts = {f"copy/{i}": query[:-1] for i, (query, _) in enumerate(queries)}
    kinds = _verdicts_of_queries(build(tmp_path / "cut.db", texts), queries)
    assert kinds[True] == kinds[False] == {"exact"}


# -- the C Jaccard against the Python one ------------------------------------------------------------

SPACES = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
LETTERS = "abcdeéABCＡＢ01" + "".join(HAN[:40]) + "\U0001F600\U00020000\U0001D400" + "\u200b\u180e\x00,.!"
# NFKC and case folding beyond the one pass: a space and a mark (U+00B4), marks that compose or come out of
# order, conjoining jamo, ligatures, multi-character folds, final sigma (issue 33: the Jaccard of normalize)
NORMALIZED = "\u00b4\u0301\u0323\u0308e\u1100\u1161\u11a8\uac00\ufb01\u00df\u1e9e\u0130\u03a3\u03c2\u2460\u00c5\u212b"


def _short_text():
    return st.text(alphabet=st.sampled_from(SPACES + LETTERS + NORMALIZED), min_size=1, max_size=220)


@needs_zlib
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(query=_short_text(), others=st.lists(_short_text(), min_size=1, max_size=4), data=st.data())
def test_the_c_jaccard_is_the_python_jaccard(tmp_path_factory, query, others, data):
    """Generated short texts (every kind of whitespace Python folds, full-width and astral characters,
    which the UTF-16 form stores as surrogate pairs, NUL, texts under 5 characters, characters whose NFKC
    or case fold the one pass cannot take): stored beside their edits, each pair's Jaccard from
    simhash_near is core/shingles.jaccard (of the normalized texts) exactly, and every row is the
    package's. No valid text is refused."""
    # near copies of the query too, so that candidates are within k and of both sides of the threshold
    edits = [query[:i] + data.draw(_short_text()) + query[i + 1 :] for i in range(0, len(query), 37)][:3]
    stored = {f"d{i}": text for i, text in enumerate(others + edits)}
    assume(short_text_data(query) is not None)
    path = build(tmp_path_factory.mktemp("jaccard") / "j.db", stored)
    conn = extension_connection(path)
    got = rows_of(conn.execute(NEAR, (query, 64, 1)))
    assert got == package_near(path, query, 64, 1)
    for key, _, _, _, j, how, _ in got:
        if short_text_data(stored[key]) is not None:  # a short pair: measured
            assert how == "exact" and j == jaccard(query, stored[key])


# -- damaged and hostile short_text data --------------------------------------------------------------

def _raw_deflate(data: bytes, level: int = 9) -> bytes:
    packer = zlib.compressobj(level, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


def _utf16(text: str) -> bytes:
    return text.encode("utf-16-le", "surrogatepass")


def hostile_blobs(good: bytes, rng: random.Random) -> dict[str, bytes]:
    """Damaged forms of one stored short text, and hostile ones."""
    stream = good[1:]
    blobs = {
        "empty": b"",
        "header only": good[:1],
        "encoding 2": bytes((2,)) + stream,
        "encoding 255": bytes((255,)) + stream,
        "utf-16 read as utf-8": bytes((1 - good[0],)) + stream,
        "trailing bytes after the stream": good + b"\x00garbage\xff" * 3,
        "two streams": good + stream,
        "not deflate": bytes((0,)) + rng.randbytes(300),
        "utf-16 of odd length": bytes((1,)) + _raw_deflate("春眠不觉晓".encode("utf-16-le") + b"x"),
        "utf-16 lone high surrogate": bytes((1,)) + _raw_deflate(_utf16("春眠\ud83d不觉晓")),
        "utf-16 lone low surrogate": bytes((1,)) + _raw_deflate(_utf16("春眠\ude00不觉晓")),
        "utf-16 surrogate pair": bytes((1,)) + _raw_deflate("春眠\U0001F600不觉晓春眠不觉晓".encode("utf-16-le")),
        "utf-8 encoded surrogate": bytes((0,)) + _raw_deflate("abc\ud800defgh".encode("utf-8", "surrogatepass")),
        "invalid utf-8": bytes((0,)) + _raw_deflate(b"abc\xff\xfe defgh \xc0\x80"),
        "overlong utf-8": bytes((0,)) + _raw_deflate(b"abc \xe0\x80\xaf defgh"),
        "at the limit": bytes((0,)) + _raw_deflate(b"a" * SHORT_TEXT_READ_MOST),
        "one byte past the limit": bytes((0,)) + _raw_deflate(b"a" * (SHORT_TEXT_READ_MOST + 1)),
        "zip bomb": bytes((0,)) + _raw_deflate(b"a" * (64 << 20)),  # 64 MiB from about 64 KB
        "zip bomb of stored blocks": bytes((0,)) + b"\x00\x00\x00\xff\xff" * 200_000 + _raw_deflate(b"abcdefgh"),
        "unfolded whitespace": bytes((0,)) + _raw_deflate(b"  many   spaces\t\there \n and there  "),
        "nul characters": bytes((0,)) + _raw_deflate(b"a\x00b\x00c\x00d\x00e\x00f"),
        "an empty stream": bytes((0,)) + _raw_deflate(b""),
        "only whitespace": bytes((1,)) + _raw_deflate(_utf16(" \u3000\t ")),
        "four characters": bytes((0,)) + _raw_deflate("abc\U0001F600".encode()),
    }
    for cut in (1, 2, 5, len(good) // 2, len(good) - 1):
        blobs[f"truncated to {cut}"] = good[:cut]
    for n in range(12):
        flipped = bytearray(good)
        at = rng.randrange(1, len(good))
        flipped[at] ^= 1 << rng.randrange(8)
        blobs[f"bit flip {n} at {at}"] = bytes(flipped)
    return blobs


@needs_zlib
def test_damaged_and_hostile_short_text_data_is_judged_as_the_package_judges_it(short_index, tmp_path):
    """Each hostile blob put in place of a stored short text: the package reads it or gives up (the pair is
    then estimated); the extension does the same, never reading past a buffer or inflating past the
    limit (the sanitizer run of bench/fuzz_extension.py covers these too)."""
    texts = short_index["texts"]
    rng = random.Random(3)
    target = "en00/v0"
    query = texts["en00/v1"]
    raw = apsw.Connection(str(short_index["path"]))
    good = raw.execute("SELECT short_text FROM documents WHERE key = ?", (target,)).get
    zh_good = raw.execute("SELECT short_text FROM documents WHERE key = 'zh01/v0'").get
    raw.close()
    blobs = {**hostile_blobs(good, rng), **{f"zh {k}": v for k, v in hostile_blobs(zh_good, rng).items()}}
    readable = {name for name, blob in blobs.items() if short_text_shingles(blob) is not None}
    # what the package reads back: the clean, the trailing bytes (ignored, as zlib's unused_data) and the limit
    assert {"trailing bytes after the stream", "two streams", "at the limit", "unfolded whitespace",
            "utf-16 surrogate pair", "nul characters", "an empty stream", "only whitespace",
            "four characters"} <= readable
    assert not {"zip bomb", "one byte past the limit", "empty", "header only", "encoding 2", "invalid utf-8",
                "utf-8 encoded surrogate", "utf-16 of odd length", "utf-16 lone high surrogate"} & readable
    path = tmp_path / "hostile.db"
    shutil.copy(short_index["path"], path)
    conn = extension_connection(path)
    writer = apsw.Connection(str(path))
    how = {True: set(), False: set()}
    for name, blob in blobs.items():
        for key in (target, "zh01/v0"):
            writer.execute("UPDATE documents SET short_text = ? WHERE key = ?", (blob, key))
        for q in (query, texts["zh01/v1"]):
            got = rows_of(conn.execute(NEAR, (q, 20, 1)))
            assert got == package_near(path, q, 20, 1), name
            how[name in readable] |= {row[5] for row in got if row[0] in (target, "zh01/v0")}
    assert "exact" in how[True] and "exact" not in how[False]


# -- without zlib ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def no_zlib_install(tmp_path_factory) -> Path:
    """`SIMHASH_SQLITE_NO_ZLIB=1 pip install .` (as where zlib.h is missing): the wheel, unpacked; its folder.
    One build for the two tests below (a wheel, about 7 s of CPU, and a compile of the same sources by hand,
    about 4 s, before)."""
    import zipfile

    from test_native import _wheel

    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler here")
    tmp = tmp_path_factory.mktemp("no-zlib")
    wheel = _wheel(tmp, {"SIMHASH_SQLITE_NO_ZLIB": "1", "CFLAGS": "-O0"})  # -O0 after -O3: a quick build
    site = tmp / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    return site


@pytest.mark.slow  # a pip build of the package without zlib: about 7 s
def test_a_build_without_zlib_estimates_short_pairs_and_says_so(short_index, no_zlib_install, tmp_path, monkeypatch):
    """Built without zlib the extension still loads and searches; pairs of short texts are then judged
    by their sketches (as the package judges them without short_text data), and `simq extension` says
    what it lacks."""
    from typer.testing import CliRunner

    from simhash_sqlite.cli.app import app

    native = no_zlib_install / "simhash_sqlite" / "native"
    built = native / json.loads((native / "_build.json").read_text())["simhash"]["file"]
    library = tmp_path / (Path(extension.loadable_path()).name if BUILT else "simhash.so")
    shutil.copy(built, library)
    assert not links_zlib(library)
    path = tmp_path / "no_short.db"
    shutil.copy(short_index["path"], path)
    nulled = tmp_path / "nulled.db"
    shutil.copy(path, nulled)
    raw = apsw.Connection(str(nulled))
    raw.execute("UPDATE documents SET short_text = NULL")
    raw.close()
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.enable_load_extension(True)
    conn.load_extension(str(library), extension.ENTRY_POINT)
    kinds = set()
    for query in list(short_index["texts"].values())[::5]:
        got = rows_of(conn.execute(NEAR, (query, 20, 1)))
        assert got == package_near(nulled, query, 20, 1)
        kinds |= {row[5] for row in got}
    assert "exact" not in kinds and "estimated" in kinds
    # simq extension: the path on stdout (for `.load $(simq extension)`), what it lacks on stderr
    why = "zlib.h not found (cc failed (1): fatal error): simhash_near estimates pairs of two short texts"
    record = {"simhash": {"built": True, "file": "simhash.so", "reason": "", "without": {"zlib": why}}}
    (tmp_path / "_build.json").write_text(json.dumps(record))
    monkeypatch.setattr(extension, "HERE", tmp_path)
    result = CliRunner().invoke(app, ["extension"])
    assert result.exit_code == 0 and result.stdout.strip() == str(library)
    assert result.stderr.strip() == f"note: the extension was built without zlib ({why})"
    assert extension.built_without() == {"zlib": why}


def test_this_build_records_whether_it_has_zlib():
    """The install's record and the library agree: zlib is linked exactly where the record says so."""
    if BUILT is None:
        pytest.skip(WHY_NOT)
    assert links_zlib(BUILT) == ("zlib" not in extension.built_without()), extension.built_without()


@pytest.mark.slow
def test_install_without_zlib(no_zlib_install, tmp_path):
    """`SIMHASH_SQLITE_NO_ZLIB=1 pip install .` (as where zlib.h is missing): the wheel still carries the
    extension, built without zlib (it needs no libz), the record says why, and `simq extension` from that
    install prints the path and the note."""
    site = no_zlib_install
    native = site / "simhash_sqlite" / "native"
    record = json.loads((native / "_build.json").read_text())["simhash"]
    assert record["built"] and record["without"]["zlib"].startswith("SIMHASH_SQLITE_NO_ZLIB=1 at install: ")
    library = native / record["file"]
    assert not links_zlib(library)
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = subprocess.run([sys.executable, "-m", "simhash_sqlite", "extension"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0 and run.stdout.strip() == str(library), run.stderr
    assert run.stderr.startswith("note: the extension was built without zlib (SIMHASH_SQLITE_NO_ZLIB=1 at install")
