"""The check's rule: when a candidate pair is a near-duplicate (judge(), its Verdict and how sure it is),
and the counts of how each candidate was judged (exact Jaccard, the sketches' estimate, or distance
alone). One rule for every surface: search, all pairs, clusters, dedup, explain, the web pages and SQL,
so a pair gets the same Jaccard, the same checked_by and the same certainty wherever it is shown.

The rule, in this order (issue 33; the loadable extension's near_filter applies the same, its numbers
generated from core/rule.py, and tests/test_rule_cases.py runs one table of cases through both):
1. the sketches filter: an estimate from both sketches below the threshold with certainty >=
   FILTER_CERTAIN (core.sketch.certainty: the probability that the true Jaccard is on the estimate's side
   of the threshold) drops the pair without reading a text, checked_by "estimated";
2. where both texts are at hand, the exact Jaccard (of the normalized texts' 5-shingles) decides, always,
   also over a sure estimate: checked_by "exact", certainty 1.0;
3. else the sketches' estimate decides, with its certainty;
4. else the distance, within min(k, RECOMMENDED_K)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..core.rule import CERTAIN, FILTER_CERTAIN
from ..core.settings import CONFIRM_K, DEFAULT_THRESHOLD, RECOMMENDED_K
from ..core.shingles import jaccard_of_sets
from ..core.sketch import DEFAULT_SCHEME, SketchScheme, certainty, estimate_many, sizes_of
from ..errors import InvalidArgument


def validate_threshold(threshold: float) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        raise InvalidArgument(f"the Jaccard threshold must be a number above 0 and at most 1, not {threshold!r}")
    return float(threshold)


def fallback_k(k: int) -> int:
    """The largest distance at which an unchecked candidate is still kept."""
    return min(k, RECOMMENDED_K)


# CERTAIN (core/rule.py): an estimate this sure is not listed as uncertain. FILTER_CERTAIN: an estimate
# below the threshold this sure drops the pair without reading its texts.
CHECKED_BY = ("exact", "estimated", "distance")


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


def judge(
    distance: int,
    *,
    estimate: float | None = None,
    sure: float | None = None,
    exact: Callable[[], float | None] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    k: int = CONFIRM_K,
    short: bool = False,
) -> Verdict:
    """The verdict on a candidate pair (the rule above). estimate, sure: the sketches' estimate and its
    certainty (None: a sketch missing); exact: gives the exact Jaccard, or None where a text is out of
    reach, called unless the sketches filter the pair out. short (both are short texts whose exact data
    the index keeps) no longer changes the verdict: their texts are at hand, so exact() decides."""
    if estimate is not None and sure is not None and estimate < threshold and sure >= FILTER_CERTAIN:
        return Verdict(False, estimate, "estimated", sure)
    measured = None if exact is None else exact()
    if measured is not None:
        return Verdict(measured >= threshold, measured, "exact", 1.0)
    if estimate is not None:
        return Verdict(estimate >= threshold, estimate, "estimated", sure)
    return Verdict(distance <= fallback_k(k), None, "distance", None)


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
    short: bool = False,
) -> Verdict:
    """judge() of one pair from its two stored sketches (None: missing) and texts() (the two shingle
    sets, None where out of reach; read only when the estimate is missing or unsure, or short)."""
    estimate = sure = None
    if sketch_a is not None and sketch_b is not None and len(sketch_a) == len(sketch_b) == scheme.nbytes:
        rows = np.frombuffer(sketch_a + sketch_b, dtype=np.uint8).reshape(2, -1)
        e, c = estimated(rows[:1], rows[1:], threshold, scheme)
        estimate, sure = float(e[0]), float(c[0])

    def exact() -> float | None:
        a, b = texts()
        return None if a is None or b is None else jaccard_of_sets(a, b)

    return judge(distance, estimate=estimate, sure=sure, exact=exact, threshold=threshold, k=k, short=short)


def keeps(distance: int, jaccard: float | None, k: int = CONFIRM_K, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """judge() of a pair within k whose Jaccard is known (None: out of reach and no sketch, judged by
    distance within min(k, RECOMMENDED_K)); False beyond k."""
    return distance <= k and judge(distance, exact=lambda: jaccard, threshold=threshold, k=k).keeps


@dataclass
class CheckSummary:
    """How the candidates were judged. Counts grow while results are consumed."""

    k: int
    threshold: float
    candidates: int = 0  # within k (or found by the sketches' LSH tables)
    checked: int = 0  # kept: exact Jaccard >= threshold
    rejected: int = 0  # dropped: exact Jaccard < threshold
    estimated: int = 0  # kept: the sketches' estimate >= threshold (sure, or a text out of reach)
    estimate_rejected: int = 0  # dropped: the estimate < threshold
    unchecked: int = 0  # kept by distance <= fallback_k: a text and a sketch out of reach
    too_far: int = 0  # dropped: no text, no sketch, and the distance > fallback_k
    sure: int = 0  # of the estimated (kept or dropped): certainty >= CERTAIN, no text read
    uncertain: int = 0  # of the estimated (kept or dropped): certainty < CERTAIN, the texts out of reach
    without_query_text: int = 0  # of the unchecked and too_far: the query was a bare fingerprint (no text)
    check_seconds: float = 0.0  # reading texts, shingling, Jaccard
    candidates_from: str = "fingerprint"  # "fingerprint": pairs within k; "sketch": the sketches' LSH tables

    COUNTS = ("candidates", "checked", "rejected", "estimated", "estimate_rejected", "unchecked", "too_far",
              "sure", "uncertain", "without_query_text", "check_seconds")

    @property
    def fallback_k(self) -> int:
        return fallback_k(self.k)

    @property
    def kept(self) -> int:
        return self.checked + self.estimated + self.unchecked

    @property
    def found_by(self) -> str:
        """How the candidates were made, in words."""
        return "found by the sketches' LSH tables" if self.candidates_from == "sketch" else f"within distance {self.k}"

    def restart(self) -> None:
        for name in self.COUNTS:
            setattr(self, name, 0)

    def add(self, other: CheckSummary) -> None:
        for name in self.COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def count(self, verdict: Verdict) -> Verdict:
        """Count one verdict (and return it)."""
        self.candidates += 1
        keep = verdict.keeps
        if verdict.checked_by == "exact":
            self.checked += keep
            self.rejected += not keep
        elif verdict.checked_by == "estimated":
            self.estimated += keep
            self.estimate_rejected += not keep
            self.sure += not verdict.uncertain
            self.uncertain += verdict.uncertain
        else:
            self.unchecked += keep
            self.too_far += not keep
        return verdict

    def count_sure(self, keep: np.ndarray) -> None:
        """Count sure estimated verdicts decided together (keep: each one's)."""
        kept = int(np.count_nonzero(keep))
        self.candidates += len(keep)
        self.estimated += kept
        self.estimate_rejected += len(keep) - kept
        self.sure += len(keep)
