"""Keep-first deduplication of a stream, checked: each document is kept unless an earlier kept document
(or one in an existing index) is a near-duplicate of it, in input order.

A near-duplicate is judged by the pair rule of `simq dupes` (find/verdict.py decide()): by default a
candidate that shares a window of the sketch's LSH tables (sketch_pairs.py, always its 24/12 windows
here: a stream does not know its size, where `dupes` widens them past 2**20 documents). Both texts of a
pair are at hand (the incoming document's, and the kept one's, written to disk as it was kept), so
every candidate the sketch filter lets through is judged by the exact 5-shingle Jaccard of the two
normalised texts ("exact", the function dupes uses for stored texts: core/shingles.py), the estimate
only deciding which pairs are read. In RAM each kept document costs its sketch (120 bytes), fingerprint,
key, LSH codes and the offset of its text in the kept-texts file (spill.KeptTexts; about 1.1 KB), and its
text costs its bytes on disk (a JSONL record's line, or the text's UTF-8); past the memory budget
(`memory`) the kept set spills to disk (spill.py) with the same decisions. A text out of reach (an indexed
document whose text the index does not store and whose file changed, a FingerprintedDocument given without
its line, a text of more than READ_WHOLE_BYTES characters) leaves its pairs to the sketches' estimate, or,
without a sketch (an index made before sketches), to distance within min(k, RECOMMENDED_K) ("distance").
A drop cannot be undone, so when unsure, keep: a document is dropped only on a verdict that is exact or at
least verdict.CERTAIN sure, unless drop_uncertain asks to drop on an uncertain one too (an estimate short
of CERTAIN, distance alone). With an explicit k the candidates are the kept documents within k, checked the
same way; without the check, within k (RECOMMENDED_K by default) by distance alone, as before sketches.

Kept sketches live in sorted runs (KeptSketches), kept fingerprints in an exact multi-index (KeptSet):
runs merged like a binary counter, so O(log n) runs, the largest moved to disk past the budget (and
merged there the same way); the kept documents' keys, fingerprints and short texts in KeptLabels.
Documents are fingerprinted and sketched a batch at a time (one pass over their shingles), the batch is
searched against the kept runs and within itself, then a short sequential pass decides keep or drop in
input order: a document is dropped for its best kept partner (highest estimate, then the earliest; for
distance, the closest). The decisions do not depend on where batches end, and the pair rule is
symmetric, so the kept set is the greedy one over the pairs in input order: the same as spark.py's on the
same input.
"""

from __future__ import annotations

import codecs
import json
import time
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, cast, overload

import apsw
import numpy as np

from ..core.fingerprint import to_hex
from ..core.pool import FingerprintJob, workers
from ..core.rule import READ_WHOLE_BYTES, TRUTH_NGRAM
from ..core.settings import CONFIRM_K, DEFAULT_THRESHOLD, FingerprintSettings, candidate_k, validate_k
from ..core.shingles import jaccard_of_pairs, shingle_set
from ..core.short_texts import short_text_shingles
from ..core.sketch import (
    DEFAULT_SCHEME,
    SketchScheme,
    as_rows,
    certainty,
    estimate_many,
    ratio_may_reach,
    recorded_size_codes,
    sizes_of,
)
from ..errors import SettingsMismatch
from ..find.arrays import keys_of
from ..find.block_tables import choose_tables
from ..find.bounded_pairs import give_back_free_memory
from ..find.check import ENTRY_BYTES, EXACT_MARGIN, ShingleCache, load_arrays_and_short
from ..find.pairs import CHUNK, _groups, near_pairs, sorted_by, within_groups
from ..find.sketch_pairs import WINDOW_BITS, WINDOW_STEP, sketch_pairs, window_keys
from ..find.verdict import decide, fallback_k, validate_threshold
from ..index import SimhashIndex
from ..native import codes as native_codes
from ..native import documents as native_documents
from ..store.documents import Document, FingerprintedDocument, fingerprinted
from ..store.labels import apart_keys, keeper_keys
from .jsonl import RecordRules, parse_record
from .sources import DEDUP_PROCESSES, LineBatch
from .spill import KeptLabels, KeptTexts, SpilledRun, SpillFolder

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

BATCH = 2000
NO_MATCH = np.iinfo(np.int64).max
# Once the kept set has spilled, batches are SPILLED_BATCH_MOST times BATCH (32,000 documents), or as many as an
# eighth of --memory holds (Deduplicator.batch_bytes): a batch reads each block of the spilled runs that one of its
# codes may be in, and the more documents a batch has, the fewer blocks it reads a document (a 1M-page stream: 44
# CPU-s, where batches grown by 2,000 every 250,000 spilled documents took 61).
SPILLED_BATCH_MOST = 16
# What a batch member holds besides its line, in bytes: its LSH codes (77 of 8 bytes) and their sort's
# temporaries, its sketch row, key and columns (memray of a 1M-page stream: about 2 KB).
BATCH_DOCUMENT_BYTES = 2048


class _Run:
    """A sorted run of kept fingerprints with one sorted key array per table (none: scanned)."""

    def __init__(self, values: np.ndarray, labels: np.ndarray, k: int) -> None:
        self.values, self.labels, self.k = values, labels, k
        # Queries and builds cost about what an all-pairs search of the run would.
        self.block_tables = choose_tables(64, k, len(values))
        self.tables = []
        if self.block_tables is not None:
            for table in self.block_tables.table_blocks:
                keys, order = sorted_by(self.block_tables.bits(values, table), self.block_tables.table_width(table))
                self.tables.append((table, keys, order))

    def candidates(self, queries: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(query number, run position) pairs that may be within k; a superset of those that are."""
        if self.block_tables is None:
            rows = max(1, CHUNK // max(len(self.values), 1))
            for q0 in range(0, len(queries), rows):
                q = np.arange(q0, min(q0 + rows, len(queries)), dtype=np.int64)
                yield np.repeat(q, len(self.values)), np.tile(np.arange(len(self.values)), len(q))
            return
        for table, keys, order in self.tables:
            wanted = self.block_tables.bits(queries, table)
            lo = np.searchsorted(keys, wanted, side="left")
            count = np.searchsorted(keys, wanted, side="right") - lo
            hits = np.flatnonzero(count)
            if len(hits) == 0:
                continue
            count, lo = count[hits], lo[hits]
            q = np.repeat(hits, count)
            step = np.arange(len(q), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
            yield q, order[np.repeat(lo, count) + step]


class KeptSet:
    """Fingerprints kept so far, each with an integer label; finds the closest one within k."""

    def __init__(self, k: int) -> None:
        self.k = validate_k(k)
        self.runs: list[_Run] = []

    def __len__(self) -> int:
        return sum(len(run.values) for run in self.runs)

    def add(self, values: np.ndarray, labels: np.ndarray) -> None:
        if len(values) == 0:
            return
        self.runs.append(_Run(values, labels, self.k))
        # Merge while the newest run is at least half its predecessor: O(log n) runs.
        while len(self.runs) > 1 and 2 * len(self.runs[-1].values) >= len(self.runs[-2].values):
            newer, older = self.runs.pop(), self.runs.pop()
            self.runs.append(
                _Run(np.concatenate((older.values, newer.values)), np.concatenate((older.labels, newer.labels)), self.k)
            )

    def within(self, queries: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Every (query number, label, distance) with the kept fingerprint within k, in chunks."""
        for run in self.runs:
            for q, position in run.candidates(queries):
                d = np.bitwise_count(queries[q] ^ run.values[position]).astype(np.int64)
                close = d <= self.k
                if close.any():
                    yield q[close], run.labels[position[close]], d[close]

    def closest(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each query, (label, distance) of the closest kept fingerprint within k, ties to the
        lowest label; distance k + 1 (and label NO_MATCH) when there is none."""
        best_distance = np.full(len(queries), self.k + 1, dtype=np.int64)
        best_label = np.full(len(queries), NO_MATCH, dtype=np.int64)
        for q, label, d in self.within(queries):
            # Best per query in this chunk: sort by (query, distance, label), take the first.
            order = np.lexsort((label, d, q))
            q, d, label = q[order], d[order], label[order]
            first = np.concatenate(([True], q[1:] != q[:-1]))
            q, d, label = q[first], d[first], label[first]
            better = (d < best_distance[q]) | ((d == best_distance[q]) & (label < best_label[q]))
            best_distance[q[better]] = d[better]
            best_label[q[better]] = label[better]
        return best_label, best_distance


# -- kept sketches -----------------------------------------------------------------------------------

_U64 = np.uint64
_POSITION_BITS = 32  # a run holds fewer than 2**32 sketches
ESTIMATE_CHUNK = 1 << 16  # candidate pairs estimated at once (their two rows gathered: 240 bytes each)


def window_codes(rows: np.ndarray, scheme: SketchScheme = DEFAULT_SCHEME) -> np.ndarray:
    """(n, windows) codes window number << WINDOW_BITS | key: the keys of sketch_pairs's LSH tables, so
    two rows share a code exactly when sketch_pairs would make them candidates."""
    n, nbytes = rows.shape
    padded = np.zeros((n, -(-nbytes // 8) * 8), dtype=np.uint8)
    padded[:, :nbytes] = rows
    words = np.ascontiguousarray(padded.view("<u8").T)
    starts = range(0, scheme.bins * scheme.bits - WINDOW_BITS + 1, WINDOW_STEP)  # the bins' bits, not the size's
    codes = np.empty((n, len(starts)), dtype=_U64)
    for w, start in enumerate(starts):
        codes[:, w] = window_keys(words, start, WINDOW_BITS) | _U64(w << WINDOW_BITS)
    return codes


_LOW = _U64((1 << _POSITION_BITS) - 1)
_HIGH = ~_LOW


def sorted_codes(rows: np.ndarray, scheme: SketchScheme = DEFAULT_SCHEME) -> np.ndarray:
    """The rows' window_codes as one sorted array of code << 32 | row number."""
    # Window by window: the window number is the codes' top, so sorting each window's codes and laying
    # the windows end to end sorts them all, and many short sorts are quicker than one long one.
    codes = np.ascontiguousarray(window_codes(rows, scheme).T)
    codes <<= _U64(_POSITION_BITS)
    codes |= np.arange(len(rows), dtype=_U64)
    codes.sort(axis=1)
    return codes.ravel()


def codes_of_some(codes: np.ndarray, chosen: np.ndarray, count: int) -> np.ndarray:
    """sorted_codes(rows[chosen]) from codes = sorted_codes(rows) of `count` rows (chosen ascending)."""
    number = np.full(count, -1, dtype=np.int64)
    number[chosen] = np.arange(len(chosen))
    row_number = number[(codes & _LOW).view(np.int64)]
    mine = row_number >= 0
    # Renumbering in order keeps the order: rows sorted within each code stay so.
    return (codes[mine] & _HIGH) | row_number[mine].view(_U64)


# Within a batch, candidate pairs come from its sorted_codes unless equal codes would pair more rows than
# this (many copies of one text in a batch: sketch_pairs folds identical rows first).
BATCH_CODE_PAIRS = 1 << 22


def pairs_of_codes(
    rows: np.ndarray, codes: np.ndarray, threshold: float, scheme: SketchScheme = DEFAULT_SCHEME
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """sketch_pairs(rows, threshold) from the rows' sorted_codes, as (left, right, estimate) with
    left < right; None where the codes pair too many rows (BATCH_CODE_PAIRS)."""
    starts, sizes = _groups(codes & _HIGH)
    if int((sizes * (sizes - 1) // 2).sum()) > BATCH_CODE_PAIRS:
        return None
    n = len(rows)
    found = [np.empty(0, np.int64)]
    for i, j in within_groups(starts, sizes):  # rows ascend within a code: left < right
        found.append((codes[i] & _LOW).view(np.int64) * n + (codes[j] & _LOW).view(np.int64))
    left, right = np.divmod(np.unique(np.concatenate(found)), n)  # a pair sharing several windows: once
    estimate = np.concatenate(
        [np.empty(0)]
        + [
            estimate_many(rows[left[lo : lo + ESTIMATE_CHUNK]], rows[right[lo : lo + ESTIMATE_CHUNK]], scheme)
            for lo in range(0, len(left), ESTIMATE_CHUNK)
        ]
    )
    keep = estimate >= threshold
    return left[keep], right[keep], estimate[keep]


# Each query code is searched for in every run, and most are in none: a bit map of the kept codes' top
# bits (their window and the top of their key: the codes are sorted, so their top bits are too) answers
# "in no run" first, a few ns a code against two binary searches a run. SEEN_BITS_A_CODE to twice that
# bits a kept code (2-4 bytes beside its own 8; 79 of the 128 windows the top bits can name are used, so at
# most a tenth of the used bits are set), while the map fits 2**SEEN_MOST bits (128 MiB: 67M codes, 850k
# kept pages); past that more absent codes pass. A crawl of 80k pages (bench/end_to_end.py): the kept
# sketches' search and upkeep 0.70 -> 0.50 CPU-s; 16 bits a code against 8 and 32: 0.50, 0.56, 0.49.
SEEN_BITS_A_CODE = 16
SEEN_FIRST, SEEN_MOST = 16, 30
SEEN_CHUNK = 1 << 18


def _seen_slots(codes: np.ndarray, bits: int) -> np.ndarray:
    """The bits of KeptSketches.seen that sorted_codes map to (their top bits; bit 63 of a code is 0)."""
    return codes >> _U64(63 - bits)


def _is_seen(seen: np.ndarray, codes: np.ndarray, bits: int) -> np.ndarray:
    slots = _seen_slots(codes, bits)
    return (seen[(slots >> _U64(3)).astype(np.intp)] >> (slots & _U64(7)).astype(np.uint8)) & 1 != 0


def _mark_seen(seen: np.ndarray, codes: np.ndarray, bits: int) -> None:
    """Set the bits of sorted codes in seen (a bit map of 2**bits bits): in C where built, else without ufunc.at:
    the codes' slots ascend, so each byte's bits are OR-ed together first and each byte is written once."""
    if native_codes.marked(seen, codes, bits):
        return
    slots = _seen_slots(codes, bits)
    byte = (slots >> _U64(3)).astype(np.intp)
    first = np.flatnonzero(np.concatenate(([True], byte[1:] != byte[:-1])))
    seen[byte[first]] |= np.bitwise_or.reduceat(np.left_shift(1, (slots & _U64(7)).astype(np.uint8)), first)


# A merged run's codes lie at the start of an array with room for as many again, so that a merge that fits writes
# into it in place (native/codes.py merge_into) and faults in only the newer run's pages: a new array's page faults
# cost more than the merge itself (7 ms to merge 56 MB into memory already touched, 20-150 ms into a new array;
# 100k crawl pages: 14 of 42 merges in place). The room is not written until a merge fills it, so it takes address
# space, not memory: the budget counts the codes (KeptSketches.nbytes).
RUN_ROOM = 2


class _SketchRun:
    """Kept sketches with their labels and one sorted array of code << 32 | position (sorted_codes); codes is the
    start of store (the room merges grow into)."""

    def __init__(
        self, rows: np.ndarray, labels: np.ndarray, codes: np.ndarray, store: np.ndarray | None = None
    ) -> None:
        self.rows, self.labels, self.codes = rows, labels, codes
        self.store = codes if store is None else store

    @classmethod
    def merged(cls, older: _SketchRun, newer: _SketchRun) -> _SketchRun:
        rows, labels = np.concatenate((older.rows, newer.rows)), np.concatenate((older.labels, newer.labels))
        need = len(older.codes) + len(newer.codes)
        if native_codes.can_merge():
            store = older.store if len(older.store) >= need else np.empty(RUN_ROOM * need, dtype=_U64)
            if native_codes.merge_into(store, older.codes, newer.codes, len(older.rows)):
                return cls(rows, labels, store[:need], store)
        codes = np.concatenate((older.codes, newer.codes + _U64(len(older.rows))))
        codes.sort(kind="stable")  # two sorted runs: timsort merges them in linear time
        return cls(rows, labels, codes)

    def candidates(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query number, run position) for every query code found here, each pair once; queries:
        sorted_codes() of the query rows (sorted, the binary searches walk the run once)."""
        return _candidates(self.codes, queries, len(self.rows))


def _candidates(run_codes: np.ndarray, queries: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """_SketchRun.candidates over run_codes: a run's sorted codes, or a sorted part of them that holds every
    code of the queries' (SpilledRun.codes_near); count: the run's rows."""
    if len(run_codes) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    found = native_codes.found(run_codes, queries, _POSITION_BITS)  # (in C where built: searches in lockstep)
    if found is not None:
        pair = np.unique(found[0] * count + found[1])  # a pair sharing several windows: once
        return pair // count, pair % count
    wanted = queries & _HIGH
    lo = np.searchsorted(run_codes, wanted, side="left")
    # Most codes are in no run: one search, and a second only for those found.
    hits = np.flatnonzero((run_codes.take(np.minimum(lo, len(run_codes) - 1)) & _HIGH) == wanted)
    if len(hits) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    lo = lo[hits]
    found = np.searchsorted(run_codes, wanted[hits] | _LOW, side="right") - lo
    q = np.repeat((queries[hits] & _LOW).view(np.int64), found)
    step = np.arange(len(q), dtype=np.int64) - np.repeat(np.cumsum(found) - found, found)
    position = (run_codes[np.repeat(lo, found) + step] & _LOW).view(np.int64)
    pair = np.unique(q * count + position)  # a pair sharing several windows: once
    return pair // count, pair % count


class KeptSketches:
    """Sketches kept so far, each with an integer label; finds every kept one that shares an LSH window
    with a query and whose estimated Jaccard with it reaches the threshold. The rows' sorted_codes() may
    be passed in where the caller has them (a batch is searched, then its kept rows added).

    budget: the bytes the runs and the bit map may hold in RAM (None: no bound); past it the largest run
    moves to `folder` (spill.SpilledRun), where it is searched with the same answers."""

    def __init__(
        self, threshold: float = DEFAULT_THRESHOLD, scheme: SketchScheme = DEFAULT_SCHEME,
        budget: int | None = None, folder: SpillFolder | None = None,
    ) -> None:
        self.threshold, self.scheme = validate_threshold(threshold), scheme
        self.budget, self.folder = budget, folder if budget is not None else None
        self.runs: list[_SketchRun] = []
        self.spilled: list[SpilledRun] = []
        self.seen = np.zeros(0, dtype=np.uint8)  # bit map of the kept codes' top seen_bits bits
        self.seen_bits = 0
        # The bit map takes at most an eighth of the budget (its bits past that let more absent codes pass).
        self.seen_most = SEEN_MOST if budget is None else max(SEEN_FIRST, min(SEEN_MOST, budget.bit_length() - 1))
        self.codes = 0
        # What matches() has done: candidate pairs (sharing a window), those estimated (not ruled out by their
        # size ratio first), and the spilled runs' rows read from disk for them. 24-bit keys: the random
        # candidates a query meets grow with the kept set (bench/scale.py candidates; docs/scale.md).
        self.candidates = 0
        self.estimated = 0
        self.rows_read = 0

    def __len__(self) -> int:
        return sum(len(run.rows) for run in self.runs) + sum(len(run) for run in self.spilled)

    @property
    def nbytes(self) -> int:
        """Bytes held in RAM."""
        return (self.seen.nbytes + sum(run.rows.nbytes + run.labels.nbytes + run.codes.nbytes for run in self.runs)
                + sum(run.nbytes for run in self.spilled))

    def add(self, rows: np.ndarray, labels: np.ndarray, codes: np.ndarray | None = None) -> None:
        if len(rows) == 0:
            return
        codes = sorted_codes(rows, self.scheme) if codes is None else codes
        self.runs.append(_SketchRun(rows, labels, codes))
        while len(self.runs) > 1 and 2 * len(self.runs[-1].rows) >= len(self.runs[-2].rows):
            newer, older = self.runs.pop(), self.runs.pop()
            self.runs.append(_SketchRun.merged(older, newer))
            del newer, older  # (not held past the merge: the spill below may move the merged run to disk)
        self.codes += len(codes)
        bits = min(max(SEEN_FIRST, (self.codes * SEEN_BITS_A_CODE - 1).bit_length()), self.seen_most)
        if bits != self.seen_bits:  # grown: every kept code again (each time the codes double)
            self.seen, self.seen_bits = np.zeros(1 << (bits - 3), dtype=np.uint8), bits
            for spilled in self.spilled:
                for part in spilled.codes_in_chunks(SEEN_CHUNK):
                    _mark_seen(self.seen, part, bits)
            for run in self.runs:
                for lo in range(0, len(run.codes), SEEN_CHUNK):  # a few MB of temporaries at a time
                    _mark_seen(self.seen, run.codes[lo : lo + SEEN_CHUNK], bits)
        else:
            _mark_seen(self.seen, codes, bits)
        # Over the budget: the largest runs (the oldest) go to disk. A merge copies its two runs, so the
        # runs in RAM are held to half the budget.
        while self.folder is not None and self.budget is not None and self.runs and 2 * self.nbytes > self.budget:
            largest = max(range(len(self.runs)), key=lambda i: len(self.runs[i].rows))
            run = self.runs.pop(largest)
            sizes = recorded_size_codes(run.rows, self.scheme)
            self.spilled.append(SpilledRun(self.folder, run.rows, run.labels, run.codes, sizes))
            del run  # (its arrays are on disk now: not held through the merges below)
            # Merged on disk as the runs in RAM are: O(log n) runs to search.
            while len(self.spilled) > 1 and 2 * len(self.spilled[-1]) >= len(self.spilled[-2]):
                newer_spilled, older_spilled = self.spilled.pop(), self.spilled.pop()
                self.spilled.append(SpilledRun.merged(self.folder, older_spilled, newer_spilled))

    def matches(
        self, rows: np.ndarray, codes: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query number, label, estimate) of every kept near-duplicate of each query row."""
        out_q, out_label, out_estimate = [np.empty(0, np.int64)], [np.empty(0, np.int64)], [np.empty(0)]
        if len(rows) and (self.runs or self.spilled):
            codes = sorted_codes(rows, self.scheme) if codes is None else codes
            codes = codes[_is_seen(self.seen, codes, self.seen_bits)]  # still sorted
            query_sizes: np.ndarray | None = None
            for run in self.runs:
                q, position = run.candidates(codes)
                for lo in range(0, len(q), ESTIMATE_CHUNK):
                    qq, pp = q[lo : lo + ESTIMATE_CHUNK], position[lo : lo + ESTIMATE_CHUNK]
                    estimate = estimate_many(rows[qq], run.rows[pp], self.scheme)
                    self.candidates += len(qq)
                    self.estimated += len(qq)
                    keep = estimate >= self.threshold
                    out_q.append(qq[keep])
                    out_label.append(run.labels[pp[keep]])
                    out_estimate.append(estimate[keep])
            for spilled in self.spilled:
                wanted, found = codes & _HIGH, [np.empty(0, np.int64)]
                for lo, hi in spilled.slices(wanted):  # a few MiB of the run read at a time
                    q, position = _candidates(spilled.codes_near(wanted[lo:hi]), codes[lo:hi], len(spilled))
                    found.append(q * len(spilled) + position)
                pair = np.unique(np.concatenate(found))  # a pair sharing windows in two slices: once
                q, position = pair // len(spilled), pair % len(spilled)
                self.candidates += len(q)
                # Random candidates grow with the kept set (24-bit keys); most differ in size too much to
                # reach the threshold, and are dropped here without reading their rows.
                if query_sizes is None:
                    query_sizes = recorded_size_codes(rows, self.scheme)
                possible = ratio_may_reach(query_sizes[q], spilled.sizes[position], self.threshold)
                q, position = q[possible], position[possible]
                for lo in range(0, len(q), ESTIMATE_CHUNK):
                    qq, pp = q[lo : lo + ESTIMATE_CHUNK], position[lo : lo + ESTIMATE_CHUNK]
                    distinct, back = np.unique(pp, return_inverse=True)
                    their_rows, their_labels = spilled.rows_and_labels(distinct)
                    estimate = estimate_many(rows[qq], their_rows[back], self.scheme)
                    self.estimated += len(qq)
                    self.rows_read += len(distinct)
                    keep = estimate >= self.threshold
                    out_q.append(qq[keep])
                    out_label.append(their_labels[back[keep]])
                    out_estimate.append(estimate[keep])
        return np.concatenate(out_q), np.concatenate(out_label), np.concatenate(out_estimate)

    def close(self) -> None:
        for run in self.spilled:
            run.close()


@dataclass(frozen=True)
class Decision:
    """What happened to one input document. duplicate_of is the key of the earlier kept document (or
    indexed one, with --against) it duplicates, None when kept; jaccard and checked_by say how that was
    judged ("exact": the exact Jaccard of the two texts; "estimated": the sketches' estimate, a text out of
    reach; "distance": by distance alone; None: check turned off)."""

    document: Document | FingerprintedDocument  # (a JSONL record fingerprinted by the reader: no text)
    raw: bytes | None  # the JSONL line it came from, passed through unchanged
    fingerprint: int | None
    duplicate_of: str | None = None
    distance: int | None = None
    jaccard: float | None = None
    checked_by: str | None = None
    certainty: float | None = None  # of the verdict on the pair (check.Verdict); None: by distance, or unchecked

    @property
    def kept(self) -> bool:
        return self.duplicate_of is None

    def output_line(self, text_field: str = "text", id_field: str = "id") -> bytes:
        """The record to write: the input line byte for byte, or a JSON object for a text file."""
        return _record_line(self.document.key, self.document.text, self.raw, text_field, id_field)

    def dupe_line(self) -> bytes:
        record = {
            "key": self.document.key,
            "duplicate_of": self.duplicate_of,
            "distance": self.distance,
            "jaccard": None if self.jaccard is None else round(self.jaccard, 4),
            "checked_by": self.checked_by,
            "certainty": None if self.certainty is None else round(self.certainty, 4),
            "fingerprint": None if self.fingerprint is None else to_hex(self.fingerprint),
        }
        return json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"


_new = object.__new__


def _kept(document: Document | FingerprintedDocument, raw: bytes | None, fingerprint: int | None) -> Decision:
    """Decision(document, raw, fingerprint), the same object, made without the frozen dataclass's __init__
    (an object.__setattr__ a field: 4 times the cost, once a kept document)."""
    decision = _new(Decision)
    decision.__dict__.update(document=document, raw=raw, fingerprint=fingerprint, duplicate_of=None, distance=None,
                             jaccard=None, checked_by=None, certainty=None)
    return decision


def _record_line(key: str, text: str | None, raw: bytes | None, text_field: str, id_field: str) -> bytes:
    """Decision.output_line of a document (its key and text) and its line."""
    if raw is not None:
        # A line that ends in one newline, without a carriage return before it (as JSONL lines do) is
        # already what rstrip and the newline make: written as it is, not copied twice.
        if raw[-1:] == b"\n" and raw[-2:-1] not in (b"\r", b"\n"):
            return raw
        return raw.rstrip(b"\r\n") + b"\n"
    record = {id_field: key, text_field: text}
    return json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"


Entry = tuple[Document | FingerprintedDocument, bytes | None]


class _Lines:
    """A batch's raw lines by place (None: none), a LineBatch's sliced from its chunk only when asked for: copies
    made up front held every line twice while the batch lived (two batches of up to 32,000 crawl pages in flight:
    some 90 MB at 1.4 KB a page)."""

    __slots__ = ("parts", "firsts", "count")

    def __init__(self) -> None:
        self.parts: list[LineBatch | list[bytes | None]] = []
        self.firsts: list[int] = []  # the place of each part's first line
        self.count = 0

    def add(self, part: LineBatch | list[bytes | None]) -> None:
        self.parts.append(part)
        self.firsts.append(self.count)
        self.count += len(part)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[bytes | None]:
        for part in self.parts:
            yield from part.lines() if isinstance(part, LineBatch) else part

    @overload
    def __getitem__(self, i: int) -> bytes | None: ...
    @overload
    def __getitem__(self, i: slice) -> list[bytes | None]: ...
    def __getitem__(self, i: int | slice) -> bytes | None | list[bytes | None]:
        if isinstance(i, slice):
            return self.take(list(range(*i.indices(self.count))))
        if not 0 <= i < self.count:
            raise IndexError(i)
        n = bisect_right(self.firsts, i) - 1
        part, j = self.parts[n], i - self.firsts[n]
        return part.lines([j])[0] if isinstance(part, LineBatch) else part[j]

    def take(self, places: list[int]) -> list[bytes | None]:
        """The lines at these places (ascending), a part at a time."""
        out: list[bytes | None] = []
        at = 0
        for n, part in enumerate(self.parts):
            first, end = self.firsts[n], self.firsts[n] + len(part)
            stop = bisect_left(places, end, at)
            if stop == at:
                continue
            mine = [p - first for p in places[at:stop]]
            out += part.lines(mine) if isinstance(part, LineBatch) else [part[j] for j in mine]
            at = stop
        return out


class _Batch:
    """One batch's documents as columns, in input order: what _decide and DecidedBatch read. Made of parts, each a
    list of entries (document, line or None) or a LineBatch (a JSONL chunk's records as arrays, from
    Reader.entry_batches: no object per record). documents[i] is None for a LineBatch's record: document(i) makes
    its FingerprintedDocument, the one Reader.entries would have given, when one is asked for (a Decision).
    complete() adds the fingerprints and sketches (of the entries' Documents: made by the pool)."""

    __slots__ = ("parts", "keys", "raws", "texts", "documents", "lengths", "values", "has", "rows", "sketched", "codes")

    def __init__(self, parts: list[list[Entry] | LineBatch]) -> None:
        self.parts = parts
        keys: list[str] = []
        raws = _Lines()
        texts: list[str | None] = []
        documents: list[Document | FingerprintedDocument | None] = []
        lengths: list[np.ndarray] = []
        for part in parts:
            if type(part) is LineBatch:
                n = len(part)
                keys += part.keys
                raws.add(part)
                texts += [None] * n
                documents += [None] * n
                lengths.append(part.columns.lengths)
                continue
            mine = [document for document, _ in part]  # type: ignore[union-attr]
            keys += [document.key for document in mine]
            raws.add([raw for _, raw in part])  # type: ignore[union-attr]
            texts += [document.text for document in mine]
            documents += mine
            lengths.append(np.array([d.length if isinstance(d, FingerprintedDocument) else len(d.text)
                                     for d in mine], dtype=np.int64))
        self.keys, self.raws, self.texts, self.documents = keys, raws, texts, documents
        self.lengths = np.concatenate(lengths) if lengths else np.empty(0, np.int64)
        self.codes: Future | None = None  # its sketched members' sorted_codes, made on a helper thread (_prepare)

    def __len__(self) -> int:
        return len(self.keys)

    def documents_to_fingerprint(self) -> list[str]:
        """The texts of the entries' Documents (not fingerprinted by the reader), in order."""
        return [d.text for part in self.parts if type(part) is not LineBatch
                for d, _ in part if isinstance(d, Document)]  # type: ignore[union-attr]

    def complete(self, computed: list, check: bool) -> None:
        """The fingerprints (values, 0 where has is False) and sketch rows (sketched: which) of every document;
        computed: the pool's results for documents_to_fingerprint() (fingerprints, or (fingerprint, sketch))."""
        nbytes = DEFAULT_SCHEME.nbytes if check else 0
        values: list[np.ndarray] = []
        has: list[np.ndarray] = []
        rows: list[np.ndarray] = []
        sketched: list[np.ndarray] = []
        results = iter(computed)
        for part in self.parts:
            if type(part) is LineBatch:
                c = part.columns
                values.append(c.fingerprints)
                has.append(c.has_fingerprint)
                if c.sketches is not None and c.sketches.shape[1] == nbytes:
                    rows.append(c.sketches)
                    sketched.append(c.has_sketch)
                else:
                    rows.append(np.zeros((len(part), nbytes), np.uint8))
                    sketched.append(np.zeros(len(part), bool))
                continue
            pairs = [((d.fingerprint, d.sketch) if isinstance(d, FingerprintedDocument)
                      else next(results) if check else (next(results), None)) for d, _ in part]  # type: ignore
            prints = [fp for fp, _ in pairs]
            has.append(np.array([fp is not None for fp in prints], dtype=bool))
            values.append(np.array([0 if fp is None else fp for fp in prints], dtype=np.uint64))
            if check:
                part_rows, present = as_rows([sketch for _, sketch in pairs])
            else:
                part_rows, present = np.zeros((len(pairs), 0), np.uint8), np.zeros(len(pairs), bool)
            rows.append(part_rows)
            sketched.append(present)
        self.values = np.concatenate(values) if values else np.empty(0, np.uint64)
        self.has = np.concatenate(has) if has else np.empty(0, bool)
        self.rows = np.concatenate(rows) if rows else np.empty((0, nbytes), np.uint8)
        self.sketched = np.concatenate(sketched) if sketched else np.empty(0, bool)

    def fingerprint(self, i: int) -> int | None:
        return int(self.values[i]) if self.has[i] else None

    def fingerprints(self) -> list[int | None]:
        return [v if h else None for v, h in zip(self.values.tolist(), self.has.tolist())]

    def document(self, i: int) -> Document | FingerprintedDocument:
        made = self.documents[i]
        if made is None:  # a LineBatch's record: what Reader.entries gives for it
            sketch = self.rows[i].tobytes() if self.sketched[i] else None
            made = fingerprinted(self.keys[i], self.fingerprint(i), int(self.lengths[i]), b"", sketch, None, None)
        return made


def _kept_lines(part: LineBatch, dropped: list[int]) -> bytes | None:
    """The lines of a LineBatch's records but the dropped ones, joined, where each ends in one newline without a
    carriage return before it (then each is its output_line): adjacent ones copied as one slice of the chunk. None
    where a line does not (the caller writes them one by one)."""
    c = part.columns
    data = np.frombuffer(part.data, dtype=np.uint8)
    starts, ends = c.starts, c.ends
    if not len(starts):
        return b""
    before = data[np.maximum(ends - 2, 0)]
    plain = (data[ends - 1] == 10) & ((ends - starts < 2) | ((before != 13) & (before != 10)))
    if dropped:
        kept = np.ones(len(starts), dtype=bool)
        kept[dropped] = False
        starts, ends, plain = starts[kept], ends[kept], plain[kept]
        if not len(starts):
            return b""
    if not plain.all():
        return None
    cut = np.flatnonzero(starts[1:] != ends[:-1]) + 1  # a run of adjacent lines ends where the next begins elsewhere
    firsts = np.concatenate(([0], cut))
    lasts = np.concatenate((cut - 1, [len(starts) - 1]))
    whole = part.data
    return b"".join([whole[a:b] for a, b in zip(starts[firsts].tolist(), ends[lasts].tolist())])


class DecidedBatch:
    """The decisions of a batch of documents, in input order, without an object per kept one: its entries
    (document, raw line), their fingerprints, and a Decision for each dropped one by its place in the batch.
    decisions() gives them one by one (Deduplicator.run); output(), dupe_lines() and kept_flags() give a
    batch's lines at once (simq dedup)."""

    __slots__ = ("batch", "dropped", "characters", "without_features")

    def __init__(self, batch: _Batch, dropped: dict[int, Decision], characters: int, without_features: int) -> None:
        self.batch, self.dropped = batch, dropped
        self.characters, self.without_features = characters, without_features  # of the whole batch; of the kept

    def __len__(self) -> int:
        return len(self.batch)

    @property
    def kept(self) -> int:
        return len(self.batch) - len(self.dropped)

    def decisions(self) -> Iterator[Decision]:
        dropped, batch = self.dropped, self.batch
        for i, (raw, fp) in enumerate(zip(batch.raws, batch.fingerprints())):
            decision = dropped.get(i) if dropped else None
            yield decision if decision is not None else _kept(batch.document(i), raw, fp)

    def output(self, text_field: str = "text", id_field: str = "id") -> bytes:
        """The kept documents' output_line()s, joined."""
        batch, dropped = self.batch, self.dropped
        pieces: list[bytes] = []
        at = 0
        for part in batch.parts:
            n = len(part)
            if type(part) is LineBatch:
                made = _kept_lines(part, [i - at for i in dropped if at <= i < at + n] if dropped else [])
                if made is not None:
                    pieces.append(made)
                    at += n
                    continue
            rows = zip(range(at, at + n), batch.raws[at : at + n], batch.keys[at : at + n], batch.texts[at : at + n])
            # (a JSONL line that ends in one newline is written as it is: _record_line's first case, inline)
            pieces += [raw if raw is not None and raw[-1:] == b"\n" and raw[-2:-1] not in (b"\r", b"\n")
                       else _record_line(key, text, raw, text_field, id_field)
                       for i, raw, key, text in rows if i not in dropped]
            at += n
        return b"".join(pieces)

    def dupe_lines(self) -> bytes:
        """The dropped documents' dupe_line()s, joined."""
        return b"".join([self.dropped[i].dupe_line() for i in sorted(self.dropped)])

    def kept_flags(self) -> bytes:
        """One byte a document: 1 kept, 0 dropped."""
        flags = bytearray(b"\x01") * len(self.batch)
        for i in self.dropped:
            flags[i] = 0
        return bytes(flags)

    def counts(self) -> dict[str, int]:
        """What the batch adds to DedupReport's counts (resume.py's names)."""
        how = [decision.checked_by for decision in self.dropped.values()]
        return {"read": len(self.batch), "kept": self.kept, "dropped": len(self.dropped),
                "without_features": self.without_features, "estimated": how.count("estimated"),
                "exact": how.count("exact"), "by_distance": how.count("distance"), "characters": self.characters}


@dataclass
class DedupReport:
    read: int = 0
    kept: int = 0
    dropped: int = 0
    without_features: int = 0  # kept: a text with no features matches nothing
    against: int = 0  # fingerprints loaded from the existing index
    against_unsketched: int = 0  # of those, without a sketch: judged by distance
    estimated: int = 0  # dropped by the sketches' estimate
    exact: int = 0  # dropped by the exact Jaccard of the two texts
    by_distance: int = 0  # dropped by distance alone
    characters: int = 0
    fingerprint_seconds: float = 0.0  # reading the input, fingerprints and sketches
    search_seconds: float = 0.0  # candidates, checks and decisions
    started: float = field(default_factory=time.perf_counter)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started


# An option for a document: (rank, score, label, distance, jaccard, how, certainty); the smallest wins.
# Estimated matches first, the highest estimate, then the earliest label; then distance ones, closest first.
_ESTIMATED, _BY_DISTANCE = 0, 1  # (an exact Jaccard ranks as an estimate does: the highest first)
# Shingle sets of kept texts held at once, in bytes (8 a distinct shingle, about one a character): most
# candidates are recent documents' near-copies, read again for each. The same for the batch's own and an
# --against index's: the three together at most a sixteenth of the budget.
SHINGLES_KEPT_BYTES = 64 << 20
_UNMADE = object()  # a shingle set not made yet (or no longer kept)


def _default_line_text(line: bytes) -> str | None:
    """The text of a JSONL line under the default fields ("text", "id"): Reader.text_of_line's."""
    return parse_record(line, RecordRules())[2]


def _line_text(line: bytes, rules: RecordRules) -> str | None:
    return parse_record(line, rules)[2]


def _line_fields(rules: RecordRules) -> native_documents.LineFields | None:
    """What the C core needs to read a line's text as parse_record(line, rules) does; None where it cannot (another
    encoding than UTF-8, the text and id the same field)."""
    try:
        if codecs.lookup(rules.encoding).name != "utf-8" or rules.text_field == rules.id_field:
            return None
    except LookupError:
        return None
    return native_documents.LineFields(rules.text_field.encode("utf-8", "surrogatepass"),
                                       rules.id_field.encode("utf-8", "surrogatepass"), rules.max_record_bytes,
                                       READ_WHOLE_BYTES)


def _parts(
    iterator: Iterator[Entry | LineBatch], target: int, most_bytes: int | None = None, least: int = 0
) -> list[list[Entry] | LineBatch]:
    """The next batch's parts from the iterator: LineBatches whole, and runs of entries between them, until they
    hold at least target documents, or at least most_bytes (their lines or texts, and BATCH_DOCUMENT_BYTES a
    document) and least documents, or the iterator ends."""
    parts: list[list[Entry] | LineBatch] = []
    count = held = 0
    most = most_bytes if most_bytes is not None else float("inf")
    run: list[Entry] = []
    for item in iterator:
        if type(item) is LineBatch:
            if run:
                parts.append(run)
                run = []
            parts.append(item)
            count += len(item)
            held += len(item.data) + BATCH_DOCUMENT_BYTES * len(item)
        else:
            run.append(item)  # type: ignore[arg-type]
            count += 1
            document, raw = item  # type: ignore[misc]
            held += BATCH_DOCUMENT_BYTES + (len(raw) if raw is not None else len(getattr(document, "text", None) or ""))
        if count >= target or (held >= most and count >= least):
            break
    if run:
        parts.append(run)
    return parts


def _whole(text: str | None) -> str | None:
    """A text the check reads (one of more than READ_WHOLE_BYTES characters is judged without it)."""
    return text if text is not None and len(text) <= READ_WHOLE_BYTES else None


class _RecentShingles:
    """Shingle sets by label (or batch member), the least recently used going past a byte budget (None, out
    of reach, too); get() gives _UNMADE for one not held."""

    def __init__(self, most_bytes: int) -> None:
        self.most_bytes = most_bytes
        self.entries: OrderedDict[int, np.ndarray | None] = OrderedDict()
        self.bytes = 0

    def get(self, label: int) -> np.ndarray | None | object:
        found = self.entries.get(label, _UNMADE)
        if found is not _UNMADE:
            self.entries.move_to_end(label)
        return found

    def put(self, label: int, shingles: np.ndarray | None) -> None:
        self.entries[label] = shingles
        self.bytes += ENTRY_BYTES + (0 if shingles is None else shingles.nbytes)
        while self.bytes > self.most_bytes and self.entries:
            _, old = self.entries.popitem(last=False)
            self.bytes -= ENTRY_BYTES + (0 if old is None else old.nbytes)


class Deduplicator:
    """Keep-first filter, checked unless check=False. `against`: an index whose documents count as kept
    before the input (they are never output); its fingerprint settings are used. k: None for sketch
    LSH candidates (any distance, the default), or the candidate radius; without the check the distance
    (RECOMMENDED_K by default). Feed run() (Document, raw line or None) pairs, e.g. from
    Reader.entries(); FingerprintedDocuments (Reader.entries(paths, settings, sketches=check)) come with
    their fingerprints and sketches made with these settings, and their texts are read from their JSONL
    lines by line_text (the reader's text_of_line; default: the field "text"). `report` counts as it goes."""

    def __init__(
        self,
        k: int | None = None,
        settings: FingerprintSettings | None = None,
        *,
        against: SimhashIndex | None = None,
        check: bool = True,
        threshold: float = DEFAULT_THRESHOLD,
        batch_size: int = BATCH,
        drop_uncertain: bool = False,
        memory: int | None = None,
        spill_near: str | None = None,
        line_text: Callable[[bytes], str | None] | None = None,
        line_rules: RecordRules | None = None,
    ) -> None:
        if against is not None and settings is not None and settings != against.settings:
            raise SettingsMismatch(
                f"{against.path} was built with {against.settings.describe()}; fingerprints made with "
                f"{settings.describe()} would never match it"
            )
        self.settings = against.settings if against is not None else settings or FingerprintSettings()
        self.check, self.threshold, self.batch_size = check, validate_threshold(threshold), batch_size
        self.drop_uncertain = drop_uncertain  # drop on an uncertain verdict too (else: when unsure, keep)
        self.batch_sizes: np.ndarray | None = None  # the batch members' distinct-shingle counts (for certainty)
        self.by_sketch = check and k is None
        self.k = candidate_k(k, check)  # the radius of fingerprint candidates
        # Fingerprint candidates: all kept documents (explicit k, or no check), or, with sketch LSH, only
        # indexed ones without a sketch, judged by distance within fallback_k.
        self.prints = KeptSet(fallback_k(CONFIRM_K) if self.by_sketch else self.k)
        # Pairs are judged by their exact Jaccard, so candidates go down to EXACT_MARGIN below the
        # threshold, as dupes' do.
        self.low = max(0.0, self.threshold - EXACT_MARGIN)
        # memory: the budget in RAM of the kept set and the batches in flight (None: unbounded); past it,
        # sketches and labels spill to a folder beside spill_near (the output) or in the temporary folder. A
        # sixteenth for the labels, a quarter for the two batches in flight, at most a sixteenth for the three
        # caches of shingle sets, the rest (ten sixteenths) for the sketches.
        self.memory = memory
        self.spill = SpillFolder(spill_near)
        recent = SHINGLES_KEPT_BYTES
        self.batch_bytes: int | None = None
        labels_bytes = sketches_bytes = None
        if memory is not None:
            recent = min(SHINGLES_KEPT_BYTES, memory // 48)
            labels_bytes, self.batch_bytes = memory // 16, max(1, memory // 8)
            sketches_bytes = memory - labels_bytes - 2 * self.batch_bytes - 3 * recent
        self.sketches = KeptSketches(self.low, budget=sketches_bytes, folder=self.spill) if self.by_sketch else None
        # The kept documents' texts, on disk in the spill folder (with the check), and the shingle sets of
        # those read lately; an indexed document's are read as dupes reads them (its stored text, its file).
        # line_rules: how the reader reads a line (its text's field), so that the exact check may read the kept and
        # incoming lines' texts in C (_make_sets); line_text alone: only in Python.
        rules: RecordRules | None = line_rules
        if line_text is None:
            rules = line_rules or RecordRules()
            line_text = _default_line_text if line_rules is None else partial(_line_text, rules=line_rules)
        self.line_text = line_text
        self.helper: ThreadPoolExecutor | None = None  # (_helper)
        self.line_fields = _line_fields(rules) if check and rules is not None else None
        self.texts = KeptTexts(self.spill) if check else None
        self.kept_shingles = _RecentShingles(recent)
        self.against_shingles = ShingleCache(against, recent) if against is not None and check else None
        # label -> key, fingerprint, distinct-shingle count its sketch records (NaN: none), its text's offset
        # in self.texts of each document kept from the input
        self.labels = KeptLabels(labels_bytes, self.spill)
        self.kept_rows = np.empty((1024 if check and not self.by_sketch else 0, DEFAULT_SCHEME.nbytes), np.uint8)
        self.kept_sketched = np.empty(len(self.kept_rows), dtype=bool)
        self.report = DedupReport()
        self.priming = False  # prime(): every document is kept
        self.against = against
        self.against_ids = np.empty(0, dtype=np.int64)
        self.against_values = np.empty(0, dtype=np.uint64)
        self.against_rows = np.empty((0, DEFAULT_SCHEME.nbytes), dtype=np.uint8)
        self.against_sketched = np.empty(0, dtype=bool)
        self.against_sizes = np.empty(0)
        # The against index's labels: an input document is never dropped as the duplicate of a document
        # it is labelled "not a duplicate" of, and a document chosen to keep is never dropped.
        self.apart: dict[str, set[str]] = {}
        self.keepers: set[str] = set()
        self.apart_labels: dict[int, str] = {}  # label (below zero) of an indexed document in `apart` -> key
        if against is not None:
            self._load_against(against)

    def _load_against(self, index: SimhashIndex) -> None:
        ids, values, rows, present, _ = load_arrays_and_short(index.conn, index.sketch_scheme,
                                                              index.short_texts.column)
        if not self.check or index.sketch_scheme != DEFAULT_SCHEME or "sketch" not in index._meta():
            # No sketches, or of another scheme (an index made by an older version): by distance.
            present[:] = False
            rows = np.zeros((len(ids), DEFAULT_SCHEME.nbytes), dtype=np.uint8)
        self.against_ids, self.against_values = ids, values
        self.against_rows, self.against_sketched = rows, present
        self.against_sizes = sizes_of(rows, DEFAULT_SCHEME)
        labels = -1 - np.arange(len(ids), dtype=np.int64)  # below zero: -1 - label is the position in against_ids
        if self.sketches is not None:  # self.by_sketch
            self.sketches.add(rows[present], labels[present])
            self.prints.add(values[~present], labels[~present])
        else:
            self.prints.add(values, labels)
        self.apart, self.keepers = apart_keys(index.conn), keeper_keys(index.conn)
        if self.apart:
            found = index.conn.execute(
                "SELECT id, key FROM documents WHERE key IN carray(?)", (apsw.carray(tuple(sorted(self.apart))),)
            ).fetchall()
            positions = np.searchsorted(ids, np.array([i for i, _ in found], dtype=np.int64))
            self.apart_labels = {-1 - int(p): str(key) for p, (_, key) in zip(positions.tolist(), found)}
        self.report.against = len(ids)
        self.report.against_unsketched = int((~present).sum()) if self.check else 0

    def run(self, entries: Iterable[Entry | LineBatch]) -> Iterator[Decision]:
        """The decision on each entry (and each record of a LineBatch: Reader.entry_batches), in order."""
        for decided in self.run_batches(entries):
            yield from decided.decisions()

    def run_batches(self, entries: Iterable[Entry | LineBatch]) -> Iterator[DecidedBatch]:
        """run()'s decisions a batch at a time (DecidedBatch: no object per kept document)."""
        # A pipeline of two batches, as in SimhashIndex.add(): the next batch is handed to the pool
        # (core.pool.FingerprintJob) before this one is decided, and this process computes the next
        # batch's chunks while the workers finish this one's. Memory holds two batches; the decisions
        # depend only on the fingerprints, sketches and order, so any number of processes gives the
        # same output. Documents fingerprinted by the reader (JSONL, in its workers) need nothing here.
        pending: tuple[_Batch, FingerprintJob, bool] | None = None
        iterator = iter(entries)
        while True:
            started = time.perf_counter()  # reading counts as fingerprinting (the reader fingerprints JSONL)
            batch = _Batch(_parts(iterator, self._batch_target(), self.batch_bytes, self.batch_size))
            self.report.fingerprint_seconds += time.perf_counter() - started
            job = self._start(batch, pending is not None) if len(batch) else None
            # A batch the reader fingerprinted whole (JSONL) is complete now: its codes are made on a helper
            # thread while the batch before it is decided.
            ready = job is not None and not batch.documents_to_fingerprint()
            if job is not None and ready:
                self._prepare(self._fingerprints(batch, job, None))
            if pending is not None:
                earlier, earlier_job, earlier_ready = pending
                yield self._decide(earlier if earlier_ready else self._fingerprints(earlier, earlier_job, job))
            if job is None:
                return
            pending = (batch, job, ready)

    def prime(self, entries: Iterable[Entry | LineBatch]) -> None:
        """Take the documents an earlier run kept, in their order, as kept, without searching (a resumed
        run: resume.py); the report is left as it was."""
        report, self.report, self.priming = self.report, DedupReport(), True
        try:
            for _ in self.run(entries):
                pass
        finally:
            self.report, self.priming = report, False

    def close(self) -> None:
        """Remove the spilled kept set (the deduplicator cannot run after this)."""
        if self.helper is not None:
            self.helper.shutdown()
            self.helper = None
        if self.sketches is not None:
            self.sketches.close()
        if self.texts is not None:
            self.texts.close()
        self.labels.close()
        self.spill.close()

    def _batch_target(self) -> int:
        """Documents a batch: batch_size, SPILLED_BATCH_MOST times more once the kept set has spilled (within
        batch_bytes): a larger batch reads the spilled runs' blocks for more documents at a time."""
        spilled = self.sketches is not None and self.sketches.spilled
        return self.batch_size * (SPILLED_BATCH_MOST if spilled else 1)

    # -- one batch -------------------------------------------------------------------------------------

    def _start(self, batch: _Batch, start_pool: bool) -> FingerprintJob:
        """The fingerprints (and sketches, when checking) of the batch's Documents under way. The first
        batch does not start the pool: a short input is done before a worker is ready."""
        texts = batch.documents_to_fingerprint()
        scheme = DEFAULT_SCHEME if self.check else None
        return FingerprintJob(texts, self.settings, start_pool=start_pool, sketches=scheme, most=DEDUP_PROCESSES)

    def _fingerprints(self, batch: _Batch, job: FingerprintJob, meanwhile: FingerprintJob | None) -> _Batch:
        """The batch with the fingerprints, sketch rows and which texts have a sketch, of every document."""
        started = time.perf_counter()
        result = job.result(meanwhile)
        self.report.fingerprint_seconds += time.perf_counter() - started
        batch.complete(result, self.check)
        return batch

    def _members(self, batch: _Batch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the batch's featured documents, their sketch rows, which are sketched): the members _decide judges."""
        have = np.flatnonzero(batch.has)
        return have, batch.rows[have], batch.sketched[have]

    def _prepare(self, batch: _Batch) -> None:
        """Start the sorted_codes of a complete batch's sketched members on a helper thread (numpy's sorts release
        the GIL), where there is one and the decisions will search by sketch; _decide takes them."""
        helper = self._helper() if self.by_sketch and not self.priming else None
        if helper is not None:
            _, rows, sketched = self._members(batch)
            batch.codes = helper.submit(sorted_codes, rows[sketched])

    def _decide(self, batch: _Batch) -> DecidedBatch:
        """Keep or drop each document of the batch, in order (its fingerprints and sketches made: complete())."""
        searching = time.perf_counter()
        have_array, rows, sketched = self._members(batch)
        have = have_array.tolist()
        self.batch, self.batch_have = batch, have
        # Their shingle sets, made when a pair's exact check needs them (most have no candidate), the least
        # recently used going past the same bytes as the kept ones' (a batch grows to 32,000 documents).
        self.batch_sets = _RecentShingles(self.kept_shingles.most_bytes)
        values = batch.values[have_array]
        # The sketched members' LSH codes, made once (or by _prepare): searched in the kept runs, then those of the
        # kept ones become the batch's new run.
        codes = None
        if self.by_sketch:
            codes = batch.codes.result() if batch.codes is not None else sorted_codes(rows[sketched])
        # The members' distinct-shingle counts, as their sketches record them (for kept ones and certainties).
        sizes = sizes_of(rows, DEFAULT_SCHEME) if self.check else None
        self.batch_sizes = sizes
        options = {} if self.priming else self._options_among_kept(values, rows, sketched, codes)
        earlier = {} if self.priming else self._pairs_within_batch(values, rows, sketched, codes)
        # The keep-first pass, in input order, over the members with a candidate only: the rest are kept. A
        # kept member's label is the next one: its number less the members dropped before it.
        base = len(self.labels)
        match: dict[int, tuple] = {}  # member -> its winning option
        dropped: list[int] = []  # the dropped members, ascending
        pending: dict[int, str] = {}  # a kept member's label, which _keep() gives it below -> its key
        for j in sorted(options.keys() | earlier.keys()):
            mine = options.get(j, [])
            for rank, score, a, d, e, how, sure in earlier.get(j, ()):
                if a not in match:  # (a < j: decided) kept, with its label
                    label = base + a - bisect_left(dropped, a)
                    if self.apart:
                        pending[label] = batch.keys[have[a]]
                    mine.append((rank, score, label, d, e, how, sure))
            if mine and (self.apart or self.keepers):
                mine = self._honoured(batch.keys[have[j]], mine, pending)
            if mine:
                match[j] = min(mine)
                dropped.append(j)
        kept = np.ones(len(have), dtype=bool)
        kept[dropped] = False
        new = np.flatnonzero(kept)
        labels = self._keep(new, values, rows, sketched, sizes)
        if self.sketches is not None:  # self.by_sketch
            assert codes is not None  # made above whenever there are sketches
            kept = sketched[new]
            members = np.flatnonzero(sketched)
            self.sketches.add(
                rows[new[kept]], labels[kept], codes_of_some(codes, np.searchsorted(members, new[kept]), len(members))
            )
        else:
            self.prints.add(values[new], labels)
        self.labels.spill_if_over()
        if self.memory is not None and self.sketches is not None and self.sketches.spilled:
            # Past the budget batches are large (tens of MB of lines and codes a batch, in blocks under glibc's
            # mmap threshold, core/pool.keep_freed_memory): the free pages they leave in the heaps go back.
            give_back_free_memory()
        names = self._indexed_keys([option[2] for option in match.values() if option[2] < 0])
        self.report.search_seconds += time.perf_counter() - searching
        decisions: dict[int, Decision] = {}
        for member, (rank, _, label, d, e, how, sure) in match.items():
            i = have[member]
            key = names[label] if label < 0 else self.labels.key_of(label)
            decisions[i] = Decision(batch.document(i), batch.raws[i], batch.fingerprint(i), key, d, e, how, sure)
        decided = DecidedBatch(batch, decisions, int(batch.lengths.sum()), len(batch) - len(have))
        report = self.report
        for name, count in decided.counts().items():
            setattr(report, name, getattr(report, name) + count)
        return decided

    def _honoured(self, key: str, options: list[tuple], pending: dict[int, str]) -> list[tuple]:
        """The options that the against index's labels allow: none for a document chosen to keep, and
        none naming a document it is labelled "not a duplicate" of. pending: the keys of the batch's kept
        members by the labels they are about to get (not in self.labels yet)."""
        if key in self.keepers:
            return []
        apart = self.apart.get(key)
        if not apart:
            return options

        def key_of(label: int) -> str | None:
            if label < 0:
                return self.apart_labels.get(label)
            return pending[label] if label in pending else self.labels.key_of(label)

        return [o for o in options if key_of(o[2]) not in apart]

    def _keep(
        self, new: np.ndarray, values: np.ndarray, rows: np.ndarray, sketched: np.ndarray, sizes: np.ndarray | None
    ) -> np.ndarray:
        """Keep these members of the batch (ascending), their texts written to self.texts; their labels. sizes:
        the distinct-shingle counts their sketches record (None: no check)."""
        batch, have = self.batch, self.batch_have
        chosen = [have[j] for j in new.tolist()]
        text_at = np.full(len(chosen), -1, dtype=np.int64)
        shorts: list[bytes | None] = [None] * len(chosen)
        all_raws, all_texts = batch.raws, batch.texts
        raws = all_raws.take(chosen)
        texts = [all_texts[i] for i in chosen]
        if self.texts is not None and None not in raws and texts.count(None) == len(texts):
            lines = cast("list[bytes]", raws)  # (JSONL: every one a line)
            text_at[:] = self.texts.append_many([KeptTexts.LINE] * len(lines), lines)
        elif self.texts is not None:
            kinds: list[int] = []
            data: list[bytes] = []
            written: list[int] = []
            for n, (i, text, raw) in enumerate(zip(chosen, texts, raws)):
                if text is not None:
                    kinds.append(KeptTexts.TEXT)
                    data.append(text.encode("utf-8", "surrogatepass"))
                elif raw is not None:
                    kinds.append(KeptTexts.LINE)
                    data.append(raw)
                else:
                    document = batch.documents[i]
                    if isinstance(document, FingerprintedDocument):  # no text at all: a short text's exact data
                        shorts[n] = document.short_text
                    continue
                written.append(n)
            if data:
                text_at[written] = self.texts.append_many(kinds, data)
        size = np.where(sketched[new], sizes[new], np.nan) if sizes is not None else np.full(len(new), np.nan)
        keys = batch.keys
        first = self.labels.append_many([keys[i] for i in chosen], values[new], size, shorts, text_at)
        labels = np.arange(first, first + len(new), dtype=np.int64)
        if len(self.kept_rows):  # (checked by distance: the kept sketches by label)
            grown = len(self.kept_rows)
            while grown < first + len(new):
                grown *= 2
            if grown > len(self.kept_rows):
                self.kept_rows = np.concatenate((self.kept_rows, np.empty_like(self.kept_rows, shape=(
                    grown - len(self.kept_rows), self.kept_rows.shape[1]))))
                self.kept_sketched = np.concatenate((self.kept_sketched, np.empty(grown - len(self.kept_sketched),
                                                                                  dtype=bool)))
            self.kept_rows[labels], self.kept_sketched[labels] = rows[new], sketched[new]
        return labels

    def _value_of(self, labels: np.ndarray) -> np.ndarray:
        out = np.empty(len(labels), dtype=np.uint64)
        mine = labels >= 0
        out[mine] = self.labels.values_of(labels[mine])
        out[~mine] = self.against_values[-1 - labels[~mine]]
        return out

    def _rows_of(self, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = np.zeros((len(labels), DEFAULT_SCHEME.nbytes), dtype=np.uint8)
        present = np.zeros(len(labels), dtype=bool)
        mine = labels >= 0
        rows[mine], present[mine] = self.kept_rows[labels[mine]], self.kept_sketched[labels[mine]]
        if (~mine).any():
            theirs = -1 - labels[~mine]
            rows[~mine], present[~mine] = self.against_rows[theirs], self.against_sketched[theirs]
        return rows, present

    def _judge(
        self, q, label, d, rows, sketched, other_rows, other_sketched, members: bool = False
    ) -> Iterator[tuple[int, tuple]]:
        """Candidates within k: (query, option) for those that drop it (or, without the check, all).
        members: the labels are batch members (earlier in the batch), not kept labels."""
        if not self.check:
            for j, a, dist in zip(q.tolist(), label.tolist(), d.tolist()):
                yield j, (_BY_DISTANCE, dist, a, dist, None, None, None)
            return
        both = sketched[q] & other_sketched
        estimate = np.full(len(q), np.nan)
        if both.any():
            estimate[both] = estimate_many(rows[q[both]], other_rows[both])
        yield from self._drops(q, label, d, estimate, members)

    def _drops(
        self, q: np.ndarray, label: np.ndarray, d: np.ndarray, estimate: np.ndarray, members: bool
    ) -> Iterator[tuple[int, tuple]]:
        """(query, option) of the candidates whose verdict (verdict.decide, the pair rule of dupes) drops the
        query: kept, and sure (exact or CERTAIN) unless drop_uncertain. estimate: NaN where a sketch is
        missing; members: the labels are batch members, not kept labels."""
        if not len(q):
            return
        assert self.batch_sizes is not None  # set by _decide whenever checking
        mine = self.batch_sizes[q]
        if members:
            theirs = self.batch_sizes[label]
        else:
            theirs = np.where(label >= 0, self.labels.sizes_of(np.maximum(label, 0)),
                              self.against_sizes[np.minimum(-1 - label, len(self.against_sizes) - 1)]
                              if len(self.against_sizes) else np.nan)
        sure = np.full(len(q), np.nan)
        sketched = ~np.isnan(estimate)
        if sketched.any():
            sure[sketched] = certainty(estimate[sketched], self.threshold, mine[sketched], theirs[sketched],
                                       DEFAULT_SCHEME)
        js, labels = q.tolist(), label.tolist()

        def exact(at: np.ndarray) -> np.ndarray:
            out = np.full(len(at), np.nan)
            chosen = at.tolist()
            self._make_sets([js[i] for i in chosen], [labels[i] for i in chosen], members)
            mine: list[np.ndarray] = []
            theirs: list[np.ndarray] = []
            found: list[int] = []
            for n, i in enumerate(chosen):
                both = self._sets_of(js[i], labels[i], members)
                if both is not None:
                    found.append(n)
                    mine.append(both[0])
                    theirs.append(both[1])
            out[found] = jaccard_of_pairs(mine, theirs)
            return out

        verdicts = decide(d, estimate, sure, exact, threshold=self.threshold, k=self.k)
        drops = verdicts.sure_to_keep(self.drop_uncertain)
        how = verdicts.how
        for i in np.flatnonzero(drops).tolist():
            j, a, dist = js[i], labels[i], int(d[i])
            c = float(verdicts.certainty[i])
            if how[i] == "distance":
                yield j, (_BY_DISTANCE, dist, a, dist, None, "distance", None)
            else:
                e = float(verdicts.jaccard[i])
                yield j, (_ESTIMATED, -e, a, dist, e, how[i], c)

    def _options_among_kept(self, values, rows, sketched, codes=None) -> dict[int, list[tuple]]:
        options: dict[int, list[tuple]] = {}
        if not len(values):
            return options
        if self.sketches is not None:  # self.by_sketch
            q, label, estimate = self.sketches.matches(rows[sketched], codes)
            q = np.flatnonzero(sketched)[q]
            d = np.bitwise_count(values[q] ^ self._value_of(label)).astype(np.int64)
            for j, option in self._drops(q, label, d, np.asarray(estimate, dtype=np.float64), False):
                options.setdefault(j, []).append(option)
            for q, label, d in self.prints.within(values):  # indexed documents without a sketch
                for j, option in self._drops(q, label, d, np.full(len(q), np.nan), False):
                    options.setdefault(j, []).append(option)
            return options
        for q, label, d in self.prints.within(values):
            other_rows, other_sketched = self._rows_of(label) if self.check else (None, None)
            for j, option in self._judge(q, label, d, rows, sketched, other_rows, other_sketched):
                options.setdefault(j, []).append(option)
        return options

    def _pairs_within_batch(self, values, rows, sketched, codes=None) -> dict[int, list[tuple]]:
        """Each member's near-duplicates earlier in the batch: member -> options whose label is the
        earlier member's number (replaced by its label if it is kept)."""
        earlier: dict[int, list[tuple]] = {}
        if self.by_sketch:
            members = np.flatnonzero(sketched)
            found = None if codes is None else pairs_of_codes(rows[members], codes, self.low)
            # Else sketch_pairs with the kept runs' windows (24/12 at any size, window_codes), whatever it
            # would pick for the batch's size.
            parts = [found] if found is not None else sketch_pairs(
                rows[members], self.low, width=WINDOW_BITS, step=WINDOW_STEP
            )
            for part in parts:
                a, b = members[part[0]], members[part[1]]
                d = np.bitwise_count(values[a] ^ values[b]).astype(np.int64)
                for y, option in self._drops(b, a, d, np.asarray(part[2], dtype=np.float64), True):
                    earlier.setdefault(y, []).append(option)
            return earlier
        for part in near_pairs(values, self.k):
            a, b = part.left, part.right  # a < b: the option names the earlier member
            other_rows, other_sketched = (rows[a], sketched[a]) if self.check else (None, None)
            for y, option in self._judge(b, a, part.distance, rows, sketched, other_rows, other_sketched, True):
                earlier.setdefault(y, []).append(option)
        return earlier

    # -- the exact check: both texts ----------------------------------------------------------------------

    def _sets_of(self, j: int, a: int, members: bool) -> tuple[np.ndarray, np.ndarray] | None:
        """The shingle sets of member j and `a` (a batch member if members, else a kept or indexed label), whose
        exact Jaccard judges the pair, where both texts are at hand; else None."""
        mine = self._batch_set(j)
        if mine is None:
            return None
        theirs = self._batch_set(a) if members else self._kept_set(a)
        return None if theirs is None else (mine, theirs)

    def _make_sets(self, queries: list[int], others: list[int], members: bool) -> None:
        """The shingle sets the exact checks of these pairs will ask for and that are not held, made at once in C
        (native/documents.py shingle_sets: the text of a JSONL line found, normalized and shingled in one call, the GIL
        released) and held (batch_sets, kept_shingles) for _batch_set and _kept_set. Those it cannot make (no C core,
        another encoding, a line or text it is not sure of, a short text's data, an indexed document) are left to
        them: the same sets either way."""
        fields = self.line_fields
        lib = native_documents.library() if fields is not None else None
        if lib is None or fields is None:
            return
        wanted: dict[tuple[bool, int], tuple[int, bytes]] = {}  # (kept label?, member or label) -> (kind, data)
        batch_sets, kept_shingles = self.batch_sets, self.kept_shingles
        for member in queries + (others if members else []):
            if (False, member) in wanted or member in batch_sets.entries:
                continue
            i = self.batch_have[member]
            text, raw = self.batch.texts[i], self.batch.raws[i]
            if text is not None:
                wanted[(False, member)] = (native_documents.SET_TEXT, text.encode("utf-8", "surrogatepass"))
            elif raw is not None:
                wanted[(False, member)] = (native_documents.SET_LINE, raw)
        if not members:
            for label in others:
                if label < 0 or (True, label) in wanted or label in kept_shingles.entries:
                    continue
                at = self.labels.text_at_of(label)
                if at >= 0:
                    assert self.texts is not None  # (a text's offset: kept with the check)
                    kind, data = self.texts.read(at)
                    wanted[(True, label)] = (native_documents.SET_TEXT if kind == KeptTexts.TEXT
                                             else native_documents.SET_LINE, data)
        # In calls of at most native_documents.SETS_CALL_BYTES, every other one on a helper thread where there is one.
        places, items = list(wanted), list(wanted.values())
        for a, b, made in native_documents.sets_in_calls(lib, [data for _, data in items], [kind for kind, _ in items],
                                                         fields, TRUTH_NGRAM, aside=self._helper()):  # fmt: skip
            if made is not None:
                for (kept, number), status, shingles in zip(places[a:b], *made):
                    if status != native_documents.SET_PYTHON:
                        (kept_shingles if kept else batch_sets).put(number, shingles)

    def _helper(self) -> ThreadPoolExecutor | None:
        """The threads that make the next batch's codes and half of the exact check's sets while this one's loop
        goes on, where this run has a second worker (None: not). Two, so that neither waits behind the other."""
        if self.helper is None and workers(DEDUP_PROCESSES) > 1:
            from concurrent.futures import ThreadPoolExecutor  # (where used: a search imports no executor)

            self.helper = ThreadPoolExecutor(2, thread_name_prefix="simq-dedup-helper")
        return self.helper

    def _batch_set(self, member: int) -> np.ndarray | None:
        """The shingle set of a batch member's text (None: out of reach)."""
        made = self.batch_sets.get(member)
        if made is _UNMADE:
            i = self.batch_have[member]
            text, raw = self.batch.texts[i], self.batch.raws[i]
            if text is None and raw is not None:
                text = self.line_text(raw)
            if _whole(text) is not None:
                made = shingle_set(text)
            else:  # a FingerprintedDocument without its line: a short text's exact data, if any
                document = self.batch.documents[i]
                made = short_text_shingles(getattr(document, "short_text", None)) if text is None else None
            self.batch_sets.put(member, made)
        return made  # type: ignore[return-value]

    def _kept_set(self, label: int) -> np.ndarray | None:
        """The shingle set of a kept document's text (None: out of reach): read back from self.texts, or for
        an indexed document (label below zero), as dupes reads it (check.ShingleCache)."""
        if label < 0:
            assert self.against_shingles is not None  # (labels below zero are the against index's)
            return self.against_shingles(self._indexed_keys([label])[label])
        made = self.kept_shingles.get(label)
        if made is not _UNMADE:
            return made  # type: ignore[return-value]
        at = self.labels.text_at_of(label)
        if at >= 0:
            assert self.texts is not None
            kind, data = self.texts.read(at)
            text = data.decode("utf-8", "surrogatepass") if kind == KeptTexts.TEXT else self.line_text(data)
            made = shingle_set(text) if _whole(text) is not None else None  # type: ignore[arg-type]
        else:
            made = short_text_shingles(self.labels.short_of(label))
        self.kept_shingles.put(label, made)
        return made

    def _indexed_keys(self, labels: list[int]) -> dict[int, str]:
        if not labels:
            return {}
        assert self.against is not None  # labels below zero are documents of the index deduplicated against
        ids = self.against_ids[[-1 - lab for lab in labels]]
        found = keys_of(self.against.conn, ids)
        return {lab: found[int(i)] for lab, i in zip(labels, ids)}


def dedup(
    entries: Iterable[tuple[Document, bytes | None]] | Iterable[Document],
    k: int | None = None,
    settings: FingerprintSettings | None = None,
    *,
    against: SimhashIndex | None = None,
    check: bool = True,
    threshold: float = DEFAULT_THRESHOLD,
    drop_uncertain: bool = False,
    memory: int | None = None,
) -> Iterator[Decision]:
    """Keep-first deduplication of documents (or (document, raw line) pairs) in their order; memory: the
    kept set's budget in RAM (past it, it spills to the temporary folder; None: no bound)."""
    pairs = ((e, None) if isinstance(e, Document) else e for e in entries)
    # Made here, not in the generator: a wrong argument raises at the call, as it did.
    deduplicator = Deduplicator(k, settings, against=against, check=check, threshold=threshold,
                                drop_uncertain=drop_uncertain, memory=memory)
    return _closed_after(deduplicator, pairs)


def _closed_after(
    deduplicator: Deduplicator, pairs: Iterable[tuple[Document | FingerprintedDocument, bytes | None]]
) -> Iterator[Decision]:
    try:
        yield from deduplicator.run(pairs)
    finally:
        deduplicator.close()
