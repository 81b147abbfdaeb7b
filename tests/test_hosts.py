"""One table of searches for every host of the SQLite extension: simhash_near gives what the package gives
(SimhashIndex.near, as `simq near`) in apsw and Python's sqlite3 (simhash_sqlite.load), the stock sqlite3
shell, SQLite's amalgamation with the extension compiled in (SQLITE_CORE, no loading), Node's better-sqlite3
and node:sqlite through the npm package (npm/), and Datasette's SQL editor and canned queries under a plain
Datasette (no `simq serve`). A host that is not here skips and says why."""

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
import tarfile
import unicodedata
from pathlib import Path

import apsw
import pytest
from test_extension import _better_sqlite3, _edited, families

import simhash_sqlite
from simhash_sqlite import Document, SimhashIndex, to_signed

try:
    EXTENSION: str | None = simhash_sqlite.loadable_path()
    WHY_NOT = ""
except simhash_sqlite.ExtensionMissing as exc:
    EXTENSION, WHY_NOT = None, str(exc)

ROOT = Path(__file__).resolve().parents[1]
NATIVE = ROOT / "simhash_sqlite" / "native"
RULE = ROOT / "simhash_sqlite" / "core" / "rule.py"
NPM = ROOT / "npm"
COLUMNS = "key, distance, similarity, fingerprint, jaccard, checked_by, certainty"
NEAR = f"SELECT {COLUMNS} FROM simhash_near(?, ?, ?)"
pytestmark = pytest.mark.skipif(EXTENSION is None, reason=WHY_NOT)


# -- the table --------------------------------------------------------------------------------------------

def corpus() -> tuple[dict[str, str], list[str]]:
    """(stored texts by key, query texts): families of long and of short texts (checked exactly from
    their short_text data) with edits from none to heavy, in English-like words and in Chinese."""
    stored, queries = families(37, count=12)
    rng = random.Random(37)
    words = list(dict.fromkeys(" ".join(stored.values()).split()))
    for f in range(8):
        base = [rng.choice(words) for _ in range(rng.randint(12, 40))]
        for v, rate in enumerate((0.0, 0.05, 0.15)):
            stored[f"short{f}/copy{v}"] = " ".join(_edited(rng, base, words, rate))
        queries.append(" ".join(_edited(rng, base, words, 0.08)))
    return stored, queries


def cases() -> list[tuple[str | int, int, int]]:
    """(query, k, checked): texts near the stored families and far from them, empty and featureless
    texts, and stored and unstored fingerprints, at radii from 3 to 30, checked and not."""
    stored, queries = corpus()
    fingerprints = [to_signed(simhash_sqlite.simhash(stored["family03/copy1"])), to_signed(0x59E111D408338701), -1]
    table: list[tuple[str | int, int, int]] = []
    for i, query in enumerate(queries + fingerprints):
        table += [(query, (7, 12, 20, 30)[i % 4], 1), (query, (3, 9, 16, 24)[i % 4], 0)]
    return table


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    stored, _ = corpus()
    path = tmp_path_factory.mktemp("hosts") / "hosts.db"
    with SimhashIndex(path, create=True) as ix:  # texts not stored: sketches and short texts decide
        ix.add(Document(key, text) for key, text in stored.items())
    return path


@pytest.fixture(scope="module")
def expected(index) -> list[list[tuple]]:
    """What the package gives for each case."""
    out = []
    with SimhashIndex(index, readonly=True) as ix:
        for query, k, checked in cases():
            if isinstance(query, str):
                matches = [] if ix.fingerprint(query) is None else ix.near(query, k=k, check=bool(checked))
            else:
                matches = ix.near(fingerprint=query & ((1 << 64) - 1), k=k, check=bool(checked))
            out.append([row((m.key, m.distance, m.similarity, to_signed(m.fingerprint), m.jaccard,
                             m.checked_by if checked else None, m.certainty if checked else None))
                        for m in matches])  # fmt: skip
    assert sum(map(len, out)) > 40 and any(r[5] == "exact" for rows in out for r in rows)
    assert any(r[5] == "estimated" for rows in out for r in rows)
    return out


def row(values) -> tuple:
    """One row of simhash_near, its reals to 12 places: hosts print them with 15 to 17 digits, and the
    certainty goes through exp() and expm1(), whose last bit libm and numpy may round apart."""
    key, distance, similarity, fingerprint, jaccard, checked_by, certainty = values
    real = lambda v: None if v is None else round(float(v), 12)  # noqa: E731
    return (key, int(distance), real(similarity), int(fingerprint), real(jaccard), checked_by, real(certainty))


def assert_same(got: list[list[tuple]], expected: list[list[tuple]]) -> None:
    assert len(got) == len(expected)
    differ = [(i, cases()[i][1:], g, e) for i, (g, e) in enumerate(zip(got, expected)) if g != e]
    assert not differ, differ[:2]


# -- hosts that load the library --------------------------------------------------------------------------

def test_apsw_with_load(index, expected):
    conn = apsw.Connection(str(index), flags=apsw.SQLITE_OPEN_READONLY)
    simhash_sqlite.load(conn)
    assert_same([[row(r) for r in conn.execute(NEAR, c)] for c in cases()], expected)


def test_pythons_sqlite3_with_load(index, expected):
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        with pytest.raises(simhash_sqlite.ExtensionMissing, match="cannot load extensions"):
            simhash_sqlite.load(sqlite3.connect(":memory:"))
        pytest.skip("this Python's sqlite3 was built without loadable extensions (load() says so: checked)")
    conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    simhash_sqlite.load(conn)
    assert_same([[row(r) for r in conn.execute(NEAR, c)] for c in cases()], expected)


def script(load: str | None) -> str:
    """The table as an SQL script for a shell: each case's rows, then a line '#end'."""
    lines = [f".load {load}"] if load else []
    for query, k, checked in cases():
        literal = str(query) if isinstance(query, int) else "'" + query.replace("'", "''") + "'"
        lines += [f"SELECT {COLUMNS} FROM simhash_near({literal}, {k}, {checked});", "SELECT '#end';"]
    return "\n".join(lines) + "\n"


def parse_tabs(out: str) -> list[list[tuple]]:
    got: list[list[tuple]] = [[]]
    for line in out.splitlines():
        if line == "#end":
            got.append([])
            continue
        values = [None if v == "\\N" else v for v in line.split("\t")]
        got[-1].append(row(values))
    assert got[-1] == []
    return got[:-1]


def test_the_stock_sqlite3_shell(index, expected):
    shell = shutil.which("sqlite3")
    if shell is None:
        pytest.skip("the sqlite3 command-line shell is not installed (Debian: apt-get install sqlite3)")
    run = subprocess.run([shell, "-readonly", "-batch", "-cmd", ".mode tabs", "-cmd", ".nullvalue \\\\N", str(index)],
                         input=script(EXTENSION), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0 and not run.stderr, run.stderr
    assert_same(parse_tabs(run.stdout), expected)


# -- SQLite compiled with the extension in (SQLITE_CORE) ------------------------------------------------------

def amalgamation(request) -> Path:
    """SQLite's sqlite3.c: SIMHASH_SQLITE_AMALGAMATION, else the one better-sqlite3 12 ships (npm)."""
    given = os.environ.get("SIMHASH_SQLITE_AMALGAMATION")
    if given:
        return Path(given)
    found = _better_sqlite3(request.config.cache) / "node_modules" / "better-sqlite3" / "deps" / "sqlite3" / "sqlite3.c"
    if not found.exists():
        pytest.skip(f"better-sqlite3 carries no amalgamation at {found}")
    return found


def static_host(request) -> Path:
    """tests/hosts/static_host.c linked with the amalgamation and the extension's sources compiled with
    -DSQLITE_CORE; kept in pytest's cache under a digest of every input (a first build: about 10 s)."""
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        pytest.skip("no C compiler here")
    sqlite3_c = amalgamation(request)
    sources = [NATIVE / "sqlite_extension.c", NATIVE / "simhash_core.c", ROOT / "tests" / "hosts" / "static_host.c"]
    digest = hashlib.sha256(unicodedata.unidata_version.encode())
    for file in [sqlite3_c, *sources, *NATIVE.glob("*.h"), RULE]:
        digest.update(file.read_bytes())
    folder = Path(request.config.cache.mkdir("static-host")) / digest.hexdigest()[:16]
    program = folder / "static_host"
    if program.exists():
        return program
    folder.mkdir(exist_ok=True)
    subprocess.run([sys.executable, str(NATIVE / "gen_unicode_tables.py"), str(folder / "_unicode_tables.h")],
                   check=True)  # fmt: skip
    # the extension's constants, generated as the install generates them
    subprocess.run([sys.executable, str(NATIVE / "gen_rule_constants.py"), str(RULE),
                    str(folder / "_rule_constants.h")], check=True)  # fmt: skip
    zlib = ["-DSIMHASH_HAVE_ZLIB"] if _compiles(compiler, "zlib.h", folder) else []
    steps = [
        [compiler, "-O0", "-c", "-o", str(folder / "sqlite3.o"), str(sqlite3_c)],
        [compiler, "-O1", "-std=c99", "-ffp-contract=off", "-DSQLITE_CORE", *zlib, f"-I{folder}", f"-I{NATIVE}",
         f"-I{sqlite3_c.parent}", "-o", str(folder / "static_host.tmp"), str(folder / "sqlite3.o"),
         *map(str, sources), "-lm", "-lpthread", "-ldl", *(["-lz"] if zlib else [])],
    ]  # fmt: skip
    for step in steps:
        run = subprocess.run(step, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
    (folder / "static_host.tmp").rename(program)
    return program


def _compiles(compiler: str, header: str, folder: Path) -> bool:
    probe = folder / "probe.c"
    probe.write_text(f"#include <{header}>\n")
    return subprocess.run([compiler, "-fsyntax-only", str(probe)], capture_output=True).returncode == 0


@pytest.mark.slow  # a first build compiles SQLite (about 10 s); later runs reuse it
def test_sqlite_compiled_with_the_extension_in(index, expected, request):
    program = static_host(request)
    run = subprocess.run([str(program), str(index)], input=script(None), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and not run.stderr, run.stderr
    assert_same(parse_tabs(run.stdout), expected)


# -- Node: the npm package -----------------------------------------------------------------------------------

_PACKED: dict[str, tuple[Path, Path]] = {}


def npm_package(request) -> Path:
    """The npm package as a user gets it: `npm pack` of npm/ (its prepack copies the C sources in), the
    tarball installed by npm into a clean folder (node-gyp compiles the extension). Once per test run;
    returns the installed package's folder."""
    return npm_tarball(request)[1]


def npm_tarball(request) -> tuple[Path, Path]:
    """(the tarball, the installed package), made once per test run: with xdist, once for all the workers (in
    the run's own temporary folder, under a lock), not once in each worker that asks (node-gyp: about 10 s)."""
    if "made" in _PACKED:
        return _PACKED["made"]
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("Node.js and npm are not installed (Debian: apt-get install nodejs npm)")
    factory = request.getfixturevalue("tmp_path_factory")
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker's folder is in the run's: <run>/popen-gw0
        folder = factory.getbasetemp().parent / "npm-package"
        folder.mkdir(exist_ok=True)
    else:
        folder = factory.mktemp("npm")
    clean = folder / "clean"
    with open(folder / "made.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "made").exists():
            run = subprocess.run(["npm", "pack", "--pack-destination", str(folder)], cwd=NPM, capture_output=True,
                                 text=True, timeout=300)  # fmt: skip
            assert run.returncode == 0, run.stderr
            clean.mkdir()
            (tarball,) = folder.glob("simhash-sqlite-*.tgz")
            run = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--no-package-lock", str(tarball)],
                                 cwd=clean, capture_output=True, text=True, timeout=300)  # fmt: skip
            assert run.returncode == 0, run.stderr
            (folder / "made").touch()
    (tarball,) = folder.glob("simhash-sqlite-*.tgz")
    _PACKED["made"] = (tarball, clean / "node_modules" / "simhash-sqlite")
    return _PACKED["made"]


def node_rows(request, driver: str, index: Path, package: Path | None = None) -> list[list[tuple]]:
    """The table's rows from npm/test/near.js, with this checkout's npm/ or an installed `package`."""
    env = {**os.environ, "SIMHASH_SQLITE_NPM": str(package or npm_package(request))}
    if driver == "better-sqlite3":
        env["NODE_PATH"] = str(_better_sqlite3(request.config.cache) / "node_modules")
    payload = [{"query": q if isinstance(q, str) else {"fingerprint": str(q)}, "k": k, "checked": c}
               for q, k, c in cases()]  # fmt: skip
    run = subprocess.run(["node", str(NPM / "test" / "near.js"), driver, str(index)], input=json.dumps(payload),
                         env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    return [[row(r) for r in rows] for rows in json.loads(run.stdout)]


@pytest.mark.slow  # npm packs and installs npm/ and may install better-sqlite3 12 (minutes the first time)
def test_node_better_sqlite3_through_the_npm_package(index, expected, request):
    assert_same(node_rows(request, "better-sqlite3", index), expected)


@pytest.mark.slow  # npm pack, then npm install of the tarball (node-gyp compiles the C): about 15 s, once
def test_the_npm_tarball_installs_in_a_clean_folder_and_answers(index, expected, request):
    tarball, installed = npm_tarball(request)
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
    assert {"package/src/sqlite_extension.c", "package/src/_unicode_tables.h", "package/binding.gyp"} <= names
    assert not any(name.startswith(("package/build/", "package/node_modules/")) for name in names)
    assert list((installed / "build" / "Release").glob("simhash.*")), "node-gyp built nothing"
    run = subprocess.run(["node", "-e", "console.log(require(process.argv[1]).getLoadablePath())", str(installed)],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert run.returncode == 0 and Path(run.stdout.strip()).parent == installed / "build" / "Release", run.stderr
    assert_same(node_rows(request, "better-sqlite3", index, package=installed), expected)


def test_the_npm_package_has_the_python_packages_version():
    assert json.loads((NPM / "package.json").read_text())["version"] == simhash_sqlite.__version__


@pytest.mark.slow
def test_node_sqlite_through_the_npm_package(index, expected, request):
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed")
    has = subprocess.run(["node", "-e", "require('node:sqlite')"], capture_output=True, text=True)
    if has.returncode:
        version = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
        pytest.skip(f"Node {version} has no node:sqlite (22.5 and later have it)")
    assert_same(node_rows(request, "node:sqlite", index), expected)


# -- Datasette ---------------------------------------------------------------------------------------------

DATASETTE = r"""
import asyncio, json, sys, urllib.parse
from datasette.app import Datasette
import datasette.utils.sqlite as driver

index, cases = sys.argv[1], json.load(sys.stdin)
columns = "key, distance, similarity, fingerprint, jaccard, checked_by, certainty"
near = f"SELECT {columns} FROM simhash_near(:q, CAST(:k AS INTEGER), CAST(:c AS INTEGER))"
by_fingerprint = f"SELECT {columns} FROM simhash_near(CAST(:q AS INTEGER), CAST(:k AS INTEGER), CAST(:c AS INTEGER))"
ds = Datasette([index], metadata={"databases": {"hosts": {"queries": {"near": {"sql": near}}}}})

async def main():
    out = []
    for case in cases:
        args = {"q": case["query"], "k": case["k"], "c": case["checked"], "_shape": "array"}
        if isinstance(case["query"], int):  # the SQL editor
            page = f"/hosts.json?{urllib.parse.urlencode({**args, 'sql': by_fingerprint})}"
        else:  # the canned query
            page = f"/hosts/near.json?{urllib.parse.urlencode(args)}"
        response = await ds.client.get(page)
        assert response.status_code == 200, response.text
        out.append([[r[c.strip()] for c in columns.split(",")] for r in response.json()])
    print(json.dumps({"driver": driver.sqlite3.__name__, "rows": out}))

asyncio.run(main())
"""


def _pysqlite3(request) -> Path:
    """A folder holding pysqlite3-binary (a sqlite3 that loads extensions, which Datasette prefers where it
    is installed), installed once into pytest's cache."""
    folder = Path(request.config.cache.mkdir("pysqlite3"))
    if not (folder / "pysqlite3").exists():
        install = [sys.executable, "-m", "pip", "install", "-q", "--target", str(folder), "pysqlite3-binary"]
        run = subprocess.run(install, capture_output=True, text=True, timeout=300)
        if run.returncode:
            pytest.skip(f"pip could not install pysqlite3-binary: {run.stderr.strip()[-300:]}")
    return folder


@pytest.mark.slow  # a Python process with Datasette: about 3 s
@pytest.mark.parametrize("driver", ["sqlite3", "pysqlite3"])
def test_a_plain_datasette_sql_editor_and_canned_queries(index, expected, request, driver):
    """Datasette started without simq serve (the plugin comes from its entry point) on Python's sqlite3,
    where it loads extensions, and on pysqlite3."""
    pytest.importorskip("datasette", reason="the [web] extra is not installed: pip install '.[test,web]'")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if driver == "pysqlite3":
        env["PYTHONPATH"] = str(_pysqlite3(request))
    elif not hasattr(sqlite3.Connection, "enable_load_extension"):
        pytest.skip("this Python's sqlite3 was built without loadable extensions: Datasette cannot load any")
    folder = index.parent / f"datasette-{driver}"
    folder.mkdir(exist_ok=True)
    copy = folder / "hosts.db"
    shutil.copy(index, copy)
    payload = [{"query": q, "k": k, "checked": c} for q, k, c in cases()]
    run = subprocess.run([sys.executable, "-c", DATASETTE, str(copy)], input=json.dumps(payload), env=env, cwd=folder,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    answer = json.loads(run.stdout)
    assert answer["driver"] == driver
    assert_same([[row(r) for r in rows] for rows in answer["rows"]], expected)


def test_the_plugin_leaves_a_connection_that_cannot_load_extensions_its_scalar_functions(index):
    """Where loading fails (no extension support in this sqlite3), Datasette's connection still gets the
    package's scalar functions, and no error."""
    pytest.importorskip("datasette", reason="the [web] extra is not installed")
    from simhash_sqlite.web.datasette_plugin import prepare_connection

    class NoLoading(sqlite3.Connection):
        def enable_load_extension(self, enabled):
            raise sqlite3.OperationalError("not authorized")

    conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True, factory=NoLoading)
    prepare_connection(conn, "hosts", None)
    assert conn.execute("SELECT simhash_hex(simhash('hello world'))").fetchone() == ("535e078da051fa3c",)
    with pytest.raises(sqlite3.OperationalError, match="simhash_near"):
        conn.execute("SELECT * FROM simhash_near('hello world')")
