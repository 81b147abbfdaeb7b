"""SQL functions registered on every connection we open, from one table.

    simhash(text)     the fingerprint of text with the index's own settings (signed int64; NULL when
                      the text has no features)   SELECT simhash('hello world')
    hamming(a, b)     number of differing bits of two fingerprints, 0..64 (NULL if either is NULL)
                      SELECT key, hamming(fingerprint, simhash('hello')) AS d FROM documents
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import apsw

from .fingerprint import hamming, simhash, to_signed
from .settings import FingerprintSettings


@dataclass(frozen=True)
class SqlFunction:
    name: str
    numargs: int
    make: Callable[[FingerprintSettings], Callable]  # builds the callable for one index's settings
    innocuous: bool  # no side effects, reveals nothing: usable from a schema even with trusted_schema off


def _sql_hamming(settings: FingerprintSettings) -> Callable:
    def sql_hamming(a, b):
        if a is None or b is None:
            return None
        if type(a) is not int or type(b) is not int:
            raise TypeError(
                f"hamming(): both arguments must be integer fingerprints, got {type(a).__name__} and {type(b).__name__}"
            )
        return hamming(a, b)

    return sql_hamming


def _sql_simhash(settings: FingerprintSettings) -> Callable:
    def sql_simhash(text):
        if text is None:
            return None
        if not isinstance(text, str):
            raise TypeError(f"simhash(): the argument must be text, got {type(text).__name__}")
        fingerprint = simhash(text, settings)
        return None if fingerprint is None else to_signed(fingerprint)

    return sql_simhash


FUNCTIONS = (
    SqlFunction("hamming", 2, _sql_hamming, innocuous=True),
    SqlFunction("simhash", 1, _sql_simhash, innocuous=True),
)


def register_functions(conn: apsw.Connection, settings: FingerprintSettings) -> None:
    """Register every function in FUNCTIONS; doing it again replaces them (a no-op in effect)."""
    for function in FUNCTIONS:
        conn.create_scalar_function(
            function.name,
            function.make(settings),
            function.numargs,
            deterministic=True,
            flags=apsw.SQLITE_INNOCUOUS if function.innocuous else 0,
        )
