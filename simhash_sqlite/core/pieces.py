"""SimHash of a text too large to hold in memory, from its pieces.

A text is fingerprinted piece by piece if each piece's n-grams are hashed once, carrying the last n-1
units over to the next piece. With count weights the bit sums are additive over n-gram positions: bit i
sums +1 for every n-gram whose hash has it set and -1 otherwise, so nothing is kept but 64 sums. Binary
and log weights need each distinct feature once, with its total count: the pieces' distinct hashes are
gathered in memory up to SPILL_HASHES, and beyond that written to temporary files partitioned by their
top byte, then each partition is read back on its own. The result is bit-identical to simhash() on the
whole text; memory stays about one piece plus SPILL_HASHES (plus one partition at the end), and the
temporary files (in TMPDIR) take up to 8 bytes per distinct feature (16 with log weights).

The pieces must normalize and split into units the same way as the whole, so texts are cut only
where that is certain (see cut_points): before a character with a normalization boundary (ASCII
or a CJK ideograph), after one that cannot combine with it, and for words only after whitespace.
"""

from __future__ import annotations

import os
import re
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator

import numpy as np

from ..errors import InvalidInput
from .features import WORD, feature_weights, ngram_hashes, word_units, words
from .settings import FingerprintSettings
from .sketch import DEFAULT_SCHEME, SketchScheme, add_to_minima, empty_minima, shares_features, sketch_from_minima

_SPACE = re.compile(r"\s+")  # the same split as features.normalize's str.split()
_SAFE = "\\x21-\\x7e\\u4e00-\\u9fff"
# chars: between two ASCII/CJK characters, or after ASCII whitespace and before one of them.
_CHARS_CUT = re.compile(f"(?<=[{_SAFE} \\t\\n\\r])(?=[{_SAFE}])")
# words: only after ASCII whitespace, so no word, Han run (jieba) or whitespace run is split.
_WORDS_CUT = re.compile(f"(?<=[ \\t\\n\\r])(?=[{_SAFE}])")

PIECE_CHARS = 1 << 20  # about 1 M characters per piece: ~130 MiB peak RSS in all, and no slower than 4 M
MAX_UNCUT_CHARS = 1 << 26  # refuse a text with no place to cut in 64 M characters
# Distinct feature hashes held in memory (8 bytes each, 16 with counts) before they go to disk.
SPILL_HASHES = 1 << 22
PARTITIONS = 256  # temporary files by the top byte of the hash: one is read back at a time
# Row v: the 8 bits of the byte value v, most significant first.
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.int64)


def pieces(chunks: Iterable[str], settings: FingerprintSettings, size: int = PIECE_CHARS) -> Iterator[str]:
    """Re-cut arbitrary chunks of a text into pieces of about `size` characters at safe places."""
    cut = _WORDS_CUT if settings.features == "words" else _CHARS_CUT
    buffer = ""
    for chunk in chunks:
        buffer += chunk
        while len(buffer) >= size:
            at = _last_cut(cut, buffer, size)
            if at is None:
                if len(buffer) > MAX_UNCUT_CHARS:
                    raise InvalidInput(
                        f"no place to cut the text into pieces within {MAX_UNCUT_CHARS:,} characters "
                        f"({'no whitespace' if settings.features == 'words' else 'no ASCII or CJK characters'})"
                    )
                break  # read more and look again
            yield buffer[:at]
            buffer = buffer[at:]
    if buffer:
        yield buffer


def _last_cut(cut: re.Pattern, buffer: str, size: int) -> int | None:
    """The last safe cut at or before `size` (searched in growing windows below it, since nearly every
    place is one in most texts), else any later one, else None."""
    end = min(size, len(buffer) - 1)
    for start in (end - 256, end - 65536, 1):
        found = None
        for found in cut.finditer(buffer, max(1, start), end):
            pass
        if found is not None:
            return found.start()
        if start <= 1:
            break
    later = cut.search(buffer, max(1, end), len(buffer) - 1)
    return later.start() if later is not None else None


def bit_counts(hashes: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """How many of the uint64 hashes have each bit set (or the sum of their integer weights), most
    significant bit first (64 int64s).

    Per byte position, a histogram of the 256 byte values times their bits: no N x 64 bit matrix.
    """
    as_bytes = hashes.astype(">u8").view(np.uint8).reshape(-1, 8)
    if weights is None:
        return np.concatenate([np.bincount(as_bytes[:, j], minlength=256) @ _BYTE_BITS for j in range(8)])
    # float64 sums of integer weights are exact below 2**53: a histogram per byte, in integers again.
    w = weights.astype(np.float64)
    return np.concatenate(
        [np.rint(np.bincount(as_bytes[:, j], weights=w, minlength=256)).astype(np.int64) @ _BYTE_BITS for j in range(8)]
    )


def simhash_pieces(
    chunks: Iterable[str], settings: FingerprintSettings, *, piece_chars: int = PIECE_CHARS,
    spill_hashes: int = SPILL_HASHES,
) -> int | None:
    """simhash(''.join(chunks), settings) without joining them, for every kind of weights."""
    return _simhash_of_pieces(piece_hashes(chunks, settings, piece_chars), settings, spill_hashes)[0]


def simhash_and_sketch_pieces(
    chunks: Iterable[str], settings: FingerprintSettings, *, piece_chars: int = PIECE_CHARS,
    spill_hashes: int = SPILL_HASHES, scheme: SketchScheme = DEFAULT_SCHEME,
) -> tuple[int | None, bytes | None]:
    """simhash_pieces() and sketch.sketch() of the whole text, in the same pass: a sketch is the bin
    minima of the text's shingle hashes, and the minima of the whole are the minima of its pieces'.
    The distinct-shingle count (a scheme that records it) comes from the binary and log weights'
    distinct features; with count weights, which keep none, the sketch records it as unknown.
    The sketch is None where the settings hash other shingles than a sketch's (words, other n)."""
    if not shares_features(settings):
        return simhash_pieces(chunks, settings, piece_chars=piece_chars, spill_hashes=spill_hashes), None
    minima = empty_minima(1, scheme)

    def tapped() -> Iterator[np.ndarray | None]:
        for hashes in piece_hashes(chunks, settings, piece_chars):
            if hashes is not None:
                add_to_minima(minima, np.zeros(len(hashes), dtype=np.intp), hashes)
            yield hashes

    fingerprint, distinct = _simhash_of_pieces(tapped(), settings, spill_hashes)
    if fingerprint is None:
        return None, None
    rows, present = sketch_from_minima(minima, scheme, None if distinct is None else np.array([distinct]))
    return fingerprint, rows[0].tobytes() if present[0] else None


def _simhash_of_pieces(
    hash_pieces: Iterable[np.ndarray | None], settings: FingerprintSettings, spill_hashes: int
) -> tuple[int | None, int | None]:
    """The fingerprint from piece_hashes()'s pieces, and the number of distinct features (None with
    count weights, which do not gather them)."""
    if settings.weights == "count":
        ones = np.zeros(64, dtype=np.int64)
        total = 0
        for hashes in hash_pieces:
            if hashes is None:
                return None, None
            total += len(hashes)
            ones += bit_counts(hashes)
        return _bits(ones, total), None
    with DistinctFeatures(with_counts=settings.weights == "log", spill_hashes=spill_hashes) as features:
        for hashes in hash_pieces:
            if hashes is None:
                return None, None
            features.add(hashes)
        ones = np.zeros(64, dtype=np.int64)
        total = distinct_total = 0
        for distinct, counts in features.groups():
            weights = feature_weights(counts, settings.weights) if counts is not None else None
            total += len(distinct) if weights is None else int(weights.sum())
            distinct_total += len(distinct)
            ones += bit_counts(distinct, weights)
        return _bits(ones, total), distinct_total


def _bits(ones: np.ndarray, total: int) -> int | None:
    if total == 0:
        return None
    return int.from_bytes(np.packbits((2 * ones - total) > 0).tobytes(), "big")


def piece_hashes(chunks: Iterable[str], settings: FingerprintSettings, piece_chars: int = PIECE_CHARS):
    """The n-gram hashes of the whole text, piece by piece (every n-gram once); a last None when the
    text has no features (no letter or digit), as simhash() gives None for it."""
    n = settings.ngram
    carry = np.empty(0, dtype=np.uint64)  # the last n-1 units seen (all of them while fewer)
    started = False  # a unit has been emitted: leading whitespace is gone
    held_space = False  # a trailing space, kept back until a later piece shows it is not the end
    has_word = False  # a text without a letter or digit has no features (as in features.units)
    emitted = False
    for piece in pieces(chunks, settings, piece_chars):
        if settings.features == "chars":
            text = _fold_space(unicodedata.normalize("NFKC", piece).casefold())
            if not started:
                text = text.lstrip(" ")
            if not text:
                continue
            if held_space:
                text = " " + text
            held_space = text.endswith(" ")
            text = text.removesuffix(" ")
            has_word = has_word or bool(WORD.search(text))
            new = np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.uint64)
        else:
            new = word_units(words(piece, settings.hmm))
            has_word = has_word or len(new) > 0
        if len(new) == 0:
            continue
        started = True
        combined = np.concatenate([carry, new])
        if len(combined) >= n:
            emitted = True
            yield ngram_hashes(combined, n)
        carry = combined[max(0, len(combined) - (n - 1)) :]
    if not has_word:
        yield None
    elif not emitted:
        # Fewer than n units in all: one short n-gram over them, as simhash() does.
        short = ngram_hashes(carry, n)
        yield short if len(short) else None


def _fold_space(text: str) -> str:
    """Every run of whitespace as one space, those at either end kept (as _SPACE.sub(" ", text), faster)."""
    if not text:
        return text
    folded = " ".join(text.split())
    if text[0].isspace():
        folded = " " + folded if folded else " "
    if text[-1].isspace() and folded != " ":
        folded += " "
    return folded


class DistinctFeatures:
    """The distinct feature hashes of a stream of hash arrays, with their counts when asked for, in
    bounded memory: in memory up to spill_hashes, beyond that in PARTITIONS temporary files."""

    def __init__(self, *, with_counts: bool, spill_hashes: int = SPILL_HASHES) -> None:
        self.with_counts, self.spill_hashes = with_counts, spill_hashes
        self.held: list[tuple[np.ndarray, np.ndarray | None]] = []
        self.held_count = 0
        self.folder: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> DistinctFeatures:
        return self

    def __exit__(self, *exc) -> None:
        if self.folder is not None:
            self.folder.cleanup()

    def add(self, hashes: np.ndarray) -> None:
        self.held.append(_distinct(hashes, None if not self.with_counts else np.ones(len(hashes), np.int64)))
        self.held_count += len(self.held[-1][0])
        if self.held_count > self.spill_hashes:
            self.held = [self._merged()]  # repeats across pieces fold first: often far fewer to write
            self.held_count = len(self.held[0][0])
            if self.held_count > self.spill_hashes // 2:
                self._spill()

    def _merged(self) -> tuple[np.ndarray, np.ndarray | None]:
        hashes = np.concatenate([h for h, _ in self.held]) if self.held else np.empty(0, np.uint64)
        counts = np.concatenate([c for _, c in self.held]) if self.with_counts and self.held else None
        if self.with_counts and counts is None:
            counts = np.empty(0, np.int64)
        return _distinct(hashes, counts)

    def _spill(self) -> None:
        hashes, counts = self._merged()
        self.held, self.held_count = [], 0
        if self.folder is None:
            self.folder = tempfile.TemporaryDirectory(prefix="simhash-features-")
        # Sorted, so each partition (by the top byte) is one slice.
        starts = np.arange(PARTITIONS, dtype=np.uint64) << np.uint64(56)  # 256 partitions: the top byte
        bounds = np.append(np.searchsorted(hashes, starts), len(hashes))
        for part in range(PARTITIONS):
            lo, hi = bounds[part], bounds[part + 1]
            if lo == hi:
                continue
            with open(os.path.join(self.folder.name, f"{part}.h"), "ab") as handle:
                handle.write(hashes[lo:hi].tobytes())
            if counts is not None:
                with open(os.path.join(self.folder.name, f"{part}.c"), "ab") as handle:
                    handle.write(counts[lo:hi].tobytes())

    def groups(self) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """(distinct hashes, their counts or None) in groups that together hold every feature once."""
        if self.folder is None:
            yield self._merged()
            return
        self._spill()
        for part in range(PARTITIONS):
            path = os.path.join(self.folder.name, f"{part}.h")
            if not os.path.exists(path):
                continue
            hashes = np.fromfile(path, dtype=np.uint64)
            counts = np.fromfile(path[:-1] + "c", dtype=np.int64) if self.with_counts else None
            yield _distinct(hashes, counts)


def _distinct(hashes: np.ndarray, counts: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Sorted distinct hashes, and the summed counts of each when counts are given. Sorts `hashes` in
    place (callers hand over arrays of their own): one copy less at the peak."""
    if counts is None:
        hashes.sort()
        ordered = hashes
    else:
        order = np.argsort(hashes, kind="stable")
        ordered = hashes[order]
    starts = np.ones(len(ordered), dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    distinct = ordered[starts]
    if counts is None:
        return distinct, None
    return distinct, np.add.reduceat(counts[order], np.flatnonzero(starts)) if len(ordered) else counts[:0]
