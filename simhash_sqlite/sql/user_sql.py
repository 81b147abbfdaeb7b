"""Run users' SQL on an index (simq sql): every statement's rows, with column names, as data."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import apsw

from ..errors import InvalidArgument, InvalidInput
from ..index import SimhashIndex
from .guard import SCHEMA_LOCKED, WOULD_CREATE, guard_schema

# Errors that say something about the index file or the machine, not the SQL: the CLI reports them
# itself. (CantOpenError is not one: the index is open, so it is a file the SQL names, as in ATTACH.)
_NOT_THE_SQL = (apsw.BusyError, apsw.FullError, apsw.CorruptError, apsw.NotADBError, apsw.IOError)


@dataclass
class ResultSet:
    """The rows of one statement that returns columns."""

    columns: list[str]
    rows: list[tuple] = field(default_factory=list)


PARAM_TYPES = {"text": str, "int": int, "real": float}


def parse_params(pairs: list[str]) -> dict[str, object]:
    """NAME=VALUE pairs for :NAME parameters; a whole number becomes an integer, anything else text.
    NAME:TYPE=VALUE binds the type asked for: text (k:text=007 is the string '007'), int or real."""
    params: dict[str, object] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name, colon, kind = name.partition(":")
        if not sep or not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise InvalidArgument(
                f"a parameter is NAME=VALUE or NAME:TYPE=VALUE (used as :NAME in the SQL), not {pair!r}"
            )
        if not colon:
            params[name] = int(value) if re.fullmatch(r"-?\d{1,18}", value) else value
            continue
        if kind not in PARAM_TYPES:
            raise InvalidArgument(f"the type in {pair!r} must be text, int or real")
        try:
            params[name] = PARAM_TYPES[kind](value.strip() if kind != "text" else value)
        except ValueError:
            raise InvalidArgument(f"{pair!r}: {value!r} is not {'an' if kind == 'int' else 'a'} {kind}") from None
        if kind == "int" and not -(1 << 63) <= params[name] < 1 << 63:
            raise InvalidArgument(f"{pair!r}: SQLite integers are 64-bit")
    return params


def run_query(index: SimhashIndex, sql: str, params: dict | None = None, *, write: bool = False) -> list[ResultSet]:
    """Run one or more statements on the index's connection and collect the rows of each.

    Read-only unless write=True (PRAGMA query_only, and no file is created: sqlguard); schema changes to
    the index file are denied either way (sqlguard), so the file still opens afterwards.
    """
    conn = index.conn
    guard = guard_schema(conn, read_only=not write)
    conn.pragma("query_only", not write)
    results: list[ResultSet] = []
    cursor = conn.cursor()

    def on_statement(cur: apsw.Cursor, statement: str, bindings) -> bool:
        try:
            columns = [column[0] for column in cur.description]
        except apsw.ExecutionCompleteError:
            columns = []
        if columns:
            results.append(ResultSet(columns))
        return True

    cursor.exec_trace = on_statement
    try:
        for row in cursor.execute(sql, params or None):
            results[-1].rows.append(row)
    except _NOT_THE_SQL:
        raise
    except apsw.AuthError:
        if guard.created is not None:
            raise InvalidInput("simq sql " + WOULD_CREATE.format(name=guard.created)) from None
        raise InvalidInput(SCHEMA_LOCKED) from None
    except apsw.CantOpenError as exc:
        raise InvalidInput(
            f"SQL: {exc} (a file the SQL names cannot be opened: a missing folder, or no permission)"
        ) from None
    except apsw.ReadOnlyError:
        raise InvalidInput("simq sql runs read-only; add --write to change the index") from None
    except apsw.BindingsError as exc:
        raise InvalidInput(f"SQL parameters: {exc} (give them as --param NAME=VALUE for :NAME)") from None
    except apsw.Error as exc:
        raise InvalidInput(f"SQL: {exc}") from None
    finally:
        conn.pragma("query_only", False)
    return results
