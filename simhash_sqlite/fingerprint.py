"""64-bit SimHash fingerprints and the arithmetic on them: pure functions, no I/O.

Charikar's SimHash: every feature's 64-bit hash votes +w on each bit where it has a 1 and -w where it
has a 0; bit i of the fingerprint is 1 if and only if its sum is > 0 (a tie, sum == 0, gives 0).

Fingerprints are unsigned 64-bit integers in the API and 16 hex digits when printed. SQLite integers
are signed, so the index stores the two's-complement int64 (to_signed / to_unsigned at the edges).
"""

from __future__ import annotations

import sys

import numpy as np

from .errors import InvalidInput
from .features import simhash_input
from .settings import FingerprintSettings

MASK64 = (1 << 64) - 1
BLOCKS = 4
BLOCK_BITS = 16
BLOCK_MASK = (1 << BLOCK_BITS) - 1


# Bit j (0 = most significant) of every byte value: byte histograms times this give the bit sums.
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.float64)
# Where byte i of a hash in memory goes among the 8 histograms (histogram 0 = most significant byte).
_BYTE_SLOT = (np.arange(8, dtype=np.intp) if sys.byteorder == "big" else np.arange(7, -1, -1, dtype=np.intp)) * 256


def simhash_of_features(hashes: np.ndarray, weights: np.ndarray) -> int | None:
    """The SimHash of feature hashes with integer weights; None when there are none.

    A hash may repeat: its weights add up, so all n-gram occurrences with weight 1 give the same
    fingerprint as the distinct n-grams weighted by their counts.
    """
    if len(hashes) == 0:
        return None
    # One histogram of weights per byte position and byte value (8 x 256), then per bit: 8 passes
    # over the features instead of 64. Integer-valued float64 sums are exact below 2**53, so the
    # order of the additions cannot change a bit.
    slots = (np.ascontiguousarray(hashes, dtype=np.uint64).view(np.uint8).reshape(-1, 8) + _BYTE_SLOT).ravel()
    unit = bool((weights == 1).all())
    histogram = np.bincount(slots, weights=None if unit else np.repeat(weights.astype(np.float64), 8), minlength=2048)
    ones = (histogram.reshape(8, 256).astype(np.float64) @ _BYTE_BITS).ravel()
    w = weights.astype(np.float64)
    fingerprint_bits = (2.0 * ones - w.sum()) > 0
    return int.from_bytes(np.packbits(fingerprint_bits).tobytes(), "big")


def simhash(text: str, settings: FingerprintSettings = FingerprintSettings()) -> int | None:
    """The fingerprint of a text, or None when it has no features (empty, or only spaces).

    None is deliberate: a featureless text has no content to compare, so it must never match.
    """
    return simhash_of_features(*simhash_input(text, settings))


def hamming(a: int, b: int) -> int:
    """Number of differing bits. Masks to 64 bits, so signed and unsigned forms may be mixed."""
    return ((a ^ b) & MASK64).bit_count()


def to_signed(fingerprint: int) -> int:
    """Unsigned 64-bit fingerprint to the int64 SQLite stores (two's complement)."""
    if not 0 <= fingerprint <= MASK64:
        raise InvalidInput(f"a fingerprint is an unsigned 64-bit integer, not {fingerprint}")
    return fingerprint - (1 << 64) if fingerprint >> 63 else fingerprint


def to_unsigned(value: int) -> int:
    """The int64 SQLite stores back to the unsigned fingerprint."""
    return value & MASK64


def to_hex(fingerprint: int) -> str:
    return f"{to_unsigned(fingerprint):016x}"


def from_hex(text: str) -> int:
    """Parse 16 hex digits (an optional 0x is allowed) into the unsigned fingerprint."""
    digits = text.strip().lower().removeprefix("0x")
    if not 1 <= len(digits) <= 16 or any(c not in "0123456789abcdef" for c in digits):
        raise InvalidInput(f"not a 64-bit hex fingerprint: {text!r}")
    return int(digits, 16)


def blocks(fingerprint: int) -> tuple[int, int, int, int]:
    """The four 16-bit blocks, most significant first (b0 = bits 63..48)."""
    f = to_unsigned(fingerprint)
    return tuple((f >> (BLOCK_BITS * (BLOCKS - 1 - i))) & BLOCK_MASK for i in range(BLOCKS))


def similarity(distance: int) -> float:
    """1 - distance/64: the share of agreeing bits (1.0 identical, about 0.5 unrelated)."""
    return 1.0 - distance / 64
