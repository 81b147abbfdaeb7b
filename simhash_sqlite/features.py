"""Text to weighted features: pure functions, no I/O.

A feature is an n-gram of units. For "chars" the units are the code points of the normalized text;
for "words" they are words (Chinese runs cut by jieba, other text split into lower-cased words),
each hashed once with BLAKE2b to 64 bits. An n-gram's hash chains the splitmix64 finalizer over its
units, vectorized with numpy, so the scheme is stable across processes, machines and Python versions
(unlike the salted built-in hash()) and easy to restate in another language:

    h = SEED;  for u in units of the n-gram:  h = splitmix64_mix(h XOR u)        (mod 2**64)
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from functools import lru_cache

import numpy as np

from .settings import FingerprintSettings

SEED = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)

# Han ideographs (CJK unified, extension A, compatibility): the runs handed to jieba.
_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[^\W_]+")

# Quantum for non-integer weights: integer weights keep the bit sums exact, so fingerprints do not
# depend on the order in which a BLAS library adds floats.
WEIGHT_SCALE = 1000


def _fold_full_width(text: str) -> str:
    """Full-width ASCII and the ideographic space replaced by what NFKC makes of them (vectorized)."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4").copy()
    wide = (codes >= 0xFF01) & (codes <= 0xFF5E)
    codes[wide] -= 0xFEE0
    codes[codes == 0x3000] = 0x20
    return codes.tobytes().decode("utf-32-le", "surrogatepass")


def normalize(text: str) -> str:
    """NFKC (full-width forms fold to ASCII), case-folded, whitespace runs folded to one space."""
    if not unicodedata.is_normalized("NFKC", text):
        # Replacing a character by its compatibility decomposition leaves the NFKC of the text
        # unchanged; after the full-width forms most Chinese text is already NFKC, which is cheap
        # to check and expensive to redo.
        text = _fold_full_width(text)
        if not unicodedata.is_normalized("NFKC", text):
            text = unicodedata.normalize("NFKC", text)
    # str.split() and the regex \s both split on str.isspace() characters.
    return " ".join(text.casefold().split())


def mix(h: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer: a bijection on uint64 that spreads every input bit over all 64."""
    h = h ^ (h >> _S30)
    return _mix_rest(h)


def _mix_rest(h: np.ndarray) -> np.ndarray:
    # In place on a fresh array: the same arithmetic as mix() without a temporary per step.
    h *= _M1
    h ^= h >> _S27
    h *= _M2
    h ^= h >> _S31
    return h


@lru_cache(maxsize=1 << 20)
def word_hash(word: str) -> int:
    """BLAKE2b-64 of the word's UTF-8 bytes, as an unsigned integer (cached: words repeat)."""
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "big")


@lru_cache(maxsize=None)
def _jieba():
    import jieba  # lazily: importing jieba and loading its dictionary costs about a second

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def jieba_version() -> str:
    from importlib.metadata import version

    return version("jieba")


@lru_cache(maxsize=None)
def _rjieba():
    """rjieba (jieba-rs, the [fast] extra) if installed: the same words as jieba with HMM off, about
    ten times faster (bench/add_speed.py; tests/test_rjieba.py proves the identity)."""
    try:
        import rjieba
    except ImportError:
        return None
    return rjieba


def cut_han(run: str, hmm: bool = False, fast: bool = True) -> list[str]:
    """Words of a run of Han characters: rjieba when installed and HMM is off (fast), else jieba."""
    if fast and not hmm and (rjieba := _rjieba()) is not None:
        return rjieba.cut(run, hmm=False)
    return _jieba().lcut(run, HMM=hmm)


def words(text: str, hmm: bool = False, fast: bool = True) -> list[str]:
    """Lower-cased words; runs of Han characters are cut into words by jieba (HMM as given)."""
    text = normalize(text)
    out: list[str] = []
    pos = 0
    for run in _HAN_RUN.finditer(text):
        out.extend(_WORD.findall(text, pos, run.start()))
        out.extend(cut_han(run.group(), hmm, fast))
        pos = run.end()
    out.extend(_WORD.findall(text, pos))
    return out


def units(text: str, settings: FingerprintSettings) -> np.ndarray:
    """The text as a uint64 array of units (code points or word hashes); empty without a letter or digit."""
    if settings.features == "chars":
        text = normalize(text)
        if not _WORD.search(text):  # punctuation alone is no content: such a text has no features
            return np.empty(0, dtype=np.uint64)
        return np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.uint64)
    return np.fromiter((word_hash(w) for w in words(text, settings.hmm)), dtype=np.uint64)


def ngram_hashes(unit_array: np.ndarray, n: int) -> np.ndarray:
    """The hash of every n-gram of units, in order. Fewer than n units make one shorter n-gram."""
    count = len(unit_array) - n + 1
    if count < 1:
        n, count = len(unit_array), min(len(unit_array), 1)
    h = np.full(count, SEED, dtype=np.uint64)
    for j in range(n):
        h ^= unit_array[j : j + count]
        h = _mix_rest(h ^ (h >> _S30))
    return h


def weighted_features(text: str, settings: FingerprintSettings) -> tuple[np.ndarray, np.ndarray]:
    """Distinct feature hashes (uint64) and their integer weights. Both empty for a featureless text."""
    hashes, counts = np.unique(ngram_hashes(units(text, settings), settings.ngram), return_counts=True)
    return hashes, feature_weights(counts, settings.weights)


def simhash_input(text: str, settings: FingerprintSettings) -> tuple[np.ndarray, np.ndarray]:
    """Feature hashes and weights to sum for the fingerprint. With count weights every occurrence
    votes once (the same sums as distinct features weighted by count), which skips a sort; binary
    weights need only the distinct hashes."""
    hashes = ngram_hashes(units(text, settings), settings.ngram)
    if settings.weights == "binary":  # distinct hashes: an in-place sort, cheaper than np.unique
        hashes.sort()
        hashes = hashes[np.concatenate(([True], hashes[1:] != hashes[:-1]))] if len(hashes) else hashes
    elif settings.weights != "count":
        return weighted_features(text, settings)
    return hashes, np.ones(len(hashes), dtype=np.int64)


def feature_weights(counts: np.ndarray, kind: str) -> np.ndarray:
    """Integer weights from term counts: count, round(1000 * (1 + ln count)), or 1."""
    if kind == "count":
        return counts.astype(np.int64)
    if kind == "log":
        return np.rint(WEIGHT_SCALE * (1.0 + np.log(counts))).astype(np.int64)
    return np.ones(len(counts), dtype=np.int64)

