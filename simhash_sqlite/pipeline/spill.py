"""Dedup's kept set in bounded memory: a budget (`--memory`) and the disk the kept set spills to past it.

Below the budget every kept document stays in RAM as compact numpy arrays (dedup.KeptSketches's runs,
KeptLabels's tail). Past it the oldest, largest sketch run is written to a folder of flat files (SpilledRun:
its sorted LSH codes, and each document's sketch row with its label) and searched there by reading only the
4 KiB blocks that may hold a query's codes (a fence of every block's first code stays in RAM); the labels'
keys, fingerprints and short texts move to an SQLite file in the same folder. A spilled run answers exactly
what it answered in RAM, so the kept set does not depend on the budget.

The kept documents' texts are on disk from the start (KeptTexts: one file in the same folder, appended as
documents are kept, read back by offset for the exact check of a later pair); only their offsets are in RAM,
with the labels, and they spill with them.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import sys
from collections.abc import Iterator

import apsw
import numpy as np

from ..errors import InvalidArgument
from ..find.external import ScratchFolder, hold_lock, lock_held

# The default budget: a quarter of the machine's memory, at most this much. bench/scale.py, 1M streamed
# pages (940k kept): peak RSS 1.11 GB at 1G against 1.58 GB at 2G, the same output, CPU 88 s against 75 s;
# past the budget the RSS stays near it, so a 1G cap keeps 10M pages near the 1M figure.
DEFAULT_MEMORY_CAP = 1 << 30
LEAST_MEMORY = 1 << 20  # a smaller --memory is refused (the library takes any budget: tests force spills)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


def parse_memory(text: str) -> int:
    """Bytes from a size such as 512M, 2G, 1.5GiB or 800000 (binary units: 1K is 1024 bytes)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise InvalidArgument(f"--memory must be a size such as 512M or 2G, not {text!r}")
    size = int(float(match.group(1)) * _UNITS[unit])
    if size < LEAST_MEMORY:
        raise InvalidArgument(f"--memory must be at least 1M, not {text!r}")
    return size


def default_memory() -> int:
    """A quarter of the machine's memory, at most DEFAULT_MEMORY_CAP."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # no sysconf (Windows): the cap
        return DEFAULT_MEMORY_CAP
    return max(LEAST_MEMORY, min(total // 4, DEFAULT_MEMORY_CAP))


class SpillFolder(ScratchFolder):
    """The folder the kept set spills to: NEAR.spill beside the output (a killed run's is removed when the
    next run for that output starts), else one in the temporary folder; made on first use, removed by
    close() (find.external.ScratchFolder, as dupes' sorted runs)."""

    def __init__(self, near: str | None = None) -> None:
        super().__init__(prefix="simq-spill-")
        self.near = near
        if near is not None and os.path.isdir(self._beside()):
            if lock_held(self._beside()):
                raise InvalidArgument(f"another simq run is writing {near} (its spill folder is in use)")
            shutil.rmtree(self._beside(), ignore_errors=True)

    def _beside(self) -> str:
        assert self.near is not None
        return os.path.abspath(self.near) + ".spill"

    def _make(self) -> tuple[str, int]:
        if self.near is None:
            return super()._make()
        os.makedirs(self._beside())
        return self._beside(), hold_lock(self._beside())


def _write(path: str, array: np.ndarray) -> int:
    with open(path, "wb") as handle:
        np.ascontiguousarray(array).tofile(handle)
    return array.nbytes


# A search of a spilled run reads at most this many of its blocks at a time (8 MiB).
READ_BLOCKS = 2048
# Spans of wanted items closer than this many items are read as one (a read costs more than a few KiB).
_GAP = 32


def gather(fd: int, positions: np.ndarray, itemsize: int, dtype: np.dtype | type = np.uint8) -> np.ndarray:
    """Items at sorted, distinct positions of a file of fixed-size items, read span by span: an array of
    len(positions) rows of itemsize bytes (viewed as dtype)."""
    out = np.empty((len(positions), itemsize), dtype=np.uint8)
    if len(positions) == 0:
        return out.view(dtype)
    breaks = np.flatnonzero(np.diff(positions) > _GAP) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [len(positions)]))
    for s, e in zip(starts.tolist(), ends.tolist()):
        first, last = int(positions[s]), int(positions[e - 1])
        data = os.pread(fd, (last - first + 1) * itemsize, first * itemsize)
        span = np.frombuffer(data, dtype=np.uint8).reshape(-1, itemsize)
        out[s:e] = span[positions[s:e] - first]
    return out.view(dtype)


class SpilledRun:
    """A sorted run of kept sketches on disk: its codes (code << 32 | position, sorted) in one file, each
    position's sketch row and label in another; in RAM only the first code of every BLOCK (8 bytes per
    4 KiB of codes) and each row's size code (2 bytes)."""

    BLOCK = 512  # codes a block: 4 KiB

    def __init__(self, folder: SpillFolder, rows: np.ndarray, labels: np.ndarray, codes: np.ndarray,
                 sizes: np.ndarray | None = None) -> None:
        # sizes: the rows' recorded_size_codes (core/sketch.py), kept in RAM (2 bytes a row), so that a candidate
        # whose size ratio rules it out is dropped before its row is read (KeptSketches.matches)
        self.sizes = np.zeros(len(rows), dtype=np.uint16) if sizes is None else sizes
        records = np.empty((len(rows), rows.shape[1] + 8), dtype=np.uint8)
        records[:, : rows.shape[1]] = rows
        records[:, rows.shape[1] :] = labels.astype("<i8").view(np.uint8).reshape(-1, 8)
        codes_path, records_path = folder.new_file(".codes"), folder.new_file(".rows")
        folder.bytes += _write(codes_path, codes) + _write(records_path, records)
        self._open(codes_path, records_path, len(rows), rows.shape[1], len(codes), codes[:: self.BLOCK].copy())

    def _open(self, codes_path: str, records_path: str, count: int, row_bytes: int, codes_count: int,
              fence: np.ndarray) -> None:
        self.codes_path, self.records_path = codes_path, records_path
        self.count, self.row_bytes, self.codes_count, self.fence = count, row_bytes, codes_count, fence
        self.codes_fd = os.open(self.codes_path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        self.records_fd = os.open(self.records_path, os.O_RDONLY | getattr(os, "O_BINARY", 0))

    @classmethod
    def merged(cls, folder: SpillFolder, older: SpilledRun, newer: SpilledRun) -> SpilledRun:
        """One run of two, merged a chunk at a time (MERGE_CHUNK codes of each in RAM); their files go."""
        run = cls.__new__(cls)
        run.sizes = np.concatenate((older.sizes, newer.sizes))
        codes_path, records_path = folder.new_file(".codes"), folder.new_file(".rows")
        with open(records_path, "wb") as out:
            for source in (older, newer):
                with open(source.records_path, "rb") as handle:
                    shutil.copyfileobj(handle, out, 1 << 20)
        fence: list[np.ndarray] = []
        written = 0
        with open(codes_path, "wb") as out:
            for part in _merged_codes(older, newer):
                fence.append(part[(-written) % cls.BLOCK :: cls.BLOCK].copy())  # not a view: the part goes
                written += len(part)
                part.tofile(out)
        folder.bytes += written * 8 + (older.count + newer.count) * (older.row_bytes + 8)
        run._open(codes_path, records_path, older.count + newer.count, older.row_bytes, written,
                  np.concatenate(fence) if fence else np.empty(0, np.uint64))
        for source in (older, newer):
            source.close()
            for path in (source.codes_path, source.records_path):
                os.unlink(path)
        return run

    def __len__(self) -> int:
        return self.count

    @property
    def nbytes(self) -> int:  # in RAM
        return self.fence.nbytes + self.sizes.nbytes

    def close(self) -> None:
        for fd in (self.codes_fd, self.records_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def codes_in_chunks(self, chunk: int) -> Iterator[np.ndarray]:
        """All the run's codes, a chunk at a time (for a bit map made again)."""
        for lo in range(0, self.codes_count, chunk):
            n = min(chunk, self.codes_count - lo)
            yield np.frombuffer(os.pread(self.codes_fd, n * 8, lo * 8), dtype=np.uint64)

    def slices(self, wanted: np.ndarray) -> Iterator[tuple[int, int]]:
        """(lo, hi): slices of wanted (sorted code tops) whose codes_near() reads about READ_BLOCKS blocks at
        most (more only where one code's entries span more)."""
        if len(wanted) == 0:
            return
        group = np.maximum(np.searchsorted(self.fence, wanted, side="left") - 1, 0) // READ_BLOCKS
        breaks = np.flatnonzero(group[1:] != group[:-1]) + 1
        yield from zip(np.concatenate(([0], breaks)).tolist(), np.concatenate((breaks, [len(wanted)])).tolist())

    def codes_near(self, wanted: np.ndarray) -> np.ndarray:
        """The run's codes in every block that may hold a code whose top is in `wanted` (sorted code tops):
        a sorted part of the run holding all of them."""
        if len(wanted) == 0 or self.codes_count == 0:
            return np.empty(0, np.uint64)
        first = np.maximum(np.searchsorted(self.fence, wanted, side="left") - 1, 0)
        last = np.maximum(np.searchsorted(self.fence, wanted | _LOW, side="right") - 1, 0)
        count = last - first + 1
        blocks = np.repeat(first, count) + (
            np.arange(int(count.sum()), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
        )
        blocks = np.unique(blocks)
        # Consecutive blocks are read in one go.
        breaks = np.flatnonzero(np.diff(blocks) > 1) + 1
        parts = []
        for s, e in zip(np.concatenate(([0], breaks)).tolist(), np.concatenate((breaks, [len(blocks)])).tolist()):
            lo = int(blocks[s]) * self.BLOCK
            hi = min((int(blocks[e - 1]) + 1) * self.BLOCK, self.codes_count)
            parts.append(np.frombuffer(os.pread(self.codes_fd, (hi - lo) * 8, lo * 8), dtype=np.uint64))
        return np.concatenate(parts)

    def rows_and_labels(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The sketch rows and labels at sorted, distinct positions."""
        records = gather(self.records_fd, positions, self.row_bytes + 8)
        return records[:, : self.row_bytes], np.ascontiguousarray(records[:, self.row_bytes :]).view("<i8").ravel()


_LOW = np.uint64((1 << 32) - 1)
MERGE_CHUNK = 1 << 20  # codes of each run read at once by a merge (8 MiB)


def _merged_codes(older: SpilledRun, newer: SpilledRun) -> Iterator[np.ndarray]:
    """The codes of two runs in order, the newer's positions after the older's, a part at a time."""
    add = np.uint64(older.count)
    sources = [(older, np.uint64(0)), (newer, add)]
    at = [0, 0]
    buffers = [np.empty(0, np.uint64), np.empty(0, np.uint64)]
    while True:
        for i, (run, plus) in enumerate(sources):
            if len(buffers[i]) == 0 and at[i] < run.codes_count:
                n = min(MERGE_CHUNK, run.codes_count - at[i])
                buffers[i] = np.frombuffer(os.pread(run.codes_fd, n * 8, at[i] * 8), dtype=np.uint64) + plus
                at[i] += n
        live = [i for i in (0, 1) if len(buffers[i])]
        if not live:
            return
        if len(live) == 1:  # one run is done: the other's buffer as it is
            yield buffers[live[0]]
            buffers[live[0]] = np.empty(0, np.uint64)
            continue
        # Everything up to the smaller of the two buffers' last codes can be placed now; one buffer empties.
        limit = min(buffers[0][-1], buffers[1][-1])
        cut = [int(np.searchsorted(buffers[i], limit, side="right")) for i in (0, 1)]
        part = np.concatenate((buffers[0][: cut[0]], buffers[1][: cut[1]]))
        part.sort(kind="stable")  # two sorted pieces: timsort merges them
        buffers = [buffers[0][cut[0] :], buffers[1][cut[1] :]]
        yield part


LABELS_SPILL_CHUNK = 1 << 16  # labels written to the file at once (a few MB of Python objects)


class KeptLabels:
    """What dedup keeps of each document kept from the input, by label (0, 1, ... in input order): its key,
    fingerprint, distinct-shingle count (NaN: none), where its text is in KeptTexts (-1: nowhere) and, for a
    short text whose text is nowhere, its exact data. The newest stay in RAM; when they pass `budget` bytes
    they move to an SQLite file in the spill folder."""

    def __init__(self, budget: int | None = None, folder: SpillFolder | None = None) -> None:
        self.budget, self.folder = budget, folder
        self.base = 0  # labels below this are in the file
        self.keys: list[str] = []
        self.values = np.empty(1024, dtype=np.uint64)
        self.sizes = np.empty(1024)
        self.text_at = np.empty(1024, dtype=np.int64)
        self.short: dict[int, bytes] = {}
        self.ram = 0  # bytes of the keys and short texts in RAM (estimated as CPython stores them)
        self.conn: apsw.Connection | None = None

    def __len__(self) -> int:
        return self.base + len(self.keys)

    @property
    def nbytes(self) -> int:
        return self.ram + self.values.nbytes + self.sizes.nbytes + self.text_at.nbytes

    def append(self, key: str, value: int, size: float, short: bytes | None, text_at: int = -1) -> int:
        label = len(self)
        tail = len(self.keys)
        if tail == len(self.values):  # grow by doubling: amortized constant
            self.values = np.concatenate((self.values, np.empty_like(self.values)))
            self.sizes = np.concatenate((self.sizes, np.empty_like(self.sizes)))
            self.text_at = np.concatenate((self.text_at, np.empty_like(self.text_at)))
        self.keys.append(key)
        self.values[tail], self.sizes[tail], self.text_at[tail] = value, size, text_at
        self.ram += sys.getsizeof(key) + 8
        if short is not None:
            self.short[label] = short
            self.ram += len(short) + 33 + 100  # the bytes object and its dict entry
        return label

    def append_many(
        self, keys: list[str], values: np.ndarray, sizes: np.ndarray, shorts: list[bytes | None], text_at: np.ndarray
    ) -> int:
        """append() of each of many documents, in order; the first one's label (the rest follow it)."""
        first, count = len(self), len(keys)
        tail = len(self.keys)
        if tail + count > len(self.values):  # grow by doubling, as append() does
            size = len(self.values)
            while size < tail + count:
                size *= 2
            more = size - len(self.values)
            self.values = np.concatenate((self.values, np.empty(more, dtype=np.uint64)))
            self.sizes = np.concatenate((self.sizes, np.empty(more)))
            self.text_at = np.concatenate((self.text_at, np.empty(more, dtype=np.int64)))
        self.keys += keys
        self.values[tail : tail + count], self.sizes[tail : tail + count] = values, sizes
        self.text_at[tail : tail + count] = text_at
        self.ram += sum(map(sys.getsizeof, keys)) + 8 * count
        for n, short in enumerate(shorts):
            if short is not None:
                self.short[first + n] = short
                self.ram += len(short) + 33 + 100
        return first

    def spill_if_over(self) -> None:
        if self.budget is None or self.folder is None or self.nbytes <= self.budget or not self.keys:
            return
        if self.conn is None:
            self.conn = apsw.Connection(self.folder.new_file(".labels.db"))
            for statement in ("PRAGMA journal_mode=OFF", "PRAGMA synchronous=OFF", "PRAGMA cache_size=-2048",
                              "CREATE TABLE kept(label INTEGER PRIMARY KEY, key TEXT, value INTEGER, size REAL, "
                              "short BLOB, text_at INTEGER)"):
                self.conn.execute(statement).fetchall()
        n = len(self.keys)
        with self.conn:
            # A chunk at a time: the whole tail as Python lists would be three objects a label (some 100
            # bytes) beside the budget itself, the peak of a 3M-page dedup.
            for lo in range(0, n, LABELS_SPILL_CHUNK):
                hi = min(n, lo + LABELS_SPILL_CHUNK)
                signed = self.values[lo:hi].view(np.int64).tolist()
                sizes = [None if s != s else s for s in self.sizes[lo:hi].tolist()]  # NaN as NULL
                text_at = self.text_at[lo:hi].tolist()
                self.conn.executemany(
                    "INSERT INTO kept VALUES (?, ?, ?, ?, ?, ?)",
                    ((self.base + i, self.keys[i], signed[i - lo], sizes[i - lo], self.short.get(self.base + i),
                      text_at[i - lo]) for i in range(lo, hi)),
                )
        self.folder.bytes += sum(len(k) + 32 for k in self.keys) + sum(len(s) for s in self.short.values())
        self.base += n
        self.keys, self.short, self.ram = [], {}, 0
        self.values, self.sizes = np.empty(1024, dtype=np.uint64), np.empty(1024)
        self.text_at = np.empty(1024, dtype=np.int64)

    def _rows(self, labels: np.ndarray, column: str) -> dict[int, object]:
        assert self.conn is not None
        wanted = np.unique(labels).astype(np.int64)
        return dict(self.conn.execute(f"SELECT label, {column} FROM kept WHERE label IN carray(?)",
                                      (apsw.carray(wanted),)))

    def values_of(self, labels: np.ndarray) -> np.ndarray:
        out = np.empty(len(labels), dtype=np.uint64)
        ram = labels >= self.base
        out[ram] = self.values[labels[ram] - self.base]
        if not ram.all():
            found = self._rows(labels[~ram], "value")
            out[~ram] = np.array([found[a] for a in labels[~ram].tolist()], dtype=np.int64).view(np.uint64)
        return out

    def sizes_of(self, labels: np.ndarray) -> np.ndarray:
        """The distinct-shingle counts of many labels (NaN: none), as values_of gives fingerprints."""
        out = np.empty(len(labels))
        ram = labels >= self.base
        out[ram] = self.sizes[labels[ram] - self.base]
        if not ram.all():
            found = self._rows(labels[~ram], "size")
            out[~ram] = np.array([np.nan if found[a] is None else found[a] for a in labels[~ram].tolist()], dtype=float)
        return out

    def size_of(self, label: int) -> float:
        if label >= self.base:
            return float(self.sizes[label - self.base])
        found = self._rows(np.array([label]), "size")[label]
        return float("nan") if found is None else float(found)  # type: ignore[arg-type]

    def key_of(self, label: int) -> str:
        if label >= self.base:
            return self.keys[label - self.base]
        return str(self._rows(np.array([label]), "key")[label])

    def text_at_of(self, label: int) -> int:
        """Where the label's text is in KeptTexts (-1: nowhere)."""
        if label >= self.base:
            return int(self.text_at[label - self.base])
        return int(self._rows(np.array([label]), "text_at")[label])  # type: ignore[call-overload]

    def short_of(self, label: int) -> bytes | None:
        if label >= self.base:
            return self.short.get(label)
        found = self._rows(np.array([label]), "short")[label]
        return found if isinstance(found, bytes) else None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class KeptTexts:
    """The texts of dedup's kept documents, for the exact check of a later pair: each appended, as it is kept,
    to one file in the spill folder (a JSONL record as its line, parsed again when read; any other text as
    its UTF-8), and read back by the offset append() returned. Nothing of it is in RAM but a write buffer of
    at most FLUSH bytes: the kept set's budget does not change with the texts, and neither does what is read.
    Records: a kind byte (TEXT or LINE), the length (8 bytes, little-endian), the bytes."""

    TEXT, LINE = 0, 1
    FLUSH = 1 << 20
    _HEAD = struct.Struct("<BQ")

    def __init__(self, folder: SpillFolder) -> None:
        self.folder = folder
        self.fd = -1
        self.flushed = 0  # bytes in the file; the buffer's follow
        self.buffer = bytearray()
        self.bytes = 0  # written so far (flushed or in the buffer)
        self.read_count = 0  # records read back

    def append(self, kind: int, data: bytes) -> int:
        offset = self.bytes
        self.buffer += self._HEAD.pack(kind, len(data))
        self.buffer += data
        self.bytes += self._HEAD.size + len(data)
        if len(self.buffer) >= self.FLUSH:
            self.flush()
        return offset

    def append_many(self, kinds: list[int], data: list[bytes]) -> np.ndarray:
        """append() of each (kind, bytes), in order, in one copy into the buffer; their offsets."""
        lengths = np.fromiter(map(len, data), dtype=np.int64, count=len(data))
        heads = np.empty(len(data), dtype=[("kind", "u1"), ("length", "<u8")])  # _HEAD's layout, packed
        heads["kind"], heads["length"] = kinds, lengths
        packed = heads.tobytes()
        size = self._HEAD.size
        offsets = self.bytes + np.concatenate(([0], np.cumsum(lengths + size)[:-1])) if len(data) else lengths
        parts: list[bytes] = [b""] * (2 * len(data))
        parts[0::2] = [packed[at : at + size] for at in range(0, len(packed), size)]
        parts[1::2] = data
        self.buffer += b"".join(parts)
        self.bytes += len(packed) + int(lengths.sum())
        if len(self.buffer) >= self.FLUSH:
            self.flush()
        return offsets.astype(np.int64)

    def flush(self) -> None:
        if not self.buffer:
            return
        if self.fd < 0:
            self.fd = os.open(self.folder.new_file(".texts"), os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0))
        data = memoryview(self.buffer)
        written = 0
        while written < len(data):
            written += os.pwrite(self.fd, data[written:], self.flushed + written)
        data.release()
        self.flushed += written
        self.buffer = bytearray()

    def read(self, offset: int) -> tuple[int, bytes]:
        """(kind, bytes) of the record at offset."""
        self.read_count += 1
        head = self._HEAD.size
        if offset >= self.flushed:  # still in the buffer
            at = offset - self.flushed
            kind, length = self._HEAD.unpack_from(self.buffer, at)
            return kind, bytes(self.buffer[at + head : at + head + length])
        kind, length = self._HEAD.unpack(os.pread(self.fd, head, offset))  # (flushed whole: records too)
        data = os.pread(self.fd, length, offset + head)
        if len(data) != length:
            raise OSError(f"the kept texts file ended early at {offset + head + len(data):,}")
        return kind, data

    def close(self) -> None:
        self.buffer = bytearray()
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)
