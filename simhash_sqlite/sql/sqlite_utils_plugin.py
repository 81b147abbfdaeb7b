"""The sqlite-utils plugin: our scalar SQL functions on every connection sqlite-utils opens, so that

    sqlite-utils query index.db "select key, hamming(fingerprint, simhash('some text')) from documents"

works with the index's own fingerprint settings (registered from sqlfunctions.FUNCTIONS).
"""

from __future__ import annotations

from sqlite_utils import hookimpl

from ..store.functions import prepare_sqlite3_connection


@hookimpl
def prepare_connection(conn):
    prepare_sqlite3_connection(conn)
