"""Reviewing near-duplicates: the pairs to label, the threshold the labels recommend, the labels
honoured by dupes and clusters, and the list of what to delete.

- population(): the candidate pairs dupes finds down to a low Jaccard (FLOOR), each with the Jaccard
  the check gives it (exact, or estimated from the sketches) and its distance.
- draw_sample(): a stratified sample of them (Jaccard band x distance band), the bands near the
  threshold over-sampled, ordered so that any first part of it is spread over every stratum.
- calibrate_labels(): precision, recall and F1 per threshold over every candidate pair, each counted
  by the chance that a pair of its Jaccard is a duplicate (a logistic fit of the labels, so labels made
  anywhere count, not only the sample's), the recommended threshold (best F1) and its intervals, once
  the labels can support one (LEAST_EACH of each kind).
- HonouredPairs: dupes() without the pairs labelled "not a duplicate" (clusters.py keeps them apart).
- deletions(): from the clusters table, every member to delete with the key kept in its place.

Functions of an open SimhashIndex (passed in; this module sits below it).
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import apsw
import numpy as np

from ..core.fingerprint import hamming, to_unsigned
from ..core.settings import DEFAULT_THRESHOLD
from ..errors import InvalidInput
from ..store.labels import (
    DUPLICATE,
    NOT_DUPLICATE,
    UNSURE,
    Label,
    apart_ids,
    apart_keys,
    keeper_keys,
    labels_of,
    pair_of,
    read_labels,
)
from .check import DuplicateSearch, ShingleCache
from .clusters import clustering_info, read_clusters
from .verdict import sketch_verdict

BITS = 64  # the distance given to a pair without fingerprints (as far as two fingerprints can be)
FLOOR = 0.5  # the population: candidate pairs whose Jaccard is at least this
# Strata: Jaccard bands (narrow near the usual thresholds) by distance bands.
JACCARD_EDGES = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
DISTANCE_EDGES = (0, 4, 10)
SAMPLE_SIZE = 200
MIN_PER_STRATUM = 2
UNCERTAIN = 0.1  # bands within this of the threshold are sampled UNCERTAIN_WEIGHT times as densely
UNCERTAIN_WEIGHT = 3.0
STEP = 0.01  # thresholds evaluated: FLOOR, FLOOR + STEP, ..., 1
BOOTSTRAP = 200
# Below this many labels the bootstrap interval (strata of one or two labels vary little when resampled)
# understates the uncertainty: the CLI and the page say so.
FEW_LABELS = 50
# No threshold is recommended until there are this many labels of each kind (duplicate, not a duplicate):
# the S curve has two parameters and, by the usual rule for a logistic fit (about ten of the rarer
# outcome per fitted slope), cannot place its step with fewer; all-duplicate labels place it nowhere
# (16 of them once "recommended" 0.50, interval 0.50-0.50).
LEAST_EACH = 10
CONFIDENCE = 0.90  # of every interval


@dataclass(frozen=True)
class ScoredPair:
    first: str  # sorted keys, as labels name them
    second: str
    distance: int | None
    jaccard: float | None  # as the check gives it; None: judged by distance alone (no text, no sketch)
    checked_by: str  # exact, estimated, distance

    @property
    def stratum(self) -> tuple[int, int] | None:
        return stratum_of(self.jaccard, self.distance)


def stratum_of(jaccard: float | None, distance: int | None) -> tuple[int, int] | None:
    """(Jaccard band, distance band), or None below FLOOR or without a Jaccard."""
    if jaccard is None or jaccard < JACCARD_EDGES[0]:
        return None
    distance = 64 if distance is None else distance
    return bisect_right(JACCARD_EDGES, jaccard) - 1, bisect_right(DISTANCE_EDGES, distance) - 1


def band_range(band: int) -> tuple[float, float]:
    return JACCARD_EDGES[band], JACCARD_EDGES[band + 1] if band + 1 < len(JACCARD_EDGES) else 1.0


@dataclass
class Population:
    pairs: list[ScoredPair]  # scored at or above FLOOR, sorted by keys
    unscored: int  # candidates judged by distance alone: no Jaccard to threshold, left out
    checked_by: Counter
    floor: float = FLOOR  # the threshold the pairs were judged at

    def counts(self) -> Counter:
        return Counter(pair.stratum for pair in self.pairs)

    def by_keys(self) -> dict[tuple[str, str], ScoredPair]:
        return {(pair.first, pair.second): pair for pair in self.pairs}


def population(index, floor: float = FLOOR, on_progress=None) -> Population:
    """Every candidate pair dupes finds whose Jaccard (as checked) is at least floor, labels ignored."""
    pairs: list[ScoredPair] = []
    unscored, kinds = 0, Counter[str]()
    for pair in DuplicateSearch(index, None, floor, on_progress=on_progress):
        kinds[pair.checked_by or "distance"] += 1
        if pair.jaccard is None:
            unscored += 1
            continue
        first, second = pair_of(pair.first, pair.second)
        pairs.append(ScoredPair(first, second, pair.distance, pair.jaccard, pair.checked_by or "distance"))
    pairs.sort(key=lambda p: (p.first, p.second))
    return Population(pairs, unscored, kinds, floor)


def score(
    index, a: str, b: str, shingles: ShingleCache | None = None, threshold: float = DEFAULT_THRESHOLD
) -> ScoredPair:
    """A pair of stored keys scored by the verdict every command gives it at this threshold
    (find.verdict.sketch_verdict): the exact Jaccard where both texts can be reached (unless the sketches are
    sure it is below the line), else the sketches' estimate, else none (distance only)."""
    shingles = shingles or ShingleCache(index)
    first, second = pair_of(a, b)
    prints = dict(index.conn.execute(
        "SELECT key, fingerprint FROM documents WHERE key IN (?, ?)", (first, second)
    ).fetchall())
    if len(prints) < 2:
        missing = first if first not in prints else second
        raise InvalidInput(f"{missing!r} is not a key in this index")
    fa, fb = prints[first], prints[second]
    distance = None if fa is None or fb is None else hamming(to_unsigned(fa), to_unsigned(fb))
    verdict = sketch_verdict(
        BITS if distance is None else distance, shingles.sketch(first), shingles.sketch(second),
        lambda: (shingles(first), shingles(second)), index.sketch_scheme, threshold,
    )
    return ScoredPair(first, second, distance, verdict.jaccard, verdict.checked_by)


# -- the sample -------------------------------------------------------------------------------------


def _near_threshold(band: int, threshold: float) -> bool:
    low, high = band_range(band)
    return low < threshold + UNCERTAIN and high > threshold - UNCERTAIN


def allocate(counts: dict, size: int, threshold: float) -> dict:
    """How many pairs to draw from each stratum: proportional to sqrt(N) (times UNCERTAIN_WEIGHT near
    the threshold), at least MIN_PER_STRATUM where there are that many, at most all of them."""
    strata = [s for s, n in counts.items() if s is not None and n > 0]
    if sum(counts[s] for s in strata) <= size:
        return {s: counts[s] for s in strata}
    weight = {s: math.sqrt(counts[s]) * (UNCERTAIN_WEIGHT if _near_threshold(s[0], threshold) else 1.0) for s in strata}
    take = {s: min(counts[s], MIN_PER_STRATUM) for s in strata}
    if sum(take.values()) > size:  # more strata than the sample holds: one pair from each of the heaviest
        heaviest = sorted(strata, key=lambda s: (-weight[s], s))[:size]
        take = {s: int(s in heaviest) for s in strata}
    left = size - sum(take.values())
    while left > 0:
        open_ = [s for s in strata if take[s] < counts[s]]
        if not open_:
            break
        total = sum(weight[s] for s in open_)
        # Give each open stratum its share of what is left (at least one to the heaviest), capped.
        shares = {s: min(counts[s] - take[s], int(left * weight[s] / total)) for s in open_}
        if not any(shares.values()):
            shares[max(open_, key=lambda s: (weight[s], s))] = 1
        for s, n in shares.items():
            n = min(n, left)
            take[s] += n
            left -= n
    return take


def draw_sample(pop: Population, size: int = SAMPLE_SIZE, threshold: float = 0.8, seed: int = 0) -> list[ScoredPair]:
    """A stratified sample of the population, the same for the same index and arguments. Strata take
    turns in the order, so labelling the first n pairs of it labels every stratum."""
    if size < 1:
        raise InvalidInput(f"a sample has at least one pair, not {size}")
    groups: dict[tuple[int, int], list[ScoredPair]] = {}
    for pair in pop.pairs:
        if (stratum := pair.stratum) is not None:  # (every pair of a population has one)
            groups.setdefault(stratum, []).append(pair)
    take = allocate({s: len(g) for s, g in groups.items()}, size, threshold)
    rng = random.Random(seed)
    drawn = {s: rng.sample(groups[s], n) for s, n in sorted(take.items())}
    order = sorted(drawn, key=lambda s: (not _near_threshold(s[0], threshold), rng.random()))
    out = []
    while any(drawn.values()):
        for s in order:
            if drawn[s]:
                out.append(drawn[s].pop())
    return out


# -- calibration from labels ------------------------------------------------------------------------


@dataclass(frozen=True)
class ThresholdRow:
    threshold: float
    precision: float | None
    recall: float | None
    f1: float | None
    above: float  # estimated pairs at or above the threshold


@dataclass(frozen=True)
class LabelCalibration:
    rows: list[ThresholdRow]
    recommended: float | None  # the threshold of best F1 (the middle of its plateau)
    interval: tuple[float, float] | None  # 90% bootstrap interval of the recommended threshold
    precision: float | None  # at the recommended threshold
    recall: float | None
    f1: float | None
    precision_interval: tuple[float, float] | None
    recall_interval: tuple[float, float] | None
    labels: int  # duplicate / not a duplicate labels used
    unsure: int
    outside: int  # labels of pairs without a Jaccard at or above FLOOR: left out
    population: int
    unscored: int  # population pairs judged by distance only: left out
    borrowed: int  # pairs of strata without labels, estimated from their Jaccard band's labels
    duplicates: int = 0  # of the labels used, those that say duplicate
    missing: str | None = None  # why no threshold is recommended (too few labels of a kind), in words


def binomial_interval(successes: int, trials: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval of a proportion seen as successes of trials: the
    proportions under which what was seen is not in either tail of probability (1 - confidence) / 2.
    16 of 16 gives (0.829, 1.0) at 90%: 16 agreeing labels do not make a proportion of 1 sure."""
    if trials <= 0:
        return (0.0, 1.0)
    successes = min(max(int(successes), 0), trials)
    tail = (1 - confidence) / 2

    def at_least(p: float) -> float:  # P(X >= successes) for X ~ Binomial(trials, p)
        return 1.0 - sum(_binomial_pmf(i, trials, p) for i in range(successes))

    def at_most(p: float) -> float:
        return sum(_binomial_pmf(i, trials, p) for i in range(successes + 1))

    low = 0.0 if successes == 0 else _solve(lambda p: at_least(p) - tail)  # increasing in p
    high = 1.0 if successes == trials else _solve(lambda p: tail - at_most(p))  # at_most decreases in p
    return (low, high)


def _binomial_pmf(i: int, n: int, p: float) -> float:
    if p <= 0.0:
        return 1.0 if i == 0 else 0.0
    if p >= 1.0:
        return 1.0 if i == n else 0.0
    return math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                    + i * math.log(p) + (n - i) * math.log1p(-p))


def _solve(increasing, low: float = 0.0, high: float = 1.0) -> float:
    """The root in [low, high] of an increasing function, by bisection (to 1e-9)."""
    for _ in range(40):
        middle = (low + high) / 2
        if increasing(middle) < 0:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def _hull(*intervals: tuple[float, float] | None) -> tuple[float, float] | None:
    """The smallest interval holding all of them (None ones left out)."""
    given = [i for i in intervals if i is not None]
    return (min(i[0] for i in given), max(i[1] for i in given)) if given else None


def thresholds(floor: float = FLOOR) -> list[float]:
    return [round(t, 2) for t in np.arange(floor, 1.0 + STEP / 2, STEP)]


def labelled_pairs(
    index, pop: Population, labels: list[Label] | None = None
) -> tuple[list[tuple[ScoredPair, bool]], int, int]:
    """([(scored pair, is a duplicate)], unsure, outside) for the index's labels."""
    labels = read_labels(index.conn) if labels is None else labels
    known = pop.by_keys()
    shingles = ShingleCache(index)
    out, unsure, outside = [], 0, 0
    for label in labels:
        if label.label == UNSURE:
            unsure += 1
            continue
        # (scored as the population was: by the verdict at its floor)
        pair = known.get((label.first, label.second)) or score(index, label.first, label.second, shingles, pop.floor)
        if pair.stratum is None:
            outside += 1
            continue
        out.append((pair, label.label == DUPLICATE))
    return out, unsure, outside


def _weights(counts: Counter, strata: list[tuple[int, int]]) -> tuple[np.ndarray, int]:
    """Each label's weight: its stratum's pairs over its labels; strata without labels lend their pairs to
    the labels of the same Jaccard band (else the nearest band with labels). (weights, pairs borrowed)."""
    labelled = Counter(strata)
    weight = np.array([counts.get(s, 0) / labelled[s] for s in strata], dtype=float)
    bands = Counter(s[0] for s in strata)
    borrowed = 0
    for s, n in counts.items():
        if s is None or n == 0 or s in labelled or not bands:
            continue
        band = min(bands, key=lambda b: (abs(b - s[0]), b))
        borrowed += n
        for i, own in enumerate(strata):
            if own[0] == band:
                weight[i] += n / bands[band]
    return weight, borrowed


def _curve(scores: np.ndarray, dup: np.ndarray, weight: np.ndarray, ts: list[float]):
    wd = weight * dup
    total_dup = wd.sum()
    rows = []
    for t in ts:
        above = scores >= t - 1e-12
        rows.append(_threshold_row(t, wd[above].sum(), weight[above].sum(), total_dup))
    return rows


def _threshold_row(t: float, duplicates: float, above: float, total: float) -> ThresholdRow:
    """Precision, recall and F1 at threshold t from the (estimated) duplicates among the pairs at or above
    it, those pairs, and the duplicates in all."""
    precision = duplicates / above if above > 0 else None
    recall = duplicates / total if total > 0 else None
    f1 = None
    if precision is not None and recall is not None:
        f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return ThresholdRow(t, precision, recall, f1, float(above))


def _best(rows: list[ThresholdRow]) -> int | None:
    """The row of best F1: the middle of the run of thresholds that share it."""
    plateau = _plateau(rows)
    return None if plateau is None else (plateau[0] + plateau[1]) // 2


def _plateau(rows: list[ThresholdRow]) -> tuple[int, int] | None:
    """(first, last) row of the run of thresholds that share the best F1: the labels cannot tell them apart."""
    f1 = [-1.0 if r.f1 is None else r.f1 for r in rows]
    if not rows or max(f1) < 0:
        return None
    best = max(f1)
    first = f1.index(best)
    last = first
    while last + 1 < len(f1) and f1[last + 1] >= best - 1e-12:
        last += 1
    return first, last


def _missing_labels(duplicates: int, not_duplicates: int, least: int) -> str | None:
    """Why these labels recommend no threshold, or None when they can."""
    missing = [f"{least - n} more {word}" for n, word in ((duplicates, "duplicate"), (not_duplicates,
               "not a duplicate")) if n < least]
    if not missing:
        return None
    return (f"{duplicates} duplicate and {not_duplicates} not-a-duplicate labels: a threshold is recommended from "
            f"{least} of each; label {' and '.join(missing)} (the review sample has both near the threshold)")


def _isotonic(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The non-decreasing fit of y on x (pool adjacent violators): (distinct x ascending, fitted y)."""
    xs, inverse = np.unique(x, return_inverse=True)
    weight = np.bincount(inverse).astype(float)
    value = np.bincount(inverse, weights=y) / weight
    blocks: list[list[float]] = []  # [value, weight, count of distinct x]
    for v, w in zip(value.tolist(), weight.tolist()):
        blocks.append([v, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks[-1]
            blocks[-1] = [(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2]
    return xs, np.repeat([b[0] for b in blocks], [int(b[2]) for b in blocks])


def _logistic(x: np.ndarray, y: np.ndarray, ridge: float = 1e-2) -> tuple[float, float]:
    """(a, b) of P(y) = 1 / (1 + exp(-(a + b (x - 0.8) * 20))), by Newton's method with a small ridge (so
    that labels a threshold separates perfectly still give a finite, steep curve)."""
    z = (x - 0.8) * 20
    a = b = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(a + b * z, -40, 40)))
        w = p * (1 - p)
        grad = np.array([np.sum(y - p), np.sum((y - p) * z) - ridge * b])
        hess = np.array([[np.sum(w) + 1e-9, np.sum(w * z)], [np.sum(w * z), np.sum(w * z * z) + ridge]])
        step = np.linalg.solve(hess, grad)
        a, b = a + step[0], b + step[1]
        if np.abs(step).max() < 1e-9:
            break
    return float(a), float(b)


def _curve_model(
    population_scores: np.ndarray, scores: np.ndarray, dup: np.ndarray, ts: list[float], method: str = "isotonic"
):
    """Precision and recall per threshold over the whole population: each pair counted by the chance it
    is a duplicate at its score, read off a monotone fit of the labels (isotonic: no assumption but that
    a higher Jaccard is never less likely a duplicate; logistic: an S curve). Exact counts of pairs above
    each threshold; only the chances are estimated."""
    if method == "logistic":
        a, b = _logistic(scores, dup)
        chance = 1 / (1 + np.exp(-np.clip(a + b * (population_scores - 0.8) * 20, -40, 40)))
    else:
        xs, fitted = _isotonic(scores, dup)
        chance = np.interp(population_scores, xs, fitted)
    order = np.argsort(-population_scores, kind="stable")
    ranked, cumulative = population_scores[order], np.cumsum(chance[order])
    total = cumulative[-1] if len(cumulative) else 0.0
    rows = []
    for t in ts:
        above = int(np.searchsorted(-ranked, -(t - 1e-12), side="right"))
        rows.append(_threshold_row(t, float(cumulative[above - 1]) if above else 0.0, above, total))
    return rows


METHODS = ("isotonic", "logistic", "strata")


def calibrate_labels(
    index, pop: Population | None = None, *, labels: list[Label] | None = None, bootstrap: int = BOOTSTRAP,
    seed: int = 0, method: str = "logistic", least: int = LEAST_EACH,
) -> LabelCalibration:
    """Precision, recall and F1 per Jaccard threshold from the labels, the recommended threshold and
    its uncertainty, once there are `least` labels of each kind (else `missing` says what is missing).

    The intervals (CONFIDENCE) are the widest of: a bootstrap of the labels within their strata; for
    the threshold, the run of thresholds sharing the best F1 (which the labels cannot tell apart); for
    precision and recall, the exact binomial bounds of the estimate over the labels it rests on (those
    at or above the threshold; those that say duplicate), which a bootstrap of a few agreeing labels
    misses.

    method "logistic" (the default) and "isotonic": every candidate pair counts, by the chance that a
    pair of its score is a duplicate, from an S curve or a monotone step fit of the labels; "strata":
    each label stands for its stratum's pairs over its labels there (post-stratification: no assumption
    about the score, more spread). bench/label_calibration.py compares them: on its held-out set the
    logistic fit's precision and recall were the closest to the truth."""
    if method not in METHODS:
        raise InvalidInput(f"method is one of {', '.join(METHODS)}, not {method!r}")
    pop = population(index) if pop is None else pop
    labelled, unsure, outside = labelled_pairs(index, pop, labels)
    counts = pop.counts()
    ts = thresholds()
    duplicates = sum(1 for _, d in labelled if d)
    missing = _missing_labels(duplicates, len(labelled) - duplicates, least)
    if not labelled:
        rows = [ThresholdRow(t, None, None, None, 0.0) for t in ts]
        return LabelCalibration(rows, None, None, None, None, None, None, None, 0, unsure, outside, len(pop.pairs),
                                pop.unscored, 0, 0, missing)
    strata = [pair.stratum or (0, 0) for pair, _ in labelled]  # (labelled_pairs keeps those with one)
    scores = np.array([pair.jaccard for pair, _ in labelled], dtype=float)
    dup = np.array([d for _, d in labelled], dtype=float)
    population_scores = np.array([pair.jaccard for pair in pop.pairs], dtype=float)

    def curve(pick: np.ndarray | None):
        chosen = np.arange(len(strata)) if pick is None else pick
        if method != "strata":
            return _curve_model(population_scores, scores[chosen], dup[chosen], ts, method), 0
        weight, borrowed = _weights(counts, [strata[i] for i in chosen])
        return _curve(scores[chosen], dup[chosen], weight, ts), borrowed

    rows, borrowed = curve(None)
    at = None if missing is not None else _best(rows)
    interval = p_interval = r_interval = None
    if at is not None and bootstrap > 0:
        rng = np.random.default_rng(seed)
        groups: dict = {}
        for i, s in enumerate(strata):
            groups.setdefault(s, []).append(i)
        chosen, precisions, recalls = [], [], []
        for _ in range(bootstrap):
            again, _ = curve(np.concatenate([rng.choice(members, len(members)) for members in groups.values()]))
            best = _best(again)
            if best is not None:
                chosen.append(ts[best])
            fixed = again[at]
            if fixed.precision is not None:
                precisions.append(fixed.precision)
            if fixed.recall is not None:
                recalls.append(fixed.recall)

        def spread(values):
            return (float(np.percentile(values, 5)), float(np.percentile(values, 95))) if values else None

        interval, p_interval, r_interval = spread(chosen), spread(precisions), spread(recalls)
    best_row = rows[at] if at is not None else None
    if best_row is not None:
        plateau = _plateau(rows)
        assert plateau is not None
        interval = _hull(interval, (ts[plateau[0]], ts[plateau[1]]))
        above = int(np.count_nonzero(scores >= best_row.threshold - 1e-12))
        if best_row.precision is not None:
            p_interval = _hull(p_interval, binomial_interval(round(best_row.precision * above), above))
        if best_row.recall is not None:
            r_interval = _hull(r_interval, binomial_interval(round(best_row.recall * duplicates), duplicates))
    return LabelCalibration(
        rows, None if best_row is None else best_row.threshold, interval,
        None if best_row is None else best_row.precision, None if best_row is None else best_row.recall,
        None if best_row is None else best_row.f1, p_interval, r_interval, len(labelled), unsure, outside,
        len(pop.pairs), pop.unscored, borrowed, duplicates, missing,
    )


# -- dupes and clusters honour the labels -----------------------------------------------------------


class HonouredPairs:
    """dupes() pairs less those labelled "not a duplicate": iterate it, or id_pairs() for clustering;
    everything else (k, report) is the wrapped DuplicateSearch'. `apart` counts the pairs it held back."""

    def __init__(self, pairs, conn) -> None:
        self.pairs = pairs
        self.apart_ids = set(apart_ids(conn))
        self.apart = 0

    def __getattr__(self, name):
        return getattr(self.pairs, name)

    def __iter__(self):
        if not self.apart_ids:
            yield from self.pairs
            return
        apart = {pair_of(a, b) for a, others in apart_keys(self.pairs.index.conn).items() for b in others}
        for pair in self.pairs:
            if pair_of(pair.first, pair.second) in apart:
                self.apart += 1
                continue
            yield pair

    def id_pairs(self):
        if not self.apart_ids:
            yield from self.pairs.id_pairs()
            return
        low = np.array(sorted({a for a, _ in self.apart_ids}), dtype=np.int64)
        for first, second in self.pairs.id_pairs():
            lo, hi = np.minimum(first, second), np.maximum(first, second)
            keep = np.ones(len(first), dtype=bool)
            for i in np.flatnonzero(np.isin(lo, low)).tolist():
                if (int(lo[i]), int(hi[i])) in self.apart_ids:
                    keep[i] = False
            self.apart += int((~keep).sum())
            yield first[keep], second[keep]


# -- decisions out ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Deletion:
    key: str  # a document to delete
    kept: str  # the key kept in its place (its cluster's keeper or representative)
    jaccard: float | None  # of the two, as the check gives it
    checked_by: str
    distance: int | None
    label: str | None  # the pair's label, if a person gave one

    def record(self) -> dict:
        return {
            "key": self.key, "kept": self.kept,
            "jaccard": None if self.jaccard is None else round(self.jaccard, 4),
            "checked_by": self.checked_by, "distance": self.distance, "label": self.label,
        }


DECISION_FIELDS = ("key", "kept", "jaccard", "checked_by", "distance", "label")


@dataclass(frozen=True)
class DecisionsNote:
    clusters: int  # clusters of two or more read
    kept_apart: int  # members kept because they are labelled not a duplicate of the kept one
    keepers: int  # members kept because a person chose them
    stale: bool  # documents or labels changed since the clusters were made


def deletions(index) -> tuple[list[Deletion], DecisionsNote]:
    """What to delete: every member of a cluster (the last `simq clusters`) but the one kept, which is
    the member a person chose (a keeper), else the representative. A member labelled "not a duplicate"
    of the kept one, and every keeper, is kept too."""
    conn = index.conn
    info = clustering_info(conn)
    if info is None:
        raise InvalidInput(f"no clusters in {index.path} yet: make them with simq clusters --db {index.path}")
    keepers = keeper_keys(conn)
    latest = max((label.at for label in read_labels(conn)), default="")
    stale = bool(info.get("stale")) or (latest > info.get("at", ""))
    shingles = ShingleCache(index)
    out: list[Deletion] = []
    clusters = kept_apart = kept_by_person = 0
    for cluster in read_clusters(conn):
        clusters += 1
        chosen = [key for key in cluster.members if key in keepers]
        kept = chosen[0] if chosen else cluster.representative
        labels = labels_of(conn, cluster.members)
        for key in cluster.members:
            if key == kept:
                continue
            if key in keepers:
                kept_by_person += 1
                continue
            label = labels.get(pair_of(key, kept))
            if label == NOT_DUPLICATE:
                kept_apart += 1
                continue
            scored = score(index, key, kept, shingles)
            out.append(Deletion(key, kept, scored.jaccard, scored.checked_by, scored.distance, label))
    return out, DecisionsNote(clusters, kept_apart, kept_by_person, stale)


def write_decisions(rows: Iterable[Deletion], handle, fmt: str) -> int:
    """Write the deletions as JSONL (one object a line) or CSV (a header line); returns the rows written."""
    if fmt not in ("jsonl", "csv"):
        raise InvalidInput(f"decisions are written as jsonl or csv, not {fmt!r}")
    written = 0
    if fmt == "csv":
        writer = csv.DictWriter(handle, fieldnames=DECISION_FIELDS, lineterminator="\n")
        writer.writeheader()
    for row in rows:
        record = row.record()
        if fmt == "csv":
            writer.writerow({k: "" if v is None else v for k, v in record.items()})
        else:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        written += 1
    return written


def read_decisions(text: str, name: str = "the list") -> list[tuple[str, str | None]]:
    """(key, kept) of each row of a decisions list, JSONL or CSV (told apart by the first character);
    a plain list of keys is refused (simq rm --from takes those)."""
    stripped = text.lstrip("\ufeff").lstrip()
    rows: list[tuple[str, str | None]] = []
    if not stripped:
        return rows
    if stripped.startswith("{"):
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{name} line {number} is not JSON ({exc.msg})") from None
            rows.append(_decision_row(record, f"{name} line {number}"))
        return rows
    reader = csv.DictReader(io.StringIO(stripped))
    if reader.fieldnames is None or "key" not in reader.fieldnames:
        raise InvalidInput(f"{name} is neither JSONL nor CSV with a key column (as simq decisions writes)")
    for number, record in enumerate(reader, 2):
        rows.append(_decision_row(record, f"{name} line {number}"))
    return rows


def _decision_row(record, where: str) -> tuple[str, str | None]:
    if not isinstance(record, dict) or not isinstance(record.get("key"), str) or not record["key"]:
        raise InvalidInput(f"{where} has no key (a decisions row names the key to delete)")
    kept = record.get("kept")
    if kept is not None and not isinstance(kept, str):
        raise InvalidInput(f"{where}: kept must be a key, not {kept!r:.40}")
    return record["key"], kept or None


def check_decisions(conn, rows: list[tuple[str, str | None]]) -> None:
    """Refuse a list that would delete the only copy: every kept key must be in the index and not
    deleted by the same list, and no keeper a person chose may be deleted."""
    deleted = {key for key, _ in rows}
    keepers = keeper_keys(conn)
    for key, kept in rows:
        if key in keepers:
            raise InvalidInput(f"{key!r} was chosen to keep (simq serve --review); nothing removed")
        if kept is None:
            continue
        if kept in deleted:
            raise InvalidInput(f"{kept!r} is both kept (for {key!r}) and deleted by the list; nothing removed")
    kept_keys = sorted({kept for _, kept in rows if kept is not None})
    found = {key for (key,) in conn.execute("SELECT key FROM documents WHERE key IN carray(?)", (
        apsw.carray(tuple(kept_keys)),))} if kept_keys else set()
    for kept in kept_keys:
        if kept not in found:
            raise InvalidInput(f"the kept copy {kept!r} is not in the index: deleting its duplicates would lose the "
                               "text; nothing removed")


