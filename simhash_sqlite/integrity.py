"""Is an index file whole? SQLite's own check plus the invariants our schema relies on.

Used by the crash, concurrency and fuzz tests and the stress scripts in bench/. (Issue 6 builds
`simq check`; the two are meant to be unified into one function.)
"""

from __future__ import annotations

import os

import apsw

from .storage import APPLICATION_ID

# Each query returns the number of rows breaking one invariant.
_INVARIANTS = {
    "rows whose blocks do not match their fingerprint": """
        SELECT count(*) FROM documents WHERE fingerprint IS NOT NULL AND (
            b0 IS NOT ((fingerprint >> 48) & 65535) OR b1 IS NOT ((fingerprint >> 32) & 65535)
            OR b2 IS NOT ((fingerprint >> 16) & 65535) OR b3 IS NOT (fingerprint & 65535))""",
    "rows with blocks but no fingerprint": """
        SELECT count(*) FROM documents WHERE fingerprint IS NULL
            AND (b0 IS NOT NULL OR b1 IS NOT NULL OR b2 IS NOT NULL OR b3 IS NOT NULL)""",
    "duplicate keys": "SELECT count(*) - count(DISTINCT key) FROM documents",
    "content hashes that are not 16 bytes": """
        SELECT count(*) FROM documents WHERE content_hash IS NOT NULL AND length(content_hash) != 16""",
}


def problems(path: str | os.PathLike) -> list[str]:
    """What is wrong with the index file at path; an empty list when it is whole.

    Opens its own read-only connection, so it can run beside writers (it sees the last commit).
    """
    try:
        conn = apsw.Connection(os.fspath(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as exc:
        return [f"cannot open: {exc}"]
    try:
        found = [f"integrity_check: {row}" for (row,) in conn.execute("PRAGMA integrity_check") if row != "ok"]
        if found:
            return found
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        if not tables and conn.pragma("application_id") == 0 and conn.pragma("user_version") == 0:
            # Nothing committed yet: an add was stopped after the file was made (journal_mode=wal
            # writes its header) but before the schema's transaction. The next open creates it.
            return []
        if conn.pragma("application_id") != APPLICATION_ID:
            return ["not marked as a simhash-sqlite index (application_id)"]
        missing = {"documents", "simhash_meta"} - tables
        if missing:
            return [f"missing tables: {', '.join(sorted(missing))}"]
        for what, sql in _INVARIANTS.items():
            count = conn.execute(sql).get
            if count:
                found.append(f"{count} {what}")
        return found
    except apsw.Error as exc:
        return [f"{type(exc).__name__}: {exc}"]
    finally:
        conn.close()
