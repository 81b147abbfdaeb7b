"""Near-duplicates checked exactly: fingerprint candidates within a generous k, kept only when the
exact 5-shingle Jaccard of their texts reaches the threshold.

bench/quality.py: at k = CONFIRM_K the default fingerprints find 96% of the pairs with Jaccard >= 0.8,
and the check removes every false one (F1 0.97-0.98 against 0.70-0.79 for the distance alone). A text
is reachable when the index stores it (--store-text) or the indexed file is unchanged at its path.
A candidate whose text (or the query's) is not reachable cannot be checked: it is judged by its
distance alone, kept within min(k, RECOMMENDED_K), and marked unchecked.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .batch_queries import Query
from .errors import InvalidInput
from .fingerprint import check_k
from .index_arrays import DuplicatePair, keys_of, load_fingerprints
from .indexed_text import text_of
from .pairs import near_pairs
from .search import Match, SearchResult
from .settings import CONFIRM_K, RECOMMENDED_K
from .shingles import jaccard_of_sets, shingle_set

if TYPE_CHECKING:  # the index calls into this module: importing it at run time would be circular
    from .index import SimhashIndex

DEFAULT_THRESHOLD = 0.8
# Shingle sets kept between pairs (8 bytes per distinct shingle, about one per character). Pairs of a
# dupes chunk are visited in order of their first document, so most reuse is between neighbours.
CACHE_BYTES = 256 << 20
# What an entry costs besides its array (key, dict slot, array header): so a cache of keys whose text is
# out of reach (None) is bounded too.
ENTRY_BYTES = 256


def check_threshold(threshold: float) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        raise InvalidInput(f"the Jaccard threshold must be a number above 0 and at most 1, not {threshold!r}")
    return float(threshold)


def candidate_k(k: int | None, check: bool) -> int:
    """The candidate radius: an explicit k, else CONFIRM_K when checking, else RECOMMENDED_K."""
    if k is None:
        return CONFIRM_K if check else RECOMMENDED_K
    return check_k(k)


def fallback_k(k: int) -> int:
    """The largest distance at which an unchecked candidate is still kept."""
    return min(k, RECOMMENDED_K)


def keeps(distance: int, jaccard: float | None, k: int = CONFIRM_K, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """The rule: a pair within k is a near-duplicate iff its exact Jaccard is >= threshold, or, when
    the Jaccard is unknown (a text out of reach), iff it is within min(k, RECOMMENDED_K)."""
    if distance > k:
        return False
    return distance <= fallback_k(k) if jaccard is None else jaccard >= threshold


class ShingleCache:
    """Shingle sets of stored documents by key; the least recently used go past a byte budget
    (arrays plus ENTRY_BYTES each). None (no reachable text) is cached too."""

    def __init__(self, index: SimhashIndex, max_bytes: int = CACHE_BYTES) -> None:
        self.index, self.max_bytes = index, max_bytes
        self.entries: OrderedDict[str, np.ndarray | None] = OrderedDict()
        self.bytes = 0

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


def _cost(shingles: np.ndarray | None) -> int:
    return ENTRY_BYTES + (0 if shingles is None else shingles.nbytes)


@dataclass
class ConfirmReport:
    """How the candidates within k were judged. Counts grow while results are consumed."""

    k: int
    threshold: float
    candidates: int = 0  # within k
    checked: int = 0  # kept: exact Jaccard >= threshold
    rejected: int = 0  # dropped: exact Jaccard < threshold
    unchecked: int = 0  # kept by distance <= fallback_k: a text was not reachable
    too_far: int = 0  # dropped: a text was not reachable and the distance > fallback_k
    without_query_text: int = 0  # of the unchecked and too_far: the query was a bare fingerprint (no text)
    check_seconds: float = 0.0  # reading texts, shingling, Jaccard

    @property
    def fallback_k(self) -> int:
        return fallback_k(self.k)

    @property
    def kept(self) -> int:
        return self.checked + self.unchecked

    def judge(self, distance: int, a: np.ndarray | None, b: np.ndarray | None) -> tuple[bool, float | None]:
        """(keep?, exact Jaccard or None when a text is missing), counted."""
        self.candidates += 1
        if a is None or b is None:
            keep = keeps(distance, None, self.k, self.threshold)
            self.unchecked += keep
            self.too_far += not keep
            return keep, None
        similarity = jaccard_of_sets(a, b)
        keep = keeps(distance, similarity, self.k, self.threshold)
        self.checked += keep
        self.rejected += not keep
        return keep, similarity


def check_search(
    result: SearchResult, query: Query, shingles: ShingleCache, threshold: float, limit: int | None
) -> SearchResult:
    """The search's candidates (within its plan's k), each kept iff it passes the check; closest first,
    `limit` counting kept matches. The answer carries the ConfirmReport."""
    report = ConfirmReport(result.plan.k, threshold)
    if query.text is None and query.key is None:
        report.without_query_text = len(result.matches)
    mine = _query_shingles(query, shingles)  # the query's shingles; None: no text to compare
    started = time.perf_counter()
    kept = []
    for match in result.matches:
        if limit is not None and len(kept) >= limit:
            break
        other = None if mine is None else shingles(match.key)  # no query text: no need to read theirs
        keep, similarity = report.judge(match.distance, mine, other)
        if keep:
            kind = "distance" if similarity is None else "exact"
            kept.append(Match(match.key, match.fingerprint, match.distance, similarity, kind))
    report.check_seconds = time.perf_counter() - started
    return SearchResult(result.fingerprint, result.plan, result.candidates, kept, report)


def _query_shingles(query: Query, shingles: ShingleCache) -> np.ndarray | None:
    if query.text is not None:
        return shingle_set(query.text)
    if query.key is not None:
        return shingles(query.key)
    return None  # a bare fingerprint has no text


class DuplicatePairs:
    """Every pair of indexed documents within k, each once (first added first), streamed in chunks of
    the pair search. With check (the default) a pair is kept iff its exact Jaccard is >= threshold, or,
    without reachable texts, iff it is within min(k, RECOMMENDED_K); `report` counts as pairs come.
    Without check every pair within k is kept and `report` is None. Memory: one chunk of candidate
    positions and the shingle cache (cache_bytes), whatever the number of pairs."""

    def __init__(
        self,
        index: SimhashIndex,
        k: int = CONFIRM_K,
        threshold: float = DEFAULT_THRESHOLD,
        *,
        check: bool = True,
        cache_bytes: int = CACHE_BYTES,
    ) -> None:
        self.index, self.k = index, check_k(k)
        self.report = ConfirmReport(self.k, check_threshold(threshold)) if check else None
        self.cache_bytes = cache_bytes

    def __iter__(self) -> Iterator[DuplicatePair]:
        for first, second, distance, similarity, keys in self._chunks():
            for a, b, d, j in zip(first.tolist(), second.tolist(), distance.tolist(), similarity.tolist()):
                if self.report is None:
                    yield DuplicatePair(keys[a], keys[b], d)
                elif math.isnan(j):
                    yield DuplicatePair(keys[a], keys[b], d, None, "distance")
                else:
                    yield DuplicatePair(keys[a], keys[b], d, j, "exact")

    def id_pairs(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The kept pairs as chunks of (first ids, second ids): what clustering needs."""
        for first, second, *_ in self._chunks():
            yield first, second

    def _chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[int, str]]]:
        """Per chunk of candidates: the kept pairs' ids (first added first), distances, Jaccard (NaN:
        unchecked) and the keys of their ids."""
        conn, report = self.index.conn, self.report
        shingles = ShingleCache(self.index, self.cache_bytes)
        stored = load_fingerprints(conn)
        for part in near_pairs(stored.values, self.k):
            order = np.lexsort((part.right, part.left))  # each document's pairs side by side: cache hits
            first, second = stored.ids[part.left[order]], stored.ids[part.right[order]]
            distance = part.distance[order]
            keys = keys_of(conn, np.concatenate((first, second)))
            if report is None:
                yield first, second, distance, np.full(len(first), np.nan), keys
                continue
            started = time.perf_counter()
            keep = np.zeros(len(first), dtype=bool)
            similarity = np.full(len(first), np.nan)
            for i, (a, b, d) in enumerate(zip(first.tolist(), second.tolist(), distance.tolist())):
                sa = shingles(keys[a])
                sb = None if sa is None else shingles(keys[b])
                keep[i], j = report.judge(d, sa, sb)
                if j is not None:
                    similarity[i] = j
            report.check_seconds += time.perf_counter() - started
            if keep.any():
                yield first[keep], second[keep], distance[keep], similarity[keep], keys


def confirm_pairs(
    index: SimhashIndex, pairs: Iterable[tuple[str, str]], threshold: float = DEFAULT_THRESHOLD
) -> list[tuple[str, str, float]]:
    """The pairs of stored keys whose exact Jaccard is >= threshold, with it. Pairs with a text that
    is not reachable are left out (there is no distance rule here)."""
    threshold = check_threshold(threshold)
    shingles = ShingleCache(index)
    out = []
    for a, b in pairs:
        sa, sb = shingles(a), shingles(b)
        if sa is not None and sb is not None and (j := jaccard_of_sets(sa, sb)) >= threshold:
            out.append((a, b, j))
    return out
