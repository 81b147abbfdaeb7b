"""Near-duplicates checked: candidates kept only when the 5-shingle Jaccard of their normalised texts reaches
the threshold, by one rule everywhere (find/verdict.py decide(): dupes, clusters, near, explain, dedup's
drops, Spark, the web pages, simhash_near), so a pair gets the same Jaccard, the same verdict and the same
"checked_by" wherever it is shown. Here: the candidates of a search (check_candidates) and of all pairs
(DuplicateSearch, PairCheck) judged in bulk, and the texts read for the exact Jaccard (ShingleCache).

bench/quality.py: at k = CONFIRM_K the default fingerprints find 96% of the pairs with Jaccard >= 0.8,
and the exact check removes every false one (F1 0.97-0.98 against 0.70-0.79 for the distance alone).
A text is reachable when the index stores it (--store-text), the indexed file is unchanged at its path,
or the index keeps a short text's exact data (core/short_texts.py).

The rule (verdict.py): the sketches' filter drops a candidate sure to be below the line unread; where both
texts are reachable the exact Jaccard decides; else the estimate ("estimated", with its certainty); without a
sketch (an index made before sketches whose texts are gone, a bare fingerprint) the distance decides, within
min(k, RECOMMENDED_K) ("distance").

All pairs (dupes, clusters) take their candidates from the sketches' LSH tables (sketch_pairs.py) when
every document has a sketch and no k is asked for: linear in the documents, and it finds the pairs of
Jaccard >= 0.8 beyond distance 12 too. With an explicit k, or documents without a sketch, the
candidates are the pairs within k (CONFIRM_K by default), checked the same way.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..core.pool import workers
from ..core.rule import READ_WHOLE_BYTES
from ..core.settings import CONFIRM_K, DEFAULT_THRESHOLD, candidate_k
from ..core.shingles import TRUTH_NGRAM, jaccard_of_pairs, jaccard_of_sets, shingle_set
from ..core.short_texts import short_text_shingles
from ..core.sketch import DEFAULT_SCHEME, SketchScheme
from ..errors import InvalidInput
from ..native import documents as native_documents
from ..store import texts
from ..store.database import IndexFile
from ..store.texts import key_path
from .arrays import DuplicatePair, keys_of, load_fingerprints
from .bounded_pairs import (
    IN_MEMORY,
    ON_DISK,
    PROCESS_SLACK,
    RESIDENT,
    BoundedPairs,
    Plan,
    give_back_free_memory,
    plan,
    resident_memory,
)
from .pairs import Progress, near_pairs
from .queries import Query
from .resident_pairs import resident_sketch_pairs
from .search import Candidates, Match, SearchResult
from .sketch_pairs import sketch_pairs
from .verdict import (
    CERTAIN,
    CheckSummary,
    ExactJaccards,
    Verdicts,
    decide,
    query_estimates,
    sketch_estimates,
    validate_threshold,
)

# Shingle sets kept between pairs (8 bytes per distinct shingle, about one per character). Pairs of a
# dupes chunk are visited in order of their first document, so most reuse is between neighbours.
CACHE_BYTES = 256 << 20
# Within a --memory budget the shingle cache takes at most this part of it.
CACHE_SHARE = 8
# What an entry costs besides its array (key, dict slot, array header): so a cache of keys whose text is
# out of reach (None) is bounded too.
ENTRY_BYTES = 256
# What room() takes an entry to cost before any is cached (a page of about 8,000 characters).
FIRST_ENTRY_BYTES = 64 << 10
# Within a budget, the cache keeps the process this far below it, as measured before a prefetch: what
# comes between two (a prefetch's lines, their sets on two threads, the LSH tables' threads running on)
# took 40-47 MB past the cache's bytes at 1M, and at 10M --memory 2G peaked 43 MB past a margin of 48.
CEILING_MARGIN = 96 << 20
# The least the cache keeps (room() then takes a few pairs at a time, and the check goes on).
CACHE_FLOOR = 4 << 20
# Over the ceiling, the allocator's free pages are given back at most this often (a few ms each time).
TRIM_SECONDS = 1.0
# All pairs by sketch LSH, where texts may be at hand: candidates whose estimate is this far below the
# threshold still get the exact check (about 5 standard deviations of the estimate near 0.8).
EXACT_MARGIN = 0.1
# Rows read at a time by load_arrays_and_short.
LOAD_CHUNK = 1 << 16
# The k recorded for all pairs found by sketch LSH: any distance.
ANY_DISTANCE = 64
# Documents without a sketch (an older index's whose texts are gone, bare fingerprints) are compared
# with every document directly, beside the sketches' LSH, while that is at most this many comparisons;
# past it every candidate comes from the fingerprints (pairs within k).
MIXED_BRUTE_PAIRS = 2_000_000_000


class ShingleCache:
    """Shingle sets of stored documents by key; the least recently used go past a byte budget
    (arrays plus ENTRY_BYTES each). None (no reachable text) is cached too. ceiling: the whole process's
    budget (dupes --memory), which the cache's budget yields to (fit())."""

    def __init__(self, index: IndexFile, max_bytes: int = CACHE_BYTES, ceiling: int | None = None) -> None:
        self.index, self.max_bytes, self.budget, self.ceiling = index, max_bytes, max_bytes, ceiling
        self.trimmed = -math.inf  # when fit() last gave the allocator's free pages back
        self.entries: OrderedDict[str, np.ndarray | None] = OrderedDict()
        self.bytes = 0
        self.sketches: OrderedDict[str, bytes | None] = OrderedDict()
        self.texts = texts.TextReader(index)  # stored texts, unchanged files, JSONL lines; short texts' data
        self.aside: ThreadPoolExecutor | None = None

    def sketch(self, key: str) -> bytes | None:
        """The stored sketch of a key (None: none stored); the last SKETCHES_KEPT are kept."""
        if key in self.sketches:
            self.sketches.move_to_end(key)
            return self.sketches[key]
        found = self.index.conn.execute("SELECT sketch FROM documents WHERE key = ?", (key,)).get
        nbytes = self.index.sketch_scheme.nbytes
        self.sketches[key] = found if isinstance(found, bytes) and len(found) == nbytes else None
        if len(self.sketches) > SKETCHES_KEPT:
            self.sketches.popitem(last=False)
        return self.sketches[key]

    def may_read(self, key: str) -> bool:
        """Whether a row that stores no text but a content hash may have it at hand: a text cached already, its
        JSONL line recorded (store.texts.TextReader), or its file at the key's path (store.texts.text_of's gate).
        native_near asks before reading a row again."""
        if key in self.entries:
            return True
        if self.texts.has_line(key):
            return True
        path = key_path(key, self.index.key_root)
        return os.access(path, os.F_OK) and os.path.isfile(path)  # access(): no exception where nothing is there

    def __call__(self, key: str) -> np.ndarray | None:
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]
        self._keep(key, self.texts.row(key))
        return self.entries[key]

    def room(self) -> int:
        """How many keys' shingles fit in a quarter of the budget, by the average entry so far (at least 2)."""
        average = self.bytes / len(self.entries) if self.entries else FIRST_ENTRY_BYTES
        return max(2, int(self.max_bytes / 4 / max(average, ENTRY_BYTES)))

    def prefetch(self, keys: Iterable[str]) -> None:
        """The shingles of keys not yet cached, their texts read together (JSONL lines in file order; those of
        UTF-8 sources parsed, checked against their content hashes and shingled by one C call, _line_sets)."""
        missing = [key for key in keys if key not in self.entries]
        if not missing:
            return
        self.fit()
        lib = native_documents.library()
        found, lines = self.texts.rows_and_lines(missing, raw_lines=lib is not None)
        made = _line_sets(lib, lines, self._aside()) if lib is not None and lines else {}
        for key in dict.fromkeys(missing):
            if key in made:
                self._store(key, made[key])
            else:
                self._keep(key, found.get(key))

    def fit(self) -> None:
        """Within a ceiling, the cache's budget is what the process leaves of it (up to its own budget): the
        cache is the part of a search's memory that can give way, while the rest holds more than a plan
        counts (at 10M documents the search held 7% past bounded_pairs.plan's figure, and the threads'
        heaps some 450 MB of the allocator's free pages)."""
        if self.ceiling is None:
            return
        room = self.ceiling - CEILING_MARGIN - resident_memory()
        if room < 0 and time.monotonic() - self.trimmed > TRIM_SECONDS and give_back_free_memory():
            self.trimmed = time.monotonic()
            room = self.ceiling - CEILING_MARGIN - resident_memory()
        self.max_bytes = min(self.budget, max(CACHE_FLOOR, self.bytes + room))
        self._evict()

    def _aside(self) -> ThreadPoolExecutor | None:
        """The thread that makes half of prefetch's sets where there is a second worker (None: not); kept with
        the cache, so that its C state and buffers are made once."""
        if self.aside is None and workers() > 1:
            self.aside = ThreadPoolExecutor(1, thread_name_prefix="exact-sets")
        return self.aside

    def _keep(self, key: str, row: tuple[str | None, bytes | None] | None) -> None:
        text = None if row is None else row[0]
        # Else a short text's exact data (core/short_texts.py), where the index keeps it.
        shingles = shingle_set(text) if text is not None else None if row is None else short_text_shingles(row[1])
        self._store(key, shingles)

    def _store(self, key: str, shingles: np.ndarray | None) -> None:
        self.entries[key] = shingles
        self.bytes += _cost(shingles)
        self._evict()

    def _evict(self) -> None:
        while self.bytes > self.max_bytes and len(self.entries) > 1:
            _, old = self.entries.popitem(last=False)
            self.bytes -= _cost(old)


SKETCHES_KEPT = 100_000


def _line_sets(lib, lines: list[texts.RawLine], aside: ThreadPoolExecutor | None) -> dict[str, np.ndarray | None]:
    """The shingle sets of JSONL lines read back, as ShingleCache._keep makes them from texts.line_text(): a
    line whose text is out of reach (longer than READ_WHOLE_BYTES, or rewritten since the add: another content
    hash) has its short text's set or None; one the C core leaves (native/documents.py SET_PYTHON) is read the
    Python way. Lines of one text field go in one series of calls (a dupes run reads one crawl file, or a few),
    half of them on `aside`'s thread where there is one."""
    made: dict[str, np.ndarray | None] = {}
    by_field: dict[str, list[texts.RawLine]] = {}
    for line in lines:
        by_field.setdefault(line.source.text_field, []).append(line)
    for field_name, group in by_field.items():
        fields = native_documents.LineFields(field_name.encode("utf-8", "surrogatepass"), b"id", texts.MAX_LINE_BYTES,
                                             READ_WHOLE_BYTES)  # (the id is not wanted: any field name serves)
        kinds = [native_documents.SET_LINE] * len(group)
        calls = native_documents.sets_in_calls(lib, [line.raw for line in group], kinds, fields, TRUTH_NGRAM,
                                               [line.digest for line in group], aside)  # fmt: skip
        for a, b, sets in calls:
            if sets is None:  # (the call failed: memory) every line the Python way
                sets = [native_documents.SET_PYTHON] * (b - a), [None] * (b - a)
            for line, status, shingle in zip(group[a:b], *sets):
                if status == native_documents.SET_MADE:
                    made[line.key] = shingle
                elif status == native_documents.SET_PYTHON:
                    text = texts.line_text(line.raw, line.source, line.digest)
                    made[line.key] = shingle_set(text) if text is not None else short_text_shingles(line.short)
                else:  # SET_LONG, SET_CHANGED: the text is out of reach
                    made[line.key] = short_text_shingles(line.short)
    return made


def _cost(shingles: np.ndarray | None) -> int:
    return ENTRY_BYTES + (0 if shingles is None else shingles.nbytes)


@dataclass
class PreparedQuery:
    """A query made ready once, at the surface: its fingerprint and sketch (one pass over a text), and its
    shingles when the check first needs them. text: the query's own text (None: a stored key's, read
    through the ShingleCache, or a bare fingerprint, which has none)."""

    query: Query
    fingerprint: int
    sketch: bytes | None
    _shingles: list[np.ndarray | None] = field(default_factory=list)

    def shingles(self, cache: ShingleCache) -> np.ndarray | None:
        if not self._shingles:
            text, key = self.query.text, self.query.key
            if text is not None:  # a text too long to read whole is judged without it, as stored ones are
                self._shingles.append(shingle_set(text) if len(text) <= texts.READ_WHOLE_BYTES else None)
            else:
                self._shingles.append(None if key is None else cache(key))
        return self._shingles[0]


def check_candidates(
    found: Candidates, query: PreparedQuery, shingles: ShingleCache, threshold: float, limit: int | None
) -> SearchResult:
    """The search's candidates (within its plan's k) judged together by verdict.decide(): the sketch filter
    over all of them at once, the exact Jaccard for those it lets through whose texts are at hand; kept
    matches closest first, at most `limit`. The answer carries the CheckSummary, and the uncertain verdicts
    (kept or not) in `uncertain`."""
    started = time.perf_counter()
    report = CheckSummary(found.plan.k, threshold)
    conn, scheme = shingles.index.conn, shingles.index.sketch_scheme
    n = len(found.ids)
    if query.query.text is None and query.query.key is None:
        report.without_query_text = n
    distance = np.bitwise_count(found.values ^ np.uint64(query.fingerprint)).astype(np.int64)
    mine = query.sketch
    if mine is not None and len(mine) == scheme.nbytes and n:
        row = np.frombuffer(mine, dtype=np.uint8)
        estimate, sure = query_estimates(row, found.rows, found.present, threshold, scheme)
    else:
        estimate, sure = np.full(n, np.nan), np.full(n, np.nan)
    keys: dict[int, str] = {} if found.keys is None else dict(zip(found.ids.tolist(), found.keys))

    def key_of(at: np.ndarray) -> list[str]:
        if found.keys is None:
            keys.update(keys_of(conn, found.ids[at]))
        return [keys[i] for i in found.ids[at].tolist()]

    def exact(at: np.ndarray) -> np.ndarray:
        out = np.full(len(at), np.nan)
        if query.query.text is None and query.query.key is None:  # a bare fingerprint: no text
            return out
        own = None
        for m, key in enumerate(key_of(at)):
            theirs = shingles(key)
            if theirs is not None:  # the query's shingles only once a text of theirs is at hand
                own = query.shingles(shingles) if own is None else own
                if own is None:
                    break
                out[m] = jaccard_of_sets(own, theirs)
        return out

    verdicts = decide(distance, estimate, sure, exact, threshold=threshold, k=found.plan.k)
    report.count_many(verdicts)
    shown = np.flatnonzero(verdicts.keep | verdicts.uncertain)
    names = key_of(shown) if len(shown) else []
    matches = [
        Match(name, int(found.values[i]), int(distance[i]), *_judged(verdicts, i))
        for name, i in zip(names, shown.tolist())
    ]
    matches.sort(key=lambda m: (m.distance, m.key))
    kept = [m for m in matches if m.keeps]
    report.check_seconds = time.perf_counter() - started
    return SearchResult(query.fingerprint, found.plan, found.read, kept if limit is None else kept[:limit], report,
                        [m for m in matches if m.certainty is None or m.certainty < CERTAIN])


def _judged(verdicts: Verdicts, i: int) -> tuple[float | None, str, float | None, bool]:
    v = verdicts[i]
    return v.jaccard, v.checked_by, v.certainty, v.keeps


class DuplicateSearch:
    """Every pair of near-duplicate documents, each once (first added first), streamed in chunks.

    With check (the default) each candidate gets judge()'s verdict: a sure estimate from both sketches,
    else the exact Jaccard where both texts are reachable, else the unsure estimate, else (no sketch)
    the distance within min(k, RECOMMENDED_K); `report` counts as pairs come. Candidates: with k None
    and a sketch for every document, the sketches' LSH tables (any distance, linear in the documents);
    otherwise the pairs within k (None: candidate_k's default). Without check every pair within k is
    kept and `report` is None. uncertain: yield the uncertain verdicts instead (Verdict.uncertain, kept
    or not: DuplicatePair.keeps says which), for review. Memory: the fingerprints and sketches (136
    bytes a document), one chunk of candidates and the shingle cache (cache_bytes)."""

    def __init__(
        self,
        index: IndexFile,
        k: int | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        *,
        check: bool = True,
        uncertain: bool = False,
        cache_bytes: int = CACHE_BYTES,
        on_progress: Progress | None = None,
        memory: int | None = None,
    ) -> None:
        if uncertain and not check:
            raise InvalidInput("only checked pairs have a certainty: uncertain needs the check")
        self.index, self.k = index, candidate_k(k, check)
        self.on_progress = on_progress  # (done, total) of the pair search, for a progress bar
        self.report = CheckSummary(self.k, validate_threshold(threshold)) if check else None
        self.cache_bytes = cache_bytes
        self.uncertain = uncertain
        self.by_sketch = check and k is None  # LSH candidates, if every document turns out to have a sketch
        # RAM for the search (None: unbounded); an index whose in-memory search needs more is searched from
        # disk (bounded_pairs.py), with the same pairs and verdicts.
        self.memory = memory
        self.search_plan: Plan | None = None  # how the last search ran (bounded_pairs.plan)

    def __iter__(self) -> Iterator[DuplicatePair]:
        for chunk in self._chunks():
            keys = chunk.keys
            if self.report is None:
                for a, b, d in zip(chunk.first.tolist(), chunk.second.tolist(), chunk.distance.tolist()):
                    yield DuplicatePair(keys[a], keys[b], d)
                continue
            assert chunk.jaccard is not None and chunk.how is not None  # checked chunks carry their verdicts
            assert chunk.certainty is not None and chunk.keep is not None
            rows = zip(chunk.first.tolist(), chunk.second.tolist(), chunk.distance.tolist(), chunk.jaccard.tolist(),
                       chunk.how, chunk.certainty.tolist(), chunk.keep.tolist())
            for a, b, d, j, how, c, keep in rows:
                yield DuplicatePair(keys[a], keys[b], d, None if math.isnan(j) else j, how,
                                    None if math.isnan(c) else c, keep)

    def id_pairs(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The kept pairs as chunks of (first ids, second ids): what clustering needs."""
        for chunk in self._chunks():
            yield chunk.first, chunk.second

    def _chunks(self) -> Iterator[_Chunk]:
        """Per chunk of candidates, the pairs to yield (kept ones; with uncertain, the uncertain ones):
        ids (first added first), distances, verdicts, and the keys of their ids."""
        conn, report = self.index.conn, self.report
        if report is not None:  # a second iteration searches again: count it afresh, in the same object
            report.restart()
        if report is None:
            stored = load_fingerprints(conn)
            for part in near_pairs(stored.values, self.k, on_progress=self.on_progress):
                first, second = stored.ids[part.left], stored.ids[part.right]
                keys = keys_of(conn, np.concatenate((first, second)))
                yield _Chunk(first, second, part.distance, keys)
            return
        scheme = self.index.sketch_scheme
        bounded = None
        # Within a budget the shingle cache takes an eighth of it at most (counted where texts may be read),
        # and the search what is left past the process's own memory and its slack (bounded_pairs.plan).
        cache_bytes, held = self.cache_bytes, 0
        if self.memory is not None:
            cache_bytes = min(cache_bytes, max(1 << 20, self.memory // CACHE_SHARE))
            readable = (self.index.store_text or self.index.short_texts.kept or texts.lines_recorded(conn)
                        or _any_file_key(conn, self.index.key_root))
            held = resident_memory() + PROCESS_SLACK + (cache_bytes if readable else 0)
        how = plan(conn.execute("SELECT count(*) FROM documents").get, scheme.nbytes, self.memory, held,
                   resident=self.by_sketch)
        self.search_plan = how
        if how.how == ON_DISK:
            bounded = BoundedPairs(conn, scheme, self.index.short_texts.column, how.work)
            ids, values, present, short = bounded.ids, bounded.values, bounded.present, bounded.short
            rows = np.zeros((0, scheme.nbytes), dtype=np.uint8)  # on disk: each batch comes with its rows
        else:
            ids, values, rows, present, short = load_arrays_and_short(conn, scheme, self.index.short_texts.column)
        try:
            yield from self._judged(ids, values, rows, present, short, bounded, how, cache_bytes)
        finally:
            if bounded is not None:
                bounded.close()

    def _judged(self, ids, values, rows, present, short, bounded: BoundedPairs | None, how: Plan,
                cache_bytes: int) -> Iterator[_Chunk]:
        conn, report, scheme = self.index.conn, self.report, self.index.sketch_scheme
        assert report is not None
        unsketched = np.flatnonzero(~present)
        if self.by_sketch and present.any() and len(unsketched) * len(values) <= MIXED_BRUTE_PAIRS:
            report.k, report.candidates_from = ANY_DISTANCE, "sketch"
            # Below the threshold too where an unsure estimate may be settled by the texts (stored, files, or
            # short texts' exact data, core/short_texts.py), or is listed.
            wider = (self.uncertain or self.index.store_text or short.any() or texts.lines_recorded(conn)
                     or _any_file_key(conn, self.index.key_root))
            low = max(0.0, report.threshold - EXACT_MARGIN) if wider else report.threshold
            unsketched_pairs = _pairs_of_unsketched(values, unsketched, self.k)
            if bounded is not None:
                no_rows = np.zeros((0, scheme.nbytes), dtype=np.uint8)  # unsketched pairs need no rows
                parts = _chain(
                    bounded.sketch_pairs(low),
                    ((left, right, None, no_rows, no_rows) for left, right in unsketched_pairs),
                )
            elif how.how == RESIDENT:
                every = bool(present.all())
                found = resident_sketch_pairs(rows, None if every else np.flatnonzero(present), low, scheme,
                                              how.threads)
                parts = _chain(
                    ((p.left, p.right, p.estimate, None, None) for p in found),
                    ((left, right, None, None, None) for left, right in unsketched_pairs),
                )
            else:
                assert how.how == IN_MEMORY
                sketched = np.flatnonzero(present)
                # Every document sketched (the usual case): the rows as they are, not a copy (1.2 GB at 10M).
                candidates = sketch_pairs(rows if len(sketched) == len(rows) else rows[sketched], low, scheme)
                parts = _chain(
                    ((sketched[p.left], sketched[p.right], p.estimate, None, None) for p in candidates),
                    ((left, right, None, None, None) for left, right in unsketched_pairs),
                )
        else:
            within = ((p.left, p.right) for p in near_pairs(values, self.k, on_progress=self.on_progress))
            parts = bounded.with_rows(within) if bounded is not None else ((a, b, None, None, None) for a, b in within)
        check = PairCheck(self.index, report, cache_bytes, ceiling=self.memory)
        for left, right, estimate, rows_left, rows_right in _batched(parts):
            order = np.lexsort((right, left))  # each document's pairs side by side: cache hits
            left, right, estimate = left[order], right[order], estimate[order]
            if rows_left is None:
                rows_left, rows_right = rows[left], rows[right]
            else:
                rows_left, rows_right = rows_left[order], rows_right[order]
            first, second = ids[left], ids[right]
            distance = np.bitwise_count(values[left] ^ values[right]).astype(np.int64)
            keys = keys_of(conn, np.concatenate((first, second)))
            both = present[left] & present[right]
            verdicts = check.judge(
                [keys[i] for i in first.tolist()], [keys[i] for i in second.tolist()], distance,
                rows_left, rows_right, both, estimate,
            )
            chosen = verdicts.uncertain if self.uncertain else verdicts.keep
            if chosen.any():
                yield _Chunk(first[chosen], second[chosen], distance[chosen], keys, verdicts.jaccard[chosen],
                             [how for how, c in zip(verdicts.how, chosen.tolist()) if c],
                             verdicts.certainty[chosen], verdicts.keep[chosen])


@dataclass
class _Chunk:
    first: np.ndarray
    second: np.ndarray
    distance: np.ndarray
    keys: dict[int, str]
    jaccard: np.ndarray | None = None  # NaN: by distance
    how: list[str] | None = None
    certainty: np.ndarray | None = None  # NaN: unknown (by distance)
    keep: np.ndarray | None = None


class PairCheck:
    """verdict.decide() on pairs of stored documents, many at once: the estimates in one vectorized pass,
    the exact Jaccards of the pairs the sketch filter lets through from texts read through a ShingleCache
    (the first side's first: a pair whose first text is out of reach does not read the second). Counted in
    `report` when given."""

    def __init__(self, index: IndexFile, report: CheckSummary | None = None, cache_bytes: int = CACHE_BYTES,
                 threshold: float = DEFAULT_THRESHOLD, ceiling: int | None = None) -> None:
        self.index, self.scheme = index, index.sketch_scheme
        self.report = report
        self.threshold = report.threshold if report is not None else validate_threshold(threshold)
        self.k = report.k if report is not None else CONFIRM_K
        self.shingles = ShingleCache(index, cache_bytes, ceiling)

    def judge(
        self, first: list[str], second: list[str], distance: np.ndarray, rows_a: np.ndarray, rows_b: np.ndarray,
        both: np.ndarray, known: np.ndarray | None = None,
    ) -> Verdicts:
        """Verdicts of the pairs (first[i], second[i]); rows_a, rows_b: their sketch rows, both: which
        pairs have two sketches; known: their estimates where already made (NaN: not yet), e.g. by
        the sketches' LSH (sketch_pairs: the same estimate_many)."""
        estimate, sure = sketch_estimates(rows_a, rows_b, both, self.threshold, self.scheme, known)
        started = time.perf_counter()
        verdicts = decide(distance, estimate, sure, self._exact(first, second), threshold=self.threshold, k=self.k)
        if self.report is not None:
            self.report.count_many(verdicts)
            self.report.check_seconds += time.perf_counter() - started
        return verdicts

    def _exact(self, first: list[str], second: list[str]) -> ExactJaccards:
        shingles = self.shingles

        def exact(at: np.ndarray) -> np.ndarray:
            out = np.full(len(at), np.nan)
            pairs = at.tolist()
            order, n = _by_component(pairs, first, second), 0
            while n < len(order):
                # Texts read together, as many pairs as the cache holds (else what was read is gone before it is
                # used), the second side only where the first is at hand.
                part = order[n : n + shingles.room() // 2]
                shingles.prefetch(first[pairs[p]] for p in part)
                shingles.prefetch(second[pairs[p]] for p in part if shingles.entries.get(first[pairs[p]]) is not None)
                measured, left, right = [], [], []
                for p in part:
                    sa = shingles(first[pairs[p]])
                    sb = None if sa is None else shingles(second[pairs[p]])
                    if sa is not None and sb is not None:
                        measured.append(p)
                        left.append(sa)
                        right.append(sb)
                out[measured] = jaccard_of_pairs(left, right)
                n += len(part)
            return out

        return exact


def _by_component(pairs: list[int], first: list[str], second: list[str]) -> list[int]:
    """Positions of the pairs (first[i], second[i]) grouped by the connected components of their keys, in order
    within each: a family's texts are then read and shingled together, once, while the pairs come ordered by
    their first document (whose family members lie anywhere in a crawl, and left the cache between visits)."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while (up := parent.get(key, key)) != key:
            parent[key] = parent.get(up, up)
            key = up
        return key

    for i in pairs:
        a, b = root(first[i]), root(second[i])
        if a != b:
            parent[a] = b
    roots = [root(first[i]) for i in pairs]
    return sorted(range(len(pairs)), key=roots.__getitem__)


# Candidates are judged this many at a time at least (the LSH yields many small chunks: copies of one
# text, pairs of unsketched documents): the vectorized work and the key lookup are per batch.
BATCH_PAIRS = 1 << 15


def _batched(parts) -> Iterator[tuple]:
    """(left, right, estimate or None, rows of left, rows of right) chunks joined into batches of
    BATCH_PAIRS to 2 * BATCH_PAIRS pairs, with NaN where no estimate came with the pair. The rows are None
    where the caller holds every row (the in-memory search), else each chunk's own (bounded_pairs.py; an
    empty array where no pair of the chunk has two sketches). A larger chunk is cut: a batch's rows, keys
    and lists are held while it is judged (a chunk of 300,000 pairs of copies took 160 MB at 10M)."""
    pending: list[tuple] = []
    count = 0
    for left, right, estimate, rows_left, rows_right in parts:
        if estimate is None:
            estimate = np.full(len(left), np.nan)
        for lo in range(0, len(left), BATCH_PAIRS):
            hi = lo + BATCH_PAIRS
            pending.append((left[lo:hi], right[lo:hi], estimate[lo:hi],
                            None if rows_left is None else rows_left[lo:hi],
                            None if rows_right is None else rows_right[lo:hi]))  # fmt: skip
            count += len(pending[-1][0])
            if count >= BATCH_PAIRS:
                yield _joined(pending)
                pending, count = [], 0
    if pending:
        yield _joined(pending)


def _joined(parts: list[tuple]) -> tuple:
    lefts, rights, estimates, rows_left, rows_right = zip(*parts)
    joined = [np.concatenate(lefts), np.concatenate(rights), np.concatenate(estimates)]
    if rows_left[0] is None:
        return (*joined, None, None)
    return (*joined, _rows_joined(rows_left, lefts), _rows_joined(rows_right, lefts))


def _rows_joined(rows: tuple[np.ndarray, ...], lefts: tuple[np.ndarray, ...]) -> np.ndarray:
    """The chunks' rows one after another, zeros for a chunk that came without (no pair with two sketches)."""
    nbytes = rows[0].shape[1]
    return np.concatenate([r if len(r) == len(x) else np.zeros((len(x), nbytes), np.uint8)
                           for r, x in zip(rows, lefts)])


def _chain(*iterables):
    for iterable in iterables:
        yield from iterable


def _pairs_of_unsketched(values: np.ndarray, unsketched: np.ndarray, k: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(left, right) positions, left < right, of every pair within k that involves a document without
    a sketch (a few, or none: they are compared with every document directly), each once."""
    n = len(values)
    rows_per_chunk = max(1, (1 << 22) // max(n, 1))
    for lo in range(0, len(unsketched), rows_per_chunk):
        mine = unsketched[lo : lo + rows_per_chunk]
        close = np.bitwise_count(values[mine][:, None] ^ values[None, :]) <= k
        close[np.arange(len(mine)), mine] = False  # not with itself
        row, other = np.nonzero(close)
        me = mine[row]
        # A pair of two unsketched documents comes from both: keep it from the lower one only.
        once = ~np.isin(other, unsketched) | (other > me)
        me, other = me[once], other[once]
        if len(me):
            yield np.minimum(me, other), np.maximum(me, other)


def load_arrays(conn, scheme: SketchScheme = DEFAULT_SCHEME) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ids, unsigned fingerprints, sketch rows, which have a sketch) of every document with a
    fingerprint, in id order, read in one pass; scheme: the index's (IndexFile.sketch_scheme)."""
    return load_arrays_and_short(conn, scheme, False)[:4]


def load_arrays_and_short(
    conn, scheme: SketchScheme, column: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """load_arrays() and which documents keep a short text's exact data (column: whether documents has
    short_text; without it, none)."""
    nbytes = scheme.nbytes
    flag = "short_text IS NOT NULL" if column else "0"
    with conn:  # a savepoint: one snapshot
        count = conn.execute("SELECT count(*) FROM documents WHERE fingerprint IS NOT NULL").get
        # Sketches go straight into one buffer: a list of 10M blobs and its join would take 3x the memory;
        # ids, fingerprints and flags into arrays a chunk at a time (as Python lists, 0.9 GB at 10M).
        buffer = bytearray(count * nbytes)
        ids, values = np.empty(count, dtype=np.int64), np.empty(count, dtype=np.int64)
        present, short = np.zeros(count, dtype=bool), np.zeros(count, dtype=bool)
        found = conn.execute(
            f"SELECT id, fingerprint, sketch, {flag} FROM documents WHERE fingerprint IS NOT NULL ORDER BY id"
        )
        n = 0
        while chunk := list(itertools.islice(found, LOAD_CHUNK)):
            ids[n : n + len(chunk)] = [i for i, _, _, _ in chunk]
            values[n : n + len(chunk)] = [f for _, f, _, _ in chunk]
            short[n : n + len(chunk)] = [h for _, _, _, h in chunk]
            for m, (_, _, s, _) in enumerate(chunk, n):
                if s is not None and len(s) == nbytes:
                    buffer[m * nbytes : (m + 1) * nbytes] = s
                    present[m] = True
            n += len(chunk)
    rows = np.frombuffer(buffer, dtype=np.uint8).reshape(count, nbytes)
    return ids[:n], values[:n].view(np.uint64), rows[:n], present[:n], short[:n]


def _any_file_key(conn, root: str | None) -> bool:
    """Whether texts may be re-read from files: one of the first keys is an existing file (from root:
    key_path). (It only widens the candidates for the exact check; every pair's texts are looked for anyway.)"""
    for (key,) in conn.execute("SELECT key FROM documents WHERE content_hash IS NOT NULL LIMIT 100"):
        if os.path.isfile(key_path(key, root)):
            return True
    return False


def confirm_pairs(
    index: IndexFile, pairs: Iterable[tuple[str, str]], threshold: float = DEFAULT_THRESHOLD
) -> list[tuple[str, str, float]]:
    """The pairs of stored keys whose exact Jaccard is >= threshold, with it. Pairs with a text that
    is not reachable are left out (there is no distance rule here)."""
    threshold = validate_threshold(threshold)
    shingles = ShingleCache(index)
    out = []
    for a, b in pairs:
        sa, sb = shingles(a), shingles(b)
        if sa is not None and sb is not None and (j := jaccard_of_sets(sa, sb)) >= threshold:
            out.append((a, b, j))
    return out
