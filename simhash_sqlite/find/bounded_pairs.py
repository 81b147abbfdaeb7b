"""All pairs (dupes, clusters) past a memory budget: the same pairs as the in-memory search, from disk.

The in-memory search (check.DuplicateSearch over sketch_pairs.py) holds every sketch twice (the rows
and their words) and a sorted LSH table per thread: about in_memory_bytes() a document, 4.3 GiB at 10M.
Past the budget this module holds per document only its id, fingerprint, two flags and the position of
its distinct sketch (KEPT_BYTES), and:

1. Loads the index once, in id order, writing the sketch rows to a flat file (RowFile) in a scratch
   folder (external.ScratchFolder: removed at the end, on Ctrl-C too), and folds identical sketches by a
   digest, as sketch_pairs does (checked row by row, so a digest shared by two sketches splits them).
2. Writes every distinct sketch's LSH window codes (table, key, number) in sorted runs
   (external.BucketedRuns), bucketed by table and the key's top bits, and reads them back bucket by
   bucket: equal keys meet in one bucket, and the pairs inside each group of equal keys are the
   candidates (the same set as sketch_pairs.candidate_codes).
3. Spools the candidates (PairSpool) bucketed by the pair of row ranges (parts) that hold their
   sketches, so that each is read once per bucket: duplicates across tables go in the merge, each
   candidate is estimated from the two parts' rows (estimate_many, the same doubles as the C core's
   LSH), and those at or above the threshold, with the copies of identical sketches, are handed back
   with their rows to be judged in batches by verdict.decide() (check.DuplicateSearch).

Candidates within k of the fingerprints (an explicit k) are spooled and judged the same way. Order of
the pairs differs from the in-memory search's (it is unspecified in both); the set and every verdict
are the same at any budget (tests/test_bounded_pairs.py).
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import sys
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import apsw
import numpy as np

from ..core.features import mix
from ..core.pool import workers
from ..core.sketch import SketchScheme, estimate_many
from . import resident_pairs
from .external import BucketedRuns, ScratchFolder, read_exactly
from .pairs import _groups, position_bits, slots_in, within_groups
from .sketch_pairs import _windows, _words, window_keys, window_plan

# RAM a document costs the in-memory search: its sketch row, the row's words (a transposed copy),
# id, fingerprint, flags, the fold's arrays and its share of a sorted table per thread. Measured
# (bench/scale.py, bench/dupes_model_scale.py): 4,046 MB at 10M documents, 396 bytes each past the process's own.
IN_MEMORY_EXTRA = 160
# RAM a document costs here whatever the budget: id and fingerprint (8 bytes each), whether it has a
# sketch and a short text (1 each), and the position of its distinct sketch (8).
KEPT_BYTES = 26
# What the bounded search takes at the least for its runs, parts and buckets, past KEPT_BYTES (the library
# takes any budget: the tests force many runs, buckets and parts on small indexes; simq's least is 1M).
LEAST_WORK = 4096
# What a search holds past its arrays, whatever the budget (measured at 1M documents: the peak RSS less the
# arrays' bytes): a chunk of rows read from the index as Python objects (about 36 MB), a batch of pairs being
# judged with its keys, and the pages the allocator keeps of freed tables.
PROCESS_SLACK = 64 << 20
# The least the disk search's runs, parts and buckets take when the budget is all but spent by the process.
DISK_FLOOR = 32 << 20
# Rows read from the index at a time while loading.
LOAD_ROWS = 1 << 16
_U64 = np.uint64
# Each sorted run, bucket or part gets a quarter of the work budget; a sort takes about twice its input.
SHARES = 4


def in_memory_bytes(documents: int, nbytes: int) -> int:
    """What the in-memory search of all pairs holds for this many documents with nbytes-byte sketches."""
    return documents * (2 * nbytes + IN_MEMORY_EXTRA)


def needs_bound(documents: int, nbytes: int, memory: int | None) -> bool:
    """Whether the in-memory search of all pairs would hold more than `memory` bytes."""
    return memory is not None and in_memory_bytes(documents, nbytes) > memory


IN_MEMORY, RESIDENT, ON_DISK = "memory", "resident", "disk"


class Plan(NamedTuple):
    """How the search of all pairs runs within a budget: `how` (IN_MEMORY: sketch_pairs; RESIDENT: the rows
    held once, resident_pairs.py, on `threads` threads; ON_DISK: this module) and the bytes it may take
    past what the process holds already (`work`)."""

    how: str
    threads: int
    work: int
    least: int = 0  # a budget below this cannot be met: the process, the slack and the disk search's least


def plan(documents: int, nbytes: int, memory: int | None, held: int = 0, resident: bool = True) -> Plan:
    """The fastest search whose arrays fit `memory` less `held` (the process's resident memory now and the
    shingle cache's budget: the budget is the whole process's). resident: False for a search of pairs within a
    fixed k (near_pairs), which the rows-held-once search does not run."""
    if memory is None:
        return Plan(IN_MEMORY, 0, 0)
    work = memory - held
    if in_memory_bytes(documents, nbytes) <= work:
        return Plan(IN_MEMORY, 0, work)
    if resident and resident_pairs.available():
        for threads in range(workers(), 0, -1):
            if resident_pairs.resident_bytes(documents, nbytes, threads) <= work:
                return Plan(RESIDENT, threads, work)
    # A budget below what the process holds already cannot be met: the disk search then takes its arrays and
    # DISK_FLOOR past them (or the whole budget where that is smaller: the tests force tiny budgets to force
    # many runs and parts). (BoundedPairs takes its arrays, KEPT_BYTES a document, out of the work it is given.)
    least = held + documents * (KEPT_BYTES + resident_pairs.RESIDENT_FOLD) + DISK_FLOOR
    return Plan(ON_DISK, 0, max(LEAST_WORK, work, min(memory, documents * KEPT_BYTES + DISK_FLOOR)), least)


def resident_memory() -> int:
    """The process's resident memory now (bytes; its peak so far where /proc is not there)."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def give_back_free_memory() -> bool:
    """Hand the allocator's free pages back to the system (glibc's malloc_trim: inside its heaps too, not
    only at their tops), where that is glibc; False elsewhere. Within a budget the small allocations of the
    search's threads and of the exact check (pairs' keys, lines, sets) leave free pages across the threads'
    heaps that stay resident: 450 MB of heaps at 10M documents, the LSH tables running beside the check."""
    trim = _malloc_trim()
    return bool(trim is not None and trim(0))


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim  # (the C library the interpreter runs on: musl has none)
    except (AttributeError, OSError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


class RowFile:
    """Fixed-size rows (sketches) in a flat file, appended in order and read back by position."""

    def __init__(self, folder: ScratchFolder, nbytes: int) -> None:
        self.folder, self.nbytes = folder, nbytes
        self.path = folder.new_file(".rows")
        self.handle = open(self.path, "w+b")  # noqa: SIM115 - closed by close()
        self.rows = 0

    def append(self, rows: np.ndarray) -> None:
        self.handle.write(np.ascontiguousarray(rows, dtype=np.uint8).data)
        self.rows += len(rows)
        self.folder.bytes += rows.nbytes

    def finish(self) -> None:
        self.handle.flush()

    def read(self, lo: int, hi: int) -> np.ndarray:
        """Rows [lo, hi)."""
        data = read_exactly(self.handle.fileno(), (hi - lo) * self.nbytes, lo * self.nbytes)
        return np.frombuffer(data, dtype=np.uint8).reshape(hi - lo, self.nbytes)

    def gather(self, positions: np.ndarray) -> np.ndarray:
        """The rows at sorted positions, read span by span (nearby positions in one read)."""
        out = np.empty((len(positions), self.nbytes), dtype=np.uint8)
        if not len(positions):
            return out
        breaks = np.flatnonzero(np.diff(positions) > 32) + 1
        for s, e in zip(np.concatenate(([0], breaks)).tolist(), np.concatenate((breaks, [len(positions)])).tolist()):
            first, last = int(positions[s]), int(positions[e - 1])
            out[s:e] = self.read(first, last + 1)[positions[s:e] - first]
        return out

    def close(self) -> None:
        self.handle.close()


def _digests(rows: np.ndarray) -> np.ndarray:
    """sketch_pairs._fold_identical's 64-bit digest of each row."""
    digest = np.zeros(len(rows), dtype=_U64)
    for word in _words(rows):
        digest ^= word
        mix(digest)
    return digest


class BoundedPairs:
    """The index's arrays (ids, fingerprints, flags) in RAM and its sketches on disk, and the pairs of
    all-pairs search from them in `memory` bytes. close() removes the scratch folder."""

    def __init__(self, conn, scheme: SketchScheme, short_column: bool, memory: int,
                 folder: str | None = None) -> None:
        self.scheme, self.memory = scheme, memory
        self.scratch = ScratchFolder(folder)
        try:
            self._load(conn, short_column)
        except BaseException:
            self.close()
            raise
        n = len(self.ids)
        self.work = max(LEAST_WORK, memory - n * KEPT_BYTES)
        self.share = max(1024, self.work // SHARES)
        # Rows of one part: two parts are read at a time, each within a share.
        self.part_rows = max(1, self.share // scheme.nbytes)
        self.parts = max(1, -(-n // self.part_rows))

    def _load(self, conn, short_column: bool) -> None:
        nbytes = self.scheme.nbytes
        flag = "short_text IS NOT NULL" if short_column else "0"
        self.rows = RowFile(self.scratch, nbytes)
        with conn:  # one snapshot
            count = conn.execute("SELECT count(*) FROM documents WHERE fingerprint IS NOT NULL").get
            ids, values = np.empty(count, dtype=np.int64), np.empty(count, dtype=np.int64)
            present, short = np.zeros(count, dtype=bool), np.zeros(count, dtype=bool)
            digest = np.zeros(count, dtype=_U64)
            found = conn.execute(
                f"SELECT id, fingerprint, sketch, {flag} FROM documents WHERE fingerprint IS NOT NULL ORDER BY id"
            )
            n = 0
            while chunk := list(itertools.islice(found, LOAD_ROWS)):
                size = len(chunk)
                ids[n : n + size] = [i for i, _, _, _ in chunk]
                values[n : n + size] = [f for _, f, _, _ in chunk]
                short[n : n + size] = [h for _, _, _, h in chunk]
                buffer = bytearray(size * nbytes)
                for m, (_, _, s, _) in enumerate(chunk):
                    if s is not None and len(s) == nbytes:
                        buffer[m * nbytes : (m + 1) * nbytes] = s
                        present[n + m] = True
                rows = np.frombuffer(buffer, dtype=np.uint8).reshape(size, nbytes)
                digest[n : n + size] = _digests(rows)
                self.rows.append(rows)
                n += size
        self.rows.finish()
        self.ids, self.values = ids[:n], values[:n].view(np.uint64)
        self.present, self.short = present[:n], short[:n]
        sketched_digest = digest[:n][present[:n]]
        del digest
        self._fold(sketched_digest)

    def _fold(self, digest: np.ndarray) -> None:
        """Identical sketches folded as sketch_pairs._fold_identical folds them (resident_pairs.fold_copies,
        holding only the copies' arrays): `position` the position of each distinct sketch's first document
        (ascending), and for the sketches with copies their numbers (`copied`), and their documents'
        positions (copy_members[copy_offsets[c]:][:copy_counts[c]])."""
        sketched = np.flatnonzero(self.present)
        first, copies = resident_pairs.fold_copies(digest, sketched, self.rows.gather)
        del digest
        self.position = sketched if first is None else first
        self.copied = np.searchsorted(self.position, copies.heads)
        self.copy_counts, self.copy_offsets, self.copy_members = copies.counts, copies.offsets, copies.members

    # -- candidates from the sketches' LSH windows --------------------------------------------------

    def sketch_pairs(self, threshold: float) -> Iterator[tuple[np.ndarray, ...]]:
        """(left, right, estimate, rows of left, rows of right) of every pair of sketched documents
        (positions, left < right) whose estimated Jaccard is >= threshold, in chunks: what
        sketch_pairs.sketch_pairs finds over the sketched rows."""
        yield from self._copy_pairs()
        m = len(self.position)
        if m < 2:
            return
        nbits = self.scheme.bins * self.scheme.bits
        width, step = window_plan(m, nbits)
        spool = PairSpool(self.scratch, m, self.position, self.part_rows, self.parts, self.share)
        try:
            for left, right in self._window_candidates(m, nbits, width, step):
                spool.add(left, right)
            yield from self._estimated(spool, threshold)
        finally:
            spool.close()

    def _copy_pairs(self) -> Iterator[tuple[np.ndarray, ...]]:
        """The pairs among the copies of each sketch: estimate 1.0, as sketch_pairs gives them."""
        if not len(self.copied):
            return
        heads = self.rows.gather(self.position[self.copied])
        for i, j in within_groups(self.copy_offsets, self.copy_counts):
            group = np.searchsorted(self.copy_offsets, i, side="right") - 1
            row = heads[group]
            yield self.copy_members[i], self.copy_members[j], np.ones(len(i)), row, row

    def _window_candidates(self, m: int, nbits: int, width: int, step: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Pairs (a < b) of distinct sketch numbers that share the key of at least one window, in
        chunks, with repeats (a pair sharing several windows comes from each)."""
        starts = _windows(nbits, width, step)
        low = position_bits(m)
        table_bits = max(1, (len(starts) - 1).bit_length())
        if table_bits + width + low > 64:
            raise ValueError(f"{m} distinct sketches are too many for {len(starts)} tables of {width}-bit windows")
        # Buckets: a table and the top `split` bits of its key, each within a share (a code and its sort).
        split = 0
        while m * 16 >> split > self.share and split < width:
            split += 1
        shift = width + low - split
        runs = BucketedRuns(self.scratch, shift, len(starts) << split)
        try:
            # Distinct sketches a run holds: its codes and a words copy, sorted in place, within a share.
            per_run = max(1, self.share // (16 * len(starts)))
            at = 0
            while at < m:
                lo, hi = int(self.position[at]), int(self.position[min(m, at + per_run) - 1]) + 1
                numbers = np.arange(at, min(m, at + per_run), dtype=_U64)
                rows = self.rows.read(lo, hi)[self.position[at : at + len(numbers)] - lo]
                words = _words(rows)
                del rows
                codes = np.empty((len(starts), len(numbers)), dtype=_U64)
                for t, start in enumerate(starts):
                    key = window_keys(words, start, width)
                    codes[t] = (_U64(t) << _U64(width + low)) | (key << _U64(low)) | numbers
                del words
                runs.add(codes.ravel())
                del codes
                at += len(numbers)
            keep = _U64((1 << (width + low)) - 1)
            mask = _U64((1 << low) - 1)
            for _, codes in runs.buckets():
                packed = codes & keep
                del codes
                group_starts, sizes = _groups(packed >> _U64(low))
                if not len(group_starts):
                    continue
                numbers = (packed & mask).astype(np.int64)
                del packed
                for i, j in within_groups(group_starts, sizes):
                    yield numbers[i], numbers[j]  # ascending numbers within a group of equal keys
        finally:
            runs.close()

    def _estimated(self, spool: PairSpool, threshold: float) -> Iterator[tuple[np.ndarray, ...]]:
        """The spooled candidates' estimates from their parts' rows, those >= threshold kept, copies
        of identical sketches expanded to every pair of their documents."""
        for a, b, rows_a, rows_b in spool.with_rows(self.rows):
            estimate = estimate_many(rows_a, rows_b, self.scheme)
            keep = estimate >= threshold
            a, b, estimate, rows_a, rows_b = a[keep], b[keep], estimate[keep], rows_a[keep], rows_b[keep]
            if not len(a):
                continue
            yield from self._expanded(a, b, estimate, rows_a, rows_b)

    def _expanded(self, a, b, estimate, rows_a, rows_b) -> Iterator[tuple[np.ndarray, ...]]:
        """Pairs of distinct sketches as pairs of documents (every copy with every copy)."""
        slot_a, slot_b = self._copy_slot(a), self._copy_slot(b)
        plain = (slot_a < 0) & (slot_b < 0)
        yield self.position[a[plain]], self.position[b[plain]], estimate[plain], rows_a[plain], rows_b[plain]
        for i in np.flatnonzero(~plain).tolist():
            xs, ys = self._documents(a[i], slot_a[i]), self._documents(b[i], slot_b[i])
            left, right = np.repeat(xs, len(ys)), np.tile(ys, len(xs))
            swapped = left > right  # a copy of the later sketch may come first: its row goes first too
            row_of = np.stack((rows_a[i], rows_b[i]))
            yield (np.minimum(left, right), np.maximum(left, right), np.full(len(left), estimate[i]),
                   row_of[swapped.astype(np.intp)], row_of[(~swapped).astype(np.intp)])

    def _copy_slot(self, numbers: np.ndarray) -> np.ndarray:
        """Where each number is among the copied ones, -1 when it has no copies."""
        return slots_in(self.copied, numbers)

    def _documents(self, number: int, slot: int) -> np.ndarray:
        if slot < 0:
            return self.position[number : number + 1]
        lo = int(self.copy_offsets[slot])
        return self.copy_members[lo : lo + int(self.copy_counts[slot])]

    # -- candidates found elsewhere (within k of the fingerprints) -----------------------------------

    def with_rows(self, pairs: Iterable[tuple[np.ndarray, np.ndarray]]) -> Iterator[tuple]:
        """(left, right, None, rows of left, rows of right) of the given pairs of positions (left <
        right), read part by part (each pair once, as given once)."""
        spool = PairSpool(self.scratch, len(self.ids), None, self.part_rows, self.parts, self.share)
        try:
            for left, right in pairs:
                spool.add(left, right)
            for a, b, rows_a, rows_b in spool.with_rows(self.rows):
                yield a, b, None, rows_a, rows_b
        finally:
            spool.close()

    def close(self) -> None:
        rows = getattr(self, "rows", None)
        if rows is not None:
            rows.close()
        self.scratch.close()


class PairSpool:
    """Pairs of numbers (a < b; number x's row at positions[x], or at x where positions is None) on
    disk, bucketed by the parts (ranges of part_rows positions) their rows are in; read back part
    pair by part pair, each pair once, with the rows."""

    def __init__(self, folder: ScratchFolder, numbers: int, positions: np.ndarray | None, part_rows: int,
                 parts: int, share: int) -> None:
        self.positions, self.part_rows, self.parts = positions, part_rows, parts
        self.bits = position_bits(max(numbers, 2))
        part_bits = max(1, (parts * parts - 1).bit_length())
        if 2 * self.bits + part_bits > 64:
            raise ValueError(f"{numbers} documents in {parts} parts are too many for the bounded pair search")
        self.runs = BucketedRuns(folder, 2 * self.bits, parts * parts)
        self.pending: list[np.ndarray] = []
        self.pending_count = 0
        self.run_size = max(1, share // 24)  # pending codes, joined (a copy) and sorted in place: within a share

    def _part(self, numbers: np.ndarray) -> np.ndarray:
        at = numbers if self.positions is None else self.positions[numbers]
        return at // self.part_rows

    def add(self, a: np.ndarray, b: np.ndarray) -> None:
        if not len(a):
            return
        a, b = a.astype(np.int64), b.astype(np.int64)
        pair = self._part(a) * self.parts + self._part(b)
        codes = (pair.astype(_U64) << _U64(2 * self.bits)) | (a.astype(_U64) << _U64(self.bits)) | b.astype(_U64)
        self.pending.append(codes)
        self.pending_count += len(codes)
        if self.pending_count >= self.run_size:
            self._flush()

    def _flush(self) -> None:
        if self.pending:
            codes = np.concatenate(self.pending)
            self.pending, self.pending_count = [], 0
            self.runs.add(codes)

    def with_rows(self, rows: RowFile) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """(a, b, rows of a, rows of b) of each distinct pair, part pair by part pair."""
        self._flush()
        mask = _U64((1 << self.bits) - 1)
        loaded: dict[int, np.ndarray] = {}
        for bucket, codes in self.runs.buckets():
            distinct = np.ones(len(codes), dtype=bool)
            np.not_equal(codes[1:], codes[:-1], out=distinct[1:])
            codes = codes[distinct]
            part_a, part_b = divmod(bucket, self.parts)
            for p in list(loaded):
                if p not in (part_a, part_b):
                    del loaded[p]
            for p in (part_a, part_b):
                if p not in loaded:
                    loaded[p] = rows.read(p * self.part_rows, min(rows.rows, (p + 1) * self.part_rows))
            a = ((codes >> _U64(self.bits)) & mask).astype(np.int64)
            b = (codes & mask).astype(np.int64)
            del codes
            pa = a if self.positions is None else self.positions[a]
            pb = b if self.positions is None else self.positions[b]
            step = max(256, min(ESTIMATE_PAIRS, self.run_size // rows.nbytes))
            for lo in range(0, len(a), step):
                hi = lo + step
                yield (a[lo:hi], b[lo:hi], loaded[part_a][pa[lo:hi] - part_a * self.part_rows],
                       loaded[part_b][pb[lo:hi] - part_b * self.part_rows])

    def close(self) -> None:
        self.runs.close()


# Pairs whose rows are gathered at once, at most (two rows of 118 bytes each: 120 MB; less within a small budget).
ESTIMATE_PAIRS = 1 << 19


def arrays_of(conn, scheme: SketchScheme, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """check.load_arrays() of the documents with these ids only (those with a fingerprint): ids
    ascending, unsigned fingerprints, sketch rows, which have a sketch."""
    wanted = np.unique(np.asarray(wanted, dtype=np.int64))
    nbytes = scheme.nbytes
    found = conn.execute(
        "SELECT id, fingerprint, sketch FROM documents WHERE id IN carray(?) AND fingerprint IS NOT NULL ORDER BY id",
        (apsw.carray(wanted),),
    ).fetchall() if len(wanted) else []
    ids = np.array([i for i, _, _ in found], dtype=np.int64)
    values = np.array([f for _, f, _ in found], dtype=np.int64).view(np.uint64)
    rows = np.zeros((len(found), nbytes), dtype=np.uint8)
    present = np.zeros(len(found), dtype=bool)
    for m, (_, _, s) in enumerate(found):
        if s is not None and len(s) == nbytes:
            rows[m] = np.frombuffer(s, dtype=np.uint8)
            present[m] = True
    return ids, values, rows, present


def parts_needed(documents: int, nbytes: int, memory: int) -> int:
    """How many parts the rows are read in at this budget (for the docs and the bench)."""
    share = max(1024, max(LEAST_WORK, memory - documents * KEPT_BYTES) // SHARES)
    return max(1, math.ceil(documents / max(1, share // nbytes)))
