"""SimHash of a text too large to hold in memory, from its pieces: pure functions, no I/O.

With count weights a fingerprint's bit sums are additive over n-gram positions: bit i sums +1 for
every n-gram whose hash has it set and -1 otherwise, so a text can be fingerprinted piece by piece
if each piece's n-grams are counted once, carrying the last n-1 units over to the next piece. The
result is bit-identical to simhash() on the whole text. Log and binary weights need every distinct
feature's total count first, which is not bounded memory; they are refused.

The pieces must normalize and split into units the same way as the whole, so texts are cut only
where that is certain (see cut_points): before a character with a normalization boundary (ASCII
or a CJK ideograph), after one that cannot combine with it, and for words only after whitespace.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator

import numpy as np

from .errors import InvalidInput
from .features import WORD, ngram_hashes, word_units, words
from .settings import FingerprintSettings

_SPACE = re.compile(r"\s+")  # the same split as features.normalize's str.split()
_SAFE = "\\x21-\\x7e\\u4e00-\\u9fff"
# chars: between two ASCII/CJK characters, or after ASCII whitespace and before one of them.
_CHARS_CUT = re.compile(f"(?<=[{_SAFE} \\t\\n\\r])(?=[{_SAFE}])")
# words: only after ASCII whitespace, so no word, Han run (jieba) or whitespace run is split.
_WORDS_CUT = re.compile(f"(?<=[ \\t\\n\\r])(?=[{_SAFE}])")

PIECE_CHARS = 1 << 20  # about 1 M characters per piece: ~130 MiB peak RSS in all, and no slower than 4 M
MAX_UNCUT_CHARS = 1 << 26  # refuse a text with no place to cut in 64 M characters
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
    """The last safe cut in buffer (searched near `size` first), or None."""
    for start in (max(1, size - 65536), 1):
        found = None
        for found in cut.finditer(buffer, start, len(buffer) - 1):
            pass
        if found is not None and found.start() > 0:
            return found.start()
    return None


def bit_counts(hashes: np.ndarray) -> np.ndarray:
    """How many of the uint64 hashes have each bit set, most significant bit first (64 int64s).

    Per byte position, a histogram of the 256 byte values times their bits: no N x 64 bit matrix.
    """
    as_bytes = hashes.astype(">u8").view(np.uint8).reshape(-1, 8)
    return np.concatenate([np.bincount(as_bytes[:, j], minlength=256) @ _BYTE_BITS for j in range(8)])


def simhash_pieces(
    chunks: Iterable[str], settings: FingerprintSettings, *, piece_chars: int = PIECE_CHARS
) -> int | None:
    """simhash(''.join(chunks), settings) without joining them; needs count weights."""
    if settings.weights != "count":
        raise InvalidInput(
            f"only count weights can fingerprint a text piece by piece (this index uses {settings.weights} weights)"
        )
    n = settings.ngram
    ones = np.zeros(64, dtype=np.int64)
    total = 0
    carry = np.empty(0, dtype=np.uint64)  # the last n-1 units seen (all of them while fewer)
    started = False  # a unit has been emitted: leading whitespace is gone
    held_space = False  # a trailing space, kept back until a later piece shows it is not the end
    has_word = False  # a text without a letter or digit has no features (as in features.units)
    for piece in pieces(chunks, settings, piece_chars):
        if settings.features == "chars":
            text = _SPACE.sub(" ", unicodedata.normalize("NFKC", piece).casefold())
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
            hashes = ngram_hashes(combined, n)
            total += len(hashes)
            ones += bit_counts(hashes)
        carry = combined[max(0, len(combined) - (n - 1)) :]
    if not has_word:
        return None
    if total == 0:
        # Fewer than n units in all: one short n-gram over them, as simhash() does.
        short = ngram_hashes(carry, n)
        if len(short) == 0:
            return None
        total = len(short)
        ones = bit_counts(short)
    return int.from_bytes(np.packbits((2 * ones - total) > 0).tobytes(), "big")
