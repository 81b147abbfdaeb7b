"""What k means on your own index: sample pairs at each distance, measure their exact shingle Jaccard.

Pairs come from the neighbours (within max_k) of randomly chosen documents whose text is available
(stored, or the unchanged file at the key's path). For each distance it reports how similar those
pairs really are, and suggests the largest k up to which most sampled pairs reach the threshold.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ..core.shingles import jaccard_of_sets, shingle_set
from ..errors import InvalidArgument, InvalidInput
from ..index import SimhashIndex
from ..store.texts import TextReader
from .explain import estimated_jaccard

DEFAULT_MAX_K = 16
MAX_CALIBRATED_K = 32  # the largest max_k: beyond it, sampled pairs are unrelated texts


@dataclass(frozen=True)
class DistanceRow:
    distance: int
    pairs: int  # sampled pairs at this distance
    mean: float | None  # mean exact Jaccard of those pairs
    low: float | None
    high: float | None
    share_similar: float | None  # share of them with Jaccard >= threshold
    estimated: float  # what the distance suggests (equal-sized sets)


@dataclass(frozen=True)
class Calibration:
    rows: list[DistanceRow]
    threshold: float
    queried: int  # documents whose neighbours were sampled
    without_text: int  # sampled documents skipped for lack of a text
    suggested_k: int | None  # largest k with share_similar >= 0.5 at every sampled distance up to it

    @property
    def pairs(self) -> int:
        return sum(row.pairs for row in self.rows)


def calibrate(
    index: SimhashIndex,
    *,
    max_k: int = DEFAULT_MAX_K,
    per_distance: int = 30,
    max_queries: int = 2000,
    threshold: float = 0.8,
    seed: int = 0,
    on_progress: Callable[[int, int], None] | None = None,
) -> Calibration:
    """Sample up to `per_distance` pairs at each distance 0..max_k and measure them exactly.

    on_progress(done, total): called before each sampled document (total: the most that may be
    sampled; the run ends sooner once every distance has its pairs)."""
    if not 0 <= max_k <= MAX_CALIBRATED_K:
        raise InvalidArgument(f"max_k must be from 0 to {MAX_CALIBRATED_K}, not {max_k}")
    if per_distance < 1 or max_queries < 1:
        raise InvalidArgument("per_distance and max_queries must be at least 1")
    if not 0 < threshold <= 1:
        raise InvalidArgument(f"threshold must be in (0, 1], not {threshold}")
    keys = [k for (k,) in index.conn.execute("SELECT key FROM documents WHERE fingerprint IS NOT NULL")]
    random.Random(seed).shuffle(keys)
    sims: dict[int, list[float]] = {d: [] for d in range(max_k + 1)}
    seen: set[tuple[str, str]] = set()
    shingles: dict[str, object] = {}
    queried = without_text = 0
    texts = TextReader(index)  # one for the run: JSONL sources stay open between keys

    def shingles_of(key):
        if key not in shingles:
            found = texts.row(key)
            text = None if found is None else found[0]
            shingles[key] = None if text is None else shingle_set(text)
        return shingles[key]

    sampled = keys[:max_queries]
    for done, key in enumerate(sampled):
        if on_progress is not None:
            on_progress(done, len(sampled))
        if all(len(v) >= per_distance for v in sims.values()):
            break
        if shingles_of(key) is None:
            without_text += 1
            continue
        queried += 1
        for match in index.near(key=key, k=max_k, check=False):
            pair = (min(key, match.key), max(key, match.key))
            if len(sims[match.distance]) >= per_distance or pair in seen:
                continue
            other = shingles_of(match.key)
            if other is None:
                continue
            seen.add(pair)
            sims[match.distance].append(jaccard_of_sets(shingles_of(key), other))
    if queried == 0:
        raise InvalidInput(
            "no document with a text to compare: calibrate needs an index made with --store-text, "
            "or the indexed files unchanged at their paths"
        )
    rows = []
    for d, values in sims.items():
        n = len(values)
        rows.append(DistanceRow(
            d, n,
            sum(values) / n if n else None,
            min(values) if n else None,
            max(values) if n else None,
            sum(v >= threshold for v in values) / n if n else None,
            estimated_jaccard(d),
        ))
    suggested = None
    for row in rows:
        if row.share_similar is None:  # no pairs at this distance
            continue
        if row.share_similar < 0.5:
            break
        suggested = row.distance
    return Calibration(rows, threshold, queried, without_text, suggested)
