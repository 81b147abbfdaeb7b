"""What an exact 5-shingle Jaccard of a short text needs, small enough to keep without the text: the text
with its whitespace runs folded (all the check's shingles see, shingles.fold_space), deflated.

The sketch's estimate spreads widely for short texts (a 944-bin sketch of a 100-shingle text is mostly
densification), so a text whose deflated form takes at most SHORT_TEXT_BYTES keeps it beside its sketch,
and a pair of two such texts is checked exactly. The cut and the encoding come from
bench/short_text_cost.py on a tuning set of 50-500 character texts: the deflated text is 2-4 times
smaller than the text's distinct shingle hashes cut to 32 bits (varint or Golomb-Rice gaps), and exact;
at 384 bytes F1 without stored texts rose from 0.959 to 0.9997 (English) and from 0.884 to 0.993
(Chinese), for a mean of 102 more bytes a text (English) and 169 (Chinese); on bench/crawl.py's pages
(150-6,000 characters) a quarter of the pages are that short and the index grows 58 bytes a page.

Format (SHORT_TEXT_FORMAT 1): one byte naming the encoding of the folded text, 0 for UTF-8 and 1 for
UTF-16-LE (Chinese and Japanese texts deflate smaller so), then its raw deflate stream (level 9). A text
of more than 4 * SHORT_TEXT_BYTES bytes of UTF-8 is not tried.
"""

from __future__ import annotations

import json
import zlib

import numpy as np

from .shingles import fold_space, shingle_set

SHORT_TEXT_BYTES = 384
SHORT_TEXT_FORMAT = 1
_ENCODINGS = ("utf-8", "utf-16-le")


def short_text_scheme() -> str:
    """What an index records in simhash_meta ('short_texts') when it keeps the exact data of short texts."""
    return json.dumps({"bytes": SHORT_TEXT_BYTES, "format": SHORT_TEXT_FORMAT}, sort_keys=True)


def _deflated(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


def short_text_data(text: str, limit: int = SHORT_TEXT_BYTES) -> bytes | None:
    """The stored form of a text whose exact check data takes at most `limit` bytes, else None: a longer
    text, one with nothing but whitespace, or one of more than 4 * limit bytes of UTF-8 once folded (deflate
    seldom shrinks text that much, and the cap keeps `add` from deflating long texts to no end)."""
    folded = fold_space(text)
    utf8 = folded.encode("utf-8", "surrogatepass")
    if not folded or len(utf8) > 4 * limit:
        return None
    best = bytes((0,)) + _deflated(utf8)
    if not folded.isascii():  # (UTF-16 only pays where characters take 3 bytes of UTF-8)
        wide = bytes((1,)) + _deflated(folded.encode("utf-16-le", "surrogatepass"))
        best = wide if len(wide) < len(best) else best
    return best if len(best) <= limit else None


def short_text_of(data: bytes) -> str:
    """The folded text back from short_text_data(). ValueError where the data is not of this format."""
    if not data or data[0] >= len(_ENCODINGS):
        raise ValueError("not a stored short text")
    try:
        unpacker = zlib.decompressobj(-15)
        raw = unpacker.decompress(data[1:], 1 << 20)
        if not unpacker.eof or unpacker.unconsumed_tail:
            raise ValueError("a stored short text that does not end")
        return raw.decode(_ENCODINGS[data[0]], "surrogatepass")
    except (zlib.error, UnicodeDecodeError) as exc:
        raise ValueError(f"a damaged stored short text: {exc}") from None


def short_text_shingles(data: bytes | None) -> np.ndarray | None:
    """The shingle set (shingles.shingle_set) of a stored short text; None where there is none or it cannot
    be read (its pairs are then estimated)."""
    if data is None:
        return None
    try:
        return shingle_set(short_text_of(data))
    except ValueError:
        return None
