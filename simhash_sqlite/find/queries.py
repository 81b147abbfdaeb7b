"""Batch queries for near_many(): the Query type, and JSONL lines or a list of file paths -> Query objects, streamed.

JSONL: one object per line with exactly one of "text", "hash" (16 hex digits) or "key" (a stored
document), and optionally "id" (any JSON value, echoed in the answer). A path list: one file path
per line; the query is the file's text and its id the path. A line that cannot be used becomes a
FailedQuery in its place, so answers stay in step with the input lines.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..core.fingerprint import from_hex
from ..errors import InvalidArgument, InvalidInput
from ..store import texts


@dataclass(frozen=True)
class Query:
    """One query of a batch: exactly one of text, fingerprint (unsigned) or key; `id` is the caller's
    label, carried through to the answer."""

    text: str | None = None
    fingerprint: int | None = None
    key: str | None = None
    id: object = None


@dataclass(frozen=True)
class FailedQuery:
    """A batch query that could not be searched, and why."""

    query: Query
    message: str


FORMATS = ("jsonl", "paths")
_FIELDS = ("text", "hash", "key")


def guess_format(name: str) -> str:
    """"jsonl" for *.jsonl / *.ndjson and stdin ("-"), else "paths"."""
    return "jsonl" if name == "-" or name.lower().endswith((".jsonl", ".ndjson")) else "paths"


def parse_queries(
    lines: Iterable[str | bytes], fmt: str, *, encoding: str = "utf-8"
) -> Iterator[Query | FailedQuery]:
    """One Query (or FailedQuery) per non-blank line, in order. Lines may be bytes (a file or stdin read
    in binary): each is decoded as UTF-8 on its own, so one that is not answers with its error and the
    lines after it are still read."""
    if fmt not in FORMATS:
        raise InvalidArgument(f"batch format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    parse = _jsonl_query if fmt == "jsonl" else lambda line, number: _path_query(line, number, encoding)
    for number, line in enumerate(lines, start=1):
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                if line.strip():
                    yield FailedQuery(Query(id=number), f"line {number}: not UTF-8 (byte 0x{line[exc.start]:02x} at "
                                     f"offset {exc.start})")
                continue
        line = line.strip()
        if line:
            yield parse(line, number)


def _jsonl_query(line: str, number: int) -> Query | FailedQuery:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return FailedQuery(Query(id=number), f"line {number}: not JSON ({exc.msg})")
    if not isinstance(obj, dict):
        return FailedQuery(Query(id=number), f"line {number}: a query is a JSON object")
    label = obj.get("id", number)
    given = [name for name in _FIELDS if obj.get(name) is not None]
    if len(given) != 1:
        return FailedQuery(Query(id=label), f"line {number}: give exactly one of {', '.join(_FIELDS)}")
    value = obj[given[0]]
    if not isinstance(value, str):
        return FailedQuery(Query(id=label), f"line {number}: {given[0]} must be a string")
    if given[0] == "text":
        return Query(text=value, id=label)
    if given[0] == "key":
        return Query(key=value, id=label)
    try:
        return Query(fingerprint=from_hex(value, whole=True), id=label)
    except InvalidInput as exc:
        return FailedQuery(Query(id=label), f"line {number}: {exc}")


def _path_query(line: str, number: int, encoding: str) -> Query | FailedQuery:
    try:
        if os.path.getsize(line) > texts.READ_WHOLE_BYTES:  # not read whole into a batch
            return FailedQuery(Query(id=line), f"line {number}: {line} is over {texts.READ_WHOLE_BYTES >> 20} "
                              f"MiB; search for it on its own: simq near --file {line}")
        return Query(text=Path(line).read_text(encoding=encoding), id=line)
    except UnicodeDecodeError:
        return FailedQuery(Query(id=line), f"line {number}: {line} is not {encoding} text")
    except OSError as exc:
        return FailedQuery(Query(id=line), f"line {number}: {line}: {exc.strerror or exc}")
