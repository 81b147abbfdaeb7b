"""SQL functions registered on every connection we open, from one table (FUNCTIONS).

Each entry carries its flags, a one-line description and a runnable example with its result; the
README's function table and tests/test_sqlfunctions.py are checked against this table. Fingerprints
in SQL are the stored signed int64 (two's complement); every function masks to 64 bits, so a
negative stored value and its unsigned hex mean the same fingerprint. NULL in gives NULL out.
The table-valued simhash_near(query, k) lives in find/near_table.py; SimhashIndex registers it beside these.
The same table registers them on the stdlib's sqlite3 connections that Datasette and sqlite-utils open
(their plugins: datasette_plugin.py, sqlite_utils_plugin.py), so the two sides cannot drift.
"""

from __future__ import annotations

import json
import unicodedata
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import apsw

from .. import native
from ..core import rule
from ..core.fingerprint import BLOCKS, blocks, from_hex, hamming, simhash, similarity, to_hex, to_signed
from ..core.settings import FingerprintSettings
from ..errors import InvalidInput, SimhashError
from ..native.gen_rule_constants import digest
from ..version import __version__

if TYPE_CHECKING:
    import sqlite3


@dataclass(frozen=True)
class SqlFunction:
    name: str
    numargs: int
    make: Callable[[FingerprintSettings], Callable]  # builds the callable for one index's settings
    innocuous: bool  # no side effects, reveals nothing: usable from a schema even with trusted_schema off
    deterministic: bool  # same arguments, same result (within one index: simhash() uses its settings)
    summary: str  # what it returns, for the README table
    example: str  # a runnable SELECT on an index with the default settings
    result: object  # what the example returns
    arguments: str = ""  # the arguments' names, for the docs: "a, b" (docs/generate_sql.py)


def _fingerprint_arg(function: str, value, position: str = "") -> int:
    if type(value) is not int:
        raise InvalidInput(
            f"{function}(): the {position}argument must be an integer fingerprint (the stored signed "
            f"int64; simhash_from_hex() converts hex), got {type(value).__name__} {value!r:.40}"
        )
    return value


def sql_whole_number(value) -> int | None:
    """An SQL integer argument (k, a block number, checked) as an int: an INTEGER, or a REAL that is a whole
    number (Node's better-sqlite3 binds a JavaScript number 7 as REAL 7.0); None for anything else.
    Fingerprints are never taken from a REAL: a double holds only 53 bits (docs/sql.md: safeIntegers)."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    return None


def _sql_hamming(settings: FingerprintSettings) -> Callable:
    def sql_hamming(a, b):
        if a is None or b is None:
            return None
        return hamming(_fingerprint_arg("hamming", a, "first "), _fingerprint_arg("hamming", b, "second "))

    return sql_hamming


def _sql_simhash(settings: FingerprintSettings) -> Callable:
    def sql_simhash(text):
        if text is None:
            return None
        if not isinstance(text, str):
            raise InvalidInput(f"simhash(): the argument must be text, got {type(text).__name__}")
        fingerprint = simhash(text, settings)
        return None if fingerprint is None else to_signed(fingerprint)

    return sql_simhash


def _sql_simhash_similarity(settings: FingerprintSettings) -> Callable:
    def sql_simhash_similarity(a, b):
        if a is None or b is None:
            return None
        a = _fingerprint_arg("simhash_similarity", a, "first ")
        return similarity(hamming(a, _fingerprint_arg("simhash_similarity", b, "second ")))

    return sql_simhash_similarity


def _sql_simhash_block(settings: FingerprintSettings) -> Callable:
    def sql_simhash_block(fingerprint, i):
        if fingerprint is None or i is None:
            return None
        fingerprint = _fingerprint_arg("simhash_block", fingerprint, "first ")
        whole = sql_whole_number(i)
        if whole is None or not 0 <= whole < BLOCKS:
            raise InvalidInput(
                f"simhash_block(): the block number must be 0 to {BLOCKS - 1} (b0 = top bits), not {i!r}"
            )
        return blocks(fingerprint)[whole]

    return sql_simhash_block


def _sql_simhash_hex(settings: FingerprintSettings) -> Callable:
    def sql_simhash_hex(fingerprint):
        if fingerprint is None:
            return None
        return to_hex(_fingerprint_arg("simhash_hex", fingerprint))

    return sql_simhash_hex


def _sql_simhash_from_hex(settings: FingerprintSettings) -> Callable:
    def sql_simhash_from_hex(text):
        if text is None:
            return None
        if not isinstance(text, str):
            raise InvalidInput(
                f"simhash_from_hex(): the argument must be text (16 hex digits), got {type(text).__name__}"
            )
        try:
            return to_signed(from_hex(text))
        except InvalidInput as exc:
            raise InvalidInput(f"simhash_from_hex(): {exc}") from None

    return sql_simhash_from_hex


def rule_values() -> dict:
    """core/rule.py's constants by name: what the loadable extension's header was generated from."""
    return {name: value for name, value in vars(rule).items() if name.isupper()}


def version_info(sqlite_version: str) -> dict:
    """What simhash_version() reports, the same keys as the loadable extension's: the package version, the
    kernels that compute fingerprints ("portable", "avx2", "avx512"; "numpy" without the C core), zlib's
    version (short texts' exact data), the Unicode version of the normalisation, the SQLite library's
    version, the rule's constants (core/rule.py) and their digest."""
    lib = native.core()
    return {
        "package": __version__,
        "kernels": native.kernels(lib) if lib is not None else "numpy",
        "zlib": zlib.ZLIB_RUNTIME_VERSION,
        "unicode": unicodedata.unidata_version,
        "sqlite": sqlite_version,
        "rule": rule_values(),
        "rule_digest": digest(rule_values()),
    }


def _sql_simhash_version(settings: FingerprintSettings, sqlite_version: str | None = None) -> Callable:
    answer = json.dumps(version_info(sqlite_version or apsw.sqlite_lib_version()), separators=(",", ":"))

    def sql_simhash_version():
        return answer

    return sql_simhash_version


FUNCTIONS = (
    # Not innocuous: it reads the index's settings (simhash_meta), so a schema object (a view, a trigger)
    # of a file from elsewhere cannot call it with trusted_schema off. Deterministic: within one index its
    # settings never change, and SQLite may then compute simhash('literal') once per statement.
    SqlFunction(
        "simhash", 1, _sql_simhash, innocuous=False, deterministic=True, arguments="text",
        summary="the fingerprint of a text with the index's own settings, as the stored signed int64; "
        "NULL for a text without features",
        example="SELECT simhash_hex(simhash('hello world'))", result="535e078da051fa3c",
    ),
    SqlFunction(
        "hamming", 2, _sql_hamming, innocuous=True, deterministic=True, arguments="a, b",
        summary="the number of differing bits, 0-64 (masks to 64 bits, so signed values are fine)",
        example="SELECT hamming(-1, 0)", result=64,
    ),
    SqlFunction(
        "simhash_similarity", 2, _sql_simhash_similarity, innocuous=True, deterministic=True, arguments="a, b",
        summary="1 - hamming(a, b)/64: 1.0 for equal fingerprints, about 0.5 for unrelated ones",
        example="SELECT simhash_similarity(0, 15)", result=0.9375,
    ),
    SqlFunction(
        "simhash_block", 2, _sql_simhash_block, innocuous=True, deterministic=True, arguments="fp, i",
        summary="16-bit block i (0-3) of a fingerprint, as stored in columns b0..b3 (b0 the top bits)",
        example="SELECT simhash_block(simhash_from_hex('59e111d408338701'), 0)", result=0x59E1,
    ),
    SqlFunction(
        "simhash_hex", 1, _sql_simhash_hex, innocuous=True, deterministic=True, arguments="fp",
        summary="16 hex digits of a fingerprint, as simq prints it",
        example="SELECT simhash_hex(-1)", result="ffffffffffffffff",
    ),
    SqlFunction(
        "simhash_from_hex", 1, _sql_simhash_from_hex, innocuous=True, deterministic=True, arguments="text",
        summary="the stored signed int64 of a hex fingerprint (up to 16 digits, optional 0x)",
        example="SELECT simhash_from_hex('ffffffffffffffff')", result=-1,
    ),
    SqlFunction(
        "simhash_version", 0, _sql_simhash_version, innocuous=True, deterministic=True,
        summary="JSON: the package version, kernels, zlib and Unicode versions, the SQLite version, the "
        "rule's constants and their digest (the same keys from the loadable extension)",
        example="SELECT json_extract(simhash_version(), '$.rule.CONFIRM_K')", result=rule.CONFIRM_K,
    ),
)


def register_functions(conn: apsw.Connection, settings: FingerprintSettings) -> None:
    """Register every function in FUNCTIONS. Registering again replaces them (a no-op in effect).

    The table-valued simhash_near needs an index to search: SimhashIndex registers it (find/near_table.py).
    """
    for function in FUNCTIONS:
        conn.create_scalar_function(
            function.name,
            function.make(settings),
            function.numargs,
            deterministic=function.deterministic,
            flags=apsw.SQLITE_INNOCUOUS if function.innocuous else 0,
        )


def register_sqlite3_functions(conn: sqlite3.Connection, settings: FingerprintSettings) -> None:
    """Register every function in FUNCTIONS on a stdlib sqlite3 connection. sqlite3 has no way to mark
    a function innocuous; its errors reach SQL as "user-defined function raised exception"."""
    import sqlite3

    for function in FUNCTIONS:
        # simhash_version() names the library this connection uses
        made = _sql_simhash_version(settings, sqlite3.sqlite_version) if function.name == "simhash_version" else (
            function.make(settings))
        conn.create_function(function.name, function.numargs, made, deterministic=function.deterministic)


def sqlite3_settings(conn: sqlite3.Connection) -> FingerprintSettings | None:
    """The fingerprint settings an index records, the defaults for a database that is not an index,
    None for settings this version cannot read (simhash() would make other fingerprints than its own)."""
    import sqlite3
    import sys

    # The driver's own Error: Datasette runs on pysqlite3 where it is installed (pysqlite3.Error is not
    # sqlite3.Error).
    driver = sys.modules.get(type(conn).__module__)
    error = getattr(driver, "Error", sqlite3.Error)
    try:
        row = conn.execute("SELECT value FROM simhash_meta WHERE key = 'fingerprint'").fetchone()
    except error:  # no simhash_meta table: not an index
        return FingerprintSettings()
    if row is None:
        return FingerprintSettings()
    try:
        return FingerprintSettings.from_json(row[0])
    except (SimhashError, ValueError, TypeError):
        return None


def prepare_sqlite3_connection(conn: sqlite3.Connection) -> None:
    """Our functions on a sqlite3 connection, with the settings of the index it opened (none at all
    on an index whose settings this version cannot read)."""
    settings = sqlite3_settings(conn)
    if settings is not None:
        register_sqlite3_functions(conn, settings)
