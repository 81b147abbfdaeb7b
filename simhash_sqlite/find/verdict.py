"""The check's rule: when a candidate pair within k is a near-duplicate, and the counts of how each
candidate was judged (exact Jaccard, the sketches' estimate, or distance alone). One rule for every
surface: search, all pairs, clusters, dedup, explain, the web pages and SQL."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.settings import CONFIRM_K, DEFAULT_THRESHOLD, RECOMMENDED_K
from ..core.shingles import jaccard_of_sets
from ..errors import InvalidInput


def validate_threshold(threshold: float) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        raise InvalidInput(f"the Jaccard threshold must be a number above 0 and at most 1, not {threshold!r}")
    return float(threshold)


def fallback_k(k: int) -> int:
    """The largest distance at which an unchecked candidate is still kept."""
    return min(k, RECOMMENDED_K)


def keeps(distance: int, jaccard: float | None, k: int = CONFIRM_K, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """The rule: a pair within k is a near-duplicate iff its exact Jaccard is >= threshold, or, when
    the Jaccard is unknown (a text out of reach), iff it is within min(k, RECOMMENDED_K)."""
    if distance > k:
        return False
    return distance <= fallback_k(k) if jaccard is None else jaccard >= threshold


@dataclass
class CheckSummary:
    """How the candidates were judged. Counts grow while results are consumed."""

    k: int
    threshold: float
    candidates: int = 0  # within k (or found by the sketches' LSH tables)
    checked: int = 0  # kept: exact Jaccard >= threshold
    rejected: int = 0  # dropped: exact Jaccard < threshold
    estimated: int = 0  # kept: a text out of reach, the sketches' estimate >= threshold
    estimate_rejected: int = 0  # dropped: a text out of reach, the estimate < threshold
    unchecked: int = 0  # kept by distance <= fallback_k: a text and a sketch out of reach
    too_far: int = 0  # dropped: no text, no sketch, and the distance > fallback_k
    without_query_text: int = 0  # of the unchecked and too_far: the query was a bare fingerprint (no text)
    check_seconds: float = 0.0  # reading texts, shingling, Jaccard
    candidates_from: str = "fingerprint"  # "fingerprint": pairs within k; "sketch": the sketches' LSH tables

    @property
    def fallback_k(self) -> int:
        return fallback_k(self.k)

    @property
    def kept(self) -> int:
        return self.checked + self.estimated + self.unchecked

    def judge(
        self, distance: int, a: np.ndarray | None, b: np.ndarray | None, estimate: float | None = None
    ) -> tuple[bool, float | None, str]:
        """(keep?, Jaccard or None, how: "exact", "estimated" or "distance"), counted. a, b: the shingle
        sets (None: text out of reach); estimate: from the two sketches (None: a sketch missing)."""
        self.candidates += 1
        if a is not None and b is not None:
            similarity = jaccard_of_sets(a, b)
            keep = keeps(distance, similarity, self.k, self.threshold)
            self.checked += keep
            self.rejected += not keep
            return keep, similarity, "exact"
        if estimate is not None:
            keep = keeps(distance, estimate, self.k, self.threshold)
            self.estimated += keep
            self.estimate_rejected += not keep
            return keep, estimate, "estimated"
        keep = keeps(distance, None, self.k, self.threshold)
        self.unchecked += keep
        self.too_far += not keep
        return keep, None, "distance"
