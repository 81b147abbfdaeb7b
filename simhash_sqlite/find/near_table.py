"""simhash_near(query, k): near-duplicate search as a table-valued function, for raw SQL and joins.

    SELECT * FROM simhash_near('some text');          -- checked, k = CONFIRM_K, as simq near
    SELECT * FROM simhash_near('some text', 3, 0);    -- distance <= 3 alone (checked = 0)
    SELECT n.key, n.distance, d.added_at FROM simhash_near(simhash_from_hex('59e111d408338701'), 8) AS n
        JOIN documents AS d USING (key);
    SELECT t.id, n.key FROM my_texts AS t, simhash_near(t.body, 3) AS n;   -- one search per row of t

Columns: key, distance, similarity, fingerprint (the stored signed int64), jaccard, checked_by and
certainty (the check's verdict, as in search.Match: the same as simq dupes and explain give the pair),
and the hidden arguments query (a text, fingerprinted with the index's settings, or an integer
fingerprint), k (0-64, default CONFIRM_K) and checked (1, the default, or 0 to turn the check off).
Rows come closest first, exactly as SimhashIndex.near returns them with its default check: each search runs
through it, so the table and `simq near` share one plan and one answer. A NULL query, or a text
without features, gives no rows (in a join, one such row must not abort the whole query).
"""

from __future__ import annotations

import weakref
from typing import Protocol

import apsw

from ..core.fingerprint import to_signed, to_unsigned
from ..core.settings import CONFIRM_K
from ..errors import InvalidInput
from ..store.functions import sql_whole_number
from .search import Match


class Searchable(Protocol):
    """What simhash_near calls: SimhashIndex is one (it registers this table on its own connection)."""

    def fingerprint(self, text: str) -> int | None: ...

    def near(self, text: str | None = None, *, fingerprint: int | None = None, k: int | None = None,
             check: bool = True) -> list[Match]: ...

NAME = "simhash_near"
COLUMNS = ("key", "distance", "similarity", "fingerprint", "jaccard", "checked_by", "certainty")
SCHEMA = (
    "CREATE TABLE x(key TEXT, distance INTEGER, similarity REAL, fingerprint INTEGER, jaccard REAL, "
    "checked_by TEXT, certainty REAL, query HIDDEN, k HIDDEN, checked HIDDEN)"
)
QUERY, K, CHECK = len(COLUMNS), len(COLUMNS) + 1, len(COLUMNS) + 2
ARGUMENTS = (QUERY, K, CHECK)  # in the order of simhash_near(query, k, checked)
DEFAULT_K = CONFIRM_K  # the same default as SimhashIndex.near and simq near
USAGE = f"{NAME}() needs a query: SELECT * FROM {NAME}('some text', 3) (or an integer fingerprint)"


def register_near_table(conn: apsw.Connection, index: Searchable) -> None:
    """Register simhash_near on the index's connection (eponymous only: nothing goes into the file)."""
    conn.create_module(
        NAME,
        _Module(weakref.ref(index)),  # type: ignore[arg-type]  # apsw's stub requires ShadowName, documented optional
        use_bestindex_object=True, eponymous_only=True, read_only=True,
    )


def search(index: Searchable, query, k, check=1) -> list[Match]:
    """One call of simhash_near(query, k, checked): the matches of SimhashIndex.near (checked unless
    `checked` is 0), or [] for no query."""
    # (a REAL that is a whole number too: a JavaScript number binds as one)
    if sql_whole_number(k) is None:
        raise InvalidInput(f"{NAME}(): k must be a whole number from 0 to 64, not {k!r}")
    if sql_whole_number(check) not in (0, 1):
        raise InvalidInput(f"{NAME}(): the third argument (checked) must be 1 or 0, not {check!r}")
    k, check = sql_whole_number(k), sql_whole_number(check)
    if query is None:
        return []
    if isinstance(query, str):
        if index.fingerprint(query) is None:
            return []
        text, fingerprint = query, None
    elif type(query) is int:
        text, fingerprint = None, to_unsigned(query)
    else:
        raise InvalidInput(f"{NAME}(): the query must be a text or an integer fingerprint, not {type(query).__name__}")
    try:
        return index.near(text, fingerprint=fingerprint, k=k, check=bool(check))
    except InvalidInput as exc:
        raise InvalidInput(f"{NAME}(): {exc}") from None


class _Module:
    def __init__(self, index_ref: weakref.ref) -> None:
        self.index_ref = index_ref

    def Create(self, connection, modulename, databasename, tablename, *args):
        if args:
            raise InvalidInput(f"{NAME} is used as a table-valued function, not with CREATE VIRTUAL TABLE")
        return SCHEMA, _Table(self.index_ref)

    Connect = Create


class _Table:
    def __init__(self, index_ref: weakref.ref) -> None:
        self.index_ref = index_ref

    def BestIndexObject(self, info: apsw.IndexInfo) -> bool:
        """Take query (argv 1) and k (argv 2) from equality constraints; refuse plans without them.

        A plan in which the query is known only later (a join where it comes from another table
        scanned after this one) is refused, so SQLite puts this table on the inside of the loop.
        """
        positions = {}
        seen_query = False
        for i in range(info.nConstraint):
            column = info.get_aConstraint_iColumn(i)
            if column not in ARGUMENTS or info.get_aConstraint_op(i) != apsw.SQLITE_INDEX_CONSTRAINT_EQ:
                continue
            seen_query |= column == QUERY
            if not info.get_aConstraint_usable(i):
                return False
            if column in positions:  # the same argument twice (simhash_near(x) WHERE query = y)
                return False
            positions[column] = i
        if QUERY not in positions:
            if seen_query:
                return False
            # No query at all: accept so that Filter can explain the usage instead of SQLite's
            # "no query solution"; make it the costliest plan.
            info.idxNum = 0
            info.estimatedCost = 1e99
            return True
        given = [column for column in ARGUMENTS if column in positions]  # query, then k and checked if given
        for argv, column in enumerate(given, start=1):
            info.set_aConstraintUsage_argvIndex(positions[column], argv)
            info.set_aConstraintUsage_omit(positions[column], True)
        info.idxNum = sum(1 << (column - QUERY) for column in given)  # bit 0 query, bit 1 k, bit 2 checked
        info.estimatedCost = 100.0
        info.estimatedRows = 25
        # Rows come ordered by distance, then key: an ORDER BY asking just that needs no sort.
        wanted = [(info.get_aOrderBy_iColumn(i), info.get_aOrderBy_desc(i)) for i in range(info.nOrderBy)]
        if wanted and wanted in ([(1, False)], [(1, False), (0, False)]):
            info.orderByConsumed = True
        return True

    def Open(self) -> _Cursor:
        return _Cursor(self.index_ref)

    def Disconnect(self) -> None:
        pass

    Destroy = Disconnect


class _Cursor:
    def __init__(self, index_ref: weakref.ref) -> None:
        self.index_ref = index_ref
        self.rows: list[tuple] = []
        self.position = 0
        self.arguments: tuple = (None, DEFAULT_K, 1)

    def Filter(self, idx_num: int, idx_str, args: tuple) -> None:
        if idx_num == 0:
            raise InvalidInput(USAGE)
        values = iter(args)
        query = next(values)
        k = next(values) if idx_num & 2 else DEFAULT_K
        check = next(values) if idx_num & 4 else 1
        index = self.index_ref()
        if index is None:
            raise InvalidInput(f"{NAME}(): the index this connection belonged to is closed")
        self.arguments = (query, k, check)
        self.rows = [
            (m.key, m.distance, m.similarity, to_signed(m.fingerprint), m.jaccard, m.checked_by, m.certainty)
            for m in search(index, query, k, check)
        ]
        self.position = 0

    def Eof(self) -> bool:
        return self.position >= len(self.rows)

    def Next(self) -> None:
        self.position += 1

    def Rowid(self) -> int:
        return self.position

    def Column(self, number: int):
        if number >= QUERY:
            return self.arguments[number - QUERY]
        return self.rows[self.position][number]

    def Close(self) -> None:
        self.rows = []
