"""An index's fingerprints as numpy arrays, and its near-duplicate pairs with keys."""

from __future__ import annotations

from dataclasses import dataclass

import apsw
import numpy as np

from ..core.features import distinct
from ..core.fingerprint import similarity


@dataclass(frozen=True)
class DuplicatePair:
    """Two indexed documents within distance k; `first` was added before `second` (lower id).
    `jaccard`, `checked_by`, `certainty` and `keeps` as in search.Match."""

    first: str
    second: str
    distance: int
    jaccard: float | None = None
    checked_by: str | None = None
    certainty: float | None = None
    keeps: bool = True  # the verdict: False only among DuplicateSearch(uncertain=True)'s pairs

    @property
    def similarity(self) -> float:
        return similarity(self.distance)


@dataclass(frozen=True)
class FingerprintArrays:
    """The documents that have a fingerprint, in id order: ids and unsigned fingerprints."""

    ids: np.ndarray  # int64
    values: np.ndarray  # uint64


def load_fingerprints(conn: apsw.Connection) -> FingerprintArrays:
    """Every stored fingerprint, read in one transaction so ids and values agree."""
    with conn:  # a savepoint: both reads see the same snapshot
        count = conn.execute("SELECT count(fingerprint) FROM documents").get
        ids = np.fromiter(
            (i for (i,) in conn.execute("SELECT id FROM documents WHERE fingerprint IS NOT NULL ORDER BY id")),
            dtype=np.int64,
            count=count,
        )
        values = np.fromiter(
            (f for (f,) in conn.execute("SELECT fingerprint FROM documents WHERE fingerprint IS NOT NULL ORDER BY id")),
            dtype=np.int64,
            count=count,
        ).view(np.uint64)
    return FingerprintArrays(ids, values)


def keys_of(conn: apsw.Connection, ids: np.ndarray) -> dict[int, str]:
    """The keys of these document ids, by id."""
    wanted = distinct(ids)
    if len(wanted) == 0:  # carray refuses an empty array
        return {}
    return dict(conn.execute("SELECT id, key FROM documents WHERE id IN carray(?)", (apsw.carray(wanted),)))
