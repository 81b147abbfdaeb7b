"""Documents from the command line's inputs: files, folders, globs, stdin and JSONL.

Paths that do not exist are an error before anything is read. Files that cannot be read as text
(binary, undecodable, unreadable) and malformed JSONL lines are skipped with a reason, and the rest
goes on; Reader.skipped lists them.
"""

from __future__ import annotations

import codecs
import glob
import hashlib
import json
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import apsw

from .errors import InvalidInput
from .index import Document, FingerprintedDocument, SimhashIndex
from .settings import FingerprintSettings
from .streaming import simhash_pieces

BINARY_SNIFF_BYTES = 8192
JSONL_SUFFIXES = (".jsonl", ".ndjson")
STDIN = "-"
ERROR_POLICIES = ("strict", "replace", "ignore", "backslashreplace")
STREAM_OVER_BYTES = 32 << 20  # larger files are read and fingerprinted piece by piece, never whole
READ_BYTES = 1 << 20
MAX_RECORD_BYTES = 128 << 20  # a longer JSONL line is skipped, not read into memory
KEPT_SKIPS = 1000  # the first skips are kept with their reasons; later ones are only counted


@dataclass(frozen=True)
class Skipped:
    where: str  # a path, or path:line for JSONL
    reason: str
    named: bool  # the user named this input (or it is a JSONL line), rather than a folder walk finding it


@dataclass(frozen=True)
class Duplicate:
    where: str  # path:line of the later record, which replaces the earlier one
    key: str
    first: str  # path:line where the key was met first


@dataclass
class Reader:
    """Turns inputs into Documents. Keys are paths as given (normalized), or JSONL ids.

    Memory stays bounded: files over stream_over bytes are fingerprinted piece by piece (count
    weights) instead of read whole, JSONL is read line by line, and the JSONL ids seen (to report a
    key met twice) are kept in a temporary SQLite file, not in a Python set.
    """

    jsonl: bool = False
    text_field: str = "text"
    id_field: str = "id"
    encoding: str = "utf-8"
    errors: str = "strict"
    stream_over: int = STREAM_OVER_BYTES
    skipped: list[Skipped] = field(default_factory=list)  # the first KEPT_SKIPS of them
    skip_count: int = 0
    failed: bool = False  # a named input (or a JSONL line) was skipped: the run should exit 1
    duplicates: list[Duplicate] = field(default_factory=list)  # the first KEPT_SKIPS of them
    duplicate_count: int = 0

    def __post_init__(self) -> None:
        try:
            "".encode(self.encoding)
            b"".decode(self.encoding, self.errors)
        except LookupError as exc:
            raise InvalidInput(str(exc)) from None
        if self.errors not in ERROR_POLICIES:
            raise InvalidInput(f"errors must be one of {', '.join(ERROR_POLICIES)}, not {self.errors!r}")
        self._seen: apsw.Connection | None = None

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
        # A file given twice (by name and inside a folder, say) is read once.
        merged: dict[str, bool] = {}
        for path, named in out:
            merged[path] = merged.get(path, False) or named
        return list(merged.items())

    def documents(
        self, paths: list[tuple[str, bool]], settings: FingerprintSettings | None = None, store_text: bool = False
    ) -> Iterator[Document | FingerprintedDocument]:
        """The documents of the expanded inputs, in order, read lazily.

        settings: the index's, needed to fingerprint a file over stream_over bytes piece by piece
        (without them, or with store_text, such a file is skipped with the reason).
        """
        for path, named in paths:
            if path != STDIN and _undecodable_name(path):
                self._skip(path.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
                           "the file name is not valid UTF-8 (rename it)", named)
            elif self.jsonl or path.endswith(JSONL_SUFFIXES):
                yield from (document for document, _ in self._jsonl(path))
            else:
                document = self._file(path, named, settings, store_text)
                if document is not None:
                    yield document

    def entries(self, paths: list[tuple[str, bool]]) -> Iterator[tuple[Document, bytes | None]]:
        """Like documents(), with the JSONL line each came from (None for a text file), so that a
        filter can pass records through byte for byte."""
        for path, named in paths:
            if (self.jsonl or path.endswith(JSONL_SUFFIXES)) and (path == STDIN or not _undecodable_name(path)):
                yield from self._jsonl(path)
            else:
                for document in self.documents([(path, named)]):
                    yield document, None

    def _file(
        self, path: str, named: bool, settings: FingerprintSettings | None, store_text: bool
    ) -> Document | FingerprintedDocument | None:
        key = "<stdin>" if path == STDIN else path
        if path == STDIN:
            return self._decoded(key, sys.stdin.buffer.read(), named)
        if os.path.islink(path) and not os.path.exists(path):
            return self._skip(path, "broken symbolic link", named)
        try:
            info = os.stat(path)
            if not stat.S_ISREG(info.st_mode):
                return self._skip(path, "not a regular file (a device, socket or pipe)", named)
            with open(path, "rb") as handle:
                if info.st_size <= self.stream_over:
                    return self._decoded(key, handle.read(), named)
                return self._streamed(key, handle, info.st_size, named, settings, store_text)
        except OSError as exc:
            return self._skip(path, exc.strerror or str(exc), named)

    def _binary(self, head: bytes) -> bool:
        """NUL bytes near the start mean binary, except in UTF-16/32, where they are part of the text."""
        if not codecs.lookup(self.encoding).name.startswith(("utf-16", "utf-32")):
            return b"\x00" in head
        return "\x00" in head.decode(self.encoding, "replace")

    def _decoded(self, key: str, raw: bytes, named: bool) -> Document | None:
        if self._binary(raw[:BINARY_SNIFF_BYTES]):
            return self._skip(key, "binary file (NUL bytes)", named)
        try:
            return Document(key, raw.decode(self.encoding, self.errors))
        except UnicodeDecodeError as exc:
            return self._skip(key, self._not_decodable(raw[exc.start], exc.start), named)

    def _not_decodable(self, byte: int, offset: int) -> str:
        return f"not {self.encoding} (byte 0x{byte:02x} at offset {offset}); try --encoding or --errors replace"

    def _streamed(
        self, key: str, handle, size: int, named: bool, settings: FingerprintSettings | None, store_text: bool
    ) -> FingerprintedDocument | None:
        """A large file, read in 1 MiB chunks: fingerprint, content hash and length in one pass."""
        mib = _size(size)
        if settings is None or store_text:
            why = "texts are stored in this index" if store_text else "no index settings to fingerprint it with"
            return self._skip(key, f"too large to read whole ({mib}) and {why}", named)
        head = handle.read(BINARY_SNIFF_BYTES)
        if self._binary(head):
            return self._skip(key, "binary file (NUL bytes)", named)
        decoder = codecs.getincrementaldecoder(self.encoding)(self.errors)
        digest = hashlib.blake2b(digest_size=16)
        length = 0
        offset = 0

        def chunks() -> Iterator[str]:
            nonlocal length, offset
            block = head
            while block:
                try:
                    text = decoder.decode(block)
                except UnicodeDecodeError as exc:
                    raise _DecodeFailed(block[exc.start], offset + exc.start) from None
                offset += len(block)
                digest.update(text.encode("utf-8", "surrogatepass"))
                length += len(text)
                yield text
                block = handle.read(READ_BYTES)
            tail = decoder.decode(b"", final=True)
            digest.update(tail.encode("utf-8", "surrogatepass"))
            length += len(tail)
            yield tail

        try:
            fingerprint = simhash_pieces(chunks(), settings)
        except _DecodeFailed as exc:
            return self._skip(key, self._not_decodable(*exc.args), named)
        except InvalidInput as exc:
            return self._skip(key, str(exc), named)
        return FingerprintedDocument(key, fingerprint, length, digest.digest())

    def _jsonl(self, path: str) -> Iterator[tuple[Document, bytes]]:
        """One document per line with its raw line, streamed: memory does not grow with the file."""
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

    def _records(self, handle, path: str) -> Iterator[tuple[Document, bytes]]:
        number = 0
        while True:
            raw = handle.readline(MAX_RECORD_BYTES + 1)
            if not raw:
                return
            number += 1
            where = f"{path}:{number}"
            if len(raw) > MAX_RECORD_BYTES and not raw.endswith(b"\n"):
                while (rest := handle.readline(READ_BYTES)) and not rest.endswith(b"\n"):
                    pass  # skip the rest of the line without holding it
                self._skip(where, f"line longer than {MAX_RECORD_BYTES >> 20} MiB", True)
                continue
            if raw.strip():
                document = self._record(raw, where)
                if document is not None:
                    self._note_key(document.key, where)
                    yield document, raw

    def _record(self, raw: bytes, where: str) -> Document | None:
        try:
            record = json.loads(raw.decode(self.encoding, self.errors))
        except UnicodeDecodeError:
            return self._skip(where, f"not {self.encoding}; try --encoding or --errors replace", True)
        except json.JSONDecodeError as exc:
            return self._skip(where, f"not JSON ({exc.msg})", True)
        except RecursionError:
            return self._skip(where, "JSON nested too deeply", True)
        if not isinstance(record, dict):
            return self._skip(where, "not a JSON object", True)
        body = record.get(self.text_field)
        if not isinstance(body, str):
            return self._skip(where, f"no text field {self.text_field!r}", True)
        key = record.get(self.id_field, where)
        if not isinstance(key, (str, int)) or isinstance(key, bool):
            return self._skip(where, f"id field {self.id_field!r} is not a string or an integer", True)
        key = str(key)
        if "\x00" in key:
            return self._skip(where, "the id contains a NUL character", True)
        if _has_lone_surrogate(key) or _has_lone_surrogate(body):
            return self._skip(where, "the JSON holds an unpaired surrogate escape (\\ud800-\\udfff)", True)
        return Document(key, body)

    def _note_key(self, key: str, where: str) -> None:
        """Report a JSONL id met twice in one run: the later record wins, as a changed file would."""
        if self._seen is None:
            self._seen = apsw.Connection("")  # a temporary file: memory does not grow with the ids
            self._seen.execute("CREATE TABLE seen (key TEXT PRIMARY KEY, place TEXT) WITHOUT ROWID")
        # One statement per key in the usual case (a new key); the lookup only for a key met before.
        self._seen.execute("INSERT INTO seen VALUES (?, ?) ON CONFLICT DO NOTHING", (key, where))
        if self._seen.changes():
            return
        first = self._seen.execute("SELECT place FROM seen WHERE key = ?", (key,)).get
        self.duplicate_count += 1
        if len(self.duplicates) < KEPT_SKIPS:
            self.duplicates.append(Duplicate(where, key, first))

    def _skip(self, where: str, reason: str, named: bool) -> None:
        self.skip_count += 1
        self.failed = self.failed or named
        if len(self.skipped) < KEPT_SKIPS:
            self.skipped.append(Skipped(where, reason, named))
        return None


def _size(count: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if count >= 1 << shift:
            return f"{count / (1 << shift):,.1f} {unit}"
    return f"{count:,} bytes"


class _DecodeFailed(Exception):
    """A streamed file's bytes did not decode (args: the byte, its offset in the file)."""


def _undecodable_name(path: str) -> bool:
    try:
        path.encode("utf-8")
        return False
    except UnicodeEncodeError:  # os.fsdecode turned bytes that are not UTF-8 into lone surrogates
        return True


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def _walk(folder: str) -> Iterator[str]:
    """Files below a folder, sorted, leaving out hidden files and folders (.git and the like)."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith("."):
                yield os.path.normpath(os.path.join(root, name))


def stale_keys(index: SimhashIndex, inputs: Iterable[str]) -> list[str]:
    """Keys that name a file under one of these folders or globs which no longer exists (for --prune).

    Keys are paths as they were typed (normalized), so only keys under a folder given here, or
    matching a glob given here, are considered, and a key is stale when no file is at that path
    now (relative paths are taken from the current folder, as when they were added). Files named
    one by one, JSONL and stdin are never pruned: their keys are not paths under an input. Caution:
    with the folder "." every relative key is under it, JSONL ids included.
    """
    stale: set[str] = set()
    for given in inputs:
        if given == STDIN or given.endswith(JSONL_SUFFIXES):
            continue
        if os.path.isdir(given):
            folder = os.path.normpath(given)
            prefix = "" if folder == "." else folder.rstrip(os.sep) + os.sep
            candidates = (key for key in index.keys(prefix) if folder != "." or not os.path.isabs(key))
        elif glob.has_magic(given):
            pattern = os.path.normpath(given)
            matcher = _glob_regex(pattern)
            first_magic = min((i for i, c in enumerate(pattern) if c in "*?["), default=len(pattern))
            folder = pattern[: pattern.rfind(os.sep, 0, first_magic) + 1]  # the literal folders before it
            candidates = (key for key in index.keys(folder) if matcher.fullmatch(key))
        else:
            continue
        stale.update(key for key in candidates if not os.path.lexists(key))
    return sorted(stale)


def _glob_regex(pattern: str) -> re.Pattern:
    """A glob as glob.glob(recursive=True) reads it: * and ? stay inside one folder, ** crosses them."""
    out, i, sep = [], 0, re.escape(os.sep)
    while i < len(pattern):
        if pattern.startswith("**" + os.sep, i):
            out.append(f"(?:.*{sep})?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append(f"[^{sep}]*")
            i += 1
        elif pattern[i] == "?":
            out.append(f"[^{sep}]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))
