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
import threading
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
# A word: a run of letters or digits. A text without one has no features, so no fingerprint.
WORD = re.compile(r"[^\W_]+")

# Quantum for non-integer weights: integer weights keep the bit sums exact, so fingerprints do not
# depend on the order in which a BLAS library adds floats.
WEIGHT_SCALE = 1000
# Mean features per text above which each text's features are sorted on their own (measured).
PER_DOCUMENT_SORT_MIN_FEATURES = 12


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


def mix(h: np.ndarray, scratch: np.ndarray | None = None) -> np.ndarray:
    """The splitmix64 finalizer, in place: a bijection on uint64 spreading every input bit over all 64."""
    t = np.empty_like(h) if scratch is None else scratch
    for shift, multiplier in ((_S30, _M1), (_S27, _M2)):
        np.right_shift(h, shift, out=t)
        h ^= t
        h *= multiplier
    np.right_shift(h, _S31, out=t)
    h ^= t
    return h


def word_hash(word: str) -> int:
    """BLAKE2b-64 of the word's UTF-8 bytes, as an unsigned integer."""
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


class _Vocabulary:
    """Word -> small id -> cached hash. Words repeat, and mapping a list of words to small ints and
    indexing a numpy table is several times faster than hashing or caching each word in Python.
    Bounded: it starts afresh past MAX_WORDS. Misses are filled under a lock (thread-safe)."""

    MAX_WORDS = 4_000_000

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.table = np.empty(1 << 16, dtype=np.uint64)
        self.lock = threading.Lock()

    def hashes(self, tokens: list[str]) -> np.ndarray:
        ids, table = self.ids, self.table
        try:
            return table[np.fromiter(map(ids.__getitem__, tokens), dtype=np.intp, count=len(tokens))]
        except (KeyError, IndexError):  # a new word, or another thread grew the table meanwhile
            pass
        with self.lock:
            if len(self.ids) + len(tokens) > self.MAX_WORDS:
                self.ids, self.table = {}, np.empty(1 << 16, dtype=np.uint64)
            ids = self.ids
            new = [w for w in dict.fromkeys(tokens) if w not in ids]
            needed = len(ids) + len(new)
            if needed > len(self.table):
                grown = np.empty(max(needed, 2 * len(self.table)), dtype=np.uint64)
                grown[: len(ids)] = self.table[: len(ids)]
                self.table = grown
            start = len(ids)
            self.table[start:needed] = np.fromiter(map(word_hash, new), dtype=np.uint64, count=len(new))
            ids.update(zip(new, range(start, needed)))
            table = self.table
        return table[np.fromiter(map(ids.__getitem__, tokens), dtype=np.intp, count=len(tokens))]


_vocabulary = _Vocabulary()


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
        out.extend(WORD.findall(text, pos, run.start()))
        out.extend(cut_han(run.group(), hmm, fast))
        pos = run.end()
    out.extend(WORD.findall(text, pos))
    return out


def units(text: str, settings: FingerprintSettings) -> np.ndarray:
    """The text as a uint64 array of units (code points or word hashes); empty without a letter or digit."""
    if settings.features == "chars":
        return char_units(text)
    return word_units(words(text, settings.hmm))


_SPACE, _ALNUM, _STR_PATH = 1, 2, 4  # flags of a code point after case folding
_BEYOND_BMP = 0x10000  # the tables' last entry, where take(mode="clip") puts every higher code point


@lru_cache(maxsize=None)
def _bmp_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tables indexed by code points below U+10000, plus one entry for all above (_BEYOND_BMP):
    - fold: the casefold (uint64), a space for every whitespace character;
    - flags: _SPACE (str.isspace), _ALNUM (str.isalnum, which is what [^\\W_] matches), _STR_PATH
      (it folds to several characters, like ß to ss, or it is beyond the BMP);
    - narrow: the full-width forms and the ideographic space as _fold_full_width() replaces them.
    About 20 ms, once per process."""
    folded = [chr(c).casefold() for c in range(_BEYOND_BMP)] + ["\U00010000"]
    size = len(folded)
    single = np.fromiter(map(len, folded), dtype=np.intp, count=size) == 1
    space = np.fromiter(map(str.isspace, folded), dtype=bool, count=size)
    alnum = np.fromiter(map(str.isalnum, folded), dtype=bool, count=size)
    fold = np.fromiter((ord(f) if len(f) == 1 else 0 for f in folded), dtype=np.uint64, count=size)
    fold[space] = 0x20
    flags = (space * _SPACE | alnum * _ALNUM | ~single * _STR_PATH).astype(np.uint8)
    flags[_BEYOND_BMP] = _STR_PATH
    narrow = np.arange(size, dtype="<u4")
    narrow[0xFF01:0xFF5F] -= 0xFEE0
    narrow[0x3000] = 0x20
    return fold, flags, narrow


def char_units(text: str) -> np.ndarray:
    """The code points of normalize(text) as uint64; empty when it has no letter or digit.

    The same as encoding normalize(text), but the folding of full-width forms, case and whitespace
    is done by table look-ups on the code points, not by str.casefold, split and join. Texts with a
    code point above U+FFFF or one that folds to several characters take the str path.
    """
    original = text
    try:
        codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    except UnicodeEncodeError:  # a lone surrogate: whatever the str path makes of it
        return _str_char_units(original)
    fold, flag_table, narrow = _bmp_tables()
    index = codes.astype(np.intp)
    if not unicodedata.is_normalized("NFKC", text):  # as in normalize()
        # (Code points beyond the BMP become _BEYOND_BMP here; such texts take the str path below.)
        folded = narrow.take(index, mode="clip")
        text = folded.tobytes().decode("utf-32-le")
        index = folded.astype(np.intp)
        if not unicodedata.is_normalized("NFKC", text):
            text = unicodedata.normalize("NFKC", text)
            index = np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.intp)
    flags = flag_table.take(index, mode="clip")
    present = int(np.bitwise_or.reduce(flags)) if len(flags) else 0
    if present & _STR_PATH:
        return _str_char_units(original)
    if not present & _ALNUM:  # punctuation alone is no content: such a text has no features
        return np.empty(0, dtype=np.uint64)
    out = fold.take(index)
    if present & _SPACE:  # each run of whitespace becomes one space (fold made it so); none at either end
        space = (flags & _SPACE).view(bool)
        keep = np.empty(len(space), dtype=bool)
        keep[0] = not space[0]
        np.logical_and(space[1:], space[:-1], out=keep[1:])
        np.logical_not(keep[1:], out=keep[1:])  # a space right after a space goes
        out = out[keep]
        if out[-1] == 0x20:
            out = out[:-1]
    return out


def _str_char_units(text: str) -> np.ndarray:
    text = normalize(text)
    if not WORD.search(text):
        return np.empty(0, dtype=np.uint64)
    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.uint64)


def word_units(tokens: list[str]) -> np.ndarray:
    """Words as units: their BLAKE2b-64 hashes."""
    return _vocabulary.hashes(tokens)


def ngram_hashes(unit_array: np.ndarray, n: int) -> np.ndarray:
    """The hash of every n-gram of units, in order. Fewer than n units make one shorter n-gram."""
    count = len(unit_array) - n + 1
    if count < 1:
        n, count = len(unit_array), min(len(unit_array), 1)
    if n == 0:
        return np.empty(0, dtype=np.uint64)
    h = np.bitwise_xor(unit_array[:count], SEED, dtype=np.uint64)  # SEED ^ the first unit, in one pass
    scratch = np.empty_like(h)
    mix(h, scratch)
    for j in range(1, n):
        h ^= unit_array[j : j + count]
        mix(h, scratch)
    return h


def batch_features(texts: list[str], settings: FingerprintSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """weighted_features for many texts at once: (document index, feature hash, weight) arrays.

    The n-grams of all texts are hashed in one pass over their concatenated units, dropping the
    windows that straddle two texts, so the cost per text is a few microseconds, not a dozen numpy
    calls. With count weights a repeated feature simply appears again (the bit sums add up the same).
    """
    return units_features([units(text, settings) for text in texts], settings)


def units_features(
    unit_arrays: list[np.ndarray], settings: FingerprintSettings
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """batch_features from the texts' units (code points or word hashes) already made."""
    lengths = np.fromiter(map(len, unit_arrays), dtype=np.intp, count=len(unit_arrays))
    n = settings.ngram
    # A text has len - n + 1 n-grams; one of fewer than n units has one shorter n-gram.
    short = np.flatnonzero((lengths > 0) & (lengths < n))
    counts = np.maximum(lengths - (n - 1), 0)
    counts[short] = 1
    docs = np.repeat(np.arange(len(lengths)), counts)  # in text order
    short_at = (np.cumsum(counts) - 1)[short]  # where a short text's one n-gram goes
    total = int(lengths.sum())
    hashes = np.empty(len(docs), dtype=np.uint64)
    if total >= n:
        joined = np.concatenate(unit_arrays)
        # Windows that start within n - 1 units before a text's end straddle two texts (or more).
        inside = np.ones(total - n + 1, dtype=bool)
        if n > 1 and len(lengths) > 1:
            straddling = (np.cumsum(lengths[:-1])[:, None] - np.arange(1, n)).ravel()
            inside[straddling[(straddling >= 0) & (straddling < len(inside))]] = False
        windows = ngram_hashes(joined, n)[inside]
        if len(short):
            whole = np.ones(len(docs), dtype=bool)
            whole[short_at] = False
            hashes[whole] = windows
        else:
            hashes = windows
    for i, position in zip(short.tolist(), short_at.tolist()):
        hashes[position] = ngram_hashes(unit_arrays[i], n)[0]
    if settings.weights == "count":
        return docs, hashes, np.ones(len(hashes), dtype=np.int64)
    docs, hashes = _sorted_within_documents(docs, hashes)
    starts_run = np.ones(len(hashes), dtype=bool)
    starts_run[1:] = (docs[1:] != docs[:-1]) | (hashes[1:] != hashes[:-1])
    first = np.flatnonzero(starts_run)
    counts = np.diff(np.append(first, len(hashes)))
    return docs[first], hashes[first], feature_weights(counts, settings.weights)


def _sorted_within_documents(
    docs: np.ndarray, hashes: np.ndarray, min_features: float = PER_DOCUMENT_SORT_MIN_FEATURES
) -> tuple[np.ndarray, np.ndarray]:
    """The (doc, hash) pairs sorted by document, then hash; docs is nondecreasing (texts in order).

    Sorting each document's slice in place is several times faster than a two-key lexsort
    (bench/add_speed.py), but costs a numpy call per document: for texts of a dozen features or
    fewer the lexsort is faster.
    """
    bounds = np.flatnonzero(docs[1:] != docs[:-1]) + 1
    if len(hashes) < min_features * (len(bounds) + 1):
        order = np.lexsort((hashes, docs))
        return docs[order], hashes[order]
    edges = [0, *bounds.tolist(), len(hashes)]
    for start, end in zip(edges, edges[1:]):
        hashes[start:end].sort()
    return docs, hashes


def weighted_features(text: str, settings: FingerprintSettings) -> tuple[np.ndarray, np.ndarray]:
    """Distinct feature hashes (uint64) and their integer weights. Both empty for a featureless text."""
    return weigh(ngram_hashes(units(text, settings), settings.ngram), settings.weights)


def weigh(hashes: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Distinct hashes and integer weights from their counts: count, round(1000 * (1 + ln count)), or 1."""
    distinct, counts = np.unique(hashes, return_counts=True)
    return distinct, feature_weights(counts, kind)


def feature_weights(counts: np.ndarray, kind: str) -> np.ndarray:
    """Integer weights from term counts: count, round(1000 * (1 + ln count)), or 1."""
    if kind == "count":
        return counts.astype(np.int64)
    if kind == "log":
        return np.rint(WEIGHT_SCALE * (1.0 + np.log(counts))).astype(np.int64)
    return np.ones(len(counts), dtype=np.int64)


def distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (np.unique, without its slow hash-table path in numpy 2.3+)."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
