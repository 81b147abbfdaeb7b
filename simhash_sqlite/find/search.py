"""Exact near-duplicate search over the four 16-bit block columns: plans, their SQL, and running them.

Pigeonhole: if two fingerprints differ in at most k bits, at least one of the four blocks differs in
at most floor(k/4) bits (were all four to differ in more, the total would exceed k). So probing each
block with every 16-bit value within radius floor(k/4) of the query's block, then checking the
candidates' distance, finds every match (multi-index hashing). For k <= 3 the radius is 0 and the
probes are four plain equality lookups. When the probes would touch a large share of the table, a
full scan is cheaper and just as exact.

How a query runs (chosen by measurement, see BENCHMARKS.md, issue 3):
- probes: one statement reads the fingerprint of every candidate from the covering block indexes
  (no table access), numpy computes the distances, and a second statement fetches the rows of the
  matching fingerprints only (an index seek each). A Python hamming() per candidate costs several
  times more than moving the fingerprint, and moving the ids too cost a third more.
- scan: every fingerprint is read once into a numpy array (group_concat, parsed in C) and kept for
  the connection until the index changes; each scan is then one vectorized XOR and popcount, and
  the matches' rows are sought as for the probes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from math import comb
from typing import cast

import apsw
import numpy as np

from ..core.fingerprint import BLOCK_BITS, BLOCKS, to_unsigned
from ..core.rule import PROBE_ROW_NS, PROBE_SEEK_NS, SCAN_LOAD_ROW_NS, SCAN_ROW_NS
from ..core.settings import DEFAULT_THRESHOLD, candidate_k
from ..errors import InvalidArgument
from .match import Match
from .verdict import CheckSummary, validate_threshold

BLOCK_VALUES = 1 << BLOCK_BITS

# The cost model for choosing a plan (core/rule.py: PROBE_SEEK_NS, PROBE_ROW_NS, SCAN_ROW_NS, SCAN_LOAD_ROW_NS,
# nanoseconds measured at 10M random fingerprints; only their ratios matter).

# The check reads each candidate's sketch: a probe plan seeks each match's row, a scan reads every row's
# sketch with its fingerprint and id once per change of the index (bench/near_k.py on 100k pages).
MATCH_ROW_NS = 1_500
CHECK_LOAD_ROW_NS = 900

# Scan when the probes alone would read more than this share of the rows, even with the scan's array
# still to load (plan_for without an index at hand uses this rule only).
SCAN_SHARE = SCAN_LOAD_ROW_NS / PROBE_ROW_NS


@dataclass(frozen=True)
class Plan:
    """How a query for distance <= k runs: "blocks" (equality), "probes" (radius > 0) or "scan"."""

    kind: str
    k: int
    radius: int

    @property
    def probes_per_block(self) -> int:
        return probes_per_block(self.radius)

    def describe(self) -> str:
        if self.kind == "scan":
            return f"full scan (numpy, all fingerprints) with distance <= {self.k}"
        return (
            f"{BLOCKS} block lookups x {self.probes_per_block:,} value(s) within {self.radius} bit(s) "
            f"(covering indexes), then distance <= {self.k}"
        )


@dataclass(frozen=True)
class SearchResult:
    """One query's answer and how it was found: the plan and how many candidates were checked
    (rows whose distance was computed: for probes, block hits counted once per block)."""

    fingerprint: int  # the query's, unsigned
    plan: Plan
    candidates: int
    matches: list[Match] = field(default_factory=list)
    report: CheckSummary | None = None  # how the candidates were checked (None: not checked)
    uncertain: list[Match] = field(default_factory=list)  # the uncertain verdicts, kept or not (Match.keeps)


@dataclass(frozen=True)
class Candidates:
    """The documents within k of a query, as arrays, with what the check needs of them: their sketch rows
    (those without one are zero rows, `present` False) and, where the plan read them, their keys."""

    plan: Plan
    read: int  # rows whose distance was computed (SearchResult.candidates)
    ids: np.ndarray
    values: np.ndarray  # unsigned fingerprints
    rows: np.ndarray  # (n, nbytes) uint8
    present: np.ndarray
    keys: list[str] | None = None  # None: look them up by id


@dataclass(frozen=True)
class SearchOptions:
    """The options of every search (SimhashIndex.search, near, near_many), validated once, here.
    k: the candidate radius (None: CONFIRM_K when checking, RECOMMENDED_K when not); limit: at most
    this many kept matches; check: confirm candidates by Jaccard (find/verdict.py) at threshold;
    plan: None chooses by cost, "index" or "scan" force one (the same answer)."""

    k: int
    limit: int | None
    check: bool
    threshold: float
    plan: Plan | None

    @classmethod
    def of(
        cls, k: int | None = None, limit: int | None = None, check: bool = True,
        threshold: float = DEFAULT_THRESHOLD, plan: str | None = None,
    ) -> SearchOptions:
        k = candidate_k(k, check)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidArgument(f"limit must be a whole number, not negative: {limit!r}")
        return cls(k, limit, bool(check), validate_threshold(threshold), forced_plan(k, plan))


def probes_per_block(radius: int) -> int:
    return sum(comb(BLOCK_BITS, i) for i in range(radius + 1))


def plan_for(
    k: int, rows: int | None = None, candidates: float | None = None, scan_loaded: bool = False, checked: bool = False
) -> Plan:
    """The cheaper exact plan for distance <= k (validated by the caller's entry: SearchOptions, SimhashIndex.plan).

    rows: documents in the index; candidates: the block hits the probes would read (None: assume
    uniform block values); scan_loaded: the scan's array is already in memory; checked: the check reads
    every match's sketch (the probes seek each match's row; the scan reads the sketches with the
    fingerprints). Without rows, the rule is the share of the table the probes would read (SCAN_SHARE).
    """
    radius = k // BLOCKS
    probe_kind = "blocks" if radius == 0 else "probes"
    probes = BLOCKS * probes_per_block(radius)
    if rows is None:
        share = probes / BLOCK_VALUES
        return Plan("scan" if share > SCAN_SHARE else probe_kind, k, radius)
    if candidates is None:
        candidates = probes * rows / BLOCK_VALUES
    probe_cost = probe_cost_ns(probes, candidates)
    load = CHECK_LOAD_ROW_NS if checked else SCAN_LOAD_ROW_NS
    scan_cost = rows * (SCAN_ROW_NS + (0 if scan_loaded else load))
    if checked:
        probe_cost += rows * within_share(k) * MATCH_ROW_NS
    return Plan("scan" if scan_cost < probe_cost else probe_kind, k, radius)


def forced_plan(k: int, choice: str | None) -> Plan | None:
    """None (let the planner choose), or the plan a user forced: "index" or "scan" (k: validated already)."""
    if choice is None:
        return None
    radius = k // BLOCKS
    if choice == "scan":
        return Plan("scan", k, radius)
    if choice == "index":
        return Plan("blocks" if radius == 0 else "probes", k, radius)
    raise InvalidArgument(f"plan must be 'index' or 'scan' (or None to choose), not {choice!r}")


@lru_cache(maxsize=None)
def _probe_plan(k: int) -> Plan:
    radius = k // BLOCKS
    return Plan("blocks" if radius == 0 else "probes", k, radius)


@lru_cache(maxsize=None)
def within_share(k: int) -> float:
    """The share of uniformly random fingerprints within distance k of a query."""
    return sum(comb(64, i) for i in range(k + 1)) / 2.0**64


def probe_cost_ns(probes: int, candidates: float) -> float:
    return probes * PROBE_SEEK_NS + candidates * PROBE_ROW_NS


@lru_cache(maxsize=None)
def _masks(radius: int) -> np.ndarray:
    """Every 16-bit value with at most `radius` bits set (XOR masks), fewest bits first."""
    values = np.arange(BLOCK_VALUES, dtype=np.int64)
    counts = np.bitwise_count(values)
    return values[np.argsort(counts, kind="stable")][: int((counts <= radius).sum())]


def block_neighbours(value: int, radius: int) -> np.ndarray:
    """All 16-bit values within `radius` bits of `value` (int64, for a carray binding)."""
    return np.bitwise_xor(_masks(radius), value)


# -- SQL -------------------------------------------------------------------------------------------

_COLUMNS = "key, fingerprint, hamming(fingerprint, :q) AS distance"
_ORDER = "ORDER BY distance, key LIMIT :limit"


@lru_cache(maxsize=None)
def near_sql(plan: Plan) -> str:
    """Standalone SQL giving the same answer as near() for a plan, to read or reuse. Parameters: :q
    (signed fingerprint), :k, :limit (-1 = all), :exclude (a key to leave out, or NULL), and
    :b0..:b3 (block values, or carray() arrays of them). near() itself runs CANDIDATES_SQL and
    checks distances in numpy, which is faster than calling hamming() for every candidate."""
    if plan.kind == "scan":
        where = "fingerprint IS NOT NULL AND hamming(fingerprint, :q) <= :k"
        return f"SELECT {_COLUMNS} FROM documents\nWHERE {where} AND key IS NOT :exclude\n{_ORDER}"
    if plan.kind == "blocks":
        source = "documents WHERE b{i} = :b{i} AND"
    else:  # a join with the probe values: `b IN carray(...)` builds a temporary index per query
        source = "carray(:b{i}) AS probe JOIN documents ON b{i} = probe.value WHERE"
    lookups = "\n    UNION\n".join(
        f"    SELECT id FROM {source.format(i=i)} hamming(fingerprint, :q) <= :k" for i in range(BLOCKS)
    )
    return f"SELECT {_COLUMNS} FROM documents\nWHERE id IN (\n{lookups}\n) AND key IS NOT :exclude\n{_ORDER}"


def near_params(plan: Plan, fingerprint: int, limit: int | None = None, exclude: str | None = None) -> dict:
    """Named parameters for near_sql(plan)."""
    from ..core.fingerprint import blocks, to_signed

    params: dict[str, object] = {
        "q": to_signed(fingerprint), "k": plan.k, "limit": -1 if limit is None else limit, "exclude": exclude
    }
    if plan.kind != "scan":
        for i, value in enumerate(blocks(fingerprint)):
            params[f"b{i}"] = value if plan.kind == "blocks" else apsw.carray(block_neighbours(value, plan.radius))
    return params


# What near() runs: the candidates' fingerprints from the four covering indexes, as one
# comma-separated string (group_concat), parsed by numpy: several times cheaper than moving each
# row into a Python tuple. Only fingerprints: the few that match find their rows again through the
# (b0, fingerprint) index (KEYS_BY_FINGERPRINT_SQL). The probes join a carray of sorted block values
# (an `IN carray()` list measured up to 40x slower: it builds a temporary index per query).
_UNION = {
    "blocks": "\nUNION ALL\n".join(f"SELECT fingerprint FROM documents WHERE b{i} = ?" for i in range(BLOCKS)),
    "probes": "\nUNION ALL\n".join(
        f"SELECT fingerprint FROM carray(?) AS probe JOIN documents ON b{i} = probe.value" for i in range(BLOCKS)
    ),
}
CANDIDATES_SQL = {
    kind: f"SELECT count(*), group_concat(fingerprint, ',') FROM (\n{union}\n)" for kind, union in _UNION.items()
}
KEYS_BY_FINGERPRINT_SQL = (
    "SELECT id, key, fingerprint FROM carray(?) AS wanted JOIN documents\n"
    "ON documents.b0 = (wanted.value >> 48) & 65535 AND documents.fingerprint = wanted.value"
)
# The check's rows of the matches: id, key, fingerprint and sketch.
ROWS_BY_FINGERPRINT_SQL = (
    "SELECT id, key, fingerprint, sketch FROM carray(?) AS wanted JOIN documents\n"
    "ON documents.b0 = (wanted.value >> 48) & 65535 AND documents.fingerprint = wanted.value"
)
# Every fingerprint, in chunks of ?2 rows after the id ?1 (the ids are not needed: the matches' rows are
# sought by fingerprint, and reading the ids too cost about twice as much).
_SCAN_SQL = (
    "SELECT count(*), max(id), group_concat(fingerprint, ',') FROM "
    "(SELECT id, fingerprint FROM documents WHERE id > ?1 AND fingerprint IS NOT NULL ORDER BY id LIMIT ?2)"
)


def executed_sql(plan: Plan) -> str:
    """The statements near() itself runs for a plan (distances are computed in numpy)."""
    if plan.kind == "scan":
        first = f"-- read every fingerprint, once per change of the index, in chunks:\n{_SCAN_SQL};"
    else:
        first = f"-- candidates' fingerprints from the covering block indexes:\n{CANDIDATES_SQL[plan.kind]};"
    return f"{first}\n-- keys of the matches:\n{KEYS_BY_FINGERPRINT_SQL};"


_BLOCK_COUNTS_SQL = "SELECT b{i}, count(*) FROM documents WHERE b{i} IS NOT NULL GROUP BY b{i}"
_SCAN_CHUNK = 1_000_000  # rows per group_concat while loading the scan array (bounds the string's size)
_SHIFTS = np.array([48, 32, 16, 0], dtype=np.uint64)


def _parts(fingerprint: int) -> tuple[int, int, int, int]:
    return (
        (fingerprint >> 48) & 0xFFFF, (fingerprint >> 32) & 0xFFFF, (fingerprint >> 16) & 0xFFFF, fingerprint & 0xFFFF
    )


class Searcher:
    """Runs searches on one connection, keeping what is worth keeping between queries: the scan's
    array, valid until the index changes (PRAGMA data_version for other connections' commits,
    total_changes() for this one's), and the block value counts."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self._scan: tuple[object, np.ndarray] | None = None  # (token, fingerprints)
        # (token, ids, fingerprints, sketch rows, present): the check's scan, with the sketches
        self._checked: tuple[object, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        # Rows per value of each block (4 x 65536), for planning only: stale counts can cost speed,
        # never exactness, so they are not re-checked on every query.
        self._counts: np.ndarray | None = None
        self._count_lists: list[list[int]] = []
        self._counts_token: object = None
        self._counted_rows = 0

    def _token(self) -> tuple[int, int]:
        return (self.conn.pragma("data_version"), self.conn.total_changes())

    # -- what the planner knows -----------------------------------------------------------------

    def rows(self) -> int:
        """Documents with a fingerprint: exact from the scan array or block counts when loaded,
        else an upper bound that costs one index seek (max(id))."""
        if self._scan is not None and self.scan_loaded():
            return len(self._scan[1])
        if self._counts is not None:
            return self._counted_rows
        return self.conn.execute("SELECT coalesce(max(id), 0) FROM documents").get

    def uniform_candidates(self, k: int) -> float:
        """The block hits a query would read if block values were uniform."""
        return BLOCKS * probes_per_block(k // BLOCKS) * self.rows() / BLOCK_VALUES

    def load_block_counts(self) -> np.ndarray:
        """Count the rows holding each value of each block (one pass over each block index), so the
        planner knows a hot bucket when a query lands in one. Batches do it once they meet one."""
        token = self._token()
        if self._counts is None or self._counts_token != token:
            counts = np.zeros((BLOCKS, BLOCK_VALUES), dtype=np.int64)
            for i in range(BLOCKS):
                for value, count in self.conn.execute(_BLOCK_COUNTS_SQL.format(i=i)):
                    counts[i, value] = count
            self._counts, self._count_lists, self._counts_token = counts, counts.tolist(), token
            self._counted_rows = int(counts[0].sum())
        return self._counts

    def needs_fingerprint(self) -> bool:
        """Whether plan() depends on the query's fingerprint: the block counts are loaded (a batch met a hot
        bucket), so a query's own buckets decide."""
        return self._counts is not None

    def plan(self, k: int, fingerprint: int | None = None, checked: bool = False) -> Plan:
        """The plan near() uses for this k (and, when block counts are loaded, this fingerprint); checked:
        for a checked search (within(), which reads the matches' sketches too)."""
        radius = k // BLOCKS
        if radius <= 1 and self._counts is None and self._scan is None and self._checked is None:
            # Probes read at most 4 x 17 / 65,536 of the rows (uniform blocks): no need to ask the
            # index anything; a scan could only win on a tiny index, where both are instant.
            return _probe_plan(k)
        candidates = None
        if self._counts is not None and fingerprint is not None:
            parts = _parts(fingerprint)
            if radius == 0:
                candidates = sum(self._count_lists[i][value] for i, value in enumerate(parts))
            else:
                candidates = int(
                    sum(self._counts[i][block_neighbours(value, radius)].sum() for i, value in enumerate(parts))
                )
        loaded = self.checked_loaded() if checked else self.scan_loaded()
        return plan_for(k, self.rows(), candidates, loaded, checked)

    # -- running --------------------------------------------------------------------------------

    def search(
        self, fingerprint: int, k: int, limit: int | None = None, exclude: str | None = None, plan: Plan | None = None
    ) -> SearchResult:
        if plan is None:
            plan = self.plan(k, fingerprint)
        q = np.uint64(fingerprint)
        if plan.kind == "scan":
            fps = self._scan_array()
        else:
            parts = _parts(fingerprint)
            bindings: tuple[int, ...] | list[apsw.CArrayBinding] = parts
            if plan.kind == "probes":
                bindings = [apsw.carray(np.sort(block_neighbours(value, plan.radius))) for value in parts]
            count, fps_text = self.conn.execute(CANDIDATES_SQL[plan.kind], bindings).get
            if not count:
                return SearchResult(fingerprint, plan, 0, [])
            fps = np.fromstring(fps_text, dtype=np.int64, sep=",").view(np.uint64)
        candidates = len(fps)
        # Sorted and deduplicated: a match found through several blocks, or shared by several rows, is sought
        # once (not np.unique, which imports numpy.ma on first use: a cost of every simq near).
        wanted = np.sort(fps[np.bitwise_count(fps ^ q) <= k])
        if len(wanted) > 1:
            wanted = wanted[np.concatenate(([True], wanted[1:] != wanted[:-1]))]
        wanted = wanted.view(np.int64)
        rows = self.conn.execute(KEYS_BY_FINGERPRINT_SQL, (apsw.carray(wanted),)) if len(wanted) else ()
        matches = []
        for _id, key, stored in rows:
            if key != exclude:
                unsigned = to_unsigned(stored)
                matches.append(Match(key, unsigned, (unsigned ^ fingerprint).bit_count()))
        matches.sort(key=lambda m: (m.distance, m.key))
        if limit is not None:
            matches = matches[:limit]
        return SearchResult(fingerprint, plan, candidates, matches)

    def within(
        self, fingerprint: int, k: int, nbytes: int, exclude: str | None = None, plan: Plan | None = None
    ) -> Candidates:
        """The documents within k of the fingerprint (but `exclude`) as arrays, with their sketch rows
        (nbytes: the index's sketch size): what a checked search judges, in bulk."""
        if plan is None:
            plan = self.plan(k, fingerprint, checked=True)
        q = np.uint64(fingerprint)
        if plan.kind == "scan":
            ids, values, rows, present = self.checked_arrays(nbytes)
            at = np.flatnonzero(np.bitwise_count(values ^ q) <= k)
            if exclude is not None and len(at):
                mine = self.conn.execute("SELECT id FROM documents WHERE key = ?", (exclude,)).get
                at = at[ids[at] != mine] if mine is not None else at
            return Candidates(plan, len(values), ids[at], values[at], rows[at], present[at])
        parts = _parts(fingerprint)
        bindings: tuple[int, ...] | list[apsw.CArrayBinding] = parts
        if plan.kind == "probes":
            bindings = [apsw.carray(np.sort(block_neighbours(value, plan.radius))) for value in parts]
        count, fps_text = self.conn.execute(CANDIDATES_SQL[plan.kind], bindings).get
        fps = np.fromstring(fps_text, dtype=np.int64, sep=",").view(np.uint64) if count else np.zeros(0, np.uint64)
        wanted = np.unique(fps[np.bitwise_count(fps ^ q) <= k]).view(np.int64)
        found = self.conn.execute(ROWS_BY_FINGERPRINT_SQL, (apsw.carray(wanted),)).fetchall() if len(wanted) else []
        found = [row for row in found if row[1] != exclude]
        rows = np.zeros((len(found), nbytes), dtype=np.uint8)
        present = np.zeros(len(found), dtype=bool)
        for n, (_, _, _, sketch) in enumerate(found):
            if isinstance(sketch, bytes) and len(sketch) == nbytes:
                rows[n] = np.frombuffer(sketch, dtype=np.uint8)
                present[n] = True
        ids = np.array([row[0] for row in found], dtype=np.int64)
        values = np.array([row[2] for row in found], dtype=np.int64).view(np.uint64)
        return Candidates(plan, len(fps), ids, values, rows, present, [cast(str, row[1]) for row in found])

    def checked_loaded(self) -> bool:
        return self._checked is not None and self._checked[0] == self._token()

    def checked_arrays(self, nbytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ids, unsigned fingerprints, sketch rows, which have a sketch) of every document with a fingerprint,
        read in one pass and kept until the index changes (8 + 8 + nbytes bytes a document)."""
        token = self._token()
        if self._checked is None or self._checked[0] != token or self._checked[3].shape[1] != nbytes:
            self._checked = None
            with self.conn:  # one snapshot
                count = self.conn.execute("SELECT count(*) FROM documents WHERE fingerprint IS NOT NULL").get
                buffer = bytearray(count * nbytes)
                ids = np.empty(count, dtype=np.int64)
                values = np.empty(count, dtype=np.int64)
                present = np.zeros(count, dtype=bool)
                n = -1
                for n, (i, f, sketch) in enumerate(self.conn.execute(
                    "SELECT id, fingerprint, sketch FROM documents WHERE fingerprint IS NOT NULL ORDER BY id"
                )):
                    if n >= count:
                        raise RuntimeError("reading the fingerprints for a scan went wrong (counts differ)")
                    ids[n], values[n] = i, f
                    if sketch is not None and len(sketch) == nbytes:
                        buffer[n * nbytes : (n + 1) * nbytes] = sketch
                        present[n] = True
                if n + 1 != count:
                    raise RuntimeError("reading the fingerprints for a scan went wrong (counts differ)")
            rows = np.frombuffer(buffer, dtype=np.uint8).reshape(count, nbytes)
            self._checked = (token, ids, values.view(np.uint64), rows, present)
        return self._checked[1], self._checked[2], self._checked[3], self._checked[4]

    def scan_loaded(self) -> bool:
        return self._scan is not None and self._scan[0] == self._token()

    def load_cost_ns(self, checked: bool = False) -> float:
        """What reading the scan array (checked: with the sketches) would cost (the planner's estimate)."""
        return self.rows() * (CHECK_LOAD_ROW_NS if checked else SCAN_LOAD_ROW_NS)

    def load_scan(self) -> None:
        """Read every fingerprint into the scan array now (kept until the index changes)."""
        self._scan_array()

    def _scan_array(self) -> np.ndarray:
        token = self._token()
        if self._scan is None or self._scan[0] != token:
            self._scan = None  # let the old array go before reading the new one
            parts, last = [], -(1 << 63)
            while True:
                count, last, text = self.conn.execute(_SCAN_SQL, (last, _SCAN_CHUNK)).get
                if not count:
                    break
                parts.append(np.fromstring(text, dtype=np.int64, sep=","))
                if len(parts[-1]) != count:
                    raise RuntimeError("reading the fingerprints for a scan went wrong (lengths differ)")
            fps = np.concatenate(parts).view(np.uint64) if parts else np.zeros(0, np.uint64)
            self._scan = (token, fps)
        return self._scan[1]
