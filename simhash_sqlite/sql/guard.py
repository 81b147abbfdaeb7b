"""Keep an index's schema as our migrations made it while users run their own SQL on it.

The shell and `simq sql` hand the connection to arbitrary SQL. A table, view or trigger created in
the index file would make every later open refuse it (storage.verify_schema), so schema changes to
the main database are denied there; temp objects and ATTACHed databases stay free to change.
Read-only (the default of both), no file is created either: ATTACH and VACUUM INTO may only name a
file that exists (PRAGMA query_only, which refuses the writes, would still leave an empty file).
"""

from __future__ import annotations

import os
import urllib.parse

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


WOULD_CREATE = "is read-only, and {name} does not exist: it would be created (add --write to allow it)"


class Guard:
    """The authorizer: _authorizer, and read-only, no ATTACH or VACUUM INTO of a file that does not
    exist. `created` names the last file refused so (None: the last denial was a schema change)."""

    def __init__(self, read_only: bool) -> None:
        self.read_only, self.created = read_only, None

    def __call__(self, action: int, first, second, database, trigger) -> int:
        if action == apsw.SQLITE_ATTACH:  # ATTACH 'x' and VACUUM INTO 'x'
            self.created = None
            if self.read_only and not _exists(str(first or "")):
                self.created = first
                return apsw.SQLITE_DENY
            return apsw.SQLITE_OK
        return _authorizer(action, first, second, database, trigger)


def _exists(name: str) -> bool:
    """An ATTACH target that exists, or one that is no file (temporary, in memory)."""
    if name in ("", ":memory:"):
        return True
    if name.startswith("file:"):
        parsed = urllib.parse.urlparse(name)
        if "mode=memory" in parsed.query or parsed.path in ("", ":memory:"):
            return True
        name = urllib.parse.unquote(parsed.path)
    return os.path.exists(name)


def guard_schema(conn: apsw.Connection, *, read_only: bool = False) -> Guard:
    """Deny schema changes to the main database of conn (see SCHEMA_LOCKED), and read-only, the
    creation of files (see WOULD_CREATE)."""
    guard = Guard(read_only)
    conn.authorizer = guard
    return guard
