"""Exact text similarity: Jaccard of character shingle sets, the yardstick fingerprints are judged by.

A shingle is a run of n characters of the normalised text (features.normalize: NFKC, case-folded,
whitespace runs folded to one space, stripped): the one normalisation the fingerprint and the sketch
use too, so a pair has one Jaccard, whatever measured it (docs/quality.md). Shingles are hashed to
64 bits with the same splitmix64 chain as features; a collision needs two distinct 5-character runs
to share a 64-bit value, which is negligible at the sizes compared here. The loadable extension computes the
same sets in C (sqlite_extension.c).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import native
from .rule import TRUTH_NGRAM

if TYPE_CHECKING:
    import numpy as np


def fold_space(text: str) -> str:
    """Every run of whitespace as one space, none at either end: re.sub(r"\\s+", " ", text).strip(), 2.5 times
    faster (str.split() and the regular expression's \\s take the same characters, those of str.isspace():
    tests/test_short_texts.py checks every code point). What short texts store (core/short_texts.py); the
    check normalises it when read: normalize(fold_space(x)) == normalize(x) (tests/test_normalize.py)."""
    return " ".join(text.split())


def shingle_set(text: str, n: int = TRUTH_NGRAM) -> np.ndarray:
    """Sorted distinct hashes of the n-character shingles of normalize(text) (a shorter text is one shingle)."""
    import numpy as np  # (here: the quick lane imports jaccard_of_counts without numpy)

    from .features import distinct, ngram_hashes, normalize

    normal = normalize(text)
    if not normal:
        return np.empty(0, dtype=np.uint64)
    codes = np.frombuffer(normal.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    made = native.shingle_set(codes, n)  # the same hashes in C (dedup's exact check: a third of its search)
    if made is not None:
        return made
    return distinct(ngram_hashes(codes.astype(np.uint64), n))  # np.unique's hash-table path is slower here


def jaccard_of_sets(a: np.ndarray, b: np.ndarray) -> float:
    """|a & b| / |a | b| for sorted distinct arrays; 1.0 for two empty sets."""
    if len(a) == 0 and len(b) == 0:
        return 1.0
    if len(a) > len(b):
        a, b = b, a
    if len(a) == 0:
        return 0.0
    import numpy as np

    # Binary search of the smaller set in the larger: no concatenation and sort (intersect1d's way).
    at = np.minimum(np.searchsorted(b, a), len(b) - 1)
    shared = int(np.count_nonzero(b[at] == a))
    return jaccard_of_counts(shared, len(a), len(b))


def jaccard_of_counts(shared: int, a: int, b: int) -> float:
    """The Jaccard of two sets of a and b members, `shared` of them in both: 1.0 for two empty sets. The one
    formula of every exact check here (sqlite_extension.c's jaccard_of_sets is its C twin)."""
    return 1.0 if a + b == 0 else shared / (a + b - shared)


# Pairs whose Jaccards one C call measures (it copies their sets into one array: about 4 MB).
JACCARD_PAIRS = 512


def jaccard_of_pairs(a: list[np.ndarray], b: list[np.ndarray]) -> np.ndarray:
    """jaccard_of_sets of each pair (a[i], b[i]), as an array: a C call for each JACCARD_PAIRS of them where the
    core is built (the exact checks of dedup and dupes: a batch's pairs at once), else one by one."""
    import numpy as np

    out = np.full(len(a), np.nan)
    for lo in range(0, len(a), JACCARD_PAIRS):
        hi = lo + JACCARD_PAIRS
        made = native.jaccards(a[lo:hi], b[lo:hi])
        out[lo:hi] = made if made is not None else [jaccard_of_sets(x, y) for x, y in zip(a[lo:hi], b[lo:hi])]
    return out


def jaccard(text_a: str, text_b: str, n: int = TRUTH_NGRAM) -> float:
    """Exact Jaccard similarity of the two texts' n-character shingle sets."""
    return jaccard_of_sets(shingle_set(text_a, n), shingle_set(text_b, n))
