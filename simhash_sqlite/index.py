"""SimhashIndex: a single-file SQLite index of document fingerprints, and exact search in it."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from itertools import islice

import apsw
import numpy as np

from .core.features import jieba_version
from .core.fingerprint import BLOCKS, blocks, simhash, to_signed, to_unsigned
from .core.pool import FingerprintJob
from .core.settings import SHORT_TEXT, FingerprintSettings
from .core.sketch import DEFAULT_SCHEME, SketchScheme, sketch_many
from .errors import IndexNotFound, InvalidInput
from .find.check import DEFAULT_THRESHOLD, DuplicatePairs, ShingleCache, candidate_k, check_search, check_threshold
from .find.clusters import Cluster, ClusterReport, cluster_index, clustering_info, read_clusters
from .find.near_table import register_near_table
from .find.pairs import Progress
from .find.queries import Query, QueryError
from .find.search import Match, Plan, Searcher, SearchResult, forced_plan, near_sql, probe_cost_ns
from .store.database import connect, retry_busy, write_transaction
from .store.functions import register_functions
from .store.texts import content_hash, text_of
from .version import __version__

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
# While adding, the WAL is folded back into the file every this many pages (256 MiB of 4 KiB pages)
# instead of SQLite's 1000: a block-index leaf that many consecutive batches change is then copied into
# the file once, not once per batch (issue 16). Folded in at the end of the add.
BULK_CHECKPOINT_PAGES = 65_536


@dataclass(frozen=True)
class Document:
    """A text to index under a unique key (a path, or an id of the user's)."""

    key: str
    text: str


@dataclass(frozen=True)
class FingerprintedDocument:
    """A document fingerprinted before add(): a large file streamed in pieces, or a JSONL record
    fingerprinted in a worker process (sources.Reader). Its text is kept only for an index that stores
    texts."""

    key: str
    fingerprint: int | None  # unsigned, made with the index's settings; None: no features
    length: int
    content_hash: bytes
    sketch: bytes | None = None  # sketch.sketch() of the text, when the reader made one
    text: str | None = None  # the text, for an index that stores texts (never one streamed in pieces)


@dataclass(frozen=True)
class StoredDocument:
    key: str
    fingerprint: int | None  # unsigned; None when the text had no features
    length: int | None  # None for a bare fingerprint (add_fingerprints)
    content_hash: str | None
    text: str | None
    added_at: str


@dataclass
class AddReport:
    """What an add did. Counts cover committed batches only."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    no_features: list[str] = field(default_factory=list)  # the first keys stored with no fingerprint
    without_features: int = 0  # all of them (the list keeps only the first, so memory stays bounded)
    batches: int = 0
    characters: int = 0
    short: int = 0  # added or updated texts under settings.SHORT_TEXT characters (noisier distances)
    last_key: str | None = None  # the last document of the last committed batch

    @property
    def documents(self) -> int:
        return self.added + self.updated + self.unchanged


@dataclass(frozen=True)
class Stats:
    path: str
    documents: int
    without_features: int
    settings: FingerprintSettings
    store_text: bool
    schema_version: int
    created_with: str
    file_bytes: int
    clusters: dict | None = None  # the last clusters() run: k, representative, documents, at, stale


# Run in every transaction that changes documents; a no-op until clusters() has run.
_CLUSTERS_STALE = (
    "UPDATE simhash_meta SET value = json_set(value, '$.stale', json('true')) "
    "WHERE key = 'clusters' AND json_extract(value, '$.stale') IS NOT 1"
)


@dataclass
class _PreparedBatch:
    """A batch read and compared with the index, its fingerprints being computed; not yet written."""

    batch: list[Document | FingerprintedDocument]
    changed: list[tuple[Document | FingerprintedDocument, bytes]]  # (document, content hash) to write
    digests: dict[str, bytes]  # key -> content hash of the changed documents
    fingerprints: FingerprintJob  # of the changed Documents' texts, in order
    added: int
    updated: int
    unchanged: int
    no_features: list[str] = field(default_factory=list)  # keys written with no fingerprint (once written)


class _Commits:
    """add()'s transactions: prepared batches are written into an open transaction, COMMITted once it
    holds `size` documents (None: SimhashIndex.transaction_size(), asked again for each transaction, with
    the page cache to go with it). Only committed batches reach the report and on_batch."""

    def __init__(self, index: SimhashIndex, report: AddReport, size: int | None, on_batch) -> None:
        self.index, self.report, self.size, self.on_batch = index, report, size, on_batch
        self.open: ExitStack | None = None
        self.limit = 0
        # The counts of the batches written since the last COMMIT (not the batches: their texts go).
        self.written, self.documents = AddReport(), 0

    def write(self, prepared: _PreparedBatch, after: _PreparedBatch | None = None) -> None:
        rows = self.index._batch_rows(prepared, after)
        if rows and self.open is None:
            conn = self.index.conn
            self.limit = self.size or self.index.transaction_size()
            if self.size is None:
                conn.pragma("cache_size", -self.index._add_cache_mib() * 1024)
            self.open = ExitStack()
            self.open.enter_context(write_transaction(conn))
            self.index._clusters_now_stale()
        if rows:
            self.index.conn.executemany(_UPSERT, rows)
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


def _batch_counts(prepared: _PreparedBatch) -> AddReport:
    """A written batch's counts, without its documents."""
    return AddReport(
        added=prepared.added,
        updated=prepared.updated,
        unchanged=prepared.unchanged,
        no_features=prepared.no_features[:KEPT_KEYS],
        without_features=len(prepared.no_features),
        batches=1,
        characters=sum(_length(doc) for doc in prepared.batch),
        short=sum(_length(doc) < SHORT_TEXT for doc, _ in prepared.changed),
        last_key=prepared.batch[-1].key,
    )


def _merge_counts(report: AddReport, more: AddReport) -> None:
    """Add the counts of `more` (later batches) to `report`."""
    for name in ("added", "updated", "unchanged", "without_features", "batches", "characters", "short"):
        setattr(report, name, getattr(report, name) + getattr(more, name))
    report.no_features.extend(more.no_features[: max(0, KEPT_KEYS - len(report.no_features))])
    report.last_key = more.last_key


def _length(doc: Document | FingerprintedDocument) -> int:
    return doc.length if isinstance(doc, FingerprintedDocument) else len(doc.text)


MAX_BATCH_SIZE = 100_000_000  # far past any useful batch, and below what islice() can take


def check_batch_size(batch_size) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise InvalidInput(f"batch_size must be a whole number from 1 to {MAX_BATCH_SIZE:,}, not {batch_size!r}")


def _check_keys(keys: Iterable[str]) -> None:
    """Keys with NUL characters are refused: carray and SQLite's C-string functions cut them there."""
    for key in keys:
        if "\x00" in key:
            raise InvalidInput(f"a key must not contain a NUL character: {key!r}")


_UPSERT = """
INSERT INTO documents (key, fingerprint, b0, b1, b2, b3, length, content_hash, text, sketch)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET
    fingerprint = excluded.fingerprint, b0 = excluded.b0, b1 = excluded.b1, b2 = excluded.b2,
    b3 = excluded.b3, length = excluded.length, content_hash = excluded.content_hash,
    text = excluded.text, added_at = excluded.added_at, sketch = excluded.sketch
"""


_UPSERT_FINGERPRINT = """
INSERT INTO documents (key, fingerprint, b0, b1, b2, b3) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET
    fingerprint = excluded.fingerprint, b0 = excluded.b0, b1 = excluded.b1, b2 = excluded.b2,
    b3 = excluded.b3, length = NULL, content_hash = NULL, text = NULL, added_at = excluded.added_at, sketch = NULL
"""

# The indexes a bulk load of an empty index drops and builds again (not the UNIQUE key index).
_SECONDARY_INDEXES = (
    "SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'documents' AND sql IS NOT NULL"
)


def _fingerprint_rows(batch: list[tuple[str, int]]) -> list[tuple]:
    """(key, signed, b0, b1, b2, b3) rows, computed with numpy: per-item Python arithmetic is the
    larger part of a load's time otherwise."""
    keys = [key for key, _ in batch]
    fingerprints = [fp for _, fp in batch]
    if not all(type(fp) is int for fp in fingerprints):  # numpy would truncate floats and take bools
        fingerprints = [_checked_int(fp) for fp in fingerprints]
    try:
        unsigned = np.array(fingerprints, dtype=np.uint64)
    except OverflowError:
        for fp in fingerprints:
            to_signed(fp)  # raises InvalidInput naming the value out of range
        raise
    parts = [((unsigned >> np.uint64(shift)) & np.uint64(0xFFFF)).tolist() for shift in (48, 32, 16, 0)]
    return list(zip(keys, unsigned.view(np.int64).tolist(), *parts))


def _checked_int(fp) -> int:
    if isinstance(fp, bool) or not isinstance(fp, (int, np.integer)):
        raise InvalidInput(f"a fingerprint is an unsigned 64-bit integer, not {fp!r}")
    return int(fp)


@contextmanager
def _bulk_writes(conn: apsw.Connection, cache_mib: int) -> Iterator[None]:
    """Settings of this connection for the duration of an add: a page cache of cache_mib MiB and
    checkpoints every BULK_CHECKPOINT_PAGES; then the previous settings again, and once the add has
    finished, the WAL it left over SQLite's usual size folded into the file (a passive checkpoint: it
    never waits for readers, and one still reading keeps its pages for the next checkpoint)."""
    cache, pages = conn.pragma("cache_size"), conn.pragma("wal_autocheckpoint")
    conn.pragma("cache_size", -cache_mib * 1024)
    conn.pragma("wal_autocheckpoint", max(pages, BULK_CHECKPOINT_PAGES) if pages > 0 else pages)
    try:
        yield
    finally:
        conn.pragma("cache_size", cache)
        conn.pragma("wal_autocheckpoint", pages)
    wal = conn.filename + "-wal"
    if 0 < pages and os.path.exists(wal) and os.path.getsize(wal) > pages * conn.pragma("page_size"):
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


class SimhashIndex:
    """An index file. Fingerprint settings are fixed when the file is created and recorded in it.

    >>> with SimhashIndex("corpus.db", create=True) as index:
    ...     index.add([Document("a", "some text"), Document("b", "some other text")])
    ...     index.near("some text", k=3)

    Keyword settings (features, ngram, weights, hmm, store_text) choose how a new index makes
    fingerprints; for an existing one they must match what it recorded (None: take the recorded).
    readonly: open an existing index for reading only (SQLite refuses every write; the web pages).

    Threads: one SimhashIndex per thread. It holds one SQLite connection, whose transactions two
    threads would interleave; open another (cheap) in each thread, e.g. in a threading.local().
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        create: bool = False,
        features: str | None = None,
        ngram: int | None = None,
        weights: str | None = None,
        hmm: bool | None = None,
        store_text: bool | None = None,
        readonly: bool = False,
    ) -> None:
        if readonly and create:
            raise InvalidInput("an index opened read-only cannot be created")
        self.path = os.fspath(path)
        requested = {"features": features, "ngram": ngram, "weights": weights, "hmm": hmm}
        if create:  # settings a new index could not record are refused before a file is made
            FingerprintSettings(**{name: value for name, value in requested.items() if value is not None})
        self.conn = connect(self.path, create=create, readonly=readonly)
        try:
            self.settings, self.store_text = self._settings(requested, store_text, create)
            # (sketched, out of reach) when this open sketched an index made before sketches, else None.
            self.sketch_upgrade = self._sketch_older_documents()
            # The scheme its sketches were made with (an older index keeps version 1: no sizes).
            self.sketch_scheme = self._sketch_scheme()
            register_functions(self.conn, self.settings)
            register_near_table(self.conn, self)
            self._searcher = Searcher(self.conn)  # keeps scan arrays and block counts between queries
        except BaseException:
            self.conn.close()
            raise

    def _settings(self, requested: dict, store_text: bool | None, create: bool) -> tuple[FingerprintSettings, bool]:
        meta = self._meta()
        if "fingerprint" not in meta and not create:
            # Its creating add was killed before recording settings: only an add may choose them.
            raise IndexNotFound(f"the index {self.path} was never finished (run simq add --db {self.path} FILES)")
        if "fingerprint" not in meta:
            # A new index: record its settings once (another process may be doing the same).
            settings = FingerprintSettings(**{k: v for k, v in requested.items() if v is not None})
            rows = {
                "sketch": DEFAULT_SCHEME.to_json(),
                "fingerprint": settings.to_json(),
                "store_text": "1" if store_text else "0",
                "created_with": f"simhash-sqlite {__version__}",
            }
            if settings.features == "words":
                rows["jieba_version"] = jieba_version()
            with write_transaction(self.conn):
                self.conn.executemany(
                    "INSERT INTO simhash_meta (key, value) VALUES (?, ?) ON CONFLICT DO NOTHING", rows.items()
                )
            meta = self._meta()
        settings = FingerprintSettings.from_json(meta["fingerprint"]).merged(**requested)
        stored = meta.get("store_text") == "1"
        if store_text is not None and store_text != stored:
            raise InvalidInput(
                f"this index was created {'with' if stored else 'without'} stored texts; "
                f"store_text={store_text} does not match"
            )
        return settings, stored

    def _sketch_older_documents(self) -> tuple[int, int] | None:
        """An index made before sketches (simhash_meta has no 'sketch'): sketch its documents where
        their texts can be reached (stored, or the unchanged file at the key's path), once. Returns
        (sketched, out of reach), or None when there was nothing to do or the file is read-only. The
        documents out of reach keep a NULL sketch: their pairs are judged by distance."""
        if "sketch" in self._meta() or self.conn.readonly("main"):
            return None
        sketched = out_of_reach = 0
        with write_transaction(self.conn):
            if "sketch" in self._meta():  # another process did it while we waited for the lock
                return None
            last = -1
            while True:
                rows = self.conn.execute(
                    "SELECT id, key, text, content_hash FROM documents WHERE id > ? AND fingerprint IS NOT NULL "
                    "AND sketch IS NULL ORDER BY id LIMIT ?",
                    (last, SKETCH_UPGRADE_BATCH),
                ).fetchall()
                if not rows:
                    break
                last = rows[-1][0]
                texts = [(i, text_of(key, stored, digest)) for i, key, stored, digest in rows]
                found = [(i, text) for i, text in texts if text is not None]
                out_of_reach += len(rows) - len(found)
                sketches, present = sketch_many([text for _, text in found])
                self.conn.executemany(
                    "UPDATE documents SET sketch = ? WHERE id = ?",
                    [(row.tobytes(), i) for (i, _), row, there in zip(found, sketches, present.tolist()) if there],
                )
                sketched += int(present.sum())
            self.conn.execute(
                "INSERT INTO simhash_meta (key, value) VALUES ('sketch', ?) ON CONFLICT DO NOTHING",
                (DEFAULT_SCHEME.to_json(),),
            )
        return sketched, out_of_reach

    def _sketch_scheme(self) -> SketchScheme:
        try:  # (a read-only index made before sketches records none: the default, it has no sketches)
            return SketchScheme.recorded(self._meta().get("sketch"))
        except ValueError as exc:
            raise InvalidInput(
                f"the index {self.path} records a sketch scheme this version cannot read: {exc}"
            ) from None

    def _meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM simhash_meta"))

    # -- life cycle --------------------------------------------------------------------------

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> SimhashIndex:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- adding ------------------------------------------------------------------------------

    def fingerprint(self, text: str) -> int | None:
        """The unsigned fingerprint of a text with this index's settings (None: no features)."""
        return simhash(text, self.settings)

    def add(
        self,
        documents: Iterable[Document | FingerprintedDocument],
        *,
        batch_size: int | None = None,
        on_batch: Callable[[AddReport], None] | None = None,
    ) -> AddReport:
        """Add or update documents, in transactions of batch_size documents.

        batch_size None: transactions of DEFAULT_BATCH_SIZE documents, larger into a large index
        (transaction_size()), read DEFAULT_BATCH_SIZE at a time so that memory stays bounded.
        on_batch(report) runs after each COMMIT, with the counts of every committed document.
        An interrupted add leaves every committed transaction in place; running it again skips the
        documents already there (same key, same content) and finishes the rest.
        """
        if batch_size is not None:
            check_batch_size(batch_size)
        report = AddReport()
        iterator = iter(documents)
        commits = _Commits(self, report, batch_size, on_batch)
        # A pipeline of two batches: the next batch is read, hashed and handed to the pool's workers
        # before this one is written, so that the workers fingerprint while this process parses
        # input and writes to SQLite (with a barrier per batch they waited for it).
        pending: _PreparedBatch | None = None
        with _bulk_writes(self.conn, ADD_CACHE_MIB):
            try:
                while True:
                    try:
                        batch = list(islice(iterator, batch_size or DEFAULT_BATCH_SIZE))
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
                commits.roll_back()  # only after a failed write: nothing of the open transaction was reported
        return report

    def _prepare_batch(
        self, batch: list[Document | FingerprintedDocument], pending: _PreparedBatch | None
    ) -> _PreparedBatch:
        """Which documents of the batch are new or changed, with their fingerprints under way.

        pending: the batch before, not yet written; its keys count as stored with their new content.
        """
        known = self._content_hashes({doc.key for doc in batch})
        if pending is not None:
            known.update((key, pending.digests[key]) for key in {doc.key for doc in batch} & pending.digests.keys())
        changed, added, updated, unchanged = [], 0, 0, 0
        for doc in batch:
            prepared = isinstance(doc, FingerprintedDocument)
            digest = doc.content_hash if prepared else content_hash(doc.text)
            if known.get(doc.key) == digest:
                unchanged += 1
                continue
            if doc.key in known:
                updated += 1
            else:
                added += 1
            known[doc.key] = digest
            changed.append((doc, digest))
        # Streamed files come fingerprinted; the rest in one vectorized call (all cores if large).
        plain = [doc.text for doc, _ in changed if not isinstance(doc, FingerprintedDocument)]
        digests = {doc.key: digest for doc, digest in changed}
        fingerprints = FingerprintJob(plain, self.settings, start_pool=pending is not None, sketches=self.sketch_scheme)
        return _PreparedBatch(batch, changed, digests, fingerprints, added, updated, unchanged)

    def _batch_rows(self, prepared: _PreparedBatch, after: _PreparedBatch | None = None) -> list[tuple]:
        """The rows to upsert for a prepared batch. after: the batch prepared next, whose fingerprints
        this process works on while the workers finish this one's."""
        computed = iter(prepared.fingerprints.result(after.fingerprints if after is not None else None))
        rows = []
        for doc, digest in prepared.changed:
            streamed = isinstance(doc, FingerprintedDocument)
            fingerprint, sketch = (doc.fingerprint, doc.sketch) if streamed else next(computed)
            if fingerprint is None:
                prepared.no_features.append(doc.key)
                signed, parts = None, (None,) * 4
            else:
                signed, parts = to_signed(fingerprint), blocks(fingerprint)
            text = doc.text if self.store_text else None
            rows.append((doc.key, signed, *parts, _length(doc), digest, text, sketch))
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
        check_batch_size(batch_size)
        written = 0
        iterator = iter(items)
        with _bulk_writes(self.conn, cache_mib):
            if rebuild_indexes is None:
                rebuild_indexes = self.conn.execute("SELECT NOT EXISTS (SELECT 1 FROM documents)").get
            if rebuild_indexes:
                with write_transaction(self.conn):
                    definitions = self.conn.execute(_SECONDARY_INDEXES).fetchall()
                    for name, _sql in definitions:
                        self.conn.execute(f'DROP INDEX "{name}"')
                    while batch := list(islice(iterator, batch_size)):
                        self.conn.executemany(_UPSERT_FINGERPRINT, _fingerprint_rows(batch))
                        written += len(batch)
                    for _name, sql in definitions:
                        self.conn.execute(sql)
                    self._clusters_now_stale()
                return written
            while batch := list(islice(iterator, batch_size)):
                rows = _fingerprint_rows(batch)
                with write_transaction(self.conn):
                    self.conn.executemany(_UPSERT_FINGERPRINT, rows)
                    self._clusters_now_stale()
                written += len(batch)
        return written

    def _content_hashes(self, keys: set[str]) -> dict[str, bytes]:
        _check_keys(keys)
        return dict(
            self.conn.execute(
                "SELECT key, content_hash FROM documents WHERE key IN carray(?)", (apsw.carray(tuple(keys)),)
            )
        )

    # -- reading -----------------------------------------------------------------------------

    def get(self, key: str) -> StoredDocument | None:
        row = self.conn.execute(
            "SELECT key, fingerprint, length, content_hash, text, added_at FROM documents WHERE key = ?", (key,)
        ).get
        if row is None:
            return None
        key, fingerprint, length, digest, text, added_at = row
        return StoredDocument(
            key,
            None if fingerprint is None else to_unsigned(fingerprint),
            length,
            None if digest is None else digest.hex(),
            text,
            added_at,
        )

    def __len__(self) -> int:
        return self.conn.execute("SELECT count(*) FROM documents").get

    def keys(self, prefix: str | None = None) -> Iterator[str]:
        """Every key in the order added; with a prefix, the keys starting with it, sorted."""
        if prefix is None:
            yield from (key for (key,) in self.conn.execute("SELECT key FROM documents ORDER BY id"))
            return
        # A range on the key's unique index; U+10FFFF (a noncharacter) sorts after every other code point.
        rows = self.conn.execute(
            "SELECT key FROM documents WHERE key >= ? AND key < ? ORDER BY key", (prefix, prefix + "\U0010ffff")
        )
        yield from (key for (key,) in rows)

    # -- removing ----------------------------------------------------------------------------

    def remove(self, keys: Iterable[str], *, batch_size: int = 10_000) -> int:
        """Delete the documents with these keys (unknown keys are ignored); returns how many went.

        One transaction per batch, like add(): an interrupted remove keeps the batches it committed.
        """
        check_batch_size(batch_size)
        removed = 0
        iterator = iter(keys)
        while batch := tuple(islice(iterator, batch_size)):
            _check_keys(batch)
            with write_transaction(self.conn):
                self.conn.execute("DELETE FROM documents WHERE key IN carray(?)", (apsw.carray(batch),))
                if changes := self.conn.changes():
                    removed += changes
                    self._clusters_now_stale()
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
                self._clusters_now_stale()
        return keys

    def _clusters_now_stale(self) -> None:
        """Documents changed: the clusters table (if any) describes the index as it was, so say so
        in its record until the next clusters() run rewrites both."""
        self.conn.execute(_CLUSTERS_STALE)

    def vacuum(self) -> tuple[int, int]:
        """Rebuild the file without the space deleted documents left; (bytes before, bytes after).

        Needs as much free disk as the index takes. Readers may go on meanwhile; writers wait.
        """
        before = self.stats().file_bytes
        retry_busy(self.conn, "VACUUM")
        # Fold the WAL back into the file and truncate it; with readers still active this may only
        # partly succeed, which is harmless (the next checkpoint finishes it).
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return before, self.stats().file_bytes

    def stats(self) -> Stats:
        documents, without = self.conn.execute(
            "SELECT count(*), count(*) - count(fingerprint) FROM documents"
        ).get
        size = sum(os.path.getsize(p) for p in (self.path, self.path + "-wal") if os.path.exists(p))
        return Stats(
            path=self.path,
            documents=documents,
            without_features=without,
            settings=self.settings,
            store_text=self.store_text,
            schema_version=self.conn.pragma("user_version"),
            created_with=self._meta().get("created_with", "?"),
            file_bytes=size,
            clusters=clustering_info(self.conn),
        )

    # -- searching ---------------------------------------------------------------------------

    def near(
        self,
        text: str | None = None,
        *,
        fingerprint: int | None = None,
        key: str | None = None,
        k: int | None = None,
        limit: int | None = None,
        check: bool = True,
        threshold: float = DEFAULT_THRESHOLD,
        plan: str | None = None,
    ) -> list[Match]:
        """Near-duplicates of a text, a fingerprint or a stored key, closest first (a key's own
        document is left out). search() with the plan and counts left out; see it for the arguments."""
        return self.search(
            text, fingerprint=fingerprint, key=key, k=k, limit=limit, check=check, threshold=threshold, plan=plan
        ).matches

    def search(
        self,
        text: str | None = None,
        *,
        fingerprint: int | None = None,
        key: str | None = None,
        k: int | None = None,
        limit: int | None = None,
        check: bool = True,
        threshold: float = DEFAULT_THRESHOLD,
        plan: str | None = None,
    ) -> SearchResult:
        """Near-duplicates of one query, with how they were found: the plan, the candidates read and
        (when checking) the check's counts.

        Candidates are every document within Hamming distance k (exact for every k). With check (the
        default) each is kept iff the 5-shingle Jaccard of its text and the query's is >= threshold,
        or, where a text is out of reach, iff it is within min(k, RECOMMENDED_K); each match says which
        (Match.checked_by). k defaults to CONFIRM_K when checking, RECOMMENDED_K when not. `limit` counts
        kept matches. plan: None chooses by cost; "index" or "scan" force one (same answer)."""
        k = candidate_k(k, check)
        threshold = check_threshold(threshold)
        _check_limit(limit)
        chosen = forced_plan(k, plan)
        query = self._query_fingerprint(text, fingerprint, key)
        result = self._searcher.search(query, k, None if check else limit, exclude=key, plan=chosen)
        if not check:
            return result
        query = Query(text=text, fingerprint=fingerprint, key=key)
        return check_search(result, query, ShingleCache(self), threshold, limit)

    def near_many(
        self,
        queries: Iterable[Query | int | QueryError],
        *,
        k: int | None = None,
        limit: int | None = None,
        check: bool = True,
        threshold: float = DEFAULT_THRESHOLD,
        plan: str | None = None,
    ) -> Iterator[tuple[Query, SearchResult | QueryError]]:
        """search() for many queries (Query objects, or bare unsigned fingerprints) in one go, yielding
        (query, answer) in order: a SearchResult, or a QueryError for a query that cannot be searched
        (unknown key, text without features; QueryErrors given as input pass through), so one bad
        line does not end a long batch. The same check and defaults as search().

        Lazy: a million queries stream through without being held in memory. Once the probes have
        cost as much as reading every fingerprint would, the batch reads them (8 bytes per document
        in memory), so long batches with a large k scan arrays instead of probing. The first query that
        reads far more candidates than uniform block values would give (a hot bucket) makes the
        planner count the rows per block value, once; later queries in hot buckets then scan when
        that is cheaper.
        """
        k = candidate_k(k, check)
        threshold = check_threshold(threshold)
        _check_limit(limit)
        chosen = forced_plan(k, plan)
        shingles = ShingleCache(self) if check else None
        counted = chosen is not None
        hot = None
        # Ski rental: once the probes have cost as much as reading every fingerprint would, read them;
        # the planner then compares each query's probes with a scan of arrays already in memory.
        probe_spent, load_cost = 0.0, None
        for query in queries:
            if isinstance(query, QueryError):
                yield query.query, query
                continue
            if not isinstance(query, Query):
                query = Query(fingerprint=query)
            try:
                fp = self._query_fingerprint(query.text, query.fingerprint, query.key)
            except InvalidInput as exc:
                yield query, QueryError(query, str(exc))
                continue
            result = self._searcher.search(fp, k, None if check else limit, exclude=query.key, plan=chosen)
            yield query, result if shingles is None else check_search(result, query, shingles, threshold, limit)
            if not counted:
                if hot is None:
                    hot = HOT_CANDIDATES + HOT_FACTOR * self._searcher.uniform_candidates(k)
                if result.candidates > hot:
                    self._searcher.load_block_counts()
                    counted = True
            if chosen is None and result.plan.kind != "scan":
                probe_spent += probe_cost_ns(BLOCKS * result.plan.probes_per_block, result.candidates)
                if load_cost is None:
                    load_cost = self._searcher.load_cost_ns()
                if probe_spent > load_cost and not self._searcher.scan_loaded():
                    self._searcher.load_scan()
                    probe_spent = 0.0

    # -- whole-corpus near duplicates (confirm.py, index_arrays.py, clusters.py) --------------

    def dupes(
        self,
        k: int | None = None,
        *,
        check: bool = True,
        threshold: float = DEFAULT_THRESHOLD,
        on_progress: Progress | None = None,
    ) -> DuplicatePairs:
        """Every pair of near-duplicate documents, each once (first added first), streamed in no
        particular order: the pairs within k, checked as in search() (same defaults). Iterate the
        result; its `report` counts how pairs were judged (None without check). With check and no k,
        the candidates come from the sketches (confirm.DuplicatePairs), at any distance.
        on_progress(done, total): how far the pair search is, for a progress bar."""
        return DuplicatePairs(self, k, threshold, check=check, on_progress=on_progress)

    def clusters(
        self,
        k: int | None = None,
        *,
        check: bool = True,
        threshold: float = DEFAULT_THRESHOLD,
        representative: str = "first",
        on_progress: Progress | None = None,
    ) -> ClusterReport:
        """Group documents into connected components of the dupes() pairs and write them to the
        clusters table (cluster = lowest id; representative by rule: first, last, longest, shortest).
        The report's `check` holds how the pairs were judged (None without check)."""
        pairs = self.dupes(k, check=check, threshold=threshold, on_progress=on_progress)
        if pairs.report is None:
            return cluster_index(self.conn, pairs.k, representative, on_progress=on_progress)
        report = cluster_index(
            self.conn, pairs.k, representative, pairs=pairs.id_pairs(), threshold=pairs.report.threshold
        )
        return dataclasses.replace(report, check=pairs.report)

    def cluster_list(self, *, min_size: int = 2) -> Iterator[Cluster]:
        """The clusters written by the last clusters() run, with their member keys."""
        return read_clusters(self.conn, min_size)

    def near_sql(self, k: int = 3) -> str:
        """Standalone SQL for the distance search, near(k=k, check=False), for this k (see search.near_sql).
        Its default, k = 3, is the classic line where the SQL is four block equality lookups."""
        return near_sql(self.plan(k))

    def plan(self, k: int, fingerprint: int | None = None) -> Plan:
        """The plan near() would use for this k (and fingerprint, when block counts are known)."""
        return self._searcher.plan(k, fingerprint)

    def _query_fingerprint(self, text: str | None, fingerprint: int | None, key: str | None) -> int:
        if sum(x is not None for x in (text, fingerprint, key)) != 1:
            raise InvalidInput("give exactly one of a text, a fingerprint or a key to search for")
        if key is not None:
            stored = self.conn.execute("SELECT fingerprint FROM documents WHERE key = ?", (key,)).fetchall()
            if not stored:
                raise InvalidInput(f"no document with key {key!r} in {self.path}")
            if stored[0][0] is None:
                raise InvalidInput(f"document {key!r} has no features (empty text), so it has no neighbours")
            return to_unsigned(stored[0][0])
        if text is not None:
            fingerprint = self.fingerprint(text)
            if fingerprint is None:
                raise InvalidInput("the query text has no features (no letters or digits) to search with")
            return fingerprint
        if isinstance(fingerprint, bool) or not isinstance(fingerprint, int):
            raise InvalidInput(f"a fingerprint is an unsigned 64-bit integer, not {fingerprint!r}")
        to_signed(fingerprint)  # range check
        return fingerprint


# A batch query reading more candidates than this (HOT_CANDIDATES + HOT_FACTOR x the uniform
# expectation) has met a hot bucket: the batch then counts rows per block value to plan the rest.
HOT_CANDIDATES = 1000
HOT_FACTOR = 20


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidInput(f"limit must be a whole number, not negative: {limit!r}")
