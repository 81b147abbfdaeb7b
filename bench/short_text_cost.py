"""What exact data for short texts costs, and what it buys: F1 of `dupes` without stored texts against
the bytes stored per document, for a range of size cuts.

    .venv/bin/python bench/short_text_cost.py tune.jsonl [--cuts 0,64,128,...]

Input: a set from bench/short_texts.py (or any JSONL with 'text' and 'lang'). Part 1 compares the
encodings of what an exact 5-shingle Jaccard needs, bytes per document by language: the whitespace-folded
text deflated (raw deflate, level 9, UTF-8 or UTF-16-LE), its distinct shingle hashes cut to 32 bits
(sorted, gaps as LEB128 varints, or Golomb-Rice coded) and the full 64-bit hashes (sorted, varint gaps).

Part 2 is the curve. A text whose stored form (core/short_texts.py's encoding: one byte, then the folded
text deflated, as UTF-16 where UTF-8 takes over 2 bytes a character) takes at most `cut` bytes keeps it;
a pair of two such texts is judged by the exact Jaccard, any other pair by the sketches' estimate (sketch.py,
120 bytes), as `simq dupes` judges them without stored texts. Candidates are the sketches' LSH pairs (sketch_pairs)
down to the threshold less confirm.EXACT_MARGIN where exact data could raise them, else at the threshold.
Truth: every pair of exact Jaccard >= 0.8 (bench/quality.py's truth_pairs). Bytes per document: the
sketch plus the mean stored exact data (its column's few bytes of record overhead not counted).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from quality import prf, truth_pairs

from simhash_sqlite.core.shingles import fold_space, jaccard_of_sets, shingle_set
from simhash_sqlite.core.short_texts import SHORT_TEXT_MOST, encoded
from simhash_sqlite.core.sketch import DEFAULT_SCHEME, sketch_many
from simhash_sqlite.find.check import EXACT_MARGIN
from simhash_sqlite.find.sketch_pairs import sketch_pairs

THRESHOLD = 0.8
NEVER = 1 << 30


def deflated(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


def varint_bytes(gaps: np.ndarray) -> int:
    gaps = gaps.astype(np.float64)
    return int(np.sum(np.maximum(1, np.ceil(np.log2(gaps + 1) / 7))))


def rice_bytes(values: np.ndarray, space: float) -> int:
    """Golomb-Rice code of sorted distinct values in [0, space): k = log2 of the mean gap, plus a size byte."""
    if len(values) == 0:
        return 1
    gaps = np.diff(np.concatenate(([0], values.astype(np.float64))))
    k = max(0, int(math.floor(math.log2(max(space / len(values), 1.0)))))
    bits = np.sum(np.floor(gaps / 2**k) + 1 + k)
    return 1 + int(math.ceil(bits / 8))


def stored_size(text: str) -> int:
    """Bytes of the stored form, whatever the cut (NEVER where a text is never kept: too long, or blank)."""
    data = encoded(text) if len(text) <= SHORT_TEXT_MOST else None
    return NEVER if data is None else len(data)


def encodings(text: str) -> dict[str, int]:
    folded = fold_space(text)
    shingles = shingle_set(text)
    low32 = np.unique(shingles & np.uint64(0xFFFFFFFF))
    return {
        "deflate utf-8": len(deflated(folded.encode("utf-8"))),
        "stored (short_texts.encoded)": stored_size(text),
        "deflate best of utf-8/utf-16": 1 + min(len(deflated(folded.encode("utf-8"))),
                                               len(deflated(folded.encode("utf-16-le")))),
        "32-bit hashes, varint gaps": varint_bytes(np.diff(np.concatenate(([0], low32)))),
        "32-bit hashes, Rice": rice_bytes(low32, 2.0**32),
        "64-bit hashes, varint gaps": varint_bytes(np.diff(np.concatenate(([0], shingles.astype(np.float64))))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl")
    parser.add_argument("--cuts", default="0,48,64,96,128,160,192,256,320,384,512,1024")
    args = parser.parse_args()
    by_language: dict[str, list[str]] = {}
    with open(args.jsonl, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            by_language.setdefault(record["lang"], []).append(record["text"])
    cuts = [int(c) for c in args.cuts.split(",")]
    for lang, texts in sorted(by_language.items()):
        costs = [encodings(t) for t in texts]
        print(f"\n{lang}: {len(texts)} texts, mean {np.mean([len(t) for t in texts]):.0f} characters")
        for name in costs[0]:
            sizes = [c[name] for c in costs if c[name] < NEVER]
            print(f"  {name:32} {np.mean(sizes):7.1f} bytes a text")
        sets = [shingle_set(t) for t in texts]
        truth, _ = truth_pairs(sets, THRESHOLD)
        rows, _ = sketch_many(texts, DEFAULT_SCHEME)
        stored = np.array([c["stored (short_texts.encoded)"] for c in costs])
        n = len(texts)
        candidates = [p for p in sketch_pairs(rows, THRESHOLD - EXACT_MARGIN, DEFAULT_SCHEME)]
        left = np.concatenate([p.left for p in candidates])
        right = np.concatenate([p.right for p in candidates])
        estimate = np.concatenate([p.estimate for p in candidates])
        lo, hi = np.minimum(left, right), np.maximum(left, right)
        exact = np.array([jaccard_of_sets(sets[a], sets[b]) for a, b in zip(lo.tolist(), hi.tolist())])
        keys = lo * n + hi
        print(f"  {len(truth)} true pairs, {len(keys)} candidates (estimate >= {THRESHOLD - EXACT_MARGIN:.2f})")
        print("  cut (bytes)  texts kept exact  bytes a text  precision  recall   F1")
        for cut in cuts:
            short = stored <= cut
            both = short[lo] & short[hi]
            keep = np.where(both, exact >= THRESHOLD, estimate >= THRESHOLD)
            found = keys[keep]
            p, r, f1 = prf(int(np.isin(found, truth).sum()), len(found), len(truth))
            extra = float(np.where(short, stored, 0).mean())
            size = DEFAULT_SCHEME.nbytes + extra
            print(f"  {cut:>11}  {short.mean():16.1%}  {size:12.1f}  {p:9.4f}  {r:.4f}  {f1:.4f}")


if __name__ == "__main__":
    main()
