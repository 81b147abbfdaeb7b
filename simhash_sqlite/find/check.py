"""Near-duplicates checked: candidates kept only when the 5-shingle Jaccard of their texts reaches the
threshold, by one rule everywhere (judge(): dupes, clusters, near, explain, dedup's drops, the web
pages, simhash_near), so a pair gets the same Jaccard, the same verdict and the same "checked_by"
wherever it is shown.

bench/quality.py: at k = CONFIRM_K the default fingerprints find 96% of the pairs with Jaccard >= 0.8,
and the exact check removes every false one (F1 0.97-0.98 against 0.70-0.79 for the distance alone).
A text is reachable when the index stores it (--store-text) or the indexed file is unchanged at its
path.

The rule: an estimate from both sketches (sketch.py) that is sure (certainty >= CERTAIN; sketch.certainty:
the probability that the true Jaccard is on the estimate's side of the threshold) decides without
reading a text; an unsure one is settled by the exact Jaccard where both texts are reachable, and stays
an unsure estimate where not ("estimated"); without a sketch (an index made before sketches whose texts are gone, a bare
fingerprint) the distance decides, within min(k, RECOMMENDED_K) ("distance"). Each verdict says which
and how sure it is (Verdict). So exact checks go only to the pairs near the line (bench/accuracy.py
counts them).

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
from dataclasses import dataclass

import numpy as np

from ..core.settings import CONFIRM_K, DEFAULT_THRESHOLD, candidate_k
from ..core.shingles import jaccard_of_sets, shingle_set
from ..core.short_texts import short_text_data, short_text_shingles
from ..core.sketch import DEFAULT_SCHEME, SketchScheme, certainty, estimate_many, sizes_of, sketch
from ..errors import InvalidInput
from ..store import texts
from ..store.database import IndexFile
from ..store.texts import text_of
from .arrays import DuplicatePair, keys_of, load_fingerprints
from .pairs import Progress, near_pairs
from .queries import Query
from .search import Match, SearchResult
from .sketch_pairs import sketch_pairs
from .verdict import CERTAIN, CheckSummary, Verdict, judge, sketch_verdict, validate_threshold

# Shingle sets kept between pairs (8 bytes per distinct shingle, about one per character). Pairs of a
# dupes chunk are visited in order of their first document, so most reuse is between neighbours.
CACHE_BYTES = 256 << 20
# What an entry costs besides its array (key, dict slot, array header): so a cache of keys whose text is
# out of reach (None) is bounded too.
ENTRY_BYTES = 256
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
    (arrays plus ENTRY_BYTES each). None (no reachable text) is cached too."""

    def __init__(self, index: IndexFile, max_bytes: int = CACHE_BYTES) -> None:
        self.index, self.max_bytes = index, max_bytes
        self.entries: OrderedDict[str, np.ndarray | None] = OrderedDict()
        self.bytes = 0
        self.sketches: OrderedDict[str, bytes | None] = OrderedDict()
        short = "short_text" if index.short_texts.column else "NULL"
        self._query = f"SELECT text, content_hash, {short} FROM documents WHERE key = ?"
        self._short_query = f"SELECT {short} IS NOT NULL FROM documents WHERE key = ?"
        self.shorts: OrderedDict[str, bool] = OrderedDict()

    def short(self, key: str) -> bool:
        """Whether the index keeps a short text's exact data for the key (core/short_texts.py)."""
        if key in self.shorts:
            self.shorts.move_to_end(key)
            return self.shorts[key]
        found = bool(self.index.short_texts.column and self.index.conn.execute(self._short_query, (key,)).get)
        self.shorts[key] = found
        if len(self.shorts) > SKETCHES_KEPT:
            self.shorts.popitem(last=False)
        return found

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
        row = self.index.conn.execute(self._query, (key,)).get
        text = None if row is None else text_of(key, row[0], row[1])
        # Else a short text's exact data (core/short_texts.py), where the index keeps it.
        shingles = shingle_set(text) if text is not None else None if row is None else short_text_shingles(row[2])
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
    """The search's candidates (within its plan's k), each kept iff judge() keeps it; closest first,
    `limit` counting kept matches. The answer carries the CheckSummary, and the uncertain verdicts (kept
    or not) in `uncertain`."""
    report = CheckSummary(result.plan.k, threshold)
    if query.text is None and query.key is None:
        report.without_query_text = len(result.matches)
    started = time.perf_counter()
    scheme = shingles.index.sketch_scheme
    # The query's shingles and sketch, made when first needed (a query without any reads no text).
    mine: list[np.ndarray | None] = []
    my_sketch = _query_sketch(query, shingles) if result.matches else None
    my_short = bool(result.matches) and _query_short(query, shingles)
    kept: list[Match] = []
    uncertain: list[Match] = []
    for match in result.matches:
        if limit is not None and len(kept) >= limit:
            break

        def texts(key=match.key):
            if not mine:
                mine.append(_query_shingles(query, shingles))
            return mine[0], None if mine[0] is None else shingles(key)  # no query text: theirs not read

        theirs = None if my_sketch is None else shingles.sketch(match.key)
        short = my_short and shingles.short(match.key)
        verdict = report.count(
            sketch_verdict(match.distance, my_sketch, theirs, texts, scheme, threshold, report.k, short)
        )
        found = Match(match.key, match.fingerprint, match.distance, verdict.jaccard, verdict.checked_by,
                      verdict.certainty, verdict.keeps)
        if verdict.keeps:
            kept.append(found)
        if verdict.uncertain:
            uncertain.append(found)
    report.check_seconds = time.perf_counter() - started
    return SearchResult(result.fingerprint, result.plan, result.candidates, kept, report, uncertain)


def _query_short(query: Query, shingles: ShingleCache) -> bool:
    """Whether the query is a short text as the index keeps them (core/short_texts.py): a pair of two
    is checked exactly."""
    if query.text is not None:
        return shingles.index.short_texts.column and not shingles.index.store_text and short_text_data(
            query.text) is not None
    return query.key is not None and shingles.short(query.key)


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
    ) -> None:
        if uncertain and not check:
            raise InvalidInput("only checked pairs have a certainty: uncertain needs the check")
        self.index, self.k = index, candidate_k(k, check)
        self.on_progress = on_progress  # (done, total) of the pair search, for a progress bar
        self.report = CheckSummary(self.k, validate_threshold(threshold)) if check else None
        self.cache_bytes = cache_bytes
        self.uncertain = uncertain
        self.by_sketch = check and k is None  # LSH candidates, if every document turns out to have a sketch

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
        ids, values, rows, present, short = load_arrays_and_short(conn, scheme, self.index.short_texts.column)
        unsketched = np.flatnonzero(~present)
        if self.by_sketch and present.any() and len(unsketched) * len(values) <= MIXED_BRUTE_PAIRS:
            report.k, report.candidates_from = ANY_DISTANCE, "sketch"
            # Below the threshold too where an unsure estimate may be settled by the texts (stored, files, or
            # short texts' exact data, core/short_texts.py), or is listed.
            wider = self.uncertain or self.index.store_text or short.any() or _any_file_key(conn)
            low = max(0.0, report.threshold - EXACT_MARGIN) if wider else report.threshold
            sketched = np.flatnonzero(present)
            # Every document sketched (the usual case): the rows as they are, not a copy (1.2 GB at 10M).
            candidates = sketch_pairs(rows if len(sketched) == len(rows) else rows[sketched], low, scheme)
            parts = _chain(
                ((sketched[p.left], sketched[p.right], p.estimate) for p in candidates),
                ((left, right, None) for left, right in _pairs_of_unsketched(values, unsketched, self.k)),
            )
        else:
            parts = ((p.left, p.right, None) for p in near_pairs(values, self.k, on_progress=self.on_progress))
        check = PairCheck(self.index, report, self.cache_bytes)
        for left, right, estimate in _batched(parts):
            order = np.lexsort((right, left))  # each document's pairs side by side: cache hits
            left, right, estimate = left[order], right[order], estimate[order]
            first, second = ids[left], ids[right]
            distance = np.bitwise_count(values[left] ^ values[right]).astype(np.int64)
            keys = keys_of(conn, np.concatenate((first, second)))
            both = present[left] & present[right]
            verdicts = check.judge(
                [keys[i] for i in first.tolist()], [keys[i] for i in second.tolist()], distance,
                rows[left], rows[right], both, estimate, short[left] & short[right],
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


@dataclass
class Verdicts:
    """judge()'s verdicts on many pairs, as arrays: keep, Jaccard (NaN: by distance), how each was
    checked, certainty (NaN: unknown, by distance)."""

    keep: np.ndarray
    jaccard: np.ndarray
    how: list[str]
    certainty: np.ndarray

    @property
    def uncertain(self) -> np.ndarray:
        return ~(self.certainty >= CERTAIN)  # NaN (by distance) is uncertain

    def __getitem__(self, i: int) -> Verdict:
        j, c = float(self.jaccard[i]), float(self.certainty[i])
        return Verdict(bool(self.keep[i]), None if math.isnan(j) else j, self.how[i], None if math.isnan(c) else c)


class PairCheck:
    """judge() on pairs of stored documents, many at once: the sure estimates in one vectorized pass,
    the others one by one (their texts read through a ShingleCache, the first side's first: a pair
    whose first text is out of reach does not read the second). Counted in `report` when given."""

    def __init__(self, index: IndexFile, report: CheckSummary | None = None, cache_bytes: int = CACHE_BYTES,
                 threshold: float = DEFAULT_THRESHOLD) -> None:
        self.index, self.scheme = index, index.sketch_scheme
        self.report = report
        self.threshold = report.threshold if report is not None else validate_threshold(threshold)
        self.k = report.k if report is not None else CONFIRM_K
        self.shingles = ShingleCache(index, cache_bytes)

    def judge(
        self, first: list[str], second: list[str], distance: np.ndarray, rows_a: np.ndarray, rows_b: np.ndarray,
        both: np.ndarray, known: np.ndarray | None = None, short: np.ndarray | None = None,
    ) -> Verdicts:
        """Verdicts of the pairs (first[i], second[i]); rows_a, rows_b: their sketch rows, both: which
        pairs have two sketches; known: their estimates where already made (NaN: not yet), e.g. by
        the sketches' LSH (sketch_pairs: the same estimate_many); short: which pairs are two short
        texts whose exact data the index keeps (None: looked up), checked exactly (judge())."""
        n = len(first)
        if short is None:
            shingles = self.shingles
            short = np.array([shingles.short(a) and shingles.short(b) for a, b in zip(first, second)], dtype=bool)
        estimate, sure = np.full(n, np.nan), np.full(n, np.nan)
        if both.any():
            a, b = rows_a[both], rows_b[both]
            given = np.full(int(both.sum()), np.nan) if known is None else known[both]
            missing = np.isnan(given)
            if missing.any():
                given[missing] = estimate_many(a[missing], b[missing], self.scheme)
            estimate[both] = given
            sure[both] = certainty(given, self.threshold, sizes_of(a, self.scheme), sizes_of(b, self.scheme),
                                   self.scheme)
        decided = (sure >= CERTAIN) & ~short
        keep = decided & (estimate >= self.threshold)
        jaccard = np.where(decided, estimate, np.nan)
        certain = np.where(decided, sure, np.nan)
        how = ["estimated"] * n
        if self.report is not None:
            self.report.count_sure(keep[decided])
        started = time.perf_counter()
        shingles = self.shingles
        for i in np.flatnonzero(~decided).tolist():
            def exact(a=first[i], b=second[i]) -> float | None:
                sa = shingles(a)
                sb = None if sa is None else shingles(b)
                return None if sa is None or sb is None else jaccard_of_sets(sa, sb)

            e = None if math.isnan(estimate[i]) else float(estimate[i])
            verdict = judge(int(distance[i]), estimate=e, sure=None if e is None else float(sure[i]), exact=exact,
                            threshold=self.threshold, k=self.k, short=bool(short[i]))
            if self.report is not None:
                self.report.count(verdict)
            keep[i], how[i] = verdict.keeps, verdict.checked_by
            jaccard[i] = np.nan if verdict.jaccard is None else verdict.jaccard
            certain[i] = np.nan if verdict.certainty is None else verdict.certainty
        if self.report is not None:
            self.report.check_seconds += time.perf_counter() - started
        return Verdicts(keep, jaccard, how, certain)


# Candidates are judged this many at a time at least (the LSH yields many small chunks: copies of one
# text, pairs of unsketched documents): the vectorized work and the key lookup are per batch.
BATCH_PAIRS = 1 << 15


def _batched(parts) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(left, right, estimate or None) chunks joined into batches of at least BATCH_PAIRS pairs, as
    (left, right, estimate) with NaN where no estimate came with the pair."""
    pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    count = 0
    for left, right, estimate in parts:
        if len(left) == 0:
            continue
        pending.append((left, right, np.full(len(left), np.nan) if estimate is None else estimate))
        count += len(left)
        if count >= BATCH_PAIRS:
            yield _joined(pending)
            pending, count = [], 0
    if pending:
        yield _joined(pending)


def _joined(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lefts, rights, estimates = zip(*parts)
    return np.concatenate(lefts), np.concatenate(rights), np.concatenate(estimates)


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
