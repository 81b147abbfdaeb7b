"""Why two documents are, or are not, near-duplicates: distance, the Jaccard estimated from the sketches,
the exact shingle Jaccard, the verdict of the check (the same as simq dupes and near give the pair), the
features that weigh most on each side, and a short diff."""

from __future__ import annotations

import difflib
import math
import os
from collections import Counter
from dataclasses import dataclass

from ..core.features import WORD, feature_weights, normalize, words
from ..core.fingerprint import hamming, simhash
from ..core.settings import DEFAULT_THRESHOLD, RECOMMENDED_K, SHORT_TEXT, FingerprintSettings  # SHORT_TEXT: measured
from ..core.shingles import jaccard_of_sets, shingle_set
from ..core.sketch import sketch
from ..errors import InvalidInput
from ..find.check import ShingleCache
from ..find.verdict import Verdict, sketch_verdict
from ..index import SimhashIndex
from ..pipeline.sources import read_one
from ..store import texts
from ..store.documents import FingerprintedDocument
from ..store.texts import stored_text

DIFF_LINES = 40


@dataclass(frozen=True)
class Side:
    name: str  # the key, or the file path
    fingerprint: int | None
    text: str | None  # None when neither stored nor on disk unchanged
    sketch: bytes | None = None  # the stored sketch (a file: made now); None: none
    stored: bool = False  # a key of the index (else a file read now)


@dataclass(frozen=True)
class Feature:
    text: str  # the n-gram as the fingerprint saw it (normalized; words joined by spaces)
    weight: int
    count: int


@dataclass(frozen=True)
class Explanation:
    a: Side
    b: Side
    settings: FingerprintSettings
    distance: int | None
    estimated_jaccard: float | None  # from the two sketches (sketch.py); None without both
    exact_jaccard: float | None  # None without both texts
    verdict: Verdict | None  # the check's (check.judge), as every command gives it; None: no fingerprint
    shared: list[Feature]  # heaviest features in both
    only_a: list[Feature]
    only_b: list[Feature]
    diff: list[str]  # unified diff lines, at most DIFF_LINES
    notes: list[str]

    @property
    def similarity(self) -> float | None:
        return None if self.distance is None else 1 - self.distance / 64


def estimated_jaccard(distance: int) -> float:
    """The Jaccard similarity a distance suggests (calibrate's "expected" column; never a verdict):
    SimHash estimates the angle between the feature sets (pi * d / 64); for two sets of equal size,
    cos = |A & B| / |A| and J = cos / (2 - cos)."""
    cos = math.cos(math.pi * distance / 64)
    return max(0.0, cos / (2 - cos))


def named_features(text: str, settings: FingerprintSettings) -> Counter:
    """The text's n-grams as strings with their counts: the features behind the fingerprint."""
    if settings.features == "chars":
        norm = normalize(text)
        if not WORD.search(norm):
            return Counter()
        unit_list, glue = list(norm), ""
    else:
        unit_list, glue = words(text, settings.hmm), " "
    n = min(settings.ngram, len(unit_list))
    return Counter(glue.join(unit_list[i : i + n]) for i in range(len(unit_list) - n + 1 if unit_list else 0))


def _heaviest(names: list[str], counts: Counter, settings: FingerprintSettings, limit: int) -> list[Feature]:
    import numpy as np

    if not names:
        return []
    weights = feature_weights(np.array([counts[x] for x in names]), settings.weights)
    ranked = sorted(zip(names, weights.tolist()), key=lambda t: (-t[1], -counts[t[0]], t[0]))
    return [Feature(name, weight, counts[name]) for name, weight in ranked[:limit]]


def _side(index: SimhashIndex, ref: str, shingles: ShingleCache) -> Side:
    stored = index.get(ref)
    if stored is not None:
        return Side(ref, stored.fingerprint, stored_text(index, ref), shingles.sketch(ref), stored=True)
    if os.path.isfile(ref) and os.path.getsize(ref) > texts.READ_WHOLE_BYTES:
        # Too large to read whole: fingerprinted and sketched in pieces; no features, Jaccard or diff.
        document = read_one(ref, index.settings)
        if isinstance(document, FingerprintedDocument):
            return Side(ref, document.fingerprint, None, document.sketch)
        return Side(ref, simhash(document.text, index.settings), None, sketch(document.text, index.sketch_scheme))
    if os.path.isfile(ref):
        with open(ref, "rb") as f:
            try:
                text = f.read().decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidInput(f"{ref} is not UTF-8 text") from None
        return Side(ref, simhash(text, index.settings), text, sketch(text, index.sketch_scheme))
    raise InvalidInput(f"{ref!r} is neither a key in {index.path} nor a file")


def explain(index: SimhashIndex, a: str, b: str, *, top: int = 8) -> Explanation:
    """Compare two documents, each a key in the index or a file (fingerprinted and sketched with its
    settings). The verdict is check.judge()'s at the default threshold, from the same stored sketches
    and texts as simq dupes and near read: the same Jaccard, the same checked_by."""
    shingles = ShingleCache(index)
    left, right = _side(index, a, shingles), _side(index, b, shingles)
    s = index.settings
    notes = []
    distance = verdict = None
    if left.fingerprint is None or right.fingerprint is None:
        notes.append("a document without features (no letters or digits) has no fingerprint and matches nothing")
    else:
        distance = hamming(left.fingerprint, right.fingerprint)
    estimate = None
    if left.sketch is not None and right.sketch is not None:
        estimate = sketch_verdict(0, left.sketch, right.sketch, lambda: (None, None), index.sketch_scheme).jaccard
    # (a stored short text's exact data where its text is out of reach, as dupes and near read it)
    set_a = shingle_set(left.text) if left.text is not None else shingles(left.name) if left.stored else None
    set_b = shingle_set(right.text) if right.text is not None else shingles(right.name) if right.stored else None
    if distance is not None:
        verdict = sketch_verdict(distance, left.sketch, right.sketch, lambda: (set_a, set_b), index.sketch_scheme)
    exact, shared, only_a, only_b, diff = None, [], [], [], []
    missing = [side.name for side in (left, right) if side.text is None]
    if left.text is None or right.text is None:  # (missing)
        notes.append(
            f"no text for {', '.join(missing)}: add with --store-text, or keep the files unchanged, "
            "for the exact Jaccard, the features and a diff"
        )
    else:
        assert set_a is not None and set_b is not None  # both texts are here
        exact = jaccard_of_sets(set_a, set_b)
        fa, fb = named_features(left.text, s), named_features(right.text, s)
        both = fa.keys() & fb.keys()
        shared = _heaviest(sorted(both), fa + fb, s, top)
        only_a = _heaviest(sorted(fa.keys() - both), fa, s, top)
        only_b = _heaviest(sorted(fb.keys() - both), fb, s, top)
        lines = difflib.unified_diff(
            left.text.splitlines(), right.text.splitlines(), left.name, right.name, n=1, lineterm=""
        )
        diff = [line for _, line in zip(range(DIFF_LINES), lines)]
        short = [side.name for side, text in ((left, left.text), (right, right.text)) if len(text) < SHORT_TEXT]
        if short:
            notes.append(
                f"{', '.join(short)} is shorter than {SHORT_TEXT} characters: distances between short texts are "
                "noisier (measured precision at k=9 fell to 0.4-0.6), so trust the Jaccard more than the distance"
            )
    return Explanation(left, right, s, distance, estimate, exact, verdict, shared, only_a, only_b, diff, notes)


def describe(verdict: Verdict) -> str:
    """A verdict in words: 'near-duplicates (estimated Jaccard 0.912, certainty 1.000)'."""
    said = "near-duplicates" if verdict.keeps else "not near-duplicates"
    if verdict.checked_by == "distance":
        return f"{said} (no text or sketch: by distance <= {RECOMMENDED_K}, certainty unknown)"
    return f"{said} ({verdict.checked_by} Jaccard {verdict.jaccard:.3f}, certainty {verdict.certainty:.3f})"


def verdicts(e: Explanation) -> list[tuple[str, str]]:
    """(rule, what it says of the pair): by distance alone at RECOMMENDED_K, and the check's verdict (what
    simq dupes, near, clusters and the web pages say of it). Empty when a side has no fingerprint."""
    if e.distance is None or e.verdict is None:
        return []
    by_distance = "near-duplicates" if e.distance <= RECOMMENDED_K else "not near-duplicates"
    return [
        (f"by distance alone (k={RECOMMENDED_K})", by_distance),
        (f"the check (J >= {DEFAULT_THRESHOLD:g}, as simq dupes and near)", describe(e.verdict)),
    ]
