"""64-bit SimHash fingerprints and the arithmetic on them: pure functions, no I/O.

Charikar's SimHash: every feature's 64-bit hash votes +w on each bit where it has a 1 and -w where it
has a 0; bit i of the fingerprint is 1 if and only if its sum is > 0 (a tie, sum == 0, gives 0).

Fingerprints are unsigned 64-bit integers in the API and 16 hex digits when printed. SQLite integers
are signed, so the index stores the two's-complement int64 (to_signed / to_unsigned at the edges).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from .. import native
from ..errors import InvalidInput
from .features import batch_features, units, units_features
from .settings import FingerprintSettings

MASK64 = (1 << 64) - 1
BLOCKS = 4
BLOCK_BITS = 16
BLOCK_MASK = (1 << BLOCK_BITS) - 1
# Texts per vectorized pass, bounding its temporary arrays (a few tens of bytes per character).
CHUNK_CHARACTERS = 128_000  # measured: larger chunks fall out of the CPU caches
# A text longer than this many characters is fingerprinted and sketched piece by piece (pieces.py, _in_pieces):
# the same fingerprint and sketch, bit for bit, in about one piece's memory instead of ~46 bytes a character
# for the whole text's feature arrays (2.7 GB at 60 M characters).
LONG_TEXT = 1 << 22
# Row v: the 8 bits of byte value v, most significant first.
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.float64)


def simhash_of_features(hashes: np.ndarray, weights: np.ndarray) -> int | None:
    """The SimHash of distinct feature hashes with integer weights; None when there are none."""
    return simhash_of_batch(np.zeros(len(hashes), dtype=np.intp), hashes, weights, 1)[0]


def simhash(text: str, settings: FingerprintSettings = FingerprintSettings()) -> int | None:
    """The fingerprint of a text, or None when it has no features (empty, or no letters or digits).

    None is deliberate: a featureless text has no content to compare, so it must never match.
    """
    return simhash_many([text], settings)[0]


def simhash_many(
    texts: Sequence[str], settings: FingerprintSettings = FingerprintSettings(), *, utf8: list[bytes] | None = None
) -> list[int | None]:
    """simhash() of each text: by the C core where it is built and supports the settings (character
    n-grams), the texts it declines by the numpy reference; else by the reference alone. utf8: each
    text's UTF-8 ('surrogatepass'), where the caller has it, for the core's buffer (native.batch)."""
    if any(len(text) > LONG_TEXT for text in texts):
        from .pieces import simhash_pieces

        return _long_texts_apart(texts, lambda short: (simhash_many(short, settings),),
                                 lambda text: (simhash_pieces(_cut(text), settings),))[0]
    lib = native.core()
    if lib is None or not native.supports(settings) or not texts:
        return reference_simhash_many(texts, settings)
    values, _, status = native.batch(lib, texts, ngram=settings.ngram, weights=settings.weights, utf8=utf8)
    assert values is not None
    out = [v if s & native.HAS_FINGERPRINT else None for v, s in zip(values.tolist(), status.tolist())]
    declined = np.flatnonzero(status & native.DECLINED).tolist()
    if declined:
        for i, value in zip(declined, reference_simhash_many([texts[i] for i in declined], settings)):
            out[i] = value
    return out


def reference_simhash_many(
    texts: Sequence[str], settings: FingerprintSettings = FingerprintSettings()
) -> list[int | None]:
    """simhash_many() by the numpy reference, in vectorized chunks (much faster for many short texts)."""
    out: list[int | None] = []
    for chunk in _chunks(texts):
        docs, hashes, weights = batch_features(chunk, settings)
        out.extend(simhash_of_batch(docs, hashes, weights, len(chunk)))
    return out


def simhash_and_sketch_many(
    texts: Sequence[str], settings: FingerprintSettings | None = None, scheme=None, *, utf8: list[bytes] | None = None
) -> tuple[list[int | None], list[bytes | None]]:
    """simhash_many() and each text's sketch (sketch.sketch(), None without a letter or digit). With
    character 5-gram fingerprints (the default) both come from one pass over the shingle hashes.
    scheme: a sketch.SketchScheme (None: the default). utf8: as simhash_many's."""
    # Imported here: sketch -> shingles -> pairs -> fingerprint would be circular at import time.
    from .sketch import DEFAULT_SCHEME, sketch_many

    settings = FingerprintSettings() if settings is None else settings
    scheme = DEFAULT_SCHEME if scheme is None else scheme
    if any(len(text) > LONG_TEXT for text in texts):
        fingerprints, sketches = _long_texts_apart(
            texts, lambda short: simhash_and_sketch_many(short, settings, scheme),
            lambda text: _in_pieces(text, settings, scheme),
        )
        return fingerprints, sketches
    lib = native.core()
    if lib is None or not texts:
        return reference_simhash_and_sketch_many(texts, settings, scheme)
    if not native.supports(settings):  # jieba words: fingerprints by the reference, sketches by the core
        rows, present = sketch_many(texts, scheme)
        return reference_simhash_many(texts, settings), _blobs(rows, present)
    values, made, status = native.batch(
        lib, texts, ngram=settings.ngram, weights=settings.weights, scheme=scheme, utf8=utf8
    )
    assert values is not None and made is not None
    fingerprints = [v if s & native.HAS_FINGERPRINT else None for v, s in zip(values.tolist(), status.tolist())]
    sketches = _blobs(made, status & native.HAS_SKETCH)
    declined = np.flatnonzero(status & native.DECLINED).tolist()
    if declined:
        again = reference_simhash_and_sketch_many([texts[i] for i in declined], settings, scheme)
        for i, fingerprint, blob in zip(declined, *again):
            fingerprints[i], sketches[i] = fingerprint, blob
    return fingerprints, sketches


def reference_simhash_and_sketch_many(
    texts: Sequence[str], settings: FingerprintSettings, scheme
) -> tuple[list[int | None], list[bytes | None]]:
    """simhash_and_sketch_many() by the numpy reference."""
    from .sketch import SketchBatches, reference_sketch_many, shares_features

    if not shares_features(settings):
        rows, present = reference_sketch_many(texts, scheme)
        return reference_simhash_many(texts, settings), _blobs(rows, present)
    fingerprints: list[int | None] = []
    # Binary and log weights leave each text's hashes distinct already: counted without a sort.
    batches = SketchBatches(len(texts), scheme, distinct=settings.weights != "count")
    for chunk in _chunks(texts):
        docs, hashes, weights = units_features([units(text, settings) for text in chunk], settings)
        fingerprints.extend(simhash_of_batch(docs, hashes, weights, len(chunk)))
        batches.add(docs, hashes, len(chunk))
    return fingerprints, _blobs(*batches.finish())


def _long_texts_apart(texts: Sequence[str], many, one) -> tuple[list, ...]:
    """many(the texts up to LONG_TEXT) and one(text) for each longer one, merged back in order: lists of
    results, one list per thing computed (fingerprints; fingerprints and sketches)."""
    short = [text for text in texts if len(text) <= LONG_TEXT]
    computed = [iter(values) for values in many(short)] if short else None
    out: list[list] = []
    for text in texts:
        values = one(text) if len(text) > LONG_TEXT else tuple(next(it) for it in computed or ())
        if not out:
            out = [[] for _ in values]
        for column, value in zip(out, values):
            column.append(value)
    return tuple(out)


def _in_pieces(text: str, settings: FingerprintSettings, scheme) -> tuple[int | None, bytes | None]:
    """simhash_and_sketch_many([text]) of a long text, piece by piece. The sketch comes from the same pass
    when the settings hash the sketch's shingles with distinct features (binary, log); else from a
    second pass with binary weights, as sketch_many() makes it (its distinct-shingle count included)."""
    import dataclasses

    from .pieces import simhash_and_sketch_pieces, simhash_pieces
    from .sketch import SKETCH_FEATURES, shares_features

    if shares_features(settings) and settings.weights != "count":
        return simhash_and_sketch_pieces(_cut(text), settings, scheme=scheme)
    binary = dataclasses.replace(SKETCH_FEATURES, weights="binary")
    return simhash_pieces(_cut(text), settings), simhash_and_sketch_pieces(_cut(text), binary, scheme=scheme)[1]


def _cut(text: str) -> Iterator[str]:
    """A text as chunks for pieces.py, which re-cuts them at safe places."""
    step = 1 << 20
    return (text[i : i + step] for i in range(0, len(text), step))


def _blobs(rows: np.ndarray, present: np.ndarray) -> list[bytes | None]:
    """Each row's bytes where present (slices of one bytes object: a row at a time cost twice as much)."""
    flat, width = rows.tobytes(), rows.shape[1] if rows.ndim == 2 else 0
    return [flat[i * width : (i + 1) * width] if there else None for i, there in enumerate(present.tolist())]


def _chunks(texts: Sequence[str]) -> Iterator[list[str]]:
    """Runs of texts of about CHUNK_CHARACTERS in all, bounding the memory of one vectorized pass."""
    chunk, size = [], 0
    for text in texts:
        chunk.append(text)
        size += len(text)
        if size >= CHUNK_CHARACTERS:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def simhash_of_batch(docs: np.ndarray, hashes: np.ndarray, weights: np.ndarray, count: int) -> list[int | None]:
    """SimHash of the features of `count` documents; docs[i] says whose feature hashes[i] is
    (features.batch_features / units_features make these arrays).

    For each document and each of the 8 bytes of the hashes (most significant first), a weighted
    histogram of the byte's 256 values; a 256 x 8 table of bits turns the histograms into the weight
    of ones per bit. O(features) work. Integer-valued float64 sums are exact below 2**53, so neither
    summation order nor BLAS can change a bit. A bit is 1 iff its sum of +w/-w votes is > 0.
    """
    # Count weights of 1 (the default) need no weights array: bincount then counts, exactly.
    w = None if (weights == 1).all() else weights.astype(np.float64)
    columns = hashes.astype(">u8").view(np.uint8).reshape(-1, 8)
    base = docs * 256
    histograms = np.empty((count, 8, 256))
    for c in range(8):
        histograms[:, c, :] = np.bincount(base + columns[:, c], weights=w, minlength=count * 256).reshape(count, 256)
    ones = (histograms @ _BYTE_BITS).reshape(count, 64)
    totals = np.bincount(docs, weights=w, minlength=count)  # total weight per document
    bits = (2.0 * ones - totals[:, None]) > 0
    values = np.packbits(bits, axis=1).view(">u8").ravel().tolist()
    has_features = np.bincount(docs, minlength=count) > 0
    return [value if present else None for value, present in zip(values, has_features.tolist())]


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


def from_hex(text: str, *, whole: bool = False) -> int:
    """Parse up to 16 hex digits (an optional 0x is allowed) into the unsigned fingerprint. whole: exactly
    16, as to_hex() writes them (simq's --hash and a batch's "hash": a shorter one is a mistake, such as
    a decimal number or a cut copy, more often than a fingerprint with leading zeros left out)."""
    digits = text.strip().lower().removeprefix("0x")
    if not 1 <= len(digits) <= 16 or any(c not in "0123456789abcdef" for c in digits):
        raise InvalidInput(f"not a 64-bit hex fingerprint: {text!r}")
    if whole and len(digits) != 16:
        raise InvalidInput(f"a fingerprint is 16 hex digits (leading zeros included), not {len(digits)}: {text!r}")
    return int(digits, 16)


def blocks(fingerprint: int) -> tuple[int, int, int, int]:
    """The four 16-bit blocks, most significant first (b0 = bits 63..48)."""
    f = to_unsigned(fingerprint)
    b0, b1, b2, b3 = ((f >> (BLOCK_BITS * (BLOCKS - 1 - i))) & BLOCK_MASK for i in range(BLOCKS))
    return b0, b1, b2, b3


def similarity(distance: int) -> float:
    """1 - distance/64: the share of agreeing bits (1.0 identical, about 0.5 unrelated)."""
    return 1.0 - distance / 64
