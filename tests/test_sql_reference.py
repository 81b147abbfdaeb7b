"""docs/sql.md's function reference is generated from the extension's one function table (the C
`FUNCTIONS` in sqlite_extension.c) by docs/generate_sql.py, and says what the built extension registers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import apsw
import pytest

from simhash_sqlite.native.extension import ENTRY_POINT, ExtensionMissing, loadable_path
from simhash_sqlite.store.functions import FUNCTIONS

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("generate_sql", ROOT / "docs" / "generate_sql.py")
assert spec is not None and spec.loader is not None
generate_sql = importlib.util.module_from_spec(spec)
spec.loader.exec_module(generate_sql)
FLAG_BITS = {"SQLITE_DETERMINISTIC": apsw.SQLITE_DETERMINISTIC, "SQLITE_INNOCUOUS": apsw.SQLITE_INNOCUOUS}


def test_sql_md_holds_the_generated_reference():
    text = generate_sql.SQL_MD.read_text(encoding="utf-8")
    assert generate_sql.updated(text) == text, "docs/sql.md is out of date: run .venv/bin/python docs/generate_sql.py"


def test_the_reference_follows_the_c_table():
    source = generate_sql.EXTENSION_C.read_text(encoding="utf-8")
    parsed = generate_sql.c_functions(source)
    assert [f.name for f in parsed] == [f.name for f in FUNCTIONS]
    # A function added to the C table is read too (the generator then asks for its description).
    extra = '    {"simhash_extra", 1, fn_hex, SQLITE_DETERMINISTIC, 0},\n'
    added = source.replace('    {"hamming", 2,', extra + '    {"hamming", 2,', 1)
    assert [f.name for f in generate_sql.c_functions(added)][:3] == ["simhash", "simhash_extra", "hamming"]


def test_the_built_extension_registers_what_the_reference_says():
    try:
        path = loadable_path()
    except ExtensionMissing as exc:
        pytest.skip(str(exc))
    bare = apsw.Connection(":memory:")
    conn = apsw.Connection(":memory:")
    conn.enable_load_extension(True)
    conn.load_extension(path, ENTRY_POINT)
    listed = "SELECT name, narg, flags FROM pragma_function_list"
    added = set(conn.execute(listed)) - set(bare.execute(listed))
    source = generate_sql.EXTENSION_C.read_text(encoding="utf-8")
    want = set()
    for function in generate_sql.c_functions(source):
        bits = sum(FLAG_BITS[flag] for flag in function.flags)
        want.add((function.name, function.nargs, bits))
    mask = apsw.SQLITE_DETERMINISTIC | apsw.SQLITE_INNOCUOUS
    assert {(name, narg, flags & mask) for name, narg, flags in added} == want
    assert generate_sql.near_name(source) in {name for (name,) in conn.execute("SELECT name FROM pragma_module_list")}
    for function in FUNCTIONS:  # the documented examples give the documented results in the extension
        assert conn.execute(function.example).get == function.result, function.example
