"""The loadable SQLite extension (simhash_sqlite/native/sqlite_extension.c): in the stock sqlite3 shell,
apsw, Python's sqlite3 and Node's better-sqlite3 it registers the functions the package registers, with
the same names, flags and results, and simhash_near gives what SimhashIndex.near (simq near) gives; bad
input of every kind is an SQL error, never a crash. Skipped, saying why, where the install could not
build the extension."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from simhash_sqlite import Document, SimhashIndex, simhash, to_signed
from simhash_sqlite.core.short_texts import short_text_data
from simhash_sqlite.native.extension import ENTRY_POINT, ExtensionMissing, load, loadable_path

try:
    BUILT = loadable_path()
    WHY_NOT = ""
except ExtensionMissing as exc:
    BUILT, WHY_NOT = None, str(exc)
# Another build of the same source to test instead (bench/fuzz_extension.py's sanitizer build, for a run
# with LD_PRELOAD of the sanitizer runtimes).
EXTENSION = os.environ.get("SIMHASH_SQLITE_TEST_EXTENSION") or BUILT

pytestmark = pytest.mark.skipif(EXTENSION is None, reason=WHY_NOT)
SQLITE3 = shutil.which("sqlite3")
needs_shell = pytest.mark.skipif(
    SQLITE3 is None, reason="the sqlite3 command-line shell is not installed (Debian: apt-get install sqlite3)"
)
NAMES = ("simhash", "hamming", "simhash_similarity", "simhash_block", "simhash_hex", "simhash_from_hex",
         "simhash_version")
MARK = "#next"


# -- a corpus of near-duplicate families -------------------------------------------------------------

def _words(rng: random.Random, count: int) -> list[str]:
    return ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(count)]


def _edited(rng: random.Random, words: list[str], vocabulary: list[str], rate: float) -> list[str]:
    out = []
    for word in words:
        roll = rng.random()
        if roll < rate / 3:
            continue  # deleted
        if roll < 2 * rate / 3:
            out.append(rng.choice(vocabulary))  # replaced
            continue
        out.append(word)
        if roll < rate:
            out.append(rng.choice(vocabulary))  # inserted
    return out


def families(seed: int, count: int = 24) -> tuple[dict[str, str], list[str]]:
    """(stored texts by key, query texts): families of edited copies, English-like and Chinese, with
    edits from tiny to heavy so the check keeps some candidates and drops others."""
    rng = random.Random(seed)
    vocabulary = _words(rng, 1500)
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    stored, queries = {}, []
    for f in range(count):
        chinese = f % 4 == 3
        if chinese:
            base = [rng.choice(han) for _ in range(rng.randint(80, 400))]
            join = "".join
        else:
            base = [rng.choice(vocabulary) for _ in range(rng.randint(40, 260))]
            join = " ".join
        for v, rate in enumerate((0.0, 0.02, 0.06, 0.12, 0.2)):
            stored[f"family{f:02}/copy{v}"] = join(_edited(rng, base, han if chinese else vocabulary, rate))
        queries.append(join(_edited(rng, base, han if chinese else vocabulary, rng.choice((0.01, 0.05, 0.1, 0.15)))))
    queries += ["", "!!! ???", "a", stored["family00/copy0"][:40], " ".join(vocabulary[:30]) + "\n\t  end"]
    return stored, queries


def build(path: Path, stored: dict[str, str], store_text: bool) -> Path:
    with SimhashIndex(path, create=True, store_text=store_text) as index:
        index.add(Document(key, text) for key, text in stored.items())
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    stored, queries = families(26)
    folder = tmp_path_factory.mktemp("extension")
    return {
        "stored": stored,
        "queries": queries,
        "sketches": build(folder / "sketches.db", stored, store_text=False),  # texts out of reach
        "texts": build(folder / "texts.db", stored, store_text=True),
    }


def package_near(path: Path, query, k: int, checked: int) -> list[tuple]:
    """What SimhashIndex.near (simq near) gives, as rows of simhash_near."""
    with SimhashIndex(path, readonly=True) as index:
        if isinstance(query, str):
            if index.fingerprint(query) is None:
                return []
            matches = index.near(query, k=k, check=bool(checked))
        else:
            matches = index.near(fingerprint=query & ((1 << 64) - 1), k=k, check=bool(checked))
    return [
        (m.key, m.distance, m.similarity, to_signed(m.fingerprint), m.jaccard, m.checked_by, _sure(m.certainty))
        for m in matches
    ]


def _sure(certainty: float | None) -> float | None:
    """A certainty to 12 places: it goes through exp() and expm1(), whose last bit numpy's SIMD loops and
    libm may round apart (the verdict itself is compared exactly)."""
    return None if certainty is None else round(certainty, 12)


def rows_of(cursor) -> list[tuple]:
    return [tuple(row[:6]) + (_sure(row[6]),) + tuple(row[7:]) for row in cursor]


def extension_connection(path) -> apsw.Connection:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY) if path != ":memory:" else apsw.Connection(path)
    conn.enable_load_extension(True)
    conn.load_extension(EXTENSION, ENTRY_POINT)
    return conn


NEAR = "SELECT key, distance, similarity, fingerprint, jaccard, checked_by, certainty FROM simhash_near(?, ?, ?)"


# -- one function table ------------------------------------------------------------------------------

def test_the_extension_registers_the_package_functions_with_their_flags(corpus):
    fields = "name, type, enc, narg, flags"
    listed = f"SELECT {fields} FROM pragma_function_list WHERE name IN ({','.join('?' * len(NAMES))}) ORDER BY 1, 4"
    with SimhashIndex(corpus["sketches"], readonly=True) as index:
        package = index.conn.execute(listed, NAMES).get
        package_modules = {row[0] for row in index.conn.execute("SELECT name FROM pragma_module_list")}
    bare = apsw.Connection(":memory:")
    conn = extension_connection(corpus["sketches"])
    added = {row for row in conn.execute(f"SELECT {fields} FROM pragma_function_list")} - {
        row for row in bare.execute(f"SELECT {fields} FROM pragma_function_list")
    }
    assert sorted(added) == package and {row[0] for row in added} == set(NAMES)
    modules = {row[0] for row in conn.execute("SELECT name FROM pragma_module_list")}
    modules -= {row[0] for row in bare.execute("SELECT name FROM pragma_module_list")}
    assert modules == {"simhash_near"} and "simhash_near" in package_modules
    assert all(flags & apsw.SQLITE_DETERMINISTIC for *_, flags in package)
    # simhash() reads simhash_meta: not innocuous (issue 33); the others are
    assert {name for name, *_, flags in package if not flags & apsw.SQLITE_INNOCUOUS} == {"simhash"}


def _values(rng: random.Random) -> list:
    ints = [0, 1, -1, 2**63 - 1, -(2**63), 15, 65535, 0x59E111D408338701 - 2**64]
    ints += [to_signed(rng.getrandbits(64)) for _ in range(40)]
    others = [None, 1.5, 0.0, "text", "", "59e111d408338701", b"", b"\x00\x01", 3.0]
    return ints + others


def _outcome(conn, sql, args):
    try:
        return ("ok", conn.execute(sql, args).get)
    except Exception:  # apsw.SQLError from C, the raised exception from a Python function
        return ("error",)


def test_scalar_functions_give_the_package_results_and_errors(corpus):
    rng = random.Random(5)
    values = _values(rng)
    hexes = ["ffffffffffffffff", "0x59E111D408338701", " 0X1 ", "\u3000abc\u2028", "", "0x", "g", "1" * 17,
             "12 34", "0x0x1", "\u00a0ff\u00a0", "é", "\x1cf\x1f", "ＡＢ"]
    with SimhashIndex(corpus["sketches"], readonly=True) as index:
        package = index.conn
        ext = extension_connection(corpus["sketches"])
        calls = []
        for a in values:
            for b in rng.sample(values, 12) + [0, 3, 4, -1]:
                calls += [("SELECT hamming(?, ?)", (a, b)), ("SELECT simhash_similarity(?, ?)", (a, b)),
                          ("SELECT simhash_block(?, ?)", (a, b))]
            calls += [(f"SELECT {name}(?)", (a,)) for name in ("simhash_hex", "simhash_from_hex", "simhash")]
        calls += [("SELECT simhash_from_hex(?)", (h,)) for h in hexes]
        calls += [("SELECT simhash(?)", (text,)) for text in list(corpus["stored"].values())[:40] + corpus["queries"]]
        differ = [(sql, args) for sql, args in calls if _outcome(package, sql, args) != _outcome(ext, sql, args)]
        assert not differ, differ[:5]
        assert sum(_outcome(ext, sql, args)[0] == "error" for sql, args in calls) > 50  # errors were compared too


def test_errors_name_the_function_and_the_argument(corpus):
    conn = extension_connection(corpus["sketches"])
    cases = {
        "SELECT hamming(1.5, 2)": "hamming(): the first argument must be an integer fingerprint",
        "SELECT hamming(1, 'x')": "hamming(): the second argument must be an integer fingerprint",
        "SELECT simhash_similarity(x'00', 1)": "simhash_similarity(): the first argument",
        "SELECT simhash_block(1, 4)": "simhash_block(): the block number must be 0 to 3",
        "SELECT simhash_hex('ff')": "simhash_hex(): the argument must be an integer fingerprint",
        "SELECT simhash_from_hex(12)": "simhash_from_hex(): the argument must be text",
        "SELECT simhash_from_hex('xyz')": "simhash_from_hex(): not a 64-bit hex fingerprint",
        "SELECT simhash(x'41')": "simhash(): the argument must be text",
        "SELECT * FROM simhash_near(x'41')": "simhash_near(): the query must be a text or an integer fingerprint",
        "SELECT * FROM simhash_near('a b c', 65)": "simhash_near(): k must be a whole number from 0 to 64",
        "SELECT * FROM simhash_near('a b c', '3')": "simhash_near(): k must be a whole number from 0 to 64",
        "SELECT * FROM simhash_near('a b c', 3, 2)": "simhash_near(): the third argument (checked) must be 1 or 0",
        "SELECT * FROM simhash_near": "simhash_near() needs a query",
    }
    for sql, message in cases.items():
        with pytest.raises(apsw.SQLError, match=message.replace("(", r"\(").replace(")", r"\)")):
            conn.execute(sql).get
    # As on the package side: no query, or a text without features, is no rows, not an error.
    assert conn.execute("SELECT count(*) FROM simhash_near(NULL, 99)").get == 0
    assert conn.execute("SELECT count(*) FROM simhash_near('!!!', 3)").get == 0


# -- simhash_near --------------------------------------------------------------------------------------

def test_the_extension_checks_short_texts_exactly_as_the_package_does(tmp_path):
    """Without stored texts, simq checks two short texts by the exact data the index keeps
    (core/short_texts.py); the extension reads it too (zlib), and gives the same verdicts.
    tests/test_extension_short_texts.py compares every pair of a short-text index, and the build without
    zlib."""
    if b"inflateInit2_" not in Path(EXTENSION).read_bytes():
        pytest.skip("the extension was built without zlib")
    stored, _ = families(4)
    path = tmp_path / "short.db"
    with SimhashIndex(path, create=True) as index:
        index.add(Document(key, text) for key, text in stored.items())
        assert index.conn.execute("SELECT count(short_text) FROM documents").get > 0
    conn = extension_connection(path)
    # an indexed short text: itself and its family's copies are near it
    query = next(text for text in stored.values() if short_text_data(text) is not None)
    package = package_near(path, query, 20, 1)
    assert rows_of(conn.execute(NEAR, (query, 20, 1))) == package and "exact" in {row[5] for row in package}


@pytest.mark.parametrize("which", ["sketches", "texts"])
def test_simhash_near_gives_what_the_package_gives_in_apsw(corpus, which):
    path = corpus[which]
    conn = extension_connection(path)
    kinds = set()
    dropped = 0
    for query in corpus["queries"]:
        for k, checked in ((3, 1), (7, 1), (12, 1), (20, 1), (7, 0), (12, 0)):
            expected = package_near(path, query, k, checked)
            got = rows_of(conn.execute(NEAR, (query, k, checked)))
            assert got == expected, (query[:60], k, checked)
            kinds |= {row[5] for row in got}
            if checked:
                dropped += len(package_near(path, query, k, 0)) - len(got)
    # With texts every kept verdict is exact (issue 33: the sketch only filters); without them, pairs of
    # short texts are (from the exact data the index keeps), and the rest is estimated.
    assert kinds == ({"exact", None} if which == "texts" else {"exact", "estimated", None})
    assert dropped > 0  # the check dropped candidates: it was tested, not only passed through


def test_simhash_near_by_fingerprint_and_default_arguments(corpus):
    path = corpus["sketches"]
    conn = extension_connection(path)
    query = corpus["queries"][0]
    assert rows_of(conn.execute("SELECT * FROM simhash_near(?)", (query,))) == [
        row + (query, 12, 1) for row in package_near(path, query, 12, 1)
    ]
    for key in list(corpus["stored"])[::7]:
        fp = conn.execute("SELECT fingerprint FROM documents WHERE key = ?", (key,)).get
        for k in (0, 3, 9, 12, 30, 64):
            got = rows_of(conn.execute(NEAR, (fp, k, 1)))
            assert got == package_near(path, fp, k, 1)
            assert all(row[5] == "distance" for row in got)
    # A join, one search per row, ORDER BY taken from the table's own order.
    pairs = conn.execute(
        "SELECT a.key, n.key, n.distance FROM documents AS a, simhash_near(a.fingerprint, 9, 0) AS n "
        "WHERE n.key > a.key ORDER BY a.key, n.distance, n.key"
    ).fetchall()
    with SimhashIndex(path, readonly=True) as index:
        expected = sorted(
            (a, m.key, m.distance) for a in corpus["stored"] for m in index.near(key=a, k=9, check=False) if m.key > a
        )
    assert sorted(pairs) == expected and pairs


def shell(path, script: str) -> str:
    run = subprocess.run(
        [SQLITE3, "-batch", "-bail", str(path)], input=script, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@needs_shell
@pytest.mark.parametrize("which", ["sketches", "texts"])
def test_the_stock_shell_loads_it_and_gets_what_simq_near_gets(corpus, which):
    path = corpus[which]
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    searches = [(q, k, c) for q in corpus["queries"] for k, c in ((7, 1), (3, 1), (12, 1), (7, 0))]
    columns = "key, distance, iif(jaccard IS NULL, 'NULL', printf('%.12f', jaccard)), coalesce(checked_by, 'NULL')"
    script = f".load {EXTENSION}\n.mode list\n" + "".join(
        f"SELECT key, distance FROM simhash_near({_literal(q)}, {k}) LIMIT 0;\n"
        f"SELECT {columns} FROM simhash_near({_literal(q)}, {k}, {c});\nSELECT '{MARK}';\n"
        for q, k, c in searches
    )
    blocks = shell(path, script).split(MARK + "\n")[:-1]
    assert len(blocks) == len(searches)
    for (query, k, checked), block in zip(searches, blocks):
        expected = [
            f"{key}|{d}|{'NULL' if j is None else f'{j:.12f}'}|{how or 'NULL'}"
            for key, d, _, _, j, how, _ in package_near(path, query, k, checked)
        ]
        assert block.splitlines() == expected, (query[:60], k, checked)
    assert any(block.strip() for block in blocks)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before  # it never writes the index


@needs_shell
def test_the_shell_loads_it_without_naming_the_entry_point_and_reports_errors(corpus, tmp_path):
    out = shell(corpus["sketches"], f".load {EXTENSION}\nSELECT simhash_hex(simhash('hello world')), hamming(-1, 0);\n")
    assert out.split() == ["535e078da051fa3c|64"]
    assert Path(BUILT).stem == "simhash" and ENTRY_POINT == "sqlite3_simhash_init"
    run = subprocess.run([SQLITE3, str(corpus["sketches"]), f".load {EXTENSION}", "SELECT hamming('a', 1)"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "hamming(): the first argument must be an integer fingerprint" in run.stderr
    run = subprocess.run([SQLITE3, str(corpus["sketches"]), f".load {EXTENSION}",
                          "CREATE VIRTUAL TABLE temp.t USING simhash_near"], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "simhash_near" in run.stderr


# -- other hosts ---------------------------------------------------------------------------------------

PYTHON_SQLITE3 = r"""
import json, sqlite3, sys
path, extension, queries = sys.argv[1], sys.argv[2], json.loads(sys.stdin.read())
conn = sqlite3.connect(path)
conn.enable_load_extension(True)
conn.load_extension(extension)
print(json.dumps([conn.execute("SELECT key, distance, jaccard, checked_by FROM simhash_near(?, 7)", (q,)).fetchall()
                  for q in queries]))
"""


def _python_with_loadable_sqlite3() -> str | None:
    """This interpreter if its sqlite3 loads extensions, else another python3 on PATH whose sqlite3 does."""
    candidates = [sys.executable, shutil.which("python3"), "/usr/bin/python3"]
    for python in candidates:
        if python and Path(python).exists():
            probe = subprocess.run([python, "-c", "import sqlite3; sqlite3.Connection.enable_load_extension"],
                                   capture_output=True, timeout=60)
            if probe.returncode == 0:
                return python
    return None


def test_pythons_sqlite3_loads_it_where_it_allows_loading(corpus):
    python = _python_with_loadable_sqlite3()
    if python is None:
        pytest.skip("no Python here has a sqlite3 module built with loadable extensions")
    path = corpus["sketches"]
    queries = corpus["queries"][:12]
    run = subprocess.run([python, "-c", PYTHON_SQLITE3, str(path), EXTENSION], input=json.dumps(queries),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    got = [[tuple(row) for row in rows] for rows in json.loads(run.stdout)]
    assert got == [[(key, d, j, how) for key, d, _, _, j, how, _ in package_near(path, q, 7, 1)] for q in queries]
    if hasattr(sqlite3.Connection, "enable_load_extension"):  # and load() itself, in this interpreter
        conn = sqlite3.connect(path)
        load(conn)
        assert conn.execute("SELECT hamming(-1, 0)").fetchone() == (64,)


def test_load_says_why_a_python_sqlite3_cannot_load_it():
    class NoLoading:  # a sqlite3 module built without SQLITE_ENABLE_LOAD_EXTENSION has no such method
        pass

    with pytest.raises(ExtensionMissing, match="cannot load extensions"):
        load(NoLoading())


NODE_SCRIPT = r"""
const Database = require('better-sqlite3');
const [path, extension] = process.argv.slice(2);
const queries = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const db = new Database(path, { readonly: true });
db.loadExtension(extension);
const near = db.prepare('SELECT key, distance, jaccard, checked_by FROM simhash_near(?, 7)');
// k bound as a JavaScript number: a REAL 7.0 (issue 36 item 8)
const bound = db.prepare('SELECT key, distance, jaccard, checked_by FROM simhash_near(?, ?)');
// fingerprints as BigInt (safeIntegers): all 64 bits, back into hamming()
const fps = db.prepare('SELECT fingerprint FROM documents ORDER BY id LIMIT 2').safeIntegers().raw().all()
  .map(r => r[0]);
const distance = db.prepare('SELECT hamming(?, ?)').pluck().get(fps[0], fps[1]);
console.log(JSON.stringify({near: queries.map(q => near.raw().all(q)), bound: queries.map(q => bound.raw().all(q, 7)),
                            fingerprints: fps.map(String), distance}));
"""


def _better_sqlite3(cache) -> Path:
    """A folder whose node_modules holds better-sqlite3 12: SIMHASH_SQLITE_NODE_MODULES (CI may install it
    there beforehand), else installed once by npm into pytest's cache folder."""
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed (Debian: apt-get install nodejs npm)")
    given = os.environ.get("SIMHASH_SQLITE_NODE_MODULES")
    if given:
        if not (Path(given) / "node_modules" / "better-sqlite3" / "package.json").exists():
            pytest.skip(f"SIMHASH_SQLITE_NODE_MODULES={given} holds no better-sqlite3 (its install failed?)")
        return Path(given)
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed (Debian: apt-get install npm)")
    folder = Path(cache.mkdir("better-sqlite3-12"))
    # One install at a time: two xdist workers installing into one folder saw each other's half-made tree.
    with open(folder / "install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "node_modules" / "better-sqlite3" / "build").exists():
            install = ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), "better-sqlite3@12"]
            run = subprocess.run(install, capture_output=True, text=True, timeout=900)
            if run.returncode:
                pytest.skip(f"npm could not install better-sqlite3@12: {(run.stderr or run.stdout).strip()[-300:]}")
    return folder


def test_node_better_sqlite3_loads_it(corpus, request, tmp_path):
    folder = _better_sqlite3(request.config.cache)
    script = tmp_path / "near.js"
    script.write_text(NODE_SCRIPT)
    path = corpus["sketches"]
    queries = corpus["queries"][:12]
    env = {**os.environ, "NODE_PATH": str(folder / "node_modules")}
    run = subprocess.run(["node", str(script), str(path), EXTENSION], input=json.dumps(queries), env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    got = [[tuple(row) for row in rows] for rows in answer["near"]]
    assert got == [[(key, d, j, how) for key, d, _, _, j, how, _ in package_near(path, q, 7, 1)] for q in queries]
    assert any(got)
    assert answer["bound"] == answer["near"]  # 7 bound as a JavaScript number (REAL) is k = 7
    with SimhashIndex(path, readonly=True) as index:
        stored = [fp for (fp,) in index.conn.execute("SELECT fingerprint FROM documents ORDER BY id LIMIT 2")]
    assert [int(x) for x in answer["fingerprints"]] == stored  # all 64 bits, as BigInt
    assert answer["distance"] == bin((stored[0] ^ stored[1]) & (2**64 - 1)).count("1")


# -- safety: bad input is an SQL error, never a crash ----------------------------------------------------

def _copy(src: Path, dst: Path) -> Path:
    shutil.copy(src, dst)
    return dst


def test_blobs_of_any_length_as_sketches_are_judged_as_the_package_judges_them(corpus, tmp_path):
    path = _copy(corpus["sketches"], tmp_path / "tampered.db")
    raw = apsw.Connection(str(path))
    rng = random.Random(9)
    for i, (key,) in enumerate(raw.execute("SELECT key FROM documents ORDER BY id").fetchall()):
        if i % 3 == 0:
            size = rng.choice([0, 1, 7, 119, 121, 240, 5000])
            raw.execute("UPDATE documents SET sketch = ? WHERE key = ?", (rng.randbytes(size), key))
        elif i % 3 == 1:
            raw.execute("UPDATE documents SET sketch = ? WHERE key = ?", (rng.randbytes(120), key))  # noise, right size
    raw.close()
    conn = extension_connection(path)
    for query in corpus["queries"]:
        for k in (7, 12):
            assert rows_of(conn.execute(NEAR, (query, k, 1))) == package_near(path, query, k, 1)


def test_the_package_entry_point_gives_every_candidate_with_its_verdict(corpus, tmp_path):
    """sqlite3_simhash_package_init (find/native_near.py): only simhash_near_verdicts, whose kept rows are
    simhash_near's and whose other rows are the candidates it dropped; hostile sketches, texts and short
    texts are judged without a read out of bounds (bench/extension_sanitize.sh runs this under ASan)."""
    path = _copy(corpus["sketches"], tmp_path / "verdicts.db")
    raw = apsw.Connection(str(path))
    rng = random.Random(4)
    for i, (key,) in enumerate(raw.execute("SELECT key FROM documents ORDER BY id").fetchall()):
        if i % 4 == 0:
            raw.execute("UPDATE documents SET sketch = ? WHERE key = ?", (rng.randbytes(rng.choice([0, 7, 121])), key))
        elif i % 4 == 1:
            raw.execute("UPDATE documents SET short_text = ? WHERE key = ?", (rng.randbytes(rng.randint(0, 400)), key))
        elif i % 4 == 2:
            text = "".join(chr(rng.randint(32, 0x2FFF)) for _ in range(rng.randint(0, 60)))
            raw.execute("UPDATE documents SET text = ?, content_hash = NULL WHERE key = ?", (text, key))
    raw.close()
    conn = extension_connection(path)
    verdicts = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    verdicts.enable_load_extension(True)
    verdicts.load_extension(EXTENSION, "sqlite3_simhash_package_init")
    assert {name for (name,) in verdicts.execute("SELECT name FROM pragma_module_list WHERE name LIKE 'simhash%'")} == {
        "simhash_near_verdicts"
    }
    sql = ("SELECT key, distance, similarity, fingerprint, jaccard, checked_by, certainty, keep "
           "FROM simhash_near_verdicts(?, ?)")
    dropped = 0
    for query in corpus["queries"] + [to_signed(simhash(corpus["queries"][0]))]:
        for k in (3, 12, 20):
            first, *rows = verdicts.execute(sql, (query, k)).fetchall()
            assert first[0] is None and first[7] in (1, 2) and first[1] >= len(rows)
            if first[7] == 2:  # no features: no candidates
                assert not rows and not conn.execute(NEAR, (query, k, 0)).fetchall()
                continue
            kept = [row[:7] for row in rows if row[7]]
            assert rows_of(kept) == rows_of(conn.execute(NEAR, (query, k, 1)))
            assert {row[0] for row in rows} == {row[0] for row in conn.execute(NEAR, (query, k, 0))}
            dropped += len(rows) - len(kept)
    assert dropped > 0
    assert verdicts.execute(sql, ("!!!", 3)).fetchall() == [(None, 0, 1.0, 0, None, None, None, 2)]


def test_huge_texts(corpus):
    conn = extension_connection(corpus["sketches"])
    text = " ".join(corpus["stored"].values()) * 12  # about 5 MB
    assert conn.execute("SELECT simhash(?)", (text,)).get == to_signed(simhash(text))
    rows = conn.execute("SELECT count(*) FROM simhash_near(?, 12)", (text,)).get
    assert rows == len(package_near(corpus["sketches"], text, 12, 1))
    with pytest.raises(apsw.SQLError, match="simhash_near"):
        conn.execute("SELECT * FROM simhash_near(zeroblob(100000000))").get


TAMPERED = {
    '{"features": "words", "ngram": 2}': "fingerprints words",
    "{bad json": "not a JSON object",
    "[1, 2]": "not a JSON object",
    '{"ngram": 99}': "ngram must be a whole number from 1 to 16",
    '{"ngram": 5.0}': "ngram must be a whole number from 1 to 16",
    '{"weights": "squares"}': "weights must be one of",
    '{"version": 2}': "algorithm version",
    '{"hash": "md5"}': "unknown feature hash",
    '{"colour": "blue"}': "unknown fingerprint settings: colour",
    '{"hmm": 1}': "hmm must be true or false",
}


@pytest.mark.parametrize("value", list(TAMPERED))
def test_tampered_fingerprint_settings_are_an_sql_error(corpus, tmp_path, value):
    path = _copy(corpus["sketches"], tmp_path / "meta.db")
    raw = apsw.Connection(str(path))
    raw.execute("UPDATE simhash_meta SET value = ? WHERE key = 'fingerprint'", (value,))
    raw.close()
    conn = extension_connection(path)
    from simhash_sqlite.store.meta import meta_problems

    # refused as simq refuses to open the file (store/meta.py's rules), an integer query too; settings simq
    # takes but the C core does not compute (words) refuse the text functions only
    invalid = bool(meta_problems({"fingerprint": value}))
    for sql in ("SELECT simhash('some text here')", "SELECT * FROM simhash_near('some text here', 3)",
                "SELECT count(*) FROM simhash_near(0, 3, 0)"):
        if not invalid and "(0, 3, 0)" in sql:
            assert conn.execute(sql).get >= 0
            continue
        with pytest.raises(apsw.SQLError, match=TAMPERED[value]):
            conn.execute(sql).get
    assert conn.execute("SELECT hamming(1, 2)").get == 2


@pytest.mark.parametrize("value", ['{"bins": 0, "bits": 1}', '{"bins": 944, "bits": 3}', '{"bits": 1}', "7",
                                   '{"bins": 944, "bits": 1, "size_bits": 8}', '{"bins": 1e3, "bits": 1}'])
def test_a_tampered_sketch_scheme_refuses_the_index(corpus, tmp_path, value):
    """As simq refuses to open it (store/meta.sketch_problem): every use of the index, not the check alone."""
    path = _copy(corpus["sketches"], tmp_path / "scheme.db")
    raw = apsw.Connection(str(path))
    raw.execute("INSERT OR REPLACE INTO simhash_meta (key, value) VALUES ('sketch', ?)", (value,))
    raw.close()
    conn = extension_connection(path)
    query = corpus["stored"]["family00/copy0"]
    for sql in ("SELECT * FROM simhash_near(?, 7)", "SELECT count(*) FROM simhash_near(?, 7, 0)", "SELECT simhash(?)"):
        with pytest.raises(apsw.SQLError, match="simhash_meta 'sketch' is not valid"):
            conn.execute(sql, (query,)).get


def test_missing_tables_and_databases_that_are_not_indexes(tmp_path):
    conn = extension_connection(":memory:")
    # Not an index: the functions use the default settings, as the package's sqlite3 plugin does.
    assert conn.execute("SELECT simhash_hex(simhash('hello world'))").get == "535e078da051fa3c"
    with pytest.raises(apsw.SQLError, match="not a simhash-sqlite index"):
        conn.execute("SELECT * FROM simhash_near('hello world', 3)").get
    conn.execute("CREATE TABLE documents (id INTEGER PRIMARY KEY, key TEXT)")  # the wrong shape
    with pytest.raises(apsw.SQLError, match="not a simhash-sqlite index"):
        conn.execute("SELECT * FROM simhash_near(12345, 3)").get
    conn.execute("CREATE TABLE simhash_meta (k, v)")  # a settings table of another shape
    with pytest.raises(apsw.SQLError, match="simhash_meta"):
        conn.execute("SELECT simhash('hello world')").get
    assert conn.execute("SELECT hamming(3, 0)").get == 2


def test_loading_twice_and_closing_leave_nothing_behind(corpus):
    conn = extension_connection(corpus["sketches"])
    query = corpus["queries"][1]
    first = conn.execute(NEAR, (query, 7, 1)).fetchall()
    load(conn)  # the package's own load(), over the first
    assert conn.execute(NEAR, (query, 7, 1)).fetchall() == first
    load(conn)
    assert conn.execute(NEAR, (query, 7, 1)).fetchall() == first
    conn.close()


# -- simq extension -------------------------------------------------------------------------------------

def test_simq_extension_prints_the_path_a_shell_loads(corpus):
    run = subprocess.run([str(Path(sys.executable).parent / "simq"), "extension"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == BUILT and Path(run.stdout.strip()).is_file()
    if SQLITE3:
        out = shell(corpus["sketches"], f".load {run.stdout.strip()}\nSELECT simhash_hex(-1);\n")
        assert out.strip() == "ffffffffffffffff"


@pytest.mark.parametrize("record, said", [
    ({"simhash": {"built": False, "file": "simhash.so", "reason": "sqlite3ext.h not found (cc failed (1))"}},
     "sqlite3ext.h not found"),
    ({"_simhash_core": {"built": True, "file": "_simhash_core.so", "reason": ""}}, "not among the parts"),
    (None, "no record of a C build"),
])
def test_simq_extension_says_what_is_missing(tmp_path, monkeypatch, record, said):
    from typer.testing import CliRunner

    from simhash_sqlite.cli.app import app
    from simhash_sqlite.native import extension

    if record is not None:  # what the install's build recorded, in a package folder without the library
        (tmp_path / "_build.json").write_text(json.dumps(record))
    monkeypatch.setattr(extension, "HERE", tmp_path)
    result = CliRunner().invoke(app, ["extension"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.startswith("error: the SQLite extension is not built: ") and said in result.stderr
    assert result.stdout == ""


# -- docs/sql.md's examples ------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
SECTION = (ROOT / "docs" / "sql.md").read_text(encoding="utf-8").split("## In any SQLite host")[1].split("\n## ")[0]


def _blocks(language: str) -> list[str]:
    import re

    return [body for kind, body in re.findall(r"^```(\w*)\n(.*?)^```", SECTION, re.M | re.S) if kind == language]


@pytest.fixture
def demo(tmp_path, monkeypatch):
    """The README's demo.db, made by `simq add` in a folder holding examples/."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    simq = Path(sys.executable).parent / "simq"
    subprocess.run([str(simq), "add", "--db", "demo.db", "examples/"], check=True, capture_output=True, timeout=300)
    return tmp_path


@needs_shell
def test_the_shell_example_in_sql_md_prints_what_it_shows(demo):
    command, shown = _blocks("sh")[0], _blocks("")[0]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout == shown


def test_the_python_examples_in_sql_md_run(demo, capsys):
    apsw_block, sqlite3_block = _blocks("python")
    exec(compile(apsw_block, "sql.md, apsw", "exec"), {})
    assert "examples/sqlite_intro_edited.txt" in capsys.readouterr().out
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        pytest.skip("this Python's sqlite3 cannot load extensions (the apsw example ran)")
    exec(compile(sqlite3_block, "sql.md, sqlite3", "exec"), {})
    assert "535e078da051fa3c" in capsys.readouterr().out


def test_the_node_example_in_sql_md_runs(demo, request):
    from test_hosts import npm_package  # npm/, packed and installed (node-gyp)

    folder = _better_sqlite3(request.config.cache)
    ours = demo / "node_modules"
    ours.mkdir()
    (ours / "simhash-sqlite").symlink_to(npm_package(request), target_is_directory=True)
    (demo / "example.js").write_text(_blocks("js")[0])
    env = {**os.environ, "NODE_PATH": os.pathsep.join([str(folder / "node_modules"), str(ours)])}
    run = subprocess.run(["node", "example.js"], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "examples/sqlite_intro_edited.txt" in run.stdout and "exact" in run.stdout
