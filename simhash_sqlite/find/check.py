"""Near-duplicates checked: candidates kept only when the 5-shingle Jaccard of their texts reaches the
threshold, measured exactly where the texts are at hand and estimated from the stored sketches where not.

bench/quality.py: at k = CONFIRM_K the default fingerprints find 96% of the pairs with Jaccard >= 0.8,
and the exact check removes every false one (F1 0.97-0.98 against 0.70-0.79 for the distance alone).
A text is reachable when the index stores it (--store-text) or the indexed file is unchanged at its
path. Without both texts, the pair is judged by the estimate from both documents' sketches (sketch.py,
"estimated"); without a sketch too (an index made before sketches whose texts are gone, a bare
fingerprint) by its distance alone, kept within min(k, RECOMMENDED_K) ("distance").

All pairs (dupes, clusters) take their candidates from the sketches' LSH tables (sketch_pairs.py) when
every document has a sketch and no k is asked for: linear in the documents, and it finds the pairs of
Jaccard >= 0.8 beyond distance 12 too. With an explicit k, or documents without a sketch, the
candidates are the pairs within k (CONFIRM_K by default), checked the same way.
"""

from __future__ import annotations

import math
import os
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator

import numpy as np

from ..core.settings import DEFAULT_THRESHOLD, candidate_k
from ..core.shingles import jaccard_of_sets, shingle_set
from ..core.sketch import DEFAULT_SCHEME, SketchScheme, estimate_jaccard, estimate_many, sketch
from ..store import texts
from ..store.database import IndexFile
from ..store.texts import text_of
from .arrays import DuplicatePair, keys_of, load_fingerprints
from .pairs import Progress, near_pairs
from .queries import Query
from .search import Match, SearchResult
from .sketch_pairs import sketch_pairs
from .verdict import CheckSummary, validate_threshold

# Shingle sets kept between pairs (8 bytes per distinct shingle, about one per character). Pairs of a
# dupes chunk are visited in order of their first document, so most reuse is between neighbours.
CACHE_BYTES = 256 << 20
# What an entry costs besides its array (key, dict slot, array header): so a cache of keys whose text is
# out of reach (None) is bounded too.
ENTRY_BYTES = 256
# All pairs by sketch LSH, where texts may be at hand: candidates whose estimate is this far below the
# threshold still get the exact check (about 5 standard deviations of the estimate near 0.8).
EXACT_MARGIN = 0.1
# The k recorded for all pairs found by sketch LSH: any distance.
ANY_DISTANCE = 64
# Documents without a sketch (an older index's whose texts are gone, bare fingerprints) are compared
# with every document directly, beside the sketches' LSH, while that is at most this many comparisons;
# past it every candidate comes from the fingerprints (pairs within k).
MIXED_BRUTE_PAIRS = 2_000_000_000


class ShingleCache:
    """Shingle sets of stored documents by key; the least recently used go past a byte budget
    (arrays plus ENTRY_BYTES each). None (no reachable text) is cached too."""

    def __init__(self, index: IndexFile, max_bytes: int = CACHE_BYTES) -> None:
        self.index, self.max_bytes = index, max_bytes
        self.entries: OrderedDict[str, np.ndarray | None] = OrderedDict()
        self.bytes = 0
        self.sketches: OrderedDict[str, bytes | None] = OrderedDict()

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

    def __call__(self, key: str) -> np.ndarray | None:
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]
        row = self.index.conn.execute("SELECT text, content_hash FROM documents WHERE key = ?", (key,)).get
        text = None if row is None else text_of(key, *row)
        shingles = None if text is None else shingle_set(text)
        self.entries[key] = shingles
        self.bytes += _cost(shingles)
        while self.bytes > self.max_bytes and len(self.entries) > 1:
            _, old = self.entries.popitem(last=False)
            self.bytes -= _cost(old)
        return shingles


SKETCHES_KEPT = 100_000


def _cost(shingles: np.ndarray | None) -> int:
    return ENTRY_BYTES + (0 if shingles is None else shingles.nbytes)


def check_search(
    result: SearchResult, query: Query, shingles: ShingleCache, threshold: float, limit: int | None
) -> SearchResult:
    """The search's candidates (within its plan's k), each kept iff it passes the check; closest first,
    `limit` counting kept matches. The answer carries the CheckSummary."""
    report = CheckSummary(result.plan.k, threshold)
    if query.text is None and query.key is None:
        report.without_query_text = len(result.matches)
    started = time.perf_counter()
    # The query's shingles and sketch, made at the first candidate (a query without any reads no
    # text); None: no text to compare.
    mine = my_sketch = None
    made = False
    kept = []
    for match in result.matches:
        if limit is not None and len(kept) >= limit:
            break
        if not made:
            mine, my_sketch, made = _query_shingles(query, shingles), _query_sketch(query, shingles), True
        other = None if mine is None else shingles(match.key)  # no query text: no need to read theirs
        estimate = None
        if other is None and my_sketch is not None and (theirs := shingles.sketch(match.key)) is not None:
            estimate = estimate_jaccard(my_sketch, theirs, shingles.index.sketch_scheme)
        keep, similarity, kind = report.judge(match.distance, mine, other, estimate)
        if keep:
            kept.append(Match(match.key, match.fingerprint, match.distance, similarity, kind))
    report.check_seconds = time.perf_counter() - started
    return SearchResult(result.fingerprint, result.plan, result.candidates, kept, report)


def _query_shingles(query: Query, shingles: ShingleCache) -> np.ndarray | None:
    if query.text is not None:  # a text too long to read whole is judged by distance, as stored ones are
        return shingle_set(query.text) if len(query.text) <= texts.READ_WHOLE_BYTES else None
    if query.key is not None:
        return shingles(query.key)
    return None  # a bare fingerprint has no text


def _query_sketch(query: Query, shingles: ShingleCache) -> bytes | None:
    if query.text is not None:
        return sketch(query.text, shingles.index.sketch_scheme)
    if query.key is not None:
        return shingles.sketch(query.key)
    return None


class DuplicateSearch:
    """Every pair of near-duplicate documents, each once (first added first), streamed in chunks.

    With check (the default) a pair is kept iff its Jaccard is >= threshold: exact where both texts
    are reachable, else estimated from both sketches, else (no sketch either) iff within
    min(k, RECOMMENDED_K); `report` counts as pairs come. Candidates: with k None and a sketch for
    every document, the sketches' LSH tables (any distance, linear in the documents); otherwise the
    pairs within k (None: candidate_k's default). Without check every pair within k is kept and
    `report` is None. Memory: the fingerprints and sketches (136 bytes a document), one chunk of
    candidates and the shingle cache (cache_bytes)."""

    def __init__(
        self,
        index: IndexFile,
        k: int | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        *,
        check: bool = True,
        cache_bytes: int = CACHE_BYTES,
        on_progress: Progress | None = None,
    ) -> None:
        self.index, self.k = index, candidate_k(k, check)
        self.on_progress = on_progress  # (done, total) of the pair search, for a progress bar
        self.report = CheckSummary(self.k, validate_threshold(threshold)) if check else None
        self.cache_bytes = cache_bytes
        self.by_sketch = check and k is None  # LSH candidates, if every document turns out to have a sketch

    def __iter__(self) -> Iterator[DuplicatePair]:
        for first, second, distance, similarity, kind, keys in self._chunks():
            for a, b, d, j, how in zip(first.tolist(), second.tolist(), distance.tolist(), similarity.tolist(), kind):
                if self.report is None:
                    yield DuplicatePair(keys[a], keys[b], d)
                else:
                    yield DuplicatePair(keys[a], keys[b], d, None if math.isnan(j) else j, how)

    def id_pairs(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The kept pairs as chunks of (first ids, second ids): what clustering needs."""
        for first, second, *_ in self._chunks():
            yield first, second

    def _chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str], dict[int, str]]]:
        """Per chunk of candidates: the kept pairs' ids (first added first), distances, Jaccard (NaN:
        unchecked), how each was checked, and the keys of their ids."""
        conn, report = self.index.conn, self.report
        if report is not None:  # a second iteration searches again: count it afresh, in the same object
            for counter in ("candidates", "checked", "rejected", "estimated", "estimate_rejected", "unchecked",
                            "too_far", "without_query_text", "check_seconds"):
                setattr(report, counter, 0)
        if report is None:
            stored = load_fingerprints(conn)
            for part in near_pairs(stored.values, self.k, on_progress=self.on_progress):
                first, second = stored.ids[part.left], stored.ids[part.right]
                keys = keys_of(conn, np.concatenate((first, second)))
                yield first, second, part.distance, np.full(len(first), np.nan), [""] * len(first), keys
            return
        scheme = self.index.sketch_scheme
        ids, values, rows, present = load_arrays(conn, scheme)
        unsketched = np.flatnonzero(~present)
        if self.by_sketch and present.any() and len(unsketched) * len(values) <= MIXED_BRUTE_PAIRS:
            report.k, report.candidates_from = ANY_DISTANCE, "sketch"
            texts_possible = self.index.store_text or _any_file_key(conn)
            low = max(0.0, report.threshold - EXACT_MARGIN) if texts_possible else report.threshold
            sketched = np.flatnonzero(present)
            # Every document sketched (the usual case): the rows as they are, not a copy (1.2 GB at 10M).
            candidates = sketch_pairs(rows if len(sketched) == len(rows) else rows[sketched], low, scheme)
            parts = _chain(
                ((sketched[p.left], sketched[p.right], p.estimate) for p in candidates),
                ((left, right, None) for left, right in _pairs_of_unsketched(values, unsketched, self.k)),
            )
        else:
            parts = ((p.left, p.right, None) for p in near_pairs(values, self.k, on_progress=self.on_progress))
        shingles = ShingleCache(self.index, self.cache_bytes)
        for left, right, estimate in parts:
            if len(left) == 0:
                continue
            order = np.lexsort((right, left))  # each document's pairs side by side: cache hits
            left, right = left[order], right[order]
            if estimate is None:  # pairs within k: estimates where both have a sketch
                both = present[left] & present[right]
                estimate = np.full(len(left), np.nan)
                estimate[both] = estimate_many(rows[left[both]], rows[right[both]], scheme)
            else:
                estimate = estimate[order]
            first, second = ids[left], ids[right]
            distance = np.bitwise_count(values[left] ^ values[right]).astype(np.int64)
            keys = keys_of(conn, np.concatenate((first, second)))
            started = time.perf_counter()
            keep = np.zeros(len(first), dtype=bool)
            similarity = np.full(len(first), np.nan)
            kinds = []
            judged = zip(first.tolist(), second.tolist(), distance.tolist(), estimate.tolist())
            for i, (a, b, d, e) in enumerate(judged):
                sa = shingles(keys[a])
                sb = None if sa is None else shingles(keys[b])
                keep[i], j, kind = report.judge(d, sa, sb, None if math.isnan(e) else e)
                kinds.append(kind)
                if j is not None:
                    similarity[i] = j
            report.check_seconds += time.perf_counter() - started
            if keep.any():
                chosen = [kind for kind, kept in zip(kinds, keep.tolist()) if kept]
                yield first[keep], second[keep], distance[keep], similarity[keep], chosen, keys


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
    nbytes = scheme.nbytes
    with conn:  # a savepoint: one snapshot
        count = conn.execute("SELECT count(*) FROM documents WHERE fingerprint IS NOT NULL").get
        # Sketches go straight into one buffer: a list of 10M blobs and its join would take 3x the memory.
        buffer = bytearray(count * nbytes)
        ids, values, present = [], [], np.zeros(count, dtype=bool)
        found = conn.execute("SELECT id, fingerprint, sketch FROM documents WHERE fingerprint IS NOT NULL ORDER BY id")
        for n, (i, f, s) in enumerate(found):
            ids.append(i), values.append(f)
            if s is not None and len(s) == nbytes:
                buffer[n * nbytes : (n + 1) * nbytes] = s
                present[n] = True
    rows = np.frombuffer(buffer, dtype=np.uint8).reshape(count, nbytes)
    return np.array(ids, dtype=np.int64), np.array(values, dtype=np.int64).view(np.uint64), rows, present


def _any_file_key(conn) -> bool:
    """Whether texts may be re-read from files: one of the first keys is an existing file. (It only
    widens the candidates for the exact check; every pair's texts are looked for anyway.)"""
    for (key,) in conn.execute("SELECT key FROM documents WHERE content_hash IS NOT NULL LIMIT 100"):
        if os.path.isfile(key):
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
