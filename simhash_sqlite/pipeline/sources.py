"""Documents from the command line's inputs: files, folders, globs, stdin and JSONL.

Paths that do not exist are an error before anything is read. Files that cannot be read as text
(binary, undecodable, unreadable) and malformed JSONL lines are skipped with a reason, and the rest
goes on; Reader.skipped lists them, and Reader.notes says what was decided for the user (stdin read
as JSONL, the key stdin's text got, records keyed by line number).

Keys. A file's key is its path relative to the index's key_root (the folder it was made in; Reader's
key_root, else the current folder) when the file is inside it (a/b.txt, whether given as a/b.txt,
./a/b.txt or /abs/root/a/b.txt), else its absolute path (/data/x.txt, also when given as ../x.txt);
symbolic links are not resolved. A JSONL record's key is its id field (the first record of an id that
repeats is kept; later ones are reported and skipped), or path:line when it has none (reported;
refused with require_id). Text on stdin is keyed by --key NAME, else by its content: <stdin:16 hex
digits>, so a different text never replaces an earlier one.
"""

from __future__ import annotations

import codecs
import dataclasses
import glob
import hashlib
import itertools
import json
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import cast

import apsw
import numpy as np

from ..core.pieces import simhash_and_sketch_pieces
from ..core.pool import map_in_order
from ..core.settings import FingerprintSettings
from ..core.sketch import DEFAULT_SCHEME, SketchScheme
from ..errors import InvalidArgument, InvalidInput
from ..index import SimhashIndex
from ..store import texts
from ..store.documents import Document, FingerprintedBatch, FingerprintedDocument, LineAt, fingerprinted
from ..store.texts import SourceFile, content_hash
from .jsonl import ChunkRecords, LineChunk, RecordColumns, RecordRules, native_path, parse_record, read_line_chunk

BINARY_SNIFF_BYTES = 8192
JSONL_SUFFIXES = texts.JSONL_SUFFIXES
STDIN = "-"
STDIN_NAME = "<stdin>"  # stdin in messages and in path:line keys
SNIFF_BYTES = 1 << 20  # stdin's first line, up to this much, decides whether it is JSONL
ERROR_POLICIES = ("strict", "replace", "ignore", "backslashreplace")
READ_BYTES = 1 << 20
MAX_RECORD_BYTES = 128 << 20  # a longer JSONL line is skipped, not read into memory
KEPT_SKIPS = 1000  # the first skips are kept with their reasons; later ones are only counted
CHUNK_BYTES = 1 << 20  # JSONL is read, parsed and fingerprinted in chunks of about this many bytes (smaller: more
# vectorized passes over partly filled arrays, 5-10% more CPU at 512 KiB)
# Processes at most for dedup (its chunks and FingerprintJob): its own loop (search, decide, write) is serial
# and bounds its speed. bench/add_scaling.py on a 16-core Xeon, an 800 MB crawl: dedup 79, 85 and 82 MB/s on 4,
# 8 and 16 processes, at 0.040, 0.044 and 0.052 CPU-s a MB (one run each); again 79 and 72 MB/s on 8 and 16, at
# 0.046 and 0.054 (medians of two). add is left on every core: 8 against 16 went one way, then the other.
DEDUP_PROCESSES = 8
# JSONL read in Python (no C core) takes one more process per this many bytes of input (processes_for).
PROCESS_BYTES = 128 << 20
LOCAL_CHUNK_BYTES = 16 << 20  # a chunk this large (a very long line) is not copied to a worker
PLACE_BITS = 40  # a place number's bits for the line (Reader._places): 10^12 lines an input
# Bits of the set that says which ids cannot have been seen (Reader._note_keys): 4 MiB, whatever the input.
# An id whose bit is clear is new without a look in the table; at 10M ids a quarter still need the look.
SEEN_BITS = 1 << 25


@dataclass(frozen=True)
class Skipped:
    where: str  # a path, or path:line for JSONL
    reason: str
    named: bool  # the user named this input (or it is a JSONL line), rather than a folder walk finding it


@dataclass(frozen=True)
class Duplicate:
    where: str  # path:line of the later record, skipped (or passed on, with keep_repeats)
    key: str
    first: str  # path:line where the key was met first


class LineBatch:
    """The records of a JSONL chunk read whole by the C path, as columns in input order (Reader.entry_batches):
    keys, fingerprints and sketches, and the chunk's bytes with each record's line in it. What dedup reads without
    an object per record; entries() makes the (FingerprintedDocument, line) pairs Reader.entries gives instead."""

    __slots__ = ("keys", "data", "columns")

    def __init__(self, keys: list[str], data: bytes, columns: RecordColumns) -> None:
        self.keys, self.data, self.columns = keys, data, columns

    def __len__(self) -> int:
        return len(self.keys)

    def lines(self, at: list[int] | None = None) -> list[bytes]:
        """Each record's line (with its newline, where it has one); at: only these records' (by number), in order."""
        data, c = self.data, self.columns
        starts, ends = (c.starts, c.ends) if at is None else (c.starts[at], c.ends[at])
        return [data[a:b] for a, b in zip(starts.tolist(), ends.tolist())]

    def fingerprints(self) -> list[int | None]:
        c = self.columns
        return [fp if has else None for fp, has in zip(c.fingerprints.tolist(), c.has_fingerprint.tolist())]

    def sketches(self) -> list[bytes | None]:
        c = self.columns
        if c.sketches is None:
            return [None] * len(self.keys)
        return [row.tobytes() if has else None for row, has in zip(c.sketches, c.has_sketch.tolist())]

    def entries(self) -> list[tuple[FingerprintedDocument, bytes]]:
        """What Reader.entries gives for these records: FingerprintedDocuments (no content hash, text or short
        text: a filter's) with their lines."""
        documents = map(fingerprinted, self.keys, self.fingerprints(), self.columns.lengths.tolist(),
                        [b""] * len(self.keys), self.sketches(), [None] * len(self.keys), [None] * len(self.keys))
        return list(zip(documents, self.lines()))

    def take(self, chosen: np.ndarray) -> LineBatch:
        """The records at these places (ascending), as a batch of their own."""
        c = self.columns
        return LineBatch([self.keys[i] for i in chosen.tolist()], self.data, RecordColumns(
            c.starts[chosen], c.ends[chosen], c.lengths[chosen], c.fingerprints[chosen], c.has_fingerprint[chosen],
            None if c.sketches is None else c.sketches[chosen], c.has_sketch[chosen]))


@dataclass
class Reader:
    """Turns inputs into Documents. Keys: see the module's docstring (path_key, JSONL ids, stdin).

    Memory stays bounded: files and stdin over stream_over bytes, and JSONL texts over stream_over
    characters, are fingerprinted piece by piece instead of read or kept whole; JSONL is read in chunks
    of whole lines (CHUNK_BYTES, a few per process in flight), and the JSONL ids seen (to report a key
    met twice) are kept in a temporary SQLite file, not in a Python set.

    jsonl: read every input as JSONL; otherwise *.jsonl and *.ndjson files are, and stdin is when its
    first line is a JSON object (see _stdin_is_jsonl; unless sniff_stdin is False).
    keep_repeats: yield every record of a repeated id (a filter passes them on: repeated ids are then not looked
    for, and duplicates stays empty); add keeps the first.
    """

    jsonl: bool = False
    sniff_stdin: bool = True
    stdin_key: str | None = None
    key_root: str | None = None  # files are keyed relative to this folder (path_key); None: the current one
    require_id: bool = False
    keep_repeats: bool = False
    text_field: str = "text"
    id_field: str = "id"
    encoding: str = "utf-8"
    errors: str = "strict"
    # read when made (not at import), so that one setting moves the limit everywhere
    stream_over: int = field(default_factory=lambda: texts.READ_WHOLE_BYTES)
    sketch_scheme: SketchScheme = DEFAULT_SCHEME  # of streamed texts' sketches: the index's (documents() sets it)
    skipped: list[Skipped] = field(default_factory=list)  # the first KEPT_SKIPS of them
    skip_count: int = 0
    failed: bool = False  # a named input (or a JSONL line) was skipped: the run should exit 1
    duplicates: list[Duplicate] = field(default_factory=list)  # the first KEPT_SKIPS of them
    duplicate_count: int = 0
    notes: list[str] = field(default_factory=list)  # what was decided for the user, to be shown
    keyed_by_line: int = 0  # JSONL records without an id, keyed path:line
    first_keyed_by_line: str | None = None
    bytes_read: int = 0  # of the inputs so far, for a progress bar (files whole, JSONL line by line)

    def __post_init__(self) -> None:
        try:
            "".encode(self.encoding)
            b"".decode(self.encoding, self.errors)
        except LookupError as exc:
            raise InvalidArgument(str(exc)) from None
        if self.errors not in ERROR_POLICIES:
            raise InvalidArgument(f"errors must be one of {', '.join(ERROR_POLICIES)}, not {self.errors!r}")
        self._seen: apsw.Connection | None = None
        self._place_paths: list[str] = []  # the inputs of the places in _seen (_places)
        self._place_numbers: dict[str, int] = {}
        self._seen_bits: np.ndarray | None = None  # a bit set a hash of each id seen (_note_keys)
        if self.stdin_key is not None and (not self.stdin_key or "\x00" in self.stdin_key):
            raise InvalidInput("the key for stdin must be a non-empty text without NUL characters")

    def expand(self, inputs: list[str]) -> list[tuple[str, bool]]:
        """(path, named) for every input; raises for a missing path or a glob that matches nothing."""
        out: list[tuple[str, bool]] = []
        for given in inputs:
            if given == STDIN:
                out.append((STDIN, True))
            elif os.path.isdir(given):
                out.extend((path_key(path), False) for path in _walk(given))
            elif os.path.lexists(given):
                out.append((path_key(given), True))
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
        self, paths: list[tuple[str, bool]], settings: FingerprintSettings | None = None, store_text: bool = False,
        scheme: SketchScheme | None = None,
    ) -> Iterator[Document | FingerprintedDocument]:
        """The documents of the expanded inputs, in order, read lazily.

        settings: the index's, needed to fingerprint a file over stream_over bytes piece by piece
        (without them, or with store_text, such a file is skipped with the reason). With them, JSONL
        records come as FingerprintedDocuments, fingerprinted on every core (their texts kept only
        with store_text); text files stay Documents. scheme: the index's sketch scheme, for every
        sketch made here (None: the default).
        """
        self.sketch_scheme = DEFAULT_SCHEME if scheme is None else scheme
        for jsonl, group in itertools.groupby(paths, lambda given: self._jsonl_file(given[0])):
            if jsonl:  # consecutive JSONL files: one stream of chunks, so the pool never runs dry between them
                files = [path for path, _ in group]
                yield from (document for document, _ in self._jsonl_files(files, settings, store_text, lines=False))
                continue
            for path, named in group:
                if path != STDIN and _undecodable_name(path):
                    self._skip(path.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
                               "the file name is not valid UTF-8 (rename it)", named)
                elif path == STDIN:
                    stream = self._stdin()
                    if self._stdin_is_jsonl(stream):
                        records = self._records([(STDIN_NAME, stream)], settings, store_text, lines=False)
                        yield from (document for document, _ in records)
                    elif (document := self._stdin_text(stream, settings, store_text)) is not None:
                        yield document
                else:
                    document = self._file(path, named, settings, store_text)
                    if document is not None:
                        yield document

    def packed_documents(
        self, paths: list[tuple[str, bool]], settings: FingerprintSettings, store_text: bool = False,
        scheme: SketchScheme | None = None,
    ) -> Iterator[Document | FingerprintedDocument | FingerprintedBatch]:
        """documents(), but the records of a JSONL chunk come as one FingerprintedBatch where they all have ids
        and none was skipped: what add() writes without an object per document."""
        self._packed = True
        try:
            yield from self.documents(paths, settings, store_text, scheme)
        finally:
            self._packed = False

    def entries(
        self, paths: list[tuple[str, bool]], settings: FingerprintSettings | None = None, sketches: bool = True
    ) -> Iterator[tuple[Document | FingerprintedDocument, bytes | None]]:
        """Like documents(), with the JSONL line each came from (None for a text file), so that a
        filter can pass records through byte for byte. settings: JSONL records come fingerprinted
        (and sketched, with sketches) on every core, as FingerprintedDocuments without texts or
        content hashes; text files stay Documents."""
        # A text file or stdin over stream_over is refused here with the real reason: a filter writes each
        # kept text into its output whole (a JSONL record passes through as its line, whatever its size).
        self._whole_only = (
            "a filter writes each kept text whole into its JSONL output; give it as one JSONL record "
            '({"id": ..., "text": ...}), which is read in pieces, or index it with simq add'
        )
        for jsonl, group in itertools.groupby(paths, lambda given: self._jsonl_file(given[0])):
            if jsonl:
                yield from self._jsonl_files([path for path, _ in group], settings, for_index=False, sketches=sketches)
                continue
            for path, named in group:
                if path == STDIN:
                    stream = self._stdin()
                    if self._stdin_is_jsonl(stream):
                        yield from self._records([(STDIN_NAME, stream)], settings, for_index=False, sketches=sketches)
                    elif (document := self._stdin_text(stream, None, False)) is not None:
                        yield document, None
                else:
                    for document in self.documents([(path, named)]):
                        yield document, None

    def entry_batches(
        self, paths: list[tuple[str, bool]], settings: FingerprintSettings, sketches: bool = True
    ) -> Iterator[LineBatch | tuple[Document | FingerprintedDocument, bytes | None]]:
        """entries(), but the records of a JSONL chunk the C path read whole come as one LineBatch (keep_repeats:
        every record of a repeated id, as a filter wants): what dedup reads without an object per record."""
        if not self.keep_repeats:
            raise InvalidArgument("entry_batches gives every record: a Reader with keep_repeats")
        self._line_batches = True
        try:
            for entry in self.entries(paths, settings, sketches):
                yield entry[0] if type(entry[0]) is LineBatch else entry
        finally:
            self._line_batches = False

    def text_of_line(self, line: bytes) -> str | None:
        """The text of one of entries()'s JSONL lines, read as this reader reads them (None: a line it
        skips): dedup reads a kept record's text back from its line for the exact check."""
        return parse_record(line, self.line_rules())[2]

    def line_rules(self) -> RecordRules:
        """How text_of_line reads a line (dedup's exact check reads the kept lines' texts in C by them)."""
        return RecordRules(text_field=self.text_field, id_field=self.id_field, encoding=self.encoding,
                           errors=self.errors)

    def _jsonl_file(self, path: str) -> bool:
        return path != STDIN and (self.jsonl or path.endswith(JSONL_SUFFIXES)) and not _undecodable_name(path)

    def _stdin(self) -> _Rewound:
        return _Rewound(sys.stdin.buffer)

    def _stdin_is_jsonl(self, stream: _Rewound) -> bool:
        """--jsonl, or (unless told otherwise) a first line that is a JSON object: with the text field, or
        without it when the next line is a JSON object too, or there is none (JSONL whose first record
        lacks the field: its records are read, and those without the field skipped naming the fields they
        have). A JSON object followed by other text stays one text."""
        if self.jsonl:
            return True
        if not self.sniff_stdin:
            return False
        head = stream.peek_line(SNIFF_BYTES, lines=2)
        first, _, second = head.partition(b"\n")
        record = _json_object(first, self.encoding, self.errors)
        if record is None:
            return False
        if isinstance(record.get(self.text_field), str):
            why = f"its first line is a JSON object with a {self.text_field!r} field"
        elif not second.strip() or _json_object(second, self.encoding, self.errors) is not None:
            why = "its first lines are JSON objects"
        else:
            return False
        self.notes.append(f"stdin read as JSONL: {why} (--no-jsonl reads it as one text)")
        return True

    def _stdin_text(
        self, stream: _Rewound, settings: FingerprintSettings | None, store_text: bool
    ) -> Document | FingerprintedDocument | None:
        """stdin as one text, keyed by stdin_key or by its content (see the module's docstring)."""
        head = stream.read(self.stream_over + 1)
        document: Document | FingerprintedDocument | None
        if len(head) <= self.stream_over:
            self.bytes_read += len(head)
            document = self._decoded(self.stdin_key or STDIN_NAME, head, True)
        else:
            stream.push_back(head)
            before = stream.consumed
            key = self.stdin_key or STDIN_NAME  # without stdin_key, replaced below by one made from the content
            document = self._streamed(key, stream, None, True, settings, store_text, where=STDIN_NAME)
            self.bytes_read += stream.consumed - before
        if document is None or self.stdin_key is not None:
            return document
        digest = document.content_hash if isinstance(document, FingerprintedDocument) else content_hash(document.text)
        key = f"<stdin:{digest.hex()[:16]}>"
        self.notes.append(f"stdin added as {key}, a key made from its text (name it with --key NAME)")
        return dataclasses.replace(document, key=key)

    def _file(
        self, path: str, named: bool, settings: FingerprintSettings | None, store_text: bool
    ) -> Document | FingerprintedDocument | None:
        key = path if self.key_root is None else path_key(path, self.key_root)  # path: from the current folder
        if os.path.islink(path) and not os.path.exists(path):
            self._skip(path, "broken symbolic link", named)
            return None
        try:
            info = os.stat(path)
            self.bytes_read += info.st_size
            if not stat.S_ISREG(info.st_mode):
                self._skip(path, "not a regular file (a device, socket or pipe)", named)
                return None
            with open(path, "rb") as handle:
                if info.st_size <= self.stream_over:
                    return self._decoded(key, handle.read(), named)
                return self._streamed(key, handle, info.st_size, named, settings, store_text)
        except OSError as exc:
            self._skip(path, exc.strerror or str(exc), named)
            return None

    def _binary(self, head: bytes) -> bool:
        """NUL bytes near the start mean binary, except in UTF-16/32, where they are part of the text."""
        if not codecs.lookup(self.encoding).name.startswith(("utf-16", "utf-32")):
            return b"\x00" in head
        return "\x00" in head.decode(self.encoding, "replace")

    def _decoded(self, key: str, raw: bytes, named: bool) -> Document | None:
        if self._binary(raw[:BINARY_SNIFF_BYTES]):
            self._skip(key, "binary file (NUL bytes)", named)
            return None
        try:
            return Document(key, raw.decode(self.encoding, self.errors))
        except UnicodeDecodeError as exc:
            self._skip(key, self._not_decodable(raw[exc.start], exc.start), named)
            return None

    def _not_decodable(self, byte: int, offset: int) -> str:
        return f"not {self.encoding} (byte 0x{byte:02x} at offset {offset}); try --encoding or --errors replace"

    def _streamed(
        self, key: str, handle, size: int | None, named: bool, settings: FingerprintSettings | None,
        store_text: bool, where: str | None = None,
    ) -> FingerprintedDocument | None:
        """A large file (or stdin), read in 1 MiB chunks: fingerprint, content hash and length in one
        pass. where: how a skip names it (default: the key)."""
        where = where or key
        mib = size_text(size) if size is not None else f"over {size_text(self.stream_over)}"
        if settings is None or store_text:
            why = ("texts are stored in this index" if store_text
                   else getattr(self, "_whole_only", None) or "no index settings to fingerprint it with")
            self._skip(where, f"too large to read whole ({mib}) and {why}", named)
            return None
        head = handle.read(BINARY_SNIFF_BYTES)
        if self._binary(head):
            self._skip(where, "binary file (NUL bytes)", named)
            return None
        decoder = codecs.getincrementaldecoder(self.encoding)(self.errors)
        digest = hashlib.blake2b(digest_size=texts.DIGEST_BYTES)  # content_hash(), streamed
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
            fingerprint, sketch = simhash_and_sketch_pieces(chunks(), settings, scheme=self.sketch_scheme)
        except _DecodeFailed as exc:
            self._skip(where, self._not_decodable(*exc.args), named)
            return None
        except InvalidInput as exc:
            self._skip(where, str(exc), named)
            return None
        return FingerprintedDocument(key, fingerprint, length, digest.digest(), sketch)

    def _jsonl_files(
        self, paths: list[str], settings: FingerprintSettings | None = None, store_text: bool = False,
        for_index: bool = True, sketches: bool = True, lines: bool = True,
    ) -> Iterator[tuple[Document | FingerprintedDocument, bytes | None]]:
        """One document per line with its raw line, the files one stream: memory does not grow with them."""
        return self._records(_opened(paths), settings, store_text, for_index, sketches, lines, _files_bytes(paths))

    def _records(
        self, inputs: Iterable[tuple[str, object]], settings: FingerprintSettings | None = None,
        store_text: bool = False, for_index: bool = True, sketches: bool = True, lines: bool = True,
        size: int | None = None,
    ) -> Iterator[tuple[Document | FingerprintedDocument, bytes | None]]:
        """The records of JSONL inputs ((name, binary stream, or why it could not be opened)) with
        their lines, in order. Without settings, Documents; with them, FingerprintedDocuments, parsed
        and fingerprinted a chunk of lines at a time on every core (jsonl.read_chunk in
        pool.map_in_order). for_index: with content hashes, and a text over stream_over characters
        fingerprinted in pieces and not kept (unless store_text, which keeps the texts); else (dedup)
        neither. sketches: with each fingerprint, the text's sketch. lines: False gives None for each
        line (add does not need them: they are not copied out of their chunks). size: the inputs' bytes (None:
        not known, as for stdin), which bound the processes of the Python path (processes_for)."""
        rules = RecordRules(
            text_field=self.text_field, id_field=self.id_field, encoding=self.encoding, errors=self.errors,
            require_id=self.require_id, max_record_bytes=MAX_RECORD_BYTES, settings=settings,
            sketches=sketches, content_hashes=settings is not None and for_index, keep_texts=store_text,
            stream_over=self.stream_over if settings is not None and for_index and not store_text else None,
            # An index's own scheme (an older index keeps version 1); dedup's sketches are the default's.
            scheme=self.sketch_scheme if for_index else DEFAULT_SCHEME,
            # A short text's exact data (zlib: an eighth of dedup's instructions) only where its text may be
            # needed without it: not for a filter, which has each record's line to read it from.
            short_texts=sketches and settings is not None and not store_text and (for_index or not lines),
            columns=getattr(self, "_line_batches", False) and settings is not None and not for_index and lines,
        )
        # Where each record's line is, for an index that does not store texts: it reads them again (store/texts.py).
        lines_at = settings is not None and for_index and not store_text
        tasks = ((chunk, rules) for chunk in self._line_chunks(inputs, lines_at))
        done: Iterator[tuple[tuple[LineChunk, RecordRules], ChunkRecords]]
        if settings is None:  # the texts themselves are wanted: nothing to gain from copying them back
            done = ((task, read_line_chunk(task)) for task in tasks)
        elif native_path(rules):  # chunks in C, the GIL released: threads, nothing to start or copy
            done = map_in_order(read_line_chunk, tasks, weight=_task_bytes, threads=True,
                                most=None if for_index else DEDUP_PROCESSES)
        else:  # the Python path: processes, as many as the input's size pays for
            most = processes_for(size)
            done = map_in_order(read_line_chunk, tasks, weight=_task_bytes, local=_task_local,
                                most=most if for_index else min(most, DEDUP_PROCESSES))
        for (chunk, _), records in done:
            self.bytes_read += chunk.size
            if chunk.error is not None:
                self._skip(chunk.path, chunk.error, True)
            for number in chunk.overlong:
                self._skip(f"{chunk.path}:{number}", f"line longer than {MAX_RECORD_BYTES >> 20} MiB", True)
            if records.columns is not None:  # (entry_batches: no skips or failures, every record kept)
                keys = self._record_keys(chunk, records)
                if keys:
                    yield LineBatch(keys, chunk.data, records.columns), None  # type: ignore[misc]
                continue
            if getattr(self, "_packed", False) and not records.skips and not records.failures \
                    and not self.keep_repeats and None not in records.keys and not lines:
                batch = self._chunk_batch(chunk, records, rules)
                if len(batch):
                    yield batch, None  # type: ignore[misc]  # only under packed_documents, which passes it on
                continue
            yield from self._chunk_documents(chunk, records, chunk.path, rules, lines)

    def _chunk_batch(self, chunk: LineChunk, records: ChunkRecords, rules: RecordRules) -> FingerprintedBatch:
        """A chunk's records as columns (all with ids, none skipped): the repeated ids left out (the first stays)."""
        keys = cast(list[str], records.keys)  # (no None: the caller checked)
        first = self._note_keys(keys, self._places(chunk.path, chunk.first_line, records.lines))
        count = len(keys)
        batch = FingerprintedBatch(
            keys, records.fingerprints, records.lengths, records.hashes or [b""] * count,
            records.sketches or [None] * count, records.short_texts or [None] * count,
            list(records.texts) if records.texts is not None else None, _lines_at(chunk, records),
        )  # fmt: skip
        if all(first):
            return batch
        kept = [i for i, met_first in enumerate(first) if met_first]
        return FingerprintedBatch(
            [batch.keys[i] for i in kept], [batch.fingerprints[i] for i in kept], [batch.lengths[i] for i in kept],
            [batch.content_hashes[i] for i in kept], [batch.sketches[i] for i in kept],
            [batch.short_texts[i] for i in kept], None if batch.texts is None else [batch.texts[i] for i in kept],
            None if batch.lines is None else [batch.lines[i] for i in kept],
        )  # fmt: skip

    def _chunk_documents(
        self, chunk: LineChunk, records: ChunkRecords, path: str, rules: RecordRules, lines: bool = True
    ) -> Iterator[tuple[Document | FingerprintedDocument, bytes | None]]:
        """What a chunk's records and skipped lines mean in the whole input, in line order: places,
        repeated ids (the first stays), records keyed by place. lines: with each record its line (else
        None, and the line is not copied out of the chunk)."""
        skips = iter(records.skips)
        skip = next(skips, None)
        keys = self._record_keys(chunk, records)
        # (a filter keeps every record: repeated ids are not looked for)
        first = [True] * len(keys) if self.keep_repeats else self._note_keys(
            keys, self._places(path, chunk.first_line, records.lines))
        # The columns a record is made of, looked up once a chunk (absent ones: a list of the default).
        count, data, failures, keep_repeats = len(keys), chunk.data, records.failures, self.keep_repeats
        texts = records.texts if records.texts is not None else [None] * count
        hashes = records.hashes or [b""] * count
        sketches = records.sketches or [None] * count
        shorts = records.short_texts or [None] * count
        fingerprints, lengths, starts, ends = records.fingerprints, records.lengths, records.starts, records.ends
        places = _lines_at(chunk, records) or [None] * count
        plain = rules.settings is None
        if not plain and not records.skips and not failures and (keep_repeats or all(first)):
            # Every record as it is (dedup's chunks, nearly always): one map, not a loop of tests a record.
            raws = [data[start:end] for start, end in zip(starts, ends)] if lines else [None] * count
            yield from zip(map(fingerprinted, keys, fingerprints, lengths, hashes, sketches, texts, shorts, places),
                           raws)
            return
        for i, line in enumerate(records.lines):
            while skip is not None and skip[0] < line:
                self._skipped_line(f"{path}:{chunk.first_line + skip[0]}", skip)
                skip = next(skips, None)
            if not first[i] and not keep_repeats:
                continue  # a repeated id: the first record stays (a second add is then a no-op)
            if failures and i in failures:
                self._skip(f"{path}:{chunk.first_line + line}", failures[i], True)
                continue
            raw = data[starts[i] : ends[i]] if lines else None
            if plain:
                text = texts[i]
                assert text is not None, "without settings read_chunk returns every text"
                yield Document(keys[i], text), raw
                continue
            yield fingerprinted(keys[i], fingerprints[i], lengths[i], hashes[i], sketches[i], texts[i], shorts[i],
                                places[i]), raw
        while skip is not None:
            self._skipped_line(f"{path}:{chunk.first_line + skip[0]}", skip)
            skip = next(skips, None)

    def _skipped_line(self, where: str, skip: tuple[int, str, bool]) -> None:
        if skip[2]:
            self._keyed_by_line(where)
        self._skip(where, skip[1], True)

    def _record_keys(self, chunk: LineChunk, records: ChunkRecords) -> list[str]:
        """Each record's key: its id, or where it is (path:line) for a record without one."""
        if None not in records.keys:
            return cast(list[str], records.keys)
        return [self._keyed_by_line(f"{chunk.path}:{chunk.first_line + line}") if key is None else key
                for key, line in zip(records.keys, records.lines)]

    def _keyed_by_line(self, where: str) -> str:
        self.keyed_by_line += 1
        self.first_keyed_by_line = self.first_keyed_by_line or where
        return where

    def _line_chunks(self, inputs: Iterable[tuple[str, object]], lines_at: bool = False) -> Iterator[LineChunk]:
        """Each input's whole lines in chunks of about CHUNK_BYTES (an input that could not be opened:
        an empty chunk with the reason). lines_at: chunks of a regular file name it as their source (where
        an index finds their lines again, store/texts.py)."""
        for path, handle in inputs:
            if isinstance(handle, str):
                yield LineChunk(b"", 1, 0, path=path, error=handle)
            else:
                yield from self._handle_chunks(handle, path, self._source(handle, path) if lines_at else None)

    def _source(self, handle, path: str) -> SourceFile | None:
        """The SourceFile of an opened JSONL file, keyed as files are (path_key); None for anything that
        cannot be read again at an offset (stdin, a pipe or device)."""
        try:
            info = os.fstat(handle.fileno())
        except (OSError, AttributeError, ValueError):
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        name = path if self.key_root is None else path_key(path, self.key_root)
        return SourceFile(name, info.st_size, info.st_mtime_ns, self.text_field, self.encoding, self.errors)

    def _handle_chunks(self, handle, path: str, source: SourceFile | None = None) -> Iterator[LineChunk]:
        """A stream's whole lines in chunks of about CHUNK_BYTES. A line longer than MAX_RECORD_BYTES is
        skipped here without being held (noted in the next chunk), so memory stays bounded."""
        read = handle.read  # whole chunks also from a pipe (read1 gives 64 KiB there: more passes, ~6% more CPU)
        number = 1  # the number of the next line to begin
        parts: list[bytes] = []  # a line begun and not yet ended
        held = size = 0  # bytes in parts; bytes read since the last chunk
        total = 0  # bytes read from the stream
        overlong: list[int] = []
        skipping = False  # inside an overlong line: reading on to its end
        while block := read(CHUNK_BYTES):
            size += len(block)
            total += len(block)
            if skipping:
                end = block.find(b"\n")
                if end < 0:
                    continue
                block, skipping, number = block[end + 1 :], False, number + 1
            last = block.rfind(b"\n")
            if last < 0:
                parts.append(block)
                held += len(block)
                if held > MAX_RECORD_BYTES:
                    overlong.append(number)
                    parts, held, skipping = [], 0, True
                continue
            data = b"".join((*parts, block[: last + 1]))
            parts, held = [block[last + 1 :]], len(block) - last - 1
            yield LineChunk(data, number, size, tuple(overlong), path, offset=total - held - len(data), source=source)
            number += int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == 10))  # 10x data.count(b"\n")
            size, overlong = 0, []
        if held or size or overlong:
            yield LineChunk(b"".join(parts), number, size, tuple(overlong), path, offset=total - held, source=source)

    def _places(self, path: str, first_line: int, lines: list[int]) -> list[int]:
        """Each record's place as a number (its input's number << PLACE_BITS | its line): what the table of ids
        seen keeps, made without a string a record (_place_text makes the path:line of the few reported)."""
        number = self._place_numbers.get(path)
        if number is None:
            number = self._place_numbers[path] = len(self._place_paths)
            self._place_paths.append(path)
        return (np.asarray(lines, dtype=np.int64) + (first_line + (number << PLACE_BITS))).tolist()

    def _place_text(self, place: int) -> str:
        return f"{self._place_paths[place >> PLACE_BITS]}:{place & ((1 << PLACE_BITS) - 1)}"

    def _note_keys(self, keys: list[str], places: list[int]) -> list[bool]:
        """For each record of a chunk, True where its id is met first in this run; an id met again is
        reported (the first record stays). Two statements a chunk, in one transaction: the ids that may
        have been seen looked up, then the new ones inserted (an INSERT ... RETURNING a record took twice
        the CPU: a tenth of the main process of simq add). An id may have been seen only if its bit in
        _seen_bits (at its hash) is set: every id inserted sets its bit, so one whose bit is clear is new."""
        seen, bits = self._seen, self._seen_bits
        if seen is None or bits is None:
            seen = self._seen = apsw.Connection("")  # a temporary file: memory does not grow with the ids
            seen.execute("CREATE TABLE seen (key TEXT PRIMARY KEY, place INTEGER) WITHOUT ROWID")
            # Nothing to roll back in a table of this run's own (a failed add discards it): no journal.
            seen.pragma("journal_mode", "off")
            bits = self._seen_bits = np.zeros(SEEN_BITS >> 3, dtype=np.uint8)
        slots = np.fromiter(map(hash, keys), dtype=np.int64, count=len(keys)) & (SEEN_BITS - 1)
        byte, bit = slots >> 3, np.left_shift(1, slots & 7).astype(np.uint8)
        maybe = {key for key, set_ in zip(keys, (bits[byte] & bit).tolist()) if set_}
        np.bitwise_or.at(bits, byte, bit)
        with seen:
            known = dict(seen.execute("SELECT key, place FROM seen WHERE key IN carray(?)",
                                      (apsw.carray(tuple(maybe)),))) if maybe else {}
            new: dict[str, int] = dict(zip(keys, places)) if not maybe else {}  # key -> place, met first here
            if len(new) == len(keys):  # none seen before, none twice (the common case: no loop)
                first = [True] * len(keys)
            else:
                new, first = {}, []
                for key, where in zip(keys, places):
                    met = key in known or key in new
                    first.append(not met)
                    if not met:
                        new[key] = where
            if new:
                seen.executemany("INSERT INTO seen VALUES (?, ?)", new.items())
        for key, where, met_first in zip(keys, places, first):
            if not met_first:
                self.duplicate_count += 1
                if len(self.duplicates) < KEPT_SKIPS:
                    place = known[key] if key in known else new[key]
                    self.duplicates.append(Duplicate(self._place_text(where), key, self._place_text(place)))
        return first

    def _skip(self, where: str, reason: str, named: bool) -> None:
        self.skip_count += 1
        self.failed = self.failed or named
        if len(self.skipped) < KEPT_SKIPS:
            self.skipped.append(Skipped(where, reason, named))
        return None


def _lines_at(chunk: LineChunk, records: ChunkRecords) -> list[LineAt | None] | None:
    """Where each record's line is in the chunk's source file (None: the chunk names none)."""
    source = chunk.source
    if source is None:
        return None
    offset = chunk.offset
    return [(source, offset + start, end - start) for start, end in zip(records.starts, records.ends)]


def size_text(count: int) -> str:
    """A byte count as people read it: 1.5 GiB, 32.0 MiB, 4,096 bytes."""
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if count >= 1 << shift:
            return f"{count / (1 << shift):,.1f} {unit}"
    return f"{count:,} bytes"


def read_one(
    path: str, settings: FingerprintSettings, *, encoding: str = "utf-8", errors: str = "strict"
) -> Document | FingerprintedDocument:
    """The one text of a file, or of stdin (-), to search for or fingerprint: a Document, or for a text
    over READ_WHOLE_BYTES a FingerprintedDocument (fingerprinted in pieces, its text not kept).
    encoding, errors: as Reader's (simq add's --encoding and --errors)."""
    reader = Reader(sniff_stdin=False, stdin_key=STDIN_NAME, encoding=encoding, errors=errors)
    documents = list(reader.documents(reader.expand([path]), settings))
    if reader.skipped:
        raise InvalidInput(f"{reader.skipped[0].where}: {reader.skipped[0].reason}")
    if len(documents) != 1:
        raise InvalidInput(f"{path} holds {len(documents)} documents; give one text file")
    return documents[0]


def path_key(path: str, root: str | None = None) -> str:
    """A file's key: its path relative to `root` (the index's key_root; None: the current folder) when
    inside it, else absolute (normalized, symbolic links not resolved), so one file has one key however
    it is named and wherever simq runs."""
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute, root)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return absolute
    return relative


def _json_object(line: bytes, encoding: str, errors: str) -> dict | None:
    """A line that is a JSON object, parsed; None for anything else."""
    if not line.lstrip().startswith(b"{"):
        return None
    try:
        record = json.loads(line.decode(encoding, errors))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


class _Rewound:
    """A binary stream whose first bytes can be looked at, or read and given back, before reading on."""

    def __init__(self, stream) -> None:
        self.stream, self.buffer = stream, b""
        self.consumed = 0  # bytes read from it (less those given back)

    def peek_line(self, limit: int, lines: int = 1) -> bytes:
        """The first line (up to limit bytes), left to be read again; lines=2: the first two lines."""
        while self.buffer.count(b"\n") < lines and len(self.buffer) < limit:
            more = self.stream.read1(READ_BYTES) if hasattr(self.stream, "read1") else self.stream.read(READ_BYTES)
            if not more:
                break
            self.buffer += more
        return b"\n".join(self.buffer[:limit].split(b"\n", lines)[:lines])

    def push_back(self, data: bytes) -> None:
        self.buffer = data + self.buffer
        self.consumed -= len(data)

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            data, self.buffer = self.buffer + self.stream.read(), b""
        else:
            data, self.buffer = self.buffer[:size], self.buffer[size:]
            if len(data) < size:
                data += self.stream.read(size - len(data))
        self.consumed += len(data)
        return data


def _opened(paths: Iterable[str]) -> Iterator[tuple[str, object]]:
    """(path, its binary stream, open until the next is asked for) or (path, why it could not be opened)."""
    for path in paths:
        try:
            handle = open(path, "rb")
        except OSError as exc:
            yield path, exc.strerror or str(exc)
            continue
        with handle:
            yield path, handle


def processes_for(size: int | None) -> int:
    """Processes (the caller included) worth starting for JSONL of `size` bytes read in Python (None: unknown,
    as stdin): one more per PROCESS_BYTES. A spawned worker imports numpy and the package (~0.35 CPU-s) and
    its rows come back pickled, so a worker for less than that much input costs more CPU than it saves time."""
    return 1 << 30 if size is None else 1 + size // PROCESS_BYTES


def _files_bytes(paths: list[str]) -> int:
    """The files' sizes together (one that cannot be read counts 0: it is skipped with the reason)."""
    total = 0
    for path in paths:
        try:
            total += os.path.getsize(path)
        except OSError:
            pass
    return total


def _task_bytes(task: tuple[LineChunk, RecordRules]) -> int:
    return len(task[0].data)


def _task_local(task: tuple[LineChunk, RecordRules]) -> bool:
    return len(task[0].data) > LOCAL_CHUNK_BYTES


class _DecodeFailed(Exception):
    """A streamed file's bytes did not decode (args: the byte, its offset in the file)."""


def _undecodable_name(path: str) -> bool:
    try:
        path.encode("utf-8")
        return False
    except UnicodeEncodeError:  # os.fsdecode turned bytes that are not UTF-8 into lone surrogates
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

    Keys are paths by path_key(), so only keys under a folder given here, or matching a glob given
    here, are considered, and a key is stale when no file is at that path now (relative keys are
    taken from the index's key_root, as when they were added; from the current folder without one). Files named
    one by one, JSONL and stdin are never pruned: their keys are not paths under an input. Caution:
    with the folder "." every relative key is under it, JSONL ids included.
    """
    stale: set[str] = set()
    root = index.key_root
    for given in inputs:
        if given == STDIN or given.endswith(JSONL_SUFFIXES):
            continue
        if os.path.isdir(given):
            folder = path_key(given, root)
            prefix = "" if folder == "." else folder.rstrip(os.sep) + os.sep
            candidates = (key for key in index.keys(prefix) if folder != "." or not os.path.isabs(key))
        elif glob.has_magic(given):
            pattern = path_key(given, root)
            matcher = _glob_regex(pattern)
            first_magic = min((i for i, c in enumerate(pattern) if c in "*?["), default=len(pattern))
            folder = pattern[: pattern.rfind(os.sep, 0, first_magic) + 1]  # the literal folders before it
            candidates = (key for key in index.keys(folder) if matcher.fullmatch(key))
        else:
            continue
        stale.update(key for key in candidates if not os.path.lexists(texts.key_path(key, root)))
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
