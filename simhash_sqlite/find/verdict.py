"""The check's rule: when a candidate pair is a near-duplicate (decide(), its Verdicts and how sure each is),
and the counts of how each candidate was judged (exact Jaccard, the sketches' estimate, or distance
alone). One owner for every surface: search, all pairs, clusters, dedup, explain, Spark, the web pages and
SQL, so a pair gets the same Jaccard, the same checked_by and the same certainty wherever it is shown.

The rule, in this order, for a candidate pair (the Jaccard is of 5-shingles of the normalised texts,
core/shingles.py, the normalisation the sketch measures too):
1. the sketch filter: both sketches present, estimate < threshold and certainty >= FILTER_CERTAIN (sure to
   be below the line): not a duplicate, "estimated", and no text is read;
2. both texts at hand (stored texts, short texts' exact data, unchanged files, a query's text): the exact
   Jaccard decides, "exact", certainty 1.0, also where the estimate is sure (where the texts are at hand,
   what is reported is checked against them);
3. else the sketches' estimate decides, with its certainty (core.sketch.certainty: the probability that
   the true Jaccard is on the estimate's side of the threshold), "estimated";
4. else the distance, within min(k, RECOMMENDED_K), "distance".
The loadable extension's near_filter applies the same rule, its numbers generated from core/rule.py;
tests/test_extension_rule.py runs one table of cases through both.
A verdict short of CERTAIN (an estimate, or distance alone) is uncertain: listed apart, and dedup keeps
the document unless asked to drop on it."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..core.rule import CERTAIN, FILTER_CERTAIN
from ..core.settings import CONFIRM_K, DEFAULT_THRESHOLD
from ..core.shingles import jaccard_of_sets
from ..core.sketch import DEFAULT_SCHEME, SketchScheme, certainty, estimate_many, sizes_of
from ..errors import InvalidArgument
from .summary import CHECKED_BY, DISTANCE, ESTIMATED, EXACT, CheckSummary, fallback_k  # noqa: F401 (importable here)


def validate_threshold(threshold: float) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        raise InvalidArgument(f"the Jaccard threshold must be a number above 0 and at most 1, not {threshold!r}")
    return float(threshold)


# CERTAIN (core/rule.py): an estimate this sure is not listed as uncertain. FILTER_CERTAIN: an estimate
# below the threshold this sure drops the pair without reading its texts.


@dataclass(frozen=True)
class Verdict:
    """What the check says of one pair, the same wherever the pair is shown. keeps: a near-duplicate;
    jaccard: the measured (exact) or estimated Jaccard, None when judged by distance; checked_by: "exact",
    "estimated" or "distance"; certainty: the probability that the verdict is right, 1.0 for exact, from
    the sketches' spread for an estimate (sketch.certainty), None (unknown) by distance."""

    keeps: bool
    jaccard: float | None
    checked_by: str
    certainty: float | None

    @property
    def uncertain(self) -> bool:
        """Worth a look before trusting it: an estimate short of CERTAIN, or a verdict by distance alone."""
        return self.certainty is None or self.certainty < CERTAIN


@dataclass
class Verdicts:
    """decide()'s verdicts on many pairs, as arrays: keep, Jaccard (NaN: by distance), how each was checked
    (code: an index into CHECKED_BY), certainty (NaN: unknown, by distance)."""

    keep: np.ndarray
    jaccard: np.ndarray
    code: np.ndarray
    certainty: np.ndarray

    def __len__(self) -> int:
        return len(self.keep)

    @property
    def how(self) -> list[str]:
        return [CHECKED_BY[c] for c in self.code.tolist()]

    @property
    def uncertain(self) -> np.ndarray:
        return ~(self.certainty >= CERTAIN)  # NaN (by distance) is uncertain

    def sure_to_keep(self, drop_uncertain: bool = False) -> np.ndarray:
        """The kept pairs that may drop a document (dedup: when unsure, keep): exact, or at least CERTAIN;
        with drop_uncertain, every kept pair."""
        return self.keep if drop_uncertain else self.keep & ~self.uncertain

    def __getitem__(self, i: int) -> Verdict:
        j, c = float(self.jaccard[i]), float(self.certainty[i])
        return Verdict(bool(self.keep[i]), None if math.isnan(j) else j, CHECKED_BY[int(self.code[i])],
                       None if math.isnan(c) else c)


# Exact Jaccards of some of the pairs: given their positions (sorted), one value each, NaN where a text is
# out of reach. Called once per decide(), with the pairs the sketch filter let through.
ExactJaccards = Callable[[np.ndarray], np.ndarray]


def decide(
    distance: np.ndarray,
    estimate: np.ndarray,
    sure: np.ndarray,
    exact: ExactJaccards | None = None,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    k: int = CONFIRM_K,
) -> Verdicts:
    """The verdicts on candidate pairs by the rule (module docstring). distance: each pair's Hamming
    distance; estimate, sure: the sketches' estimate and its certainty at this threshold (NaN where a sketch
    is missing); exact: the exact Jaccards of the pairs the filter lets through (None: no text at hand,
    or an estimate-only check)."""
    distance = np.asarray(distance, dtype=np.int64)
    estimate = np.asarray(estimate, dtype=np.float64)
    sure = np.asarray(sure, dtype=np.float64)
    sketched = ~np.isnan(estimate)
    filtered = sketched & (estimate < threshold) & (sure >= FILTER_CERTAIN)
    jaccard = estimate.copy()
    certain = np.where(sketched, sure, np.nan)
    code = np.where(sketched, ESTIMATED, DISTANCE).astype(np.int8)
    rest = np.flatnonzero(~filtered)
    if exact is not None and len(rest):
        measured = np.asarray(exact(rest), dtype=np.float64)
        got = ~np.isnan(measured)
        at = rest[got]
        jaccard[at], certain[at], code[at] = measured[got], 1.0, EXACT
    keep = np.where(code == DISTANCE, distance <= fallback_k(k), jaccard >= threshold)
    return Verdicts(keep, jaccard, code, certain)


def judge(
    distance: int,
    *,
    estimate: float | None = None,
    sure: float | None = None,
    exact: Callable[[], float | None] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    k: int = CONFIRM_K,
) -> Verdict:
    """decide() of one pair. estimate, sure: the sketches' estimate and its certainty (None: a sketch
    missing); exact: gives the exact Jaccard, or None where a text is out of reach, called unless the
    sketch filter decides."""

    def measured(_rows: np.ndarray) -> np.ndarray:
        value = None if exact is None else exact()
        return np.array([np.nan if value is None else value])

    verdicts = decide(
        np.array([distance]), np.array([np.nan if estimate is None else estimate]),
        np.array([np.nan if sure is None else sure]), measured, threshold=threshold, k=k,
    )
    return verdicts[0]


def sketch_estimates(
    rows_a: np.ndarray, rows_b: np.ndarray, both: np.ndarray, threshold: float, scheme: SketchScheme = DEFAULT_SCHEME,
    known: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(estimate, certainty) of pairs of sketch rows, NaN where not both have a sketch (both False);
    known: estimates already made (NaN: not yet), e.g. by the sketches' LSH (the same estimate_many)."""
    n = len(both)
    estimate, sure = np.full(n, np.nan), np.full(n, np.nan)
    if both.all():  # the usual case: no copies
        a, b = rows_a, rows_b
    if both.any():
        if not both.all():
            a, b = rows_a[both], rows_b[both]
        given = np.full(len(a), np.nan) if known is None else known[both].astype(np.float64)
        missing = np.isnan(given)
        if missing.any():
            given[missing] = estimate_many(np.ascontiguousarray(a[missing]), np.ascontiguousarray(b[missing]), scheme)
        estimate[both] = given
        sure[both] = certainty(given, threshold, sizes_of(a, scheme), sizes_of(b, scheme), scheme)
    return estimate, sure


def query_estimates(
    row: np.ndarray, rows: np.ndarray, present: np.ndarray, threshold: float, scheme: SketchScheme = DEFAULT_SCHEME
) -> tuple[np.ndarray, np.ndarray]:
    """sketch_estimates() of one sketch row (a query's) against many, NaN where `present` is False."""
    n = len(rows)
    estimate, sure = np.full(n, np.nan), np.full(n, np.nan)
    theirs = rows if present.all() else rows[present]
    if len(theirs):
        mine = np.ascontiguousarray(np.broadcast_to(row, theirs.shape))
        given = estimate_many(mine, np.ascontiguousarray(theirs), scheme)
        estimate[present] = given
        sure[present] = certainty(given, threshold, sizes_of(row[None], scheme)[0], sizes_of(theirs, scheme), scheme)
    return estimate, sure


def estimated(
    a: np.ndarray, b: np.ndarray, threshold: float, scheme: SketchScheme = DEFAULT_SCHEME
) -> tuple[np.ndarray, np.ndarray]:
    """(estimate, certainty) of each pair of sketch rows at this threshold."""
    estimate = estimate_many(a, b, scheme)
    return estimate, certainty(estimate, threshold, sizes_of(a, scheme), sizes_of(b, scheme), scheme)


def certainty_of(estimate, size_a, size_b, threshold: float, scheme: SketchScheme = DEFAULT_SCHEME) -> np.ndarray:
    """sketch.certainty with the arguments in the order bench/certainty.py gives them."""
    return certainty(estimate, threshold, size_a, size_b, scheme)


def sketch_verdict(
    distance: int,
    sketch_a: bytes | None,
    sketch_b: bytes | None,
    texts: Callable[[], tuple[np.ndarray | None, np.ndarray | None]],
    scheme: SketchScheme,
    threshold: float = DEFAULT_THRESHOLD,
    k: int = CONFIRM_K,
) -> Verdict:
    """decide() of one pair from its two stored sketches (None: missing) and texts() (the two shingle
    sets, None where out of reach; read unless the sketch filter decides)."""
    estimate = sure = None
    if sketch_a is not None and sketch_b is not None and len(sketch_a) == len(sketch_b) == scheme.nbytes:
        rows = np.frombuffer(sketch_a + sketch_b, dtype=np.uint8).reshape(2, -1)
        e, c = estimated(rows[:1], rows[1:], threshold, scheme)
        estimate, sure = float(e[0]), float(c[0])

    def exact() -> float | None:
        a, b = texts()
        return None if a is None or b is None else jaccard_of_sets(a, b)

    return judge(distance, estimate=estimate, sure=sure, exact=exact, threshold=threshold, k=k)


def keeps(distance: int, jaccard: float | None, k: int = CONFIRM_K, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """judge() of a pair within k whose Jaccard is known (None: out of reach and no sketch, judged by
    distance within min(k, RECOMMENDED_K)); False beyond k."""
    return distance <= k and judge(distance, exact=lambda: jaccard, threshold=threshold, k=k).keeps
