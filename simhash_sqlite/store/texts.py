"""The text behind a stored key, for exact checks: the copy kept in the index (--store-text), the file at
the key's path, or the JSONL line it was added from (its source, offset and length, migration 0006), when
that still holds what was indexed (the same content hash: an edited, moved or truncated file gives None)."""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import stat
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, Protocol

# Texts up to READ_WHOLE_BYTES (core/rule.py) are read whole (by add, and here for a check); larger ones are
# fingerprinted in pieces and never held whole, so a check cannot compare them: judged by distance alone.
from ..core.rule import READ_WHOLE_BYTES

try:  # hashlib's blake2b itself (hashlib.blake2b is this), without hashlib's load of OpenSSL: 11 M instructions,
    # 4% of simq near --key's start-up (bench/startup.py)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover (an interpreter without CPython's _blake2)
    from hashlib import blake2b

# The file names read as JSONL whatever the options (pipeline.sources, and quick/lane.py's --file, which imports
# no pipeline/).
JSONL_SUFFIXES = (".jsonl", ".ndjson")

if TYPE_CHECKING:
    import apsw


class ShortTextColumn(Protocol):
    @property
    def column(self) -> bool: ...  # documents.short_text exists (documents.ShortTexts.column)


class TextSource(Protocol):
    """What this module reads of an open index (database.IndexFile is one). Named here, not imported from
    database.py: that module names documents.ShortTexts, and documents.py imports this one."""

    @property
    def conn(self) -> apsw.Connection: ...
    @property
    def key_root(self) -> str | None: ...  # the folder relative file keys are taken from (key_path)
    @property
    def short_texts(self) -> ShortTextColumn: ...


DIGEST_BYTES = 16  # a content hash's (a stored one of another length matches no text)


def content_hash(text: str) -> bytes:
    """BLAKE2b-128 of the text: stored by add(), so a file still at its key's path can be proved unchanged."""
    return content_hash_of_utf8(text.encode("utf-8", "surrogatepass"))


def content_hash_of_utf8(utf8: bytes) -> bytes:
    """content_hash() of a text given as its UTF-8 ('surrogatepass'), where the caller has the bytes."""
    return blake2b(utf8, digest_size=DIGEST_BYTES).digest()


def stored_text(index: TextSource, key: str) -> str | None:
    """The indexed text of `key`, or None when neither a stored copy nor the unchanged file or JSONL line
    exists."""
    reader = TextReader(index)
    try:
        found = reader.row(key)
    finally:
        reader.close()
    return None if found is None else found[0]


def key_path(key: str, root: str | None) -> str:
    """The file a key names: a relative key is taken from `root`, the folder the index records for its
    keys (simhash_meta 'key_root'), so that it names the same file from any working folder; from the
    working folder when None (an index made before the root was recorded)."""
    return key if root is None or os.path.isabs(key) else os.path.join(root, key)


def file_keys_out_of_reach(conn) -> bool:
    """Some of the first relative keys whose texts live in files, and none of them a file from here (an index
    made before the root of its keys was recorded, searched from another folder)."""
    keys = [key for (key,) in conn.execute(
        "SELECT key FROM documents WHERE text IS NULL AND content_hash IS NOT NULL LIMIT 100"
    ) if not os.path.isabs(key)]
    return bool(keys) and not any(os.path.isfile(key) for key in keys)


def text_of(key: str, text: str | None, digest: bytes | None, root: str | None = None) -> str | None:
    """A document's text from its row: the stored copy, else the file at `key` (key_path: from `root`)
    if its content hash is still `digest` (a file edited, moved or gone since the add gives None). None
    too for a text over READ_WHOLE_BYTES (characters, for a stored one): it is not read whole."""
    if text is not None:
        return text if len(text) <= READ_WHOLE_BYTES else None
    path = key_path(key, root)
    if digest is None or not os.path.isfile(path):
        return None
    try:
        if os.path.getsize(path) > READ_WHOLE_BYTES:
            return None
        with open(path, "rb") as f:  # bytes, as sources.Reader read them (no newline translation)
            on_disk = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return on_disk if content_hash(on_disk) == digest else None


@dataclass(frozen=True)
class SourceFile:
    """A JSONL file documents were added from, as the index records it (table sources): path relative to
    the index's key_root when inside it, else absolute (as file keys are); its size and modification time
    when it was read; the rules its lines were read by (simq add's --text-field, --encoding, --errors)."""

    path: str
    size: int
    mtime_ns: int
    text_field: str = "text"
    encoding: str = "utf-8"
    errors: str = "strict"

    @property
    def utf8(self) -> bool:
        """Whether its lines are UTF-8 (whatever `errors` says: a line that is not valid UTF-8 is left to Python)."""
        try:
            return codecs.lookup(self.encoding).name == "utf-8"
        except LookupError:
            return False


def has_sources(conn) -> bool:
    """The index records where JSONL documents' lines are (migration 0006; an older file opened read-only
    has not got it)."""
    return conn.execute("SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = 'sources'").get is not None


def lines_recorded(conn) -> bool:
    """Some documents were added from JSONL files whose lines the index can read again."""
    return has_sources(conn) and conn.execute("SELECT 1 FROM sources LIMIT 1").get is not None


def source_of(index: TextSource, key: str) -> str | None:
    """The path of the JSONL file a stored key was read from (key_path: from the index's key_root), or None."""
    if not has_sources(index.conn):
        return None
    path = index.conn.execute(
        "SELECT path FROM sources WHERE id = (SELECT source FROM documents WHERE key = ?)", (key,)
    ).get
    return key_path(path, index.key_root) if isinstance(path, str) else None


def text_of_line(raw: bytes, source: SourceFile) -> str | None:
    """The text field of one JSONL line read by the source's rules (pipeline.jsonl reads it the same way
    for add), or None where the line is not such a record. The caller compares its content hash."""
    try:
        record = json.loads(raw.decode(source.encoding, source.errors))
    except (UnicodeDecodeError, LookupError, ValueError, RecursionError):
        return None
    text = record.get(source.text_field) if type(record) is dict else None
    return text if type(text) is str else None


def line_text(raw: bytes, source: SourceFile, digest: bytes) -> str | None:
    """The text of a JSONL line read back (text_of_line) when its content hash is still digest; None for a text
    over READ_WHOLE_BYTES (fingerprinted in pieces)."""
    text = text_of_line(raw, source)
    if text is None or len(text) > READ_WHOLE_BYTES:
        return None
    try:
        return text if content_hash(text) == digest else None
    except UnicodeEncodeError:  # (surrogatepass encodes every str; kept for safety)
        return None


@dataclass(frozen=True)
class RawLine:
    """A stored document's JSONL line as read back, not yet parsed (TextReader.rows_and_lines): its text is
    line_text(raw, source, digest)."""

    key: str
    raw: bytes
    digest: bytes
    short: bytes | None  # the short text's data, where the index keeps it
    source: SourceFile


# JSONL files kept open while texts are read from them: a dupes run reads from one crawl file, or a few.
OPEN_SOURCES = 8
# Rows looked up at a time by TextReader.rows (one statement each: a dupes batch's keys in a few).
ROWS_AT_ONCE = 4096


def _readable_span(at, size) -> bool:
    """Whether a row's recorded line (line_at, line_bytes) may be read: whole numbers, within MAX_LINE_BYTES (a
    damaged row may hold anything)."""
    return type(at) is int and type(size) is int and at >= 0 and 0 < size <= MAX_LINE_BYTES


class TextReader:
    """The texts of stored documents by key, for exact checks: stored copies, unchanged files, and JSONL
    lines (read with pread from files kept open, OPEN_SOURCES at most, in order of their offsets when many
    are asked for at once). A line is accepted only when its text's content hash is the stored one; a
    source that cannot be opened, a line past the file's end or not a record gives None, never an error.
    The file of the index itself is never opened (closing a descriptor of it would drop SQLite's locks)."""

    def __init__(self, index: TextSource) -> None:
        self.index = index
        conn = index.conn
        short = "short_text" if index.short_texts.column else "NULL"
        self.lines = has_sources(conn)
        place = "source, line_at, line_bytes" if self.lines else "NULL, NULL, NULL"
        self._columns = f"key, text, content_hash, {short}, {place}"
        self._sources: dict[int, SourceFile | None] | None = None
        self._open: OrderedDict[int, BinaryIO | None] = OrderedDict()  # source id -> file (None: unreadable)
        self._index_file = _file_id(conn.filename) if conn.filename else None

    def row(self, key: str) -> tuple[str | None, bytes | None] | None:
        """(text or None, short text data or None) of a key; None when the key is not stored."""
        found = self.index.conn.execute(f"SELECT {self._columns} FROM documents WHERE key = ?", (key,)).get
        return None if found is None else self._texts([found])[0][key]

    def has_line(self, key: str) -> bool:
        """Whether the key's JSONL line is recorded (its text may be read again; row() says if it still is)."""
        return self.lines and self.index.conn.execute(
            "SELECT source IS NOT NULL FROM documents WHERE key = ?", (key,)
        ).get == 1

    def rows(self, keys: Iterable[str]) -> dict[str, tuple[str | None, bytes | None]]:
        """row() of many keys (those not stored are left out), the JSONL lines read in file order."""
        out, lines = self.rows_and_lines(keys, raw_lines=False)
        assert not lines
        return out

    def rows_and_lines(
        self, keys: Iterable[str], raw_lines: bool = True
    ) -> tuple[dict[str, tuple[str | None, bytes | None]], list[RawLine]]:
        """rows(keys), but with raw_lines the JSONL lines of UTF-8 sources come back as read (RawLine), not in
        the dict: for the exact check to parse, check and shingle them in one C call (find/check.ShingleCache),
        and line_text() to read any it leaves the Python way. A line that cannot be read is (None, short)."""
        import apsw  # (here: a pool worker imports this module for content_hash alone)

        wanted = list(dict.fromkeys(keys))
        found: list[tuple] = []
        for at in range(0, len(wanted), ROWS_AT_ONCE):
            part = apsw.carray(tuple(wanted[at : at + ROWS_AT_ONCE]))
            found += self.index.conn.execute(f"SELECT {self._columns} FROM documents WHERE key IN carray(?)", (part,))
        return self._texts(found, raw_lines)

    def _texts(
        self, found: list[tuple], raw_lines: bool = False
    ) -> tuple[dict[str, tuple[str | None, bytes | None]], list[RawLine]]:
        out: dict[str, tuple[str | None, bytes | None]] = {}
        lines, raw = [], []
        for key, text, digest, short, source, at, size in found:
            if text is None and source is not None and digest is not None:
                lines.append((source, at, size, key, digest, short))
                continue
            out[key] = (text_of(key, text, digest, self.index.key_root), short)
        lines.sort(key=lambda line: (line[0], line[1] if type(line[1]) is int else -1))  # (NULL: a damaged row)
        if len(lines) > 1:
            self._read_ahead(lines)
        for source, at, size, key, digest, short in lines:
            line = self._read_line(source, at, size)
            described = None if line is None else self._source(source)
            if line is None or described is None:
                out[key] = (None, short)
            elif raw_lines and described.utf8 and type(digest) is bytes and len(digest) == DIGEST_BYTES:
                raw.append(RawLine(key, line, digest, short, described))
            else:
                out[key] = (line_text(line, described, digest), short)
        return out, raw

    def _read_ahead(self, lines: list[tuple]) -> None:
        """Ask the kernel to read the lines' pages ahead (posix_fadvise WILLNEED), so that a file out of the page
        cache is read with the disk's whole queue, not one pread at a time (dupes of a crawl larger than memory)."""
        advise = getattr(os, "posix_fadvise", None)
        if advise is None:
            return
        for source, at, size, *_ in lines:
            if _readable_span(at, size):
                handle = self._descriptor(source)
                if handle is not None:
                    with contextlib.suppress(OSError, OverflowError, ValueError):
                        advise(handle, at, size, os.POSIX_FADV_WILLNEED)

    def _read_line(self, source: int, at, size) -> bytes | None:
        """The bytes of the line at (at, size) in the source; None where they cannot be read whole."""
        if not _readable_span(at, size):
            return None
        handle = self._descriptor(source)
        if handle is None:
            return None
        try:
            raw = os.pread(handle, size, at)
        except (OSError, OverflowError, ValueError):
            return None
        return raw if len(raw) == size else None  # shorter: the file is shorter than when it was added

    def _source(self, source: int) -> SourceFile | None:
        if self._sources is None:
            self._sources = {
                number: SourceFile(path, size, mtime, field, encoding, errors)
                for number, path, size, mtime, field, encoding, errors in self.index.conn.execute(
                    "SELECT id, path, size, mtime_ns, text_field, encoding, errors FROM sources"
                )
                if isinstance(path, str) and isinstance(field, str) and isinstance(encoding, str)
                and isinstance(errors, str)
            }
        return self._sources.get(source)

    def _descriptor(self, source: int) -> int | None:
        if source in self._open:
            self._open.move_to_end(source)
            handle = self._open[source]
            return None if handle is None else handle.fileno()
        described = self._source(source)
        handle = None
        if described is not None:
            path = key_path(described.path, self.index.key_root)
            try:
                # Looked at before it is opened: the index's own file is never opened (nor closed) here.
                if _file_id(path) != self._index_file and stat.S_ISREG(os.stat(path).st_mode):
                    handle = open(path, "rb", buffering=0)  # noqa: SIM115 (kept open, closed by close())
            except OSError:
                handle = None
        self._open[source] = handle
        while len(self._open) > OPEN_SOURCES:
            _, old = self._open.popitem(last=False)
            if old is not None:
                old.close()
        return None if handle is None else handle.fileno()

    def close(self) -> None:
        """Close the sources it holds open (a file object each: also closed when the reader is collected)."""
        while self._open:
            _, handle = self._open.popitem()
            if handle is not None:
                handle.close()


# The longest line read back: add skips longer ones (sources.MAX_RECORD_BYTES), so a larger recorded
# length is not ours and is never allocated.
MAX_LINE_BYTES = 128 << 20


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino
