"""The SQL functions: each agrees with its Python twin, is registered with its flags, and is documented."""

import re
from pathlib import Path

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_sqlite import Document, InvalidInput, SimhashIndex
from simhash_sqlite.core.fingerprint import (
    blocks,
    from_hex,
    hamming,
    simhash,
    similarity,
    to_hex,
    to_signed,
    to_unsigned,
)
from simhash_sqlite.core.settings import FingerprintSettings
from simhash_sqlite.store.functions import FUNCTIONS, register_functions

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
WORDS = FingerprintSettings(features="words", ngram=2)

fingerprints = st.integers(min_value=0, max_value=(1 << 64) - 1)
signed = fingerprints.map(to_signed)


def connection(settings=FingerprintSettings()):
    conn = apsw.Connection(":memory:")
    register_functions(conn, settings)
    return conn


CONN = connection()
WORDS_CONN = connection(WORDS)


def sql(query, *args, conn=CONN):
    return conn.execute(query, args).get


# Each function's Python twin, checked below; a function without a twin here fails the suite.
TWINS = {
    "simhash": "test_simhash_agrees_with_python",
    "hamming": "test_hamming_agrees_with_python",
    "simhash_similarity": "test_similarity_agrees_with_python",
    "simhash_block": "test_block_agrees_with_python_and_the_stored_columns",
    "simhash_hex": "test_hex_round_trips_agree_with_python",
    "simhash_from_hex": "test_hex_round_trips_agree_with_python",
    "simhash_version": "test_version_says_the_build_and_the_rule",
}


def test_every_function_has_a_python_twin_test():
    assert {f.name for f in FUNCTIONS} == set(TWINS)
    assert all(name in globals() for name in TWINS.values())


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=60))
def test_simhash_agrees_with_python(text):
    for conn, fp_settings in ((CONN, FingerprintSettings()), (WORDS_CONN, WORDS)):
        expected = simhash(text, fp_settings)
        assert sql("SELECT simhash(?)", text, conn=conn) == (None if expected is None else to_signed(expected))


@settings(max_examples=200)
@given(fingerprints, fingerprints)
def test_hamming_agrees_with_python(a, b):
    assert sql("SELECT hamming(?, ?)", to_signed(a), to_signed(b)) == hamming(a, b)


@settings(max_examples=200)
@given(fingerprints, fingerprints)
def test_similarity_agrees_with_python(a, b):
    assert sql("SELECT simhash_similarity(?, ?)", to_signed(a), to_signed(b)) == similarity(hamming(a, b))


@settings(max_examples=200)
@given(fingerprints)
def test_block_agrees_with_python_and_the_stored_columns(fp):
    assert [sql("SELECT simhash_block(?, ?)", to_signed(fp), i) for i in range(4)] == list(blocks(fp))


def test_blocks_from_sql_equal_the_indexed_columns(tmp_path):
    with SimhashIndex(tmp_path / "i.db", create=True) as index:
        index.add(Document(str(i), f"document number {i} with some words in it") for i in range(50))
        wrong = index.conn.execute(
            "SELECT count(*) FROM documents WHERE b0 != simhash_block(fingerprint, 0)"
            " OR b1 != simhash_block(fingerprint, 1)"
            " OR b2 != simhash_block(fingerprint, 2) OR b3 != simhash_block(fingerprint, 3)"
        ).get
        assert wrong == 0


@settings(max_examples=200)
@given(fingerprints)
def test_hex_round_trips_agree_with_python(fp):
    assert sql("SELECT simhash_hex(?)", to_signed(fp)) == to_hex(fp)
    assert sql("SELECT simhash_from_hex(?)", to_hex(fp)) == to_signed(from_hex(to_hex(fp)))
    assert sql("SELECT simhash_from_hex(simhash_hex(?))", to_signed(fp)) == to_signed(fp)
    # SQLite reads a 0x literal as the same two's-complement int64 (the stock shell can use it)
    assert to_unsigned(sql(f"SELECT 0x{to_hex(fp)}")) == fp


def test_version_says_the_build_and_the_rule():
    import json
    import unicodedata

    from simhash_sqlite.core import rule
    from simhash_sqlite.native.gen_rule_constants import digest
    from simhash_sqlite.version import __version__

    info = json.loads(sql("SELECT simhash_version()"))
    assert set(info) == {"package", "kernels", "zlib", "unicode", "sqlite", "rule", "rule_digest"}
    assert info["package"] == __version__ and info["unicode"] == unicodedata.unidata_version
    assert info["sqlite"] == apsw.sqlite_lib_version() and info["kernels"] in ("portable", "avx2", "avx512", "numpy")
    assert info["rule"]["FILTER_CERTAIN"] == rule.FILTER_CERTAIN and info["rule_digest"] == digest(info["rule"])


@pytest.mark.parametrize("function", [f.name for f in FUNCTIONS if f.numargs])
def test_null_in_null_out(function):
    numargs = next(f.numargs for f in FUNCTIONS if f.name == function)
    assert sql(f"SELECT {function}({', '.join(['NULL'] * numargs)})") is None


@pytest.mark.parametrize(
    "query, fragment",
    [
        ("SELECT hamming('a', 1)", "hamming(): the first argument must be an integer"),
        ("SELECT simhash(1)", "simhash(): the argument must be text"),
        ("SELECT simhash_block(1, 4)", "simhash_block(): the block number must be 0 to 3"),
        ("SELECT simhash_hex(1.5)", "simhash_hex(): the argument must be an integer"),
        ("SELECT simhash_from_hex('xyz')", "simhash_from_hex(): not a 64-bit hex fingerprint"),
        ("SELECT simhash_from_hex('1234567890abcdef0')", "simhash_from_hex(): not a 64-bit hex"),
        ("SELECT simhash_similarity(1, x'00')", "simhash_similarity(): the second argument"),
    ],
)
def test_bad_arguments_name_the_function(query, fragment):
    with pytest.raises(InvalidInput, match=re.escape(fragment)):
        sql(query)


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.name)
def test_each_documented_example_runs_and_gives_its_result(function):
    assert sql(function.example) == function.result
    row = next((line for line in README.splitlines() if line.startswith(f"| `{function.name}(")), None)
    assert row is not None, f"README's function table lacks {function.name}"
    assert f"`{function.example}`" in row and str(function.result) in row


def test_registered_functions_and_flags_match_pragma_function_list(index):
    def listed(conn):
        functions = conn.execute("SELECT name, narg, flags FROM pragma_function_list")
        return {(name, narg): flags for name, narg, flags in functions}

    plain = listed(apsw.Connection(":memory:"))  # SQLite's own and its extensions' (fts5, geopoly...)
    registered = {key: flags for key, flags in listed(index.conn).items() if key not in plain}
    assert set(registered) == {(f.name, f.numargs) for f in FUNCTIONS}
    for function in FUNCTIONS:
        flags = registered[(function.name, function.numargs)]
        assert bool(flags & apsw.SQLITE_DETERMINISTIC) == function.deterministic, function.name
        assert bool(flags & apsw.SQLITE_INNOCUOUS) == function.innocuous, function.name
    modules = {name for (name,) in index.conn.execute("SELECT name FROM pragma_module_list")}
    plain_modules = {name for (name,) in apsw.Connection(":memory:").execute("SELECT name FROM pragma_module_list")}
    assert "simhash_near" in modules and "simhash_near" not in plain_modules
