"""Keep an index's schema as our migrations made it while users run their own SQL on it.

The shell and `simq sql` hand the connection to arbitrary SQL. A table, view or trigger created in
the index file would make every later open refuse it (storage.verify_schema), so schema changes to
the main database are denied there; temp objects and ATTACHed databases stay free to change.
"""

from __future__ import annotations

import apsw

SCHEMA_HINT = (
    "the index file's schema belongs to simhash-sqlite (its migrations); create your tables in temp "
    "(CREATE TEMP TABLE ...) or in an attached file (ATTACH 'mine.db' AS mine)"
)
SCHEMA_LOCKED = f"not authorized: {SCHEMA_HINT}"

# Authorizer actions on the main database that change its schema. The TEMP variants are separate
# codes and stay allowed.
_SCHEMA_CHANGES = {
    apsw.SQLITE_CREATE_INDEX, apsw.SQLITE_CREATE_TABLE, apsw.SQLITE_CREATE_TRIGGER, apsw.SQLITE_CREATE_VIEW,
    apsw.SQLITE_CREATE_VTABLE, apsw.SQLITE_DROP_INDEX, apsw.SQLITE_DROP_TABLE, apsw.SQLITE_DROP_TRIGGER,
    apsw.SQLITE_DROP_VIEW, apsw.SQLITE_DROP_VTABLE, apsw.SQLITE_ALTER_TABLE,
}
# Pragmas whose values mark the file as ours and say which migrations it has.
_MARKS = {"user_version", "application_id"}


def _authorizer(action: int, first, second, database, trigger) -> int:
    if action in _SCHEMA_CHANGES:
        schema = first if action == apsw.SQLITE_ALTER_TABLE else database
        # ANALYZE makes SQLite create its own sqlite_stat tables (names users cannot take).
        planner_table = action == apsw.SQLITE_CREATE_TABLE and str(first).startswith("sqlite_stat")
        if schema == "main" and not planner_table:
            return apsw.SQLITE_DENY
    if action == apsw.SQLITE_PRAGMA and str(first).lower() in _MARKS and second is not None:
        if database in (None, "main"):
            return apsw.SQLITE_DENY
    return apsw.SQLITE_OK


def guard_schema(conn: apsw.Connection) -> None:
    """Deny schema changes to the main database of conn (see SCHEMA_LOCKED)."""
    conn.authorizer = _authorizer
