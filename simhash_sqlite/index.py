"""SimhashIndex: a single-file SQLite index of document fingerprints, and exact search in it."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from .core.features import jieba_version
from .core.fingerprint import BLOCKS, simhash, simhash_and_sketch_many, to_signed, to_unsigned
from .core.settings import DEFAULT_THRESHOLD, FingerprintSettings, validate_k
from .core.short_texts import SHORT_TEXT_MOST, short_text_scheme
from .core.sketch import DEFAULT_SCHEME, SketchScheme, sketch_many
from .errors import IndexNotFound, InvalidInput, SettingsMismatch
from .find.check import DuplicateSearch, PreparedQuery, ShingleCache, check_candidates
from .find.native_near import NO_FEATURES, NativeNear
from .find.near_table import register_near_table
from .find.queries import FailedQuery, Query
from .find.search import (
    MATCH_ROW_NS,
    Match,
    Plan,
    Searcher,
    SearchOptions,
    SearchResult,
    near_sql,
    probe_cost_ns,
)
from .store.database import connect, read_only, record_meta, retry_busy, write_transaction
from .store.documents import (
    AddReport,
    Document,
    FingerprintedBatch,
    FingerprintedDocument,
    ShortTexts,
    StoredDocument,
)
from .store.functions import register_functions
from .store.meta import validate_meta
from .store.texts import text_of
from .store.writer import BULK_CACHE_MIB, FINGERPRINT_BATCH_SIZE, SKETCH_UPGRADE_BATCH, Writer
from .version import __version__

if TYPE_CHECKING:
    from .find.clusters import Cluster, ClusterReport
    from .find.pairs import Progress
    from .find.review import HonouredPairs

# find.clusters, find.review and find.chains (whole-corpus pairs and clusters) are imported by the methods that
# use them: a search or an add does not (bench/startup.py).


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
    short_texts: ShortTexts | None = None  # what the index keeps for checking short texts exactly
    key_root: str | None = None  # the folder relative file keys are taken from (None: the working folder)


def _first_meta(settings: FingerprintSettings, store_text: bool) -> dict[str, str]:
    """The simhash_meta rows a new index starts with: how its fingerprints, sketches and short texts are made."""
    rows = {
        "sketch": DEFAULT_SCHEME.to_json(),
        "short_texts": short_text_scheme(),
        "fingerprint": settings.to_json(),
        "store_text": "1" if store_text else "0",
        "created_with": f"simhash-sqlite {__version__}",
    }
    if settings.features == "words":
        rows["jieba_version"] = jieba_version()
    return rows


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
        # keyword arguments of FingerprintSettings (None: not asked for)
        requested: dict[str, Any] = {"features": features, "ngram": ngram, "weights": weights, "hmm": hmm}
        first_meta = None
        if create:  # settings a new index could not record are refused before a file is made
            chosen = FingerprintSettings(**{name: value for name, value in requested.items() if value is not None})
            first_meta = _first_meta(chosen, bool(store_text))
        self.conn = connect(self.path, create=create, readonly=readonly, first_meta=first_meta)
        try:
            self.settings, self.store_text = self._settings(requested, store_text, create)
            # The folder relative file keys are taken from (store.texts.key_path); None: none recorded
            # (record_key_root), and they are taken from the working folder.
            self.key_root: str | None = self._meta().get("key_root")
            # (sketched, out of reach) when this open sketched an index made before sketches, else None.
            self.sketch_upgrade = self._sketch_older_documents()
            # Made before sketches and opened read-only: none were made (a search never writes).
            self.made_before_sketches = "sketch" not in self._meta()
            # The scheme its sketches were made with (an older index keeps version 1: no sizes).
            self.sketch_scheme = self._sketch_scheme()
            self.short_texts = self._short_texts()
            register_functions(self.conn, self.settings)
            register_near_table(self.conn, self)
            self._writer = Writer(self.conn, self.path, self.settings, self.sketch_scheme, self.store_text)
            self._searcher = Searcher(self.conn)  # keeps scan arrays and block counts between queries
            self._native = NativeNear(self.conn)  # the checked search in one C call, where it answers the same
        except BaseException:
            self.conn.close()
            raise

    def _settings(self, requested: dict, store_text: bool | None, create: bool) -> tuple[FingerprintSettings, bool]:
        meta = self._meta()
        if "fingerprint" not in meta and not create:
            # Its creating add was killed before recording settings: only an add may choose them.
            raise IndexNotFound(f"the index {self.path} was never finished (run simq add --db {self.path} FILES)")
        if "fingerprint" not in meta:
            # A new index's settings are written with its schema (connect's first_meta); this is an index
            # whose creating add, of a version before that, was killed in between: record them once
            # (another process may be doing the same).
            settings = FingerprintSettings(**{k: v for k, v in requested.items() if v is not None})
            with write_transaction(self.conn):
                record_meta(self.conn, _first_meta(settings, bool(store_text)))
            meta = self._meta()
        validate_meta(meta, self.path)  # every recorded setting, before any is used
        settings = FingerprintSettings.from_json(meta["fingerprint"]).merged(**requested)
        stored = meta.get("store_text") == "1"
        if store_text is not None and store_text != stored:
            raise SettingsMismatch(
                f"this index was created {'with' if stored else 'without'} stored texts; "
                f"store_text={store_text} does not match (leave it out, or use another index file)",
                "store_text", stored, store_text,
            )
        return settings, stored

    def _sketch_older_documents(self) -> tuple[int, int] | None:
        """An index made before sketches (simhash_meta has no 'sketch'): sketch its documents where
        their texts can be reached (stored, or the unchanged file at the key's path), once. Returns
        (sketched, out of reach), or None when there was nothing to do or the file is read-only. The
        documents out of reach keep a NULL sketch: their pairs are judged by distance."""
        if "sketch" in self._meta() or read_only(self.conn):
            return None
        sketched = out_of_reach = 0
        with write_transaction(self.conn):
            if "sketch" in self._meta():  # another process did it while we waited for the lock
                return None
            last = -1
            while True:
                rows = cast(list[tuple[int, str, str | None, bytes | None]], self.conn.execute(
                    "SELECT id, key, text, content_hash FROM documents WHERE id > ? AND fingerprint IS NOT NULL "
                    "AND sketch IS NULL ORDER BY id LIMIT ?",
                    (last, SKETCH_UPGRADE_BATCH),
                ).fetchall())  # the columns' types in the schema
                if not rows:
                    break
                last = rows[-1][0]
                texts = [(i, text_of(key, stored, digest, self.key_root)) for i, key, stored, digest in rows]
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

    def _short_texts(self, counted: bool = False) -> ShortTexts:
        """What the index keeps for short texts (counted: with how many documents have it or lack it, a
        pass over the table). An index made before (no 'short_texts' in simhash_meta) opened for writing
        has the column (migration 0005) and records from which document id on its documents have it;
        those before it whose texts are not stored lack it."""
        meta = self._meta()
        column = any(row[1] == "short_text" for row in self.conn.execute("PRAGMA table_info(documents)"))
        if "short_texts" not in meta and column and not read_only(self.conn):
            with write_transaction(self.conn):
                start = self.conn.execute("SELECT coalesce(max(id), 0) + 1 FROM documents").get
                self.conn.execute(
                    "INSERT INTO simhash_meta (key, value) VALUES ('short_texts', json_set(?, '$.from_id', ?)) "
                    "ON CONFLICT DO NOTHING", (short_text_scheme(), start),
                )
            meta = self._meta()
        kept = "short_texts" in meta and column
        if not counted or self.store_text:  # (an index that stores its texts checks them)
            return ShortTexts(kept=kept or self.store_text, column=column)
        start = json.loads(meta["short_texts"]).get("from_id", 0) if kept else None
        might = f"fingerprint IS NOT NULL AND text IS NULL AND (length IS NULL OR length <= {SHORT_TEXT_MOST})"
        if start is None:
            lacking = self.conn.execute(f"SELECT count(*) FROM documents WHERE {might}").get
        else:  # (a document updated since has it, or is too long to)
            lacking = self.conn.execute(
                f"SELECT count(*) FROM documents WHERE {might} AND short_text IS NULL AND id < ?", (start,)
            ).get
        stored = self.conn.execute("SELECT count(short_text) FROM documents").get if column else 0
        return ShortTexts(kept=kept, column=column, lacking=lacking, stored=stored)

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
        documents: Iterable[Document | FingerprintedDocument | FingerprintedBatch],
        *,
        batch_size: int | None = None,
        on_batch: Callable[[AddReport], None] | None = None,
    ) -> AddReport:
        """Add or update documents, in transactions of batch_size documents (Writer.add).

        batch_size None: transactions of DEFAULT_BATCH_SIZE documents, larger into a large index
        (transaction_size()), read DEFAULT_BATCH_SIZE at a time so that memory stays bounded.
        on_batch(report) runs after each COMMIT, with the counts of every committed document.
        An interrupted add leaves every committed transaction in place; running it again skips the
        documents already there (same key, same content) and finishes the rest.
        """
        return self._writer.add(documents, batch_size=batch_size, on_batch=on_batch)

    def add_fingerprints(
        self,
        items: Iterable[tuple[str, int]],
        *,
        batch_size: int = FINGERPRINT_BATCH_SIZE,
        cache_mib: int = BULK_CACHE_MIB,
        rebuild_indexes: bool | None = None,
    ) -> int:
        """Add (key, unsigned fingerprint) pairs made elsewhere (no text, no content hash); returns how
        many were written. Into an empty index the load is one transaction that builds the search
        indexes once at the end (Writer.add_fingerprints)."""
        return self._writer.add_fingerprints(
            items, batch_size=batch_size, cache_mib=cache_mib, rebuild_indexes=rebuild_indexes
        )

    def transaction_size(self) -> int:
        """Documents per transaction of add() without a batch size (Writer.transaction_size)."""
        return self._writer.transaction_size()

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
        One transaction per batch, like add(): an interrupted remove keeps the batches it committed."""
        return self._writer.remove(keys, batch_size=batch_size)

    def remove_glob(self, pattern: str) -> list[str]:
        """Delete the documents whose key matches a SQLite GLOB pattern; returns their keys.
        GLOB is case-sensitive; * and ? match any characters, "/" included; [abc] and [^abc] are sets."""
        return self._writer.remove_glob(pattern)

    def record_key_root(self, folder: str | os.PathLike) -> None:
        """Record the folder that relative keys name files in (simhash_meta 'key_root'), so that their
        files are found, and checked exactly, from any working folder; `simq add` records the folder it
        makes an index in. Once: a root already recorded stays (keys were made relative to it)."""
        folder = os.path.abspath(folder)
        with write_transaction(self.conn):
            record_meta(self.conn, {"key_root": folder})
        self.key_root = self._meta().get("key_root")

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
        from .find.clusters import clustering_info

        clusters = clustering_info(self.conn)
        if clusters is not None and clusters["documents"] != documents:
            # Documents added or deleted behind simq's back (another program) leave the flag unset.
            clusters["stale"] = True
        return Stats(
            path=self.path,
            documents=documents,
            without_features=without,
            settings=self.settings,
            store_text=self.store_text,
            schema_version=self.conn.pragma("user_version"),
            created_with=self._meta().get("created_with", "?"),
            file_bytes=size,
            clusters=clusters,
            short_texts=self._short_texts(counted=True),
            key_root=self.key_root,
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
        options = SearchOptions.of(k, limit, check, threshold, plan)
        query = Query(text=text, fingerprint=fingerprint, key=key)
        if not options.check:
            found = self._query_fingerprint(text, fingerprint, key)
            return self._searcher.search(found, options.k, limit, exclude=key, plan=options.plan)
        return self._checked_search(query, options, ShingleCache(self))

    def _prepare(self, query: Query) -> PreparedQuery:
        """A query made ready for a checked search, once: its fingerprint and sketch from one pass over its
        text (a key's from its row). InvalidInput where it cannot be searched."""
        if query.text is not None and query.fingerprint is None and query.key is None:
            prints, sketches = simhash_and_sketch_many([query.text], self.settings, self.sketch_scheme)
            if prints[0] is None:
                raise InvalidInput(NO_FEATURES)
            return PreparedQuery(query, prints[0], sketches[0])
        found = self._query_fingerprint(query.text, query.fingerprint, query.key)
        sketch = None
        if query.key is not None:
            stored = self.conn.execute("SELECT sketch FROM documents WHERE key = ?", (query.key,)).get
            sketch = stored if isinstance(stored, bytes) else None
        return PreparedQuery(query, found, sketch)

    def _checked_search(self, query: Query, options: SearchOptions, shingles: ShingleCache) -> SearchResult:
        """A checked search: in one C call where it answers the same (find/native_near.py), else by the
        reference (Searcher.within, check_candidates)."""
        if options.plan is not None or not self._searcher.needs_fingerprint():
            plan = options.plan or self._searcher.plan(options.k, checked=True)
            found = self._native.search(query, options.k, options.threshold, options.limit, plan, shingles)
            if found is not None:
                return found
        return self._reference_search(self._prepare(query), options, shingles)

    def _reference_search(self, query: PreparedQuery, options: SearchOptions, shingles: ShingleCache) -> SearchResult:
        found = self._searcher.within(
            query.fingerprint, options.k, self.sketch_scheme.nbytes, exclude=query.query.key, plan=options.plan
        )
        return check_candidates(found, query, shingles, options.threshold, options.limit)

    def near_many(
        self,
        queries: Iterable[Query | int | FailedQuery],
        *,
        k: int | None = None,
        limit: int | None = None,
        check: bool = True,
        threshold: float = DEFAULT_THRESHOLD,
        plan: str | None = None,
    ) -> Iterator[tuple[Query, SearchResult | FailedQuery]]:
        """search() for many queries (Query objects, or bare unsigned fingerprints) in one go, yielding
        (query, answer) in order: a SearchResult, or a FailedQuery for a query that cannot be searched
        (unknown key, text without features; QueryErrors given as input pass through), so one bad
        line does not end a long batch. The same check and defaults as search().

        Lazy: a million queries stream through without being held in memory. Once the probes have
        cost as much as reading every fingerprint would, the batch reads them (8 bytes per document
        in memory), so long batches with a large k scan arrays instead of probing. The first query that
        reads far more candidates than uniform block values would give (a hot bucket) makes the
        planner count the rows per block value, once; later queries in hot buckets then scan when
        that is cheaper.
        """
        options = SearchOptions.of(k, limit, check, threshold, plan)
        k, threshold, chosen = options.k, options.threshold, options.plan
        shingles = ShingleCache(self) if options.check else None
        counted = chosen is not None
        hot = None
        # Ski rental: once the probes have cost as much as reading every fingerprint would, read them;
        # the planner then compares each query's probes with a scan of arrays already in memory.
        probe_spent, load_cost = 0.0, None
        for query in queries:
            if isinstance(query, FailedQuery):
                yield query.query, query
                continue
            if not isinstance(query, Query):
                query = Query(fingerprint=query)
            try:
                if shingles is None:
                    fp = self._query_fingerprint(query.text, query.fingerprint, query.key)
                    result = self._searcher.search(fp, k, limit, exclude=query.key, plan=chosen)
                else:
                    result = self._checked_search(query, options, shingles)
            except InvalidInput as exc:
                yield query, FailedQuery(query, str(exc))
                continue
            yield query, result
            if not counted:
                if hot is None:
                    hot = HOT_CANDIDATES + HOT_FACTOR * self._searcher.uniform_candidates(k)
                if result.candidates > hot:
                    self._searcher.load_block_counts()
                    counted = True
            if chosen is None and result.plan.kind != "scan":
                probe_spent += probe_cost_ns(BLOCKS * result.plan.probes_per_block, result.candidates)
                if shingles is not None:  # and each match's row, for its sketch
                    probe_spent += len(result.matches) * MATCH_ROW_NS
                if load_cost is None:
                    load_cost = self._searcher.load_cost_ns(checked=shingles is not None)
                if shingles is None and probe_spent > load_cost and not self._searcher.scan_loaded():
                    self._searcher.load_scan()
                    probe_spent = 0.0
                elif shingles is not None and probe_spent > load_cost and not self._searcher.checked_loaded():
                    self._searcher.checked_arrays(self.sketch_scheme.nbytes)
                    probe_spent = 0.0

    # -- whole-corpus near duplicates (find/check.py, find/arrays.py, find/clusters.py) --------------

    def dupes(
        self,
        k: int | None = None,
        *,
        check: bool = True,
        threshold: float = DEFAULT_THRESHOLD,
        uncertain: bool = False,
        on_progress: Progress | None = None,
        memory: int | None = None,
    ) -> HonouredPairs:
        """Every pair of near-duplicate documents, each once (first added first), streamed in no
        particular order: the pairs within k, checked as in search() (same defaults). Iterate the
        result; its `report` counts how pairs were judged (None without check). With check and no k,
        the candidates come from the sketches (check.DuplicateSearch), at any distance. uncertain: the
        pairs whose verdict is uncertain instead, kept or not (DuplicatePair.keeps), to review.
        on_progress(done, total): how far the pair search is, for a progress bar. Pairs a person labelled
        "not a duplicate" (simq serve --review) are left out. memory: bytes of RAM for the search (None:
        unbounded); past them the candidates are sorted on disk (find/bounded_pairs.py), the same pairs."""
        from .find.review import HonouredPairs

        return HonouredPairs(
            DuplicateSearch(self, k, threshold, check=check, uncertain=uncertain, on_progress=on_progress,
                            memory=memory), self.conn,
        )

    def clusters(
        self,
        k: int | None = None,
        *,
        check: bool = True,
        threshold: float = DEFAULT_THRESHOLD,
        representative: str = "first",
        on_progress: Progress | None = None,
        memory: int | None = None,
    ) -> ClusterReport:
        """Group documents into connected components of the dupes() pairs and write them to the
        clusters table (cluster = lowest id; representative by rule: first, last, longest, shortest).
        The report's `check` holds how the pairs were judged (None without check). Labels are honoured:
        documents labelled "not a duplicate" of each other never share a cluster, and a member a person
        chose to keep is its cluster's representative. memory: as in dupes()."""
        from .find.chains import below_members
        from .find.clusters import cluster_index, record_chains

        pairs = self.dupes(k, check=check, threshold=threshold, on_progress=on_progress, memory=memory)
        if pairs.report is None and not pairs.apart_ids:
            return cluster_index(self.conn, pairs.k, representative, on_progress=on_progress)
        if pairs.report is None:  # distance alone, with pairs kept apart: those within k are the edges
            return cluster_index(self.conn, pairs.k, representative, pairs=pairs.id_pairs())
        report = cluster_index(
            self.conn, pairs.k, representative, pairs=pairs.id_pairs(), threshold=pairs.report.threshold
        )
        made = pairs.report.candidates_from  # known once the pairs have been read
        # Chains: members the check does not keep against their representative, counted for stats.
        chained = below_members(self, pairs.report.threshold, memory=memory)
        below = sum(map(len, chained.values()))
        if report.saved:
            record_chains(self.conn, made, below)
        return dataclasses.replace(report, check=pairs.report, below=below, chained=chained, candidates=made)

    def cluster_list(self, *, min_size: int = 2) -> Iterator[Cluster]:
        """The clusters written by the last clusters() run, with their member keys."""
        from .find.clusters import read_clusters

        return read_clusters(self.conn, min_size)

    def near_sql(self, k: int = 3) -> str:
        """Standalone SQL for the distance search, near(k=k, check=False), for this k (see search.near_sql).
        Its default, k = 3, is the classic line where the SQL is four block equality lookups."""
        return near_sql(self.plan(k))

    def plan(self, k: int, fingerprint: int | None = None) -> Plan:
        """The plan near() would use for this k (and fingerprint, when block counts are known)."""
        return self._searcher.plan(validate_k(k), fingerprint)

    def _query_fingerprint(self, text: str | None, fingerprint: int | None, key: str | None) -> int:
        if sum(x is not None for x in (text, fingerprint, key)) != 1:
            raise InvalidInput("give exactly one of a text, a fingerprint or a key to search for")
        if key is not None:
            stored = self.conn.execute("SELECT fingerprint FROM documents WHERE key = ?", (key,)).fetchall()
            if not stored:
                raise InvalidInput(f"no document with key {key!r} in {self.path}")
            if stored[0][0] is None:
                raise InvalidInput(f"document {key!r} has no features (empty text), so it has no neighbours")
            return to_unsigned(cast(int, stored[0][0]))  # an INTEGER column, not NULL here
        if text is not None:
            fingerprint = self.fingerprint(text)
            if fingerprint is None:
                raise InvalidInput(NO_FEATURES)
            return fingerprint
        if isinstance(fingerprint, bool) or not isinstance(fingerprint, int):
            raise InvalidInput(f"a fingerprint is an unsigned 64-bit integer, not {fingerprint!r}")
        to_signed(fingerprint)  # range check
        return fingerprint


# A batch query reading more candidates than this (HOT_CANDIDATES + HOT_FACTOR x the uniform
# expectation) has met a hot bucket: the batch then counts rows per block value to plan the rest.
HOT_CANDIDATES = 1000
HOT_FACTOR = 20
