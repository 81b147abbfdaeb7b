"""Keep-first deduplication of a stream: each document is kept unless it is within k of a document
kept before it (or of one in an existing index), in input order.

Fingerprints are made on every core as in add() (parallel.FingerprintJob): the next batch's are under
way in the pool while this process decides the current one, so the sequential decisions overlap the
fingerprinting. The decisions depend only on the fingerprints and the order, so the output is the same
for any number of processes.

The kept fingerprints live in memory in an exact multi-index for any k (KeptSet): sorted runs, each
with the Manku tables of pairs.py, merged like a binary counter so there are O(log n) runs and every
fingerprint is re-sorted O(log n) times. Documents are fingerprinted and checked a batch at a time:
the batch against the kept runs with numpy searchsorted, then within the batch (near_pairs), then a
short sequential pass decides keep or drop in input order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from .block_tables import choose_tables
from .errors import SettingsMismatch
from .fingerprint import check_k, to_hex
from .index import Document, SimhashIndex
from .index_arrays import keys_of, load_fingerprints
from .pairs import CHUNK, near_pairs, sorted_by
from .parallel import FingerprintJob
from .settings import FingerprintSettings

BATCH = 2000
NO_MATCH = np.iinfo(np.int64).max


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
        self.k = check_k(k)
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

    def closest(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each query, (label, distance) of the closest kept fingerprint within k, ties to the
        lowest label; distance k + 1 (and label NO_MATCH) when there is none."""
        best_distance = np.full(len(queries), self.k + 1, dtype=np.int64)
        best_label = np.full(len(queries), NO_MATCH, dtype=np.int64)
        for run in self.runs:
            for q, position in run.candidates(queries):
                d = np.bitwise_count(queries[q] ^ run.values[position]).astype(np.int64)
                close = d <= self.k
                q, d, label = q[close], d[close], run.labels[position[close]]
                if len(q) == 0:
                    continue
                # Best per query in this chunk: sort by (query, distance, label), take the first.
                order = np.lexsort((label, d, q))
                q, d, label = q[order], d[order], label[order]
                first = np.concatenate(([True], q[1:] != q[:-1]))
                q, d, label = q[first], d[first], label[first]
                better = (d < best_distance[q]) | ((d == best_distance[q]) & (label < best_label[q]))
                best_distance[q[better]] = d[better]
                best_label[q[better]] = label[better]
        return best_label, best_distance


@dataclass(frozen=True)
class Decision:
    """What happened to one input document. duplicate_of is the key of the closest earlier kept
    document (or indexed one, with --against) within k; None when kept."""

    document: Document
    raw: bytes | None  # the JSONL line it came from, passed through unchanged
    fingerprint: int | None
    duplicate_of: str | None = None
    distance: int | None = None

    @property
    def kept(self) -> bool:
        return self.duplicate_of is None

    def output_line(self, text_field: str = "text", id_field: str = "id") -> bytes:
        """The record to write: the input line byte for byte, or a JSON object for a text file."""
        if self.raw is not None:
            return self.raw.rstrip(b"\r\n") + b"\n"
        record = {id_field: self.document.key, text_field: self.document.text}
        return json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"

    def dupe_line(self) -> bytes:
        record = {
            "key": self.document.key,
            "duplicate_of": self.duplicate_of,
            "distance": self.distance,
            "fingerprint": None if self.fingerprint is None else to_hex(self.fingerprint),
        }
        return json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"


@dataclass
class DedupReport:
    read: int = 0
    kept: int = 0
    dropped: int = 0
    without_features: int = 0  # kept: a text with no features matches nothing
    against: int = 0  # fingerprints loaded from the existing index
    characters: int = 0
    fingerprint_seconds: float = 0.0
    search_seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started


class Deduplicator:
    """Keep-first filter. `against`: an index whose documents count as kept before the input (they
    are never output); its fingerprint settings are used. Feed run() (Document, raw line or None)
    pairs, e.g. from Reader.entries(); `report` counts as it goes."""

    def __init__(
        self,
        k: int = 3,
        settings: FingerprintSettings | None = None,
        *,
        against: SimhashIndex | None = None,
        batch_size: int = BATCH,
    ) -> None:
        self.k = check_k(k)
        if against is not None and settings is not None and settings != against.settings:
            raise SettingsMismatch(
                f"{against.path} was built with {against.settings.describe()}; fingerprints made with "
                f"{settings.describe()} would never match it"
            )
        self.settings = against.settings if against is not None else settings or FingerprintSettings()
        self.batch_size = batch_size
        self.kept = KeptSet(self.k)
        self.report = DedupReport()
        self.keys: list[str] = []  # label -> key of documents kept from the input
        self.against = against
        self.against_ids = np.empty(0, dtype=np.int64)
        if against is not None:
            stored = load_fingerprints(against.conn)
            self.against_ids = stored.ids
            # Labels below zero are indexed documents: -1 - label is their position in against_ids.
            self.kept.add(stored.values, -1 - np.arange(len(stored.ids), dtype=np.int64))
            self.report.against = len(stored.ids)

    def run(self, entries: Iterable[tuple[Document, bytes | None]]) -> Iterator[Decision]:
        # A pipeline of two batches, as in SimhashIndex.add(): the next batch is handed to the pool
        # before this one is decided, and this process fingerprints the next batch's chunks while the
        # workers finish this one's. Memory holds two batches, whatever the input's size.
        pending: tuple[list[tuple[Document, bytes | None]], FingerprintJob] | None = None
        batch: list[tuple[Document, bytes | None]] = []
        for entry in entries:
            batch.append(entry)
            if len(batch) >= self.batch_size:
                started = self._start(batch, pending is not None)
                if pending is not None:
                    yield from self._decide(pending[0], self._fingerprints(pending[1], started))
                pending, batch = (batch, started), []
        started = self._start(batch, pending is not None) if batch else None
        if pending is not None:
            yield from self._decide(pending[0], self._fingerprints(pending[1], started))
        if started is not None:
            yield from self._decide(batch, self._fingerprints(started, None))

    def _start(self, batch: list[tuple[Document, bytes | None]], start_pool: bool) -> FingerprintJob:
        """The batch's fingerprints, under way. The first batch does not start the pool (a short input
        is done before a worker is ready), later ones use it when it pays (parallel.py)."""
        return FingerprintJob([document.text for document, _ in batch], self.settings, start_pool=start_pool)

    def _fingerprints(self, job: FingerprintJob, meanwhile: FingerprintJob | None) -> list[int | None]:
        started = time.perf_counter()
        prints = job.result(meanwhile)
        self.report.fingerprint_seconds += time.perf_counter() - started
        return prints

    def _decide(self, batch: list[tuple[Document, bytes | None]], prints: list[int | None]) -> list[Decision]:
        """Keep or drop each document of the batch, in order; prints: their fingerprints."""
        searching = time.perf_counter()
        have = [i for i, fp in enumerate(prints) if fp is not None]
        values = np.array([prints[i] for i in have], dtype=np.uint64)
        label, distance = self.kept.closest(values) if len(values) else (np.empty(0, np.int64),) * 2
        # Earlier batch members within k of each member: (earlier, distance) lists.
        earlier: dict[int, list[tuple[int, int]]] = {}
        for part in near_pairs(values, self.k):
            for a, b, d in zip(part.left.tolist(), part.right.tolist(), part.distance.tolist()):
                earlier.setdefault(b, []).append((d, a))
        match: dict[int, tuple[int, int]] = {}  # member -> (distance, label) of what it duplicates
        kept_labels: dict[int, int] = {}  # kept member -> its label
        new_values, new_labels = [], []
        for j in range(len(have)):
            options = [(int(distance[j]), int(label[j]))] if distance[j] <= self.k else []
            options += [(d, kept_labels[a]) for d, a in earlier.get(j, ()) if a in kept_labels]
            if options:
                # Closest first; on a tie the earlier label (indexed documents are the earliest).
                match[j] = min(options)
            else:
                kept_labels[j] = len(self.keys)
                self.keys.append(batch[have[j]][0].key)
                new_values.append(values[j])
                new_labels.append(kept_labels[j])
        self.kept.add(np.array(new_values, dtype=np.uint64), np.array(new_labels, dtype=np.int64))
        names = self._indexed_keys([lab for _, lab in match.values() if lab < 0])
        self.report.search_seconds += time.perf_counter() - searching
        position = {i: j for j, i in enumerate(have)}
        out = []
        for i, ((document, raw), fp) in enumerate(zip(batch, prints)):
            j = position.get(i)
            if j is not None and j in match:
                d, lab = match[j]
                out.append(Decision(document, raw, fp, names[lab] if lab < 0 else self.keys[lab], d))
                self.report.dropped += 1
            else:
                out.append(Decision(document, raw, fp))
                self.report.kept += 1
                self.report.without_features += fp is None
            self.report.characters += len(document.text)
        self.report.read += len(batch)
        return out

    def _indexed_keys(self, labels: list[int]) -> dict[int, str]:
        if not labels:
            return {}
        ids = self.against_ids[[-1 - lab for lab in labels]]
        found = keys_of(self.against.conn, ids)
        return {lab: found[int(i)] for lab, i in zip(labels, ids)}


def dedup(
    entries: Iterable[tuple[Document, bytes | None]] | Iterable[Document],
    k: int = 3,
    settings: FingerprintSettings | None = None,
    *,
    against: SimhashIndex | None = None,
) -> Iterator[Decision]:
    """Keep-first deduplication of documents (or (document, raw line) pairs) in their order."""
    pairs = ((e, None) if isinstance(e, Document) else e for e in entries)
    return Deduplicator(k, settings, against=against).run(pairs)
