"""What a person decided while reviewing: labels of pairs and the documents chosen to keep.

Both live in the index file (migration 0004: tables `labels` and `keepers`), written one decision a
transaction, so a server killed mid-write leaves every acknowledged decision in place and the file
valid. Rows name documents by key. An index made before the migration and opened read-only has no
such tables: it is read as an index without labels. Only keys the index holds can be labelled.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

import apsw

from ..errors import InvalidInput
from .database import connect, has_table, read_only, write_transaction

DUPLICATE, NOT_DUPLICATE, UNSURE = "duplicate", "not_duplicate", "unsure"
LABELS = (DUPLICATE, NOT_DUPLICATE, UNSURE)
# What each label means, in words (the web pages and the CLI say it so).
WORDS = {DUPLICATE: "duplicate", NOT_DUPLICATE: "not a duplicate", UNSURE: "unsure"}
MAX_REVIEWER = 200  # characters of a reviewer's name


@dataclass(frozen=True)
class Label:
    first: str  # the two keys in sorted order
    second: str
    label: str  # one of LABELS
    reviewer: str
    at: str  # UTC, ISO 8601


def pair_of(a: str, b: str) -> tuple[str, str]:
    """The two keys as the labels table orders them (sorted); refuses a document paired with itself."""
    if not isinstance(a, str) or not isinstance(b, str):
        raise InvalidInput("a pair is two keys of the index")
    if a == b:
        raise InvalidInput(f"a pair needs two different documents, not {a!r} twice")
    return (a, b) if a < b else (b, a)


def validate_label(label: str) -> str:
    if label not in LABELS:
        raise InvalidInput(f"a label is one of {', '.join(LABELS)}, not {label!r:.40}")
    return label


def validate_reviewer(reviewer: str) -> str:
    reviewer = (reviewer or "").strip()
    if not reviewer or len(reviewer) > MAX_REVIEWER or any(ord(c) < 32 for c in reviewer):
        raise InvalidInput(f"the reviewer's name must be 1-{MAX_REVIEWER} printable characters, not {reviewer!r:.60}")
    return reviewer


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def has_labels(conn: apsw.Connection) -> bool:
    """The file has the labels tables (an older index opened read-only has not)."""
    return has_table(conn, "labels")


def open_for_labels(path: str | os.PathLike) -> apsw.Connection:
    """A connection that can write labels into an existing index (migrated to the tables when older);
    refused in one line when the file cannot be written."""
    conn = connect(path, create=False)
    if read_only(conn):
        conn.close()
        raise InvalidInput(
            f"{os.fspath(path)} is read-only (the file or its folder): labels are written into the index; "
            "make it writable, or serve it without --review"
        )
    return conn


def _require_keys(conn: apsw.Connection, keys: Iterable[str]) -> None:
    wanted = list(dict.fromkeys(keys))
    rows = conn.execute("SELECT key FROM documents WHERE key IN carray(?)", (apsw.carray(tuple(wanted)),))
    found = {key for (key,) in rows}
    missing = [key for key in wanted if key not in found]
    if missing:
        raise InvalidInput(f"{missing[0]!r} is not a key in this index: only its documents can be labelled")


def set_label(conn: apsw.Connection, a: str, b: str, label: str, reviewer: str) -> Label:
    """Label the pair (replacing an earlier label of it), in one transaction; both keys must be indexed."""
    first, second = pair_of(a, b)
    label, reviewer = validate_label(label), validate_reviewer(reviewer)
    at = _now()
    with write_transaction(conn):
        _require_keys(conn, (first, second))
        conn.execute(
            "INSERT INTO labels (first, second, label, reviewer, at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (first, second) DO UPDATE SET label = excluded.label, reviewer = excluded.reviewer, "
            "at = excluded.at",
            (first, second, label, reviewer, at),
        )
    return Label(first, second, label, reviewer, at)


def clear_label(conn: apsw.Connection, a: str, b: str) -> bool:
    """Forget the pair's label; whether there was one."""
    first, second = pair_of(a, b)
    with write_transaction(conn):
        conn.execute("DELETE FROM labels WHERE first = ? AND second = ?", (first, second))
        return conn.changes() > 0


def keep(
    conn: apsw.Connection, key: str, reviewer: str, *, others: Iterable[str] = (), duplicates: bool = False
) -> int:
    """Choose `key` to keep, in one transaction: it becomes a keeper, and the `others` (the rest of its
    cluster) stop being keepers. duplicates: also label each of the others a duplicate of it, except
    pairs already labelled (a "not a duplicate" stands). Returns the labels written."""
    reviewer = validate_reviewer(reviewer)
    others = [other for other in dict.fromkeys(others) if other != key]
    at = _now()
    written = 0
    with write_transaction(conn):
        _require_keys(conn, [key, *others])
        if others:
            conn.execute("DELETE FROM keepers WHERE key IN carray(?)", (apsw.carray(tuple(others)),))
        conn.execute(
            "INSERT INTO keepers (key, reviewer, at) VALUES (?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET reviewer = excluded.reviewer, at = excluded.at",
            (key, reviewer, at),
        )
        if duplicates:
            for other in others:
                first, second = pair_of(key, other)
                conn.execute(
                    "INSERT INTO labels (first, second, label, reviewer, at) VALUES (?, ?, 'duplicate', ?, ?) "
                    "ON CONFLICT (first, second) DO NOTHING",
                    (first, second, reviewer, at),
                )
                written += conn.changes()
    return written


def unkeep(conn: apsw.Connection, key: str) -> bool:
    with write_transaction(conn):
        conn.execute("DELETE FROM keepers WHERE key = ?", (key,))
        return conn.changes() > 0


def read_labels(conn: apsw.Connection) -> list[Label]:
    """Every label of two documents still in the index, in the order of their keys."""
    if not has_labels(conn):
        return []
    rows = conn.execute(
        "SELECT first, second, label, reviewer, at FROM labels "
        "WHERE first IN (SELECT key FROM documents) AND second IN (SELECT key FROM documents) ORDER BY first, second"
    )
    return [Label(*row) for row in rows]


def label_of(conn: apsw.Connection, a: str, b: str) -> Label | None:
    if a == b or not has_labels(conn):
        return None
    first, second = pair_of(a, b)
    row = conn.execute(
        "SELECT first, second, label, reviewer, at FROM labels WHERE first = ? AND second = ?", (first, second)
    ).get
    return None if row is None else Label(*row)


def labels_of(conn: apsw.Connection, keys: Iterable[str]) -> dict[tuple[str, str], str]:
    """The labels of the pairs among these keys: {(first, second): label}."""
    keys = list(dict.fromkeys(keys))
    if not keys or not has_labels(conn):
        return {}
    wanted = apsw.carray(tuple(keys))
    rows = conn.execute(
        "SELECT first, second, label FROM labels WHERE first IN carray(?) AND second IN carray(?)", (wanted, wanted)
    )
    return {(first, second): label for first, second, label in rows}


def apart_ids(conn: apsw.Connection) -> list[tuple[int, int]]:
    """(id, id) of every pair of indexed documents labelled "not a duplicate", the lower id first."""
    if not has_labels(conn):
        return []
    rows = conn.execute(
        "SELECT a.id, b.id FROM labels l JOIN documents a ON a.key = l.first JOIN documents b ON b.key = l.second "
        "WHERE l.label = 'not_duplicate'"
    )
    return [(min(x, y), max(x, y)) for x, y in rows]


def apart_keys(conn: apsw.Connection) -> dict[str, set[str]]:
    """key -> the keys it is labelled "not a duplicate" of (both ways; keys need not be indexed)."""
    if not has_labels(conn):
        return {}
    apart: dict[str, set[str]] = {}
    for first, second in conn.execute("SELECT first, second FROM labels WHERE label = 'not_duplicate'"):
        apart.setdefault(first, set()).add(second)
        apart.setdefault(second, set()).add(first)
    return apart


def keeper_keys(conn: apsw.Connection) -> set[str]:
    """The keys chosen to keep (those still in the index)."""
    if not has_labels(conn):
        return set()
    return {key for (key,) in conn.execute("SELECT key FROM keepers WHERE key IN (SELECT key FROM documents)")}


def keeper_ids(conn: apsw.Connection) -> list[int]:
    if not has_labels(conn):
        return []
    return [i for (i,) in conn.execute("SELECT d.id FROM keepers k JOIN documents d ON d.key = k.key ORDER BY d.id")]


def label_problems(conn: apsw.Connection) -> tuple[list[str], str]:
    """(problems, what is fine) of the labels tables, for simq integrity: values the schema's CHECKs allow
    only (they can be switched off: PRAGMA ignore_check_constraints), and how many rows name keys that
    are gone (ignored, not a fault)."""
    problems = []
    bad = conn.execute(
        "SELECT count(*) FROM labels WHERE label NOT IN ('duplicate', 'not_duplicate', 'unsure') "
        "OR NOT first < second OR typeof(first) != 'text' OR typeof(second) != 'text'"
    ).get
    if bad:
        problems.append(f"{bad:,} labels break the table's rules (a label other than {', '.join(LABELS)}, or keys "
                        "out of order); remove them with simq sql --write")
    labels = conn.execute("SELECT count(*) FROM labels").get
    keepers = conn.execute("SELECT count(*) FROM keepers").get
    gone = conn.execute(
        "SELECT count(*) FROM labels WHERE first NOT IN (SELECT key FROM documents) "
        "OR second NOT IN (SELECT key FROM documents)"
    ).get
    gone_keepers = conn.execute("SELECT count(*) FROM keepers WHERE key NOT IN (SELECT key FROM documents)").get
    fine = f"{labels:,} labels, {keepers:,} keepers"
    if gone or gone_keepers:
        fine += f" ({gone:,} labels and {gone_keepers:,} keepers name documents no longer indexed: ignored)"
    return problems, fine
