"""A document found near a query (Match): without numpy, so that a search whose verdicts come from the C rule
(find/quick_near.py) answers with the same objects as the reference (search.py re-exports it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Match:
    """A document found near a query. `checked_by` says how it was judged: "exact" (Jaccard of the
    texts), "estimated" (Jaccard estimated from the stored sketches: sure, or no text at hand), "distance"
    (neither at hand: kept by distance alone), or None (the check was turned off)."""

    key: str
    fingerprint: int  # unsigned
    distance: int
    jaccard: float | None = None  # the Jaccard the check measured or estimated (None: by distance)
    checked_by: str | None = None
    certainty: float | None = None  # how sure the verdict is (check.Verdict); None: by distance, or unchecked
    keeps: bool = True  # the verdict: a near-duplicate (only SearchResult.uncertain holds others)

    @property
    def similarity(self) -> float:
        return 1.0 - self.distance / 64  # core.fingerprint.similarity (which imports numpy)
