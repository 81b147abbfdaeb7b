"""How the candidates of a check were judged (CheckSummary), and the names of the ways (CHECKED_BY): without
numpy, so that a search that gets its verdicts from the C rule (find/quick_near.py) counts them as the
reference does. The rule itself is verdict.py's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ..core.rule import CERTAIN
from ..core.settings import RECOMMENDED_K


class OneVerdict(Protocol):
    """What count() reads of a verdict.Verdict (a protocol: verdict.py imports this module, not the reverse)."""

    @property
    def keeps(self) -> bool: ...
    @property
    def checked_by(self) -> str: ...
    @property
    def certainty(self) -> float | None: ...


class ManyVerdicts(Protocol):
    """What count_many() reads of a verdict.Verdicts."""

    @property
    def code(self) -> Any: ...
    @property
    def keep(self) -> Any: ...
    @property
    def uncertain(self) -> Any: ...


Judged = TypeVar("Judged", bound=OneVerdict)

CHECKED_BY = ("exact", "estimated", "distance")
EXACT, ESTIMATED, DISTANCE = range(3)  # Verdicts.code: the index into CHECKED_BY


def fallback_k(k: int) -> int:
    """The largest distance at which an unchecked candidate is still kept."""
    return min(k, RECOMMENDED_K)


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

    def count(self, verdict: Judged) -> Judged:
        """Count one verdict (and return it)."""
        self.count_one(verdict.keeps, verdict.checked_by, verdict.certainty)
        return verdict

    def count_one(self, keep: bool, checked_by: str, certainty: float | None) -> None:
        """Count one verdict given by its parts (Verdict's fields)."""
        self.candidates += 1
        if checked_by == "exact":
            self.checked += keep
            self.rejected += not keep
        elif checked_by == "estimated":
            unsure = certainty is None or certainty < CERTAIN  # Verdict.uncertain
            self.estimated += keep
            self.estimate_rejected += not keep
            self.sure += not unsure
            self.uncertain += unsure
        else:
            self.unchecked += keep
            self.too_far += not keep

    def count_many(self, verdicts: ManyVerdicts) -> None:
        """Count verdicts decided together."""
        code, keep = verdicts.code, verdicts.keep
        exact, estimated, distance = code == EXACT, code == ESTIMATED, code == DISTANCE
        unsure = verdicts.uncertain
        import numpy as np  # (here: a search by key counts its verdicts one by one, without numpy)

        self.candidates += len(code)
        self.checked += int(np.count_nonzero(exact & keep))
        self.rejected += int(np.count_nonzero(exact & ~keep))
        self.estimated += int(np.count_nonzero(estimated & keep))
        self.estimate_rejected += int(np.count_nonzero(estimated & ~keep))
        self.sure += int(np.count_nonzero(estimated & ~unsure))
        self.uncertain += int(np.count_nonzero(estimated & unsure))
        self.unchecked += int(np.count_nonzero(distance & keep))
        self.too_far += int(np.count_nonzero(distance & ~keep))
