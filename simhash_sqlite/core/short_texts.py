"""What an exact 5-shingle Jaccard of a short text needs, small enough to keep without the text: the text
with its whitespace runs folded (shingles.fold_space), deflated. The check normalises it when read
(shingles.shingle_set: NFKC and case folded too, as every text it measures), which gives the same shingles
as the original text's: normalize(fold_space(x)) == normalize(x) (tests/test_normalize.py), so the format
stays byte for byte what indexes made before hold.

The sketch's estimate spreads widely for short texts (a 944-bin sketch of a 100-shingle text is mostly
densification), so a text whose deflated form takes at most SHORT_TEXT_BYTES keeps it beside its sketch,
and a pair of two such texts is checked exactly. The cut and the encoding come from
bench/short_text_cost.py on a tuning set of 50-500 character texts (bench/short_texts.py): the deflated
text is 2-4 times smaller than the text's distinct shingle hashes cut to 32 bits (varint or Golomb-Rice
gaps), and exact. F1 without stored texts rises with the cut, from 0.959 (English) and 0.884 (Chinese)
with the sketch alone to 0.9997 and 0.991 at 352 bytes, for a mean of 103 more bytes a text (English)
and 153 (Chinese). 352 is the largest cut that keeps an index of bench/crawl.py's pages (150-6,000
characters, a fifth of them that short) within 64 more bytes a page than the sketch alone: at 384 it
grew 67 (bench/dupes_scale.py at 200k pages).

Format (SHORT_TEXT_FORMAT 1): one byte naming the encoding of the folded text, 0 for UTF-8 and 1 for
UTF-16-LE (taken where UTF-8 needs more than 2 bytes a character: Chinese deflates 8% smaller so), then
its raw deflate stream (level 9). A text of more than SHORT_TEXT_MOST characters or UTF-8 bytes is not
tried, nor one whose folded text takes more than SHORT_TEXT_DEFLATED_MOST bytes in the encoding chosen, so
no stored form inflates to more than SHORT_TEXT_READ_MOST bytes: a reader (this module, the loadable
extension's sqlite_extension.c) refuses one that does, or whose stream does not end; bytes after the
stream's end are ignored.
"""

from __future__ import annotations

import json
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# The sizes are in core/rule.py (the loadable extension reads the same data). SHORT_TEXT_DEFLATED_MOST:
# deflate is most of the cost of the data (17 us a text of 750 bytes, whose fingerprint and sketch take 3;
# over a crawl's texts tried, as much CPU as all its fingerprints), and it seldom makes short text three
# times smaller: no text of the tuning set of more than 744 bytes took SHORT_TEXT_BYTES, nor of a crawl's
# 32k texts tried (bench/crawl.py) of more than 613; of that crawl's deflating, a fifth was of texts of
# more than 768 bytes.
from .rule import (  # noqa: F401 (importable here, as before)
    SHORT_TEXT_BYTES,
    SHORT_TEXT_DEFLATED_MOST,
    SHORT_TEXT_FORMAT,
    SHORT_TEXT_MOST,
    SHORT_TEXT_READ_MOST,
)

# shingles (numpy) is imported where it is used: reading a short text back (short_text_of) needs neither, and
# simq near --key reads one without numpy (find/quick_near.py).

_ENCODINGS = ("utf-8", "utf-16-le")


def short_text_scheme() -> str:
    """What an index records in simhash_meta ('short_texts') when it keeps the exact data of short texts."""
    return json.dumps({"bytes": SHORT_TEXT_BYTES, "format": SHORT_TEXT_FORMAT}, sort_keys=True)


def _deflated(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


def short_text_data(text: str, limit: int = SHORT_TEXT_BYTES) -> bytes | None:
    """The stored form of a text whose exact check data takes at most `limit` bytes, else None: a longer
    text, one with nothing but whitespace, or one of more than SHORT_TEXT_MOST characters, or UTF-8 bytes
    once folded, or SHORT_TEXT_DEFLATED_MOST bytes to deflate (deflate seldom shrinks short text that
    much, and `add` then never folds or deflates a long text)."""
    if len(text) > SHORT_TEXT_MOST:
        return None
    data = encoded(text)
    return data if data is not None and len(data) <= limit else None


def encoded(text: str) -> bytes | None:
    """The stored form of a text (None: nothing but whitespace, or too long to try)."""
    from .shingles import fold_space

    folded = fold_space(text)
    utf8 = folded.encode("utf-8", "surrogatepass")
    if not folded or len(utf8) > SHORT_TEXT_MOST:
        return None
    form, plain = 0, utf8
    if len(utf8) > 2 * len(folded):  # mostly characters of 3 bytes in UTF-8 (Chinese): 2 in UTF-16
        form, plain = 1, folded.encode("utf-16-le", "surrogatepass")
    if len(plain) > SHORT_TEXT_DEFLATED_MOST:
        return None
    return bytes((form,)) + _deflated(plain)


def short_text_of(data: bytes) -> str:
    """The folded text back from short_text_data(). ValueError where the data is not of this format."""
    if not data or data[0] >= len(_ENCODINGS):
        raise ValueError("not a stored short text")
    try:
        unpacker = zlib.decompressobj(-15)
        raw = unpacker.decompress(data[1:], SHORT_TEXT_READ_MOST + 1)
        if not unpacker.eof or unpacker.unconsumed_tail or len(raw) > SHORT_TEXT_READ_MOST:
            raise ValueError(f"a stored short text that does not end within {SHORT_TEXT_READ_MOST} bytes")
        text = raw.decode(_ENCODINGS[data[0]], "surrogatepass")
        text.encode("utf-8")  # a lone surrogate: no text add stores has one (the extension refuses it too)
        return text
    except (zlib.error, UnicodeError) as exc:
        raise ValueError(f"a damaged stored short text: {exc}") from None


def short_text_shingles(data: bytes | None) -> np.ndarray | None:
    """The shingle set (shingles.shingle_set) of a stored short text; None where there is none or it cannot
    be read (its pairs are then estimated)."""
    if data is None:
        return None
    from .shingles import shingle_set

    try:
        return shingle_set(short_text_of(data))
    except ValueError:
        return None
