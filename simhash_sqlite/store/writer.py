"""The write path: documents into an index file, in transactions that grow with the index, with their
fingerprints computed on the worker pool while the previous batch is written."""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import apsw
import numpy as np

from ..core.fingerprint import to_signed
from ..core.pool import FingerprintJob
from ..core.settings import SHORT_TEXT, FingerprintSettings
from ..core.short_texts import short_text_data
from ..core.sketch import SketchScheme
from ..errors import InvalidArgument, InvalidInput
from .database import build_search_indexes, bulk_load, drop_search_indexes, search_indexes, write_transaction
from .documents import AddReport, Document, FingerprintedBatch, FingerprintedDocument, LineAt, joined
from .texts import SourceFile, content_hash

DEFAULT_BATCH_SIZE = 1000
# add() without a batch size: documents are read 1000 at a time, but into a large index one transaction
# holds one document per TRANSACTION_SHARE stored, up to MAX_AUTO_TRANSACTION. Each transaction writes
# every index leaf it changed, and at 10M documents (62k leaves per block index) 1000 random inserts
# change 1000 leaves per index: the page writes, not the inserts, were the cost (bench/big_index_add.py).
TRANSACTION_SHARE = 100
MAX_AUTO_TRANSACTION = 100_000
KEPT_KEYS = 1000  # AddReport lists at most this many keys; its counts cover all
FINGERPRINT_BATCH_SIZE = 1_000_000
SKETCH_UPGRADE_BATCH = 1000  # documents read and sketched at a time when an older index is upgraded
# Page cache (MiB) while loading fingerprints; SQLite's default is 2 MiB (see BENCHMARKS.md, issue 3).
# SQLite allocates it only as pages are read, so a load never holds more than the pages it touched.
BULK_CACHE_MIB = 3072
# Page cache (MiB) while add() writes: at least enough for the interior pages of every index of a
# 100M-document file (about 4 MiB at 10M), which each batch's random block-index inserts pass through.
# A large index's large transactions change most index leaves, so there it grows to half the file (up to
# MAX_ADD_CACHE_MIB): leaves then stay in memory from one insert to the next instead of being read
# again from the file or the WAL. SQLite allocates it only as pages are read.
ADD_CACHE_MIB = 64
MAX_ADD_CACHE_MIB = 1024
# While adding, the WAL is folded back into the file every this many pages (256 MiB of 4 KiB pages) at
# most, instead of SQLite's 1000: a block-index leaf that many consecutive batches change is then copied
# into the file once, not once per batch (issue 16). The interval scales with the file (as many pages as it
# has, asked again at each transaction), so the WAL of an add stays about the index's size (never below
# SQLite's 4 MiB): it had grown to 256 MiB whatever the index (docs/scale.md, the disk an add needs).
# Folded in at the end of the add.
BULK_CHECKPOINT_PAGES = 65_536


# A bulk load (store.database, "Indexes built by sort"): once an add has written more documents than the
# index held when it began, and at least BULK_AFTER, it drops the search indexes and builds them by sorting
# as it ends. Below that the two cost about the same, and searches keep their indexes. Into an empty index
# (bench/bulk_add.py's rows, one process, when the build had a 1 GiB sorter cache): 30k documents 0.19
# CPU-s against 0.33 row by row, 100k 0.68 against 1.89, 1M 20.0 against 46.5. With today's 4 MiB
# (store.database.BUILD_CACHE_MIB) the build of a 10M index took 19-21 s of wall against 65.
BULK_AFTER = 20_000
# Documents per transaction of a bulk load without a batch size: with the search indexes gone, a commit
# writes the new table pages and the key index's changed leaves; larger transactions share the latter.
BULK_TRANSACTION = 200_000

# Run in every transaction that changes documents; a no-op until clusters() has run.
_CLUSTERS_STALE = (
    "UPDATE simhash_meta SET value = json_set(value, '$.stale', json('true')) "
    "WHERE key = 'clusters' AND json_extract(value, '$.stale') IS NOT 1"
)


@dataclass
class _PreparedBatch:
    """A batch read and compared with the index, its fingerprints being computed; not yet written."""

    batch: list[Document | FingerprintedDocument] | FingerprintedBatch
    changed: list[tuple[Document | FingerprintedDocument, bytes]]  # (document, content hash) to write
    digests: dict[str, bytes]  # key -> content hash of the changed documents
    fingerprints: FingerprintJob  # of the changed Documents' texts, in order
    added: int
    updated: int
    unchanged: int
    no_features: list[str] = field(default_factory=list)  # keys written with no fingerprint (once written)
    new_keys: set[str] = field(default_factory=set)  # the keys counted as added
    data_version: int = 0  # the file's PRAGMA data_version when the stored content hashes were read
    characters: int = 0  # of every document of the batch
    lengths: list[int] = field(default_factory=list)  # of the changed documents, in order
    rows: list[tuple] | None = None  # a FingerprintedBatch's rows, made in _prepare_packed (no `changed`)
    rows_without_features: list[str] = field(default_factory=list)  # their keys without a fingerprint
    # (_RELOCATE's parameters) unchanged documents whose JSONL line is recorded again: an index made before
    # lines were, or a line that moved within its file
    relocated: list[tuple] = field(default_factory=list)


class _Commits:
    """add()'s transactions: prepared batches are written into an open transaction, COMMITted once it
    holds `size` documents (None: Writer.transaction_size(), asked again for each transaction, with
    the page cache to go with it). Only committed batches reach the report and on_batch."""

    def __init__(self, writer: Writer, report: AddReport, size: int | None, on_batch) -> None:
        self.writer, self.report, self.size, self.on_batch = writer, report, size, on_batch
        self.open: ExitStack | None = None
        self.limit = 0
        # Documents the index held when the add began (ids only grow: an upper bound, read in O(log n)).
        self.stored = writer.conn.execute("SELECT coalesce(max(id), 0) FROM documents").get
        self.rows = 0  # rows this add has written
        self.bulk = False  # this add dropped the search indexes: it builds them in finish()
        # The counts of the batches written since the last COMMIT (not the batches: their texts go).
        self.written, self.documents = AddReport(), 0

    def write(self, prepared: _PreparedBatch, after: _PreparedBatch | None = None) -> None:
        rows = self.writer._batch_rows(prepared, after)
        if rows and self.open is None:
            conn = self.writer.conn
            self.limit = self.size or (BULK_TRANSACTION if self.bulk else self.writer.transaction_size())
            if self.size is None:
                conn.pragma("cache_size", -self.writer._add_cache_mib() * 1024)
            rescale_checkpoint(conn)
            self.open = ExitStack()
            self.open.enter_context(write_transaction(conn))
            self.writer.clusters_now_stale()
        if rows and self.writer.conn.pragma("data_version") != prepared.data_version:
            # Another process committed since this batch was compared with the index (two adds of the same
            # input): compare again inside the write lock, so the counts say what this add really wrote.
            rows = self.writer._compared_again(prepared, rows)
        if rows:
            self.rows += len(rows)
            if not self.bulk and self.rows > max(BULK_AFTER, self.stored) and bulk_load(self.writer.conn) is None:
                drop_search_indexes(self.writer.conn)
                self.bulk = True
            self.writer.conn.executemany(_UPSERT, rows)
        if prepared.relocated:  # no change of content: the clusters stay as they are
            if self.open is None:
                with write_transaction(self.writer.conn):
                    self.writer.conn.executemany(_RELOCATE, prepared.relocated)
            else:
                self.writer.conn.executemany(_RELOCATE, prepared.relocated)
        _merge_counts(self.written, _batch_counts(prepared))
        self.documents += len(prepared.batch)
        # Batches with nothing to write (all unchanged) are reported at once when no transaction is open.
        if self.open is None or self.documents >= self.limit:
            self.commit()

    def commit(self) -> None:
        if self.open is not None:
            self.open.close()  # COMMIT (retried while another connection is busy)
            self.open = None
        if not self.documents:
            return
        _merge_counts(self.report, self.written)
        self.written, self.documents = AddReport(), 0
        if self.on_batch:
            self.on_batch(self.report)

    def roll_back(self) -> None:
        """After a failed write or COMMIT: the open transaction, if any, is rolled back."""
        if self.open is not None:
            open_, self.open = self.open, None
            self.written, self.documents = AddReport(), 0
            open_.__exit__(RuntimeError, RuntimeError("add failed"), None)

    def finish(self) -> None:
        """The end of the add, however it ends: a bulk load builds the search indexes it dropped (a
        transaction of its own; if it rolled back the drop, they are there and nothing is built)."""
        if self.bulk:
            self.bulk = False
            if bulk_load(self.writer.conn) is not None:
                build_search_indexes(self.writer.conn)


def _batch_counts(prepared: _PreparedBatch) -> AddReport:
    """A written batch's counts, without its documents."""
    return AddReport(
        added=prepared.added,
        updated=prepared.updated,
        unchanged=prepared.unchanged,
        no_features=prepared.no_features[:KEPT_KEYS],
        without_features=len(prepared.no_features),
        batches=1,
        characters=prepared.characters,
        short=int(np.count_nonzero(np.fromiter(prepared.lengths, np.int64, len(prepared.lengths)) < SHORT_TEXT)),
        last_key=prepared.batch.keys[-1] if isinstance(prepared.batch, FingerprintedBatch) else prepared.batch[-1].key,
    )


def _merge_counts(report: AddReport, more: AddReport) -> None:
    """Add the counts of `more` (later batches) to `report`."""
    for name in ("added", "updated", "unchanged", "without_features", "batches", "characters", "short"):
        setattr(report, name, getattr(report, name) + getattr(more, name))
    report.no_features.extend(more.no_features[: max(0, KEPT_KEYS - len(report.no_features))])
    report.last_key = more.last_key


_ABSENT = object()


class _NothingToFingerprint:
    """The FingerprintJob of a batch that came fingerprinted: nothing to wait for."""

    def result(self, meanwhile=None) -> list:
        return []

    def _take_one(self) -> bool:
        return False


_NOTHING_TO_FINGERPRINT: FingerprintJob = _NothingToFingerprint()  # type: ignore[assignment]


def _rows_of(batch: FingerprintedBatch, picked: list[int]) -> FingerprintedBatch:
    """The batch's documents at these positions, in order."""

    def pick(column):
        return [column[i] for i in picked]

    return FingerprintedBatch(
        pick(batch.keys), pick(batch.fingerprints), pick(batch.lengths), pick(batch.content_hashes),
        pick(batch.sketches), pick(batch.short_texts), None if batch.texts is None else pick(batch.texts),
        None if batch.lines is None else pick(batch.lines),
    )  # fmt: skip


def _batches(
    items: Iterator[Document | FingerprintedDocument | FingerprintedBatch], size: int
) -> Iterator[list[Document | FingerprintedDocument] | FingerprintedBatch]:
    """The documents in batches of `size` (the last may be smaller, and a batch ends where documents given one
    by one meet columns): lists of documents, or FingerprintedBatches joined and cut to size."""
    loose: list[Document | FingerprintedDocument] = []
    packed: list[FingerprintedBatch] = []
    held = 0  # documents in packed
    for item in items:
        if isinstance(item, FingerprintedBatch):
            if loose:
                yield loose
                loose = []
            packed.append(item)
            held += len(item)
            while held >= size:
                whole = joined(packed)
                yield whole.part(0, size)
                rest = whole.part(size, len(whole))
                packed, held = ([rest] if len(rest) else []), len(rest)
            continue
        if packed:
            yield joined(packed)
            packed, held = [], 0
        loose.append(item)
        if len(loose) >= size:
            yield loose
            loose = []
    if packed:
        yield joined(packed)
    if loose:
        yield loose


MAX_BATCH_SIZE = 100_000_000  # far past any useful batch, and below what islice() can take


def validate_batch_size(batch_size) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise InvalidArgument(f"batch_size must be a whole number from 1 to {MAX_BATCH_SIZE:,}, not {batch_size!r}")


def _check_keys(keys: Iterable[str]) -> None:
    """Keys with NUL characters are refused: carray and SQLite's C-string functions cut them there."""
    keys = keys if isinstance(keys, (list, tuple, set)) else list(keys)
    if "\x00" not in "".join(keys):  # one pass in C over all of them (the common case)
        return
    for key in keys:
        if "\x00" in key:
            raise InvalidInput(f"a key must not contain a NUL character: {key!r}")


_UPSERT = """
INSERT INTO documents (key, fingerprint, b0, b1, b2, b3, length, content_hash, text, sketch, short_text, source,
    line_at, line_bytes)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET
    fingerprint = excluded.fingerprint, b0 = excluded.b0, b1 = excluded.b1, b2 = excluded.b2,
    b3 = excluded.b3, length = excluded.length, content_hash = excluded.content_hash,
    text = excluded.text, added_at = excluded.added_at, sketch = excluded.sketch, short_text = excluded.short_text,
    source = excluded.source, line_at = excluded.line_at, line_bytes = excluded.line_bytes
"""


_SOURCE = """
INSERT INTO sources (path, size, mtime_ns, text_field, encoding, errors) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (path, text_field, encoding, errors) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns
RETURNING id
"""


# An unchanged document's line, written only where it differs (a re-add of the same file writes nothing).
_RELOCATE = """
UPDATE documents SET source = ?, line_at = ?, line_bytes = ?
WHERE key = ? AND (source IS NOT ? OR line_at IS NOT ? OR line_bytes IS NOT ?) AND text IS NULL
"""


_UPSERT_FINGERPRINT = """
INSERT INTO documents (key, fingerprint, b0, b1, b2, b3) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET
    fingerprint = excluded.fingerprint, b0 = excluded.b0, b1 = excluded.b1, b2 = excluded.b2,
    b3 = excluded.b3, length = NULL, content_hash = NULL, text = NULL, added_at = excluded.added_at, sketch = NULL,
    short_text = NULL, source = NULL, line_at = NULL, line_bytes = NULL
"""

def _fingerprint_rows(batch: list[tuple[str, int]]) -> list[tuple]:
    """(key, signed, b0, b1, b2, b3) rows."""
    return list(zip([key for key, _ in batch], *_signed_blocks([fp for _, fp in batch])))


def _signed_blocks(fingerprints: list) -> list[list[int]]:
    """[signed, b0, b1, b2, b3] columns of unsigned fingerprints, computed with numpy: per-item Python
    arithmetic was a sixth of a bulk load's CPU."""
    if not all(type(fp) is int for fp in fingerprints):  # numpy would truncate floats and take bools
        fingerprints = [_checked_int(fp) for fp in fingerprints]
    try:
        unsigned = np.array(fingerprints, dtype=np.uint64)
    except OverflowError:
        for fp in fingerprints:
            to_signed(fp)  # raises InvalidInput naming the value out of range
        raise
    parts = [((unsigned >> np.uint64(shift)) & np.uint64(0xFFFF)).tolist() for shift in (48, 32, 16, 0)]
    return [unsigned.view(np.int64).tolist(), *parts]


def _checked_int(fp) -> int:
    if isinstance(fp, bool) or not isinstance(fp, (int, np.integer)):
        raise InvalidInput(f"a fingerprint is an unsigned 64-bit integer, not {fp!r}")
    return int(fp)


# The wal_autocheckpoint a connection had before its add (_bulk_writes), while the add runs.
_user_checkpoint: weakref.WeakKeyDictionary[apsw.Connection, int] = weakref.WeakKeyDictionary()


def rescale_checkpoint(conn: apsw.Connection) -> None:
    """During an add: checkpoint every as many pages as the file has, at least the connection's own
    setting (SQLite's 1000) and at most BULK_CHECKPOINT_PAGES; 0 or less (checkpoints off) stays."""
    pages = _user_checkpoint.get(conn)
    if pages is not None and pages > 0:
        conn.pragma("wal_autocheckpoint", max(pages, min(BULK_CHECKPOINT_PAGES, conn.pragma("page_count"))))


@contextmanager
def _bulk_writes(conn: apsw.Connection, cache_mib: int) -> Iterator[None]:
    """Settings of this connection for the duration of an add: a page cache of cache_mib MiB and
    checkpoints every BULK_CHECKPOINT_PAGES; then the previous settings again, and once the add has
    finished, the WAL it left over SQLite's usual size folded into the file (a passive checkpoint: it
    never waits for readers, and one still reading keeps its pages for the next checkpoint)."""
    cache, pages = conn.pragma("cache_size"), conn.pragma("wal_autocheckpoint")
    conn.pragma("cache_size", -cache_mib * 1024)
    _user_checkpoint[conn] = pages
    rescale_checkpoint(conn)
    try:
        yield
    finally:
        _user_checkpoint.pop(conn, None)
        conn.pragma("cache_size", cache)
        conn.pragma("wal_autocheckpoint", pages)
    wal = conn.filename + "-wal"
    if 0 < pages and os.path.exists(wal) and os.path.getsize(wal) > pages * conn.pragma("page_size"):
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


class Writer:
    """Every write to an index's documents: add() in growing transactions, bulk fingerprints, removals.
    SimhashIndex holds one; it is the only code that inserts, updates or deletes document rows."""

    def __init__(
        self, conn: apsw.Connection, path: str, settings: FingerprintSettings, sketch_scheme: SketchScheme,
        store_text: bool,
    ) -> None:
        self.conn, self.path, self.settings = conn, path, settings
        self.sketch_scheme, self.store_text = sketch_scheme, store_text
        self._sources: dict[SourceFile, int] = {}  # sources rows met in this add (_source_id)

    def add(
        self,
        documents: Iterable[Document | FingerprintedDocument | FingerprintedBatch],
        *,
        batch_size: int | None = None,
        on_batch: Callable[[AddReport], None] | None = None,
    ) -> AddReport:
        """SimhashIndex.add: documents read DEFAULT_BATCH_SIZE at a time, compared with the stored content
        hashes, fingerprinted on the pool while the previous batch is written, committed in _Commits."""
        if batch_size is not None:
            validate_batch_size(batch_size)
        report = AddReport()
        self._sources = {}
        batches = _batches(iter(documents), batch_size or DEFAULT_BATCH_SIZE)
        commits = _Commits(self, report, batch_size, on_batch)
        # A pipeline of two batches: the next batch is read, hashed and handed to the pool's workers
        # before this one is written, so that the workers fingerprint while this process parses
        # input and writes to SQLite (with a barrier per batch they waited for it).
        pending: _PreparedBatch | None = None
        with _bulk_writes(self.conn, ADD_CACHE_MIB):
            try:
                while True:
                    try:
                        batch = next(batches, None)
                        prepared = self._prepare_batch(batch, pending) if batch else None
                    except BaseException:  # the input failed or Ctrl-C: every batch read in full is still written
                        if pending is not None:
                            commits.write(pending)
                        commits.commit()
                        raise
                    if pending is not None:
                        commits.write(pending, prepared)
                    if prepared is None:
                        break
                    pending = prepared
                commits.commit()
            finally:
                try:
                    commits.roll_back()  # only after a failed write: nothing of the open transaction was reported
                finally:
                    commits.finish()
        return report

    def _prepare_batch(
        self, batch: list[Document | FingerprintedDocument] | FingerprintedBatch, pending: _PreparedBatch | None
    ) -> _PreparedBatch:
        """Which documents of the batch are new or changed, with their fingerprints under way.

        pending: the batch before, not yet written; its keys count as stored with their new content.
        """
        if isinstance(batch, FingerprintedBatch):
            return self._prepare_packed(batch, pending)
        data_version = self.conn.pragma("data_version")  # before the read: a commit after it is seen as one
        batch_keys = {doc.key for doc in batch}
        known = self._content_hashes(batch_keys)
        if pending is not None:
            known.update((key, pending.digests[key]) for key in batch_keys & pending.digests.keys())
        changed, added, updated, unchanged, new_keys = [], 0, 0, 0, set()
        relocated: list[tuple] = []
        lengths: list[int] = []  # of the changed documents
        characters, plain = 0, []
        for doc in batch:
            if isinstance(doc, FingerprintedDocument):
                digest, length = doc.content_hash, doc.length
            else:
                digest, length = content_hash(doc.text), len(doc.text)
            characters += length
            key = doc.key
            stored = known.get(key)
            if stored == digest:
                unchanged += 1
                if isinstance(doc, FingerprintedDocument) and doc.line is not None and not self.store_text:
                    relocated.append(self._relocation(key, doc.line))
                continue
            if stored is not None or key in known:
                updated += 1
            else:
                added += 1
                new_keys.add(key)
            known[key] = digest
            changed.append((doc, digest))
            lengths.append(length)
            if not isinstance(doc, FingerprintedDocument):
                plain.append(doc.text)
        # Streamed files come fingerprinted; the rest in one vectorized call (all cores if large).
        digests = {doc.key: digest for doc, digest in changed}
        fingerprints = FingerprintJob(plain, self.settings, start_pool=pending is not None, sketches=self.sketch_scheme)
        return _PreparedBatch(
            batch, changed, digests, fingerprints, added, updated, unchanged,
            new_keys=new_keys, data_version=data_version, characters=characters, lengths=lengths,
            relocated=relocated,
        )

    def _prepare_packed(self, batch: FingerprintedBatch, pending: _PreparedBatch | None) -> _PreparedBatch:
        """_prepare_batch of columns: the same comparison, and the rows to write made at once from the columns
        (no object per document; into an index that holds none of the keys, no loop over them in Python)."""
        data_version = self.conn.pragma("data_version")
        keys, hashes, lengths = batch.keys, batch.content_hashes, batch.lengths
        batch_keys = set(keys)
        known = self._content_hashes(batch_keys)
        if pending is not None:
            known.update((key, pending.digests[key]) for key in batch_keys & pending.digests.keys())
        relocated: list[tuple] = []
        if not known and len(batch_keys) == len(keys):  # all new
            chosen = batch
            added, updated, unchanged, new_keys = len(keys), 0, 0, batch_keys
        else:
            picked, added, updated, unchanged, new_keys = [], 0, 0, 0, set()
            lines = batch.lines if batch.lines is not None and not self.store_text else None
            for i, (key, digest) in enumerate(zip(keys, hashes)):
                stored = known.get(key, _ABSENT)
                if stored == digest:
                    unchanged += 1
                    if lines is not None and (line := lines[i]) is not None:
                        relocated.append(self._relocation(key, line))
                    continue
                if stored is _ABSENT:
                    added += 1
                    new_keys.add(key)
                else:
                    updated += 1
                known[key] = digest
                picked.append(i)
            chosen = batch if len(picked) == len(keys) else _rows_of(batch, picked)
        rows, without = self._packed_rows(chosen)
        return _PreparedBatch(
            batch, [], dict(zip(chosen.keys, chosen.content_hashes)), _NOTHING_TO_FINGERPRINT, added, updated,
            unchanged, new_keys=new_keys, data_version=data_version, characters=sum(lengths),
            lengths=chosen.lengths, rows=rows, rows_without_features=without, relocated=relocated,
        )  # fmt: skip

    def _relocation(self, key: str, line: LineAt) -> tuple:
        """_RELOCATE's parameters for an unchanged document's line (where it is now, in the file added again)."""
        source = self._source_id(line[0])
        return source, line[1], line[2], key, source, line[1], line[2]

    def _packed_rows(self, batch: FingerprintedBatch) -> tuple[list[tuple], list[str]]:
        """The upsert rows of a FingerprintedBatch, built column by column; and the keys without a fingerprint."""
        count = len(batch.keys)
        fingerprints = batch.fingerprints
        without = [key for key, fp in zip(batch.keys, fingerprints) if fp is None] if None in fingerprints else []
        columns: list[Any]
        if without:
            present = [fp for fp in fingerprints if fp is not None]
            made = iter(zip(*_signed_blocks(present)))
            nothing = (None,) * 5
            columns = list(zip(*[nothing if fp is None else next(made) for fp in fingerprints]))
        else:
            columns = _signed_blocks(fingerprints) if count else [[]] * 5
        texts: Sequence[str | None]
        shorts: Sequence[bytes | None]
        if self.store_text and batch.texts is not None:
            texts, shorts = batch.texts, (None,) * count
        else:
            texts, shorts = (None,) * count, batch.short_texts  # (None where there is no fingerprint)
        rows = list(zip(batch.keys, *columns, batch.lengths, batch.content_hashes, texts, batch.sketches, shorts,
                        *self._line_columns(batch.lines, count)))
        return rows, without

    def _line_columns(self, lines: Sequence[LineAt | None] | None, count: int) -> list[Sequence[int | None]]:
        """The (source, line_at, line_bytes) columns of a batch's lines (None: no line to read again, or an
        index that stores its texts, which reads those)."""
        if lines is None or self.store_text:
            return [(None,) * count] * 3
        ids = [self._source_id(line[0]) if line is not None else None for line in lines]
        return [ids, [line[1] if line is not None else None for line in lines],
                [line[2] if line is not None else None for line in lines]]

    def _source_id(self, source: SourceFile) -> int:
        """The sources row of a JSONL file (made, or its size and mtime brought up to date, once an add)."""
        known = self._sources.get(source)
        if known is None:
            def record() -> int:
                return self.conn.execute(_SOURCE, (source.path, source.size, source.mtime_ns, source.text_field,
                                                   source.encoding, source.errors)).get
            if self.conn.get_autocommit():
                with write_transaction(self.conn):
                    known = record()
            else:  # inside the add's open transaction
                known = record()
            self._sources[source] = known
        return known

    def _compared_again(self, prepared: _PreparedBatch, rows: list[tuple]) -> list[tuple]:
        """The rows of a prepared batch still to write, its counts corrected, compared with the index as it
        is now (in the open transaction): a row another process wrote meanwhile with the same content is
        unchanged, one it added is updated, one it removed is added."""
        now = self._content_hashes({row[0] for row in rows})
        kept = []
        for row in rows:
            key, digest, was_new = row[0], row[7], row[0] in prepared.new_keys
            if key in now and now[key] == digest:
                prepared.unchanged += 1
                if was_new:
                    prepared.added -= 1
                else:
                    prepared.updated -= 1
                if key in prepared.no_features:
                    prepared.no_features.remove(key)
                continue
            if was_new and key in now:
                prepared.added, prepared.updated = prepared.added - 1, prepared.updated + 1
            elif not was_new and key not in now:
                prepared.added, prepared.updated = prepared.added + 1, prepared.updated - 1
            kept.append(row)
        return kept

    def _batch_rows(self, prepared: _PreparedBatch, after: _PreparedBatch | None = None) -> list[tuple]:
        """The rows to upsert for a prepared batch. after: the batch prepared next, whose fingerprints
        this process works on while the workers finish this one's."""
        if prepared.rows is not None:
            prepared.no_features.extend(prepared.rows_without_features)
            rows, prepared.rows = prepared.rows, None
            return rows
        computed = iter(prepared.fingerprints.result(after.fingerprints if after is not None else None))
        made = [
            (doc.fingerprint, doc.sketch) if isinstance(doc, FingerprintedDocument) else next(computed)
            for doc, _ in prepared.changed
        ]
        columns = iter(zip(*_signed_blocks([fp for fp, _ in made if fp is not None])))
        rows = []
        store_text, no_features = self.store_text, (None,) * 5
        for (doc, digest), (fingerprint, sketch), length in zip(prepared.changed, made, prepared.lengths):
            if fingerprint is None:
                prepared.no_features.append(doc.key)
                fingerprint_columns: tuple[int | None, ...] = no_features
            else:
                fingerprint_columns = next(columns)
            short: bytes | None = None
            if not store_text and fingerprint is not None:
                if isinstance(doc, FingerprintedDocument):
                    short = doc.short_text
                elif doc.text is not None:
                    short = short_text_data(doc.text)
            text = doc.text if store_text else None
            line = doc.line if isinstance(doc, FingerprintedDocument) and not store_text else None
            place = (None, None, None) if line is None else (self._source_id(line[0]), line[1], line[2])
            rows.append((doc.key, *fingerprint_columns, length, digest, text, sketch, short, *place))
        return rows

    def transaction_size(self) -> int:
        """Documents per transaction of add() without a batch size: DEFAULT_BATCH_SIZE, or one per
        TRANSACTION_SHARE stored documents (about as many as each block index has leaves), up to
        MAX_AUTO_TRANSACTION: a transaction's page writes are then shared by about one document each."""
        stored = self.conn.execute("SELECT coalesce(max(id), 0) FROM documents").get  # ids only grow: O(log n)
        return max(DEFAULT_BATCH_SIZE, min(MAX_AUTO_TRANSACTION, stored // TRANSACTION_SHARE))

    def _add_cache_mib(self) -> int:
        """add()'s page cache for this file: ADD_CACHE_MIB, or half the file up to MAX_ADD_CACHE_MIB."""
        try:
            half = os.path.getsize(self.path) // 2**21
        except OSError:  # not a file on disk
            return ADD_CACHE_MIB
        return max(ADD_CACHE_MIB, min(MAX_ADD_CACHE_MIB, half))

    def add_fingerprints(
        self,
        items: Iterable[tuple[str, int]],
        *,
        batch_size: int = FINGERPRINT_BATCH_SIZE,
        cache_mib: int = BULK_CACHE_MIB,
        rebuild_indexes: bool | None = None,
    ) -> int:
        """Add (key, unsigned fingerprint) pairs made elsewhere (no text, no content hash).

        For fingerprints computed by another process or machine with the same settings; an
        existing key gets the new fingerprint. Returns how many pairs were written.

        Into an index that holds documents, each batch is one transaction (an interrupted add keeps
        the committed batches). Into an empty index (rebuild_indexes=None: when it is empty), the
        whole load is ONE transaction that drops the search indexes, inserts every row and builds
        the indexes again: several times faster, and all-or-nothing (an interrupt leaves it empty).
        cache_mib: SQLite page cache for the load; index maintenance is random page access, so a
        cache that holds the block indexes turns it from disk-bound to memory-bound.
        """
        validate_batch_size(batch_size)
        written = 0
        iterator = iter(items)
        with _bulk_writes(self.conn, cache_mib):
            if rebuild_indexes is None:
                rebuild_indexes = self.conn.execute("SELECT NOT EXISTS (SELECT 1 FROM documents)").get
            if rebuild_indexes:
                with write_transaction(self.conn):
                    for name, _sql in search_indexes():
                        self.conn.execute(f'DROP INDEX IF EXISTS "{name}"')
                    while batch := list(islice(iterator, batch_size)):
                        self.conn.executemany(_UPSERT_FINGERPRINT, _fingerprint_rows(batch))
                        written += len(batch)
                    for _name, sql in search_indexes():
                        self.conn.execute(sql)
                    self.clusters_now_stale()
                return written
            while batch := list(islice(iterator, batch_size)):
                rows = _fingerprint_rows(batch)
                with write_transaction(self.conn):
                    self.conn.executemany(_UPSERT_FINGERPRINT, rows)
                    self.clusters_now_stale()
                written += len(batch)
        return written

    def _content_hashes(self, keys: set[str]) -> dict[str, bytes]:
        _check_keys(keys)
        return dict(
            self.conn.execute(
                "SELECT key, content_hash FROM documents WHERE key IN carray(?)", (apsw.carray(tuple(keys)),)
            )
        )

    def remove(self, keys: Iterable[str], *, batch_size: int = 10_000) -> int:
        """Delete the documents with these keys (unknown keys are ignored); returns how many went.

        One transaction per batch, like add(): an interrupted remove keeps the batches it committed.
        """
        validate_batch_size(batch_size)
        removed = 0
        iterator = iter(keys)
        while batch := tuple(islice(iterator, batch_size)):
            _check_keys(batch)
            with write_transaction(self.conn):
                self.conn.execute("DELETE FROM documents WHERE key IN carray(?)", (apsw.carray(batch),))
                if changes := self.conn.changes():
                    removed += changes
                    self.clusters_now_stale()
        return removed

    def remove_glob(self, pattern: str) -> list[str]:
        """Delete the documents whose key matches a SQLite GLOB pattern; returns their keys.

        GLOB is case-sensitive; * and ? match any characters, "/" included; [abc] and [^abc] are sets.
        """
        with write_transaction(self.conn):
            matching = self.conn.execute("SELECT key FROM documents WHERE key GLOB ? ORDER BY key", (pattern,))
            keys = [key for (key,) in matching]
            self.conn.execute("DELETE FROM documents WHERE key GLOB ?", (pattern,))
            if keys:
                self.clusters_now_stale()
        return keys

    def clusters_now_stale(self) -> None:
        """Documents changed: the clusters table (if any) describes the index as it was, so say so
        in its record until the next clusters() run rewrites both."""
        self.conn.execute(_CLUSTERS_STALE)
