"""The inputs of the commands that read texts (add, dedup): one Reader over files, folders, JSONL and
stdin, and what it skipped, told on stderr.
"""

from __future__ import annotations

import os
from typing import Optional

from ..pipeline.sources import Reader
from .reports import counted, warn


def input_reader(jsonl: Optional[bool], text_field: str, id_field: str, encoding: str, errors: str, **more) -> Reader:
    """A Reader for --jsonl (every input), --no-jsonl (stdin is one text) or neither (by suffix, and
    stdin by its first line)."""
    return Reader(
        jsonl=bool(jsonl), sniff_stdin=jsonl is None, text_field=text_field, id_field=id_field,
        encoding=encoding, errors=errors, **more,
    )


def print_reader_notes(reader: Reader) -> None:
    """What the reader decided for the user: stdin's format and key, records keyed by line number."""
    for note in reader.notes:
        warn("note", note)
    if reader.keyed_by_line:
        warn(
            "warning",
            f"{counted(reader.keyed_by_line, 'JSONL record')} had no {reader.id_field!r} field: keyed by file and "
            f"line (first: {reader.first_keyed_by_line}); name the id with --id-field, or skip such records with "
            "--require-id",
        )


def size_of(path: str) -> int:
    """A regular file's size, for the progress bar; 0 for stdin, pipes and what cannot be read."""
    try:
        return os.path.getsize(path) if path != "-" and os.path.isfile(path) else 0
    except OSError:
        return 0

