"""Documents from the command line's inputs: files, folders, globs, stdin and JSONL.

Paths that do not exist are an error before anything is read. Files that cannot be read as text
(binary, undecodable, unreadable) and malformed JSONL lines are skipped with a reason, and the rest
goes on; Reader.skipped lists them.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from .errors import InvalidInput
from .index import Document

BINARY_SNIFF_BYTES = 8192
JSONL_SUFFIXES = (".jsonl", ".ndjson")
STDIN = "-"


@dataclass(frozen=True)
class Skipped:
    where: str  # a path, or path:line for JSONL
    reason: str
    named: bool  # the user named this input (or it is a JSONL line), rather than a folder walk finding it


@dataclass
class Reader:
    """Turns inputs into Documents. Keys are paths as given (normalized), or JSONL ids."""

    jsonl: bool = False
    text_field: str = "text"
    id_field: str = "id"
    encoding: str = "utf-8"
    errors: str = "strict"
    skipped: list[Skipped] = field(default_factory=list)

    def __post_init__(self) -> None:
        try:
            "".encode(self.encoding)
            b"".decode(self.encoding, self.errors)
        except LookupError as exc:
            raise InvalidInput(str(exc)) from None

    def expand(self, inputs: list[str]) -> list[tuple[str, bool]]:
        """(path, named) for every input; raises for a missing path or a glob that matches nothing."""
        out: list[tuple[str, bool]] = []
        for given in inputs:
            if given == STDIN:
                out.append((STDIN, True))
            elif os.path.isdir(given):
                out.extend((path, False) for path in _walk(given))
            elif os.path.lexists(given):
                out.append((os.path.normpath(given), True))
            elif glob.has_magic(given):
                matches = sorted(glob.glob(given, recursive=True))
                if not matches:
                    raise InvalidInput(f"no files match {given}")
                out.extend(self.expand(matches))
            else:
                raise InvalidInput(f"no such file or directory: {given}")
        return out

    def documents(self, paths: list[tuple[str, bool]]) -> Iterator[Document]:
        for path, named in paths:
            if self.jsonl or path.endswith(JSONL_SUFFIXES):
                yield from self._jsonl(path)
            else:
                text = self._read(path, named)
                if text is not None:
                    yield Document("<stdin>" if path == STDIN else path, text)

    def entries(self, paths: list[tuple[str, bool]]) -> Iterator[tuple[Document, bytes | None]]:
        """Like documents(), with the JSONL line each came from (None for a text file), so that a
        filter can pass records through byte for byte."""
        for path, named in paths:
            if self.jsonl or path.endswith(JSONL_SUFFIXES):
                for number, raw in self._lines(path):
                    if raw.strip():
                        document = self._record(raw, f"{path}:{number}")
                        if document is not None:
                            yield document, raw
            else:
                for document in self.documents([(path, named)]):
                    yield document, None

    def _lines(self, path: str) -> Iterator[tuple[int, bytes]]:
        if path == STDIN:
            yield from enumerate(sys.stdin.buffer, 1)
            return
        try:
            handle = open(path, "rb")
        except OSError as exc:
            self._skip(path, exc.strerror or str(exc), True)
            return
        with handle:
            yield from enumerate(handle, 1)

    def _raw(self, path: str) -> bytes:
        if path == STDIN:
            return sys.stdin.buffer.read()
        with open(path, "rb") as handle:
            return handle.read()

    def _read(self, path: str, named: bool) -> str | None:
        try:
            raw = self._raw(path)
        except OSError as exc:
            return self._skip(path, exc.strerror or str(exc), named)
        if b"\x00" in raw[:BINARY_SNIFF_BYTES]:
            return self._skip(path, "binary file (NUL bytes)", named)
        try:
            return raw.decode(self.encoding, self.errors)
        except UnicodeDecodeError as exc:
            return self._skip(
                path,
                f"not {self.encoding} (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                "try --encoding or --errors replace",
                named,
            )

    def _jsonl(self, path: str) -> Iterator[Document]:
        """One document per line, streamed: memory does not grow with the file."""
        if path == STDIN:
            yield from self._records(sys.stdin.buffer, path)
            return
        try:
            handle = open(path, "rb")
        except OSError as exc:
            self._skip(path, exc.strerror or str(exc), True)
            return
        with handle:
            yield from self._records(handle, path)

    def _records(self, lines: Iterator[bytes], path: str) -> Iterator[Document]:
        for number, raw in enumerate(lines, 1):
            if raw.strip():
                document = self._record(raw, f"{path}:{number}")
                if document is not None:
                    yield document

    def _record(self, raw: bytes, where: str) -> Document | None:
        try:
            record = json.loads(raw.decode(self.encoding, self.errors))
        except UnicodeDecodeError:
            return self._skip(where, f"not {self.encoding}; try --encoding or --errors replace", True)
        except json.JSONDecodeError as exc:
            return self._skip(where, f"not JSON ({exc.msg})", True)
        if not isinstance(record, dict):
            return self._skip(where, "not a JSON object", True)
        body = record.get(self.text_field)
        if not isinstance(body, str):
            return self._skip(where, f"no text field {self.text_field!r}", True)
        key = record.get(self.id_field, where)
        if not isinstance(key, (str, int)) or isinstance(key, bool):
            return self._skip(where, f"id field {self.id_field!r} is not a string or an integer", True)
        return Document(str(key), body)

    def _skip(self, where: str, reason: str, named: bool) -> None:
        self.skipped.append(Skipped(where, reason, named))
        return None


def _walk(folder: str) -> Iterator[str]:
    """Files below a folder, sorted, leaving out hidden files and folders (.git and the like)."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith("."):
                yield os.path.normpath(os.path.join(root, name))
