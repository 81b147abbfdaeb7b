"""How well the sketch estimate's certainty is calibrated, on generated pairs of shingle sets.

    .venv/bin/python bench/certainty.py [--pairs 20000] [--seed 3]

Each pair is two sets of random 64-bit shingle hashes: a union of u shingles (log-uniform from 20 to
6,000), of which a share J (uniform from 0.6 to 1.0: a flat prior around the 0.8 line) is in both and
the rest split at random between the two (a share of the pairs all on one side: a containment, where
the size rule sharpens the estimate). Both are sketched as `simq add` sketches a text (sketch_hashes
with the distinct-shingle counts), estimated (estimate_many: the bins, sharpened by the sizes) and
judged at the 0.8 line with check.certainty. Printed: for each band of certainty, how many verdicts fell
in it and how many were right (the true J on the estimate's side of the line), against the band's
mean certainty; then the spread of the bins' estimate against the model (sketch.pair_spread) by size,
and how many verdicts are sure (certainty >= check.CERTAIN: no exact check needed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simhash_sqlite.core.sketch import (
    DEFAULT_SCHEME,
    agreeing_bins,
    estimate_from_agreeing,
    estimate_many,
    pair_spread,
    sizes_of,
    sketch_hashes,
)
from simhash_sqlite.find.verdict import CERTAIN, DEFAULT_THRESHOLD, certainty_of

BANDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, CERTAIN, 1.0 + 1e-9)


def generated(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Sketch rows of `count` pairs (rows 2i and 2i + 1) and the pairs' true Jaccard."""
    union = np.exp(rng.uniform(np.log(20), np.log(6000), count)).astype(np.int64)
    target = rng.uniform(0.6, 1.0, count)
    shared = np.maximum(1, np.rint(target * union)).astype(np.int64)
    rest = union - shared
    side = rng.uniform(0, 1, count)
    side[rng.uniform(0, 1, count) < 0.2] = 1.0  # a fifth are containments: all the rest on one side
    only_a = np.rint(rest * side).astype(np.int64)
    only_b = rest - only_a
    docs, hashes = [], []
    for i in range(count):
        both = rng.integers(0, 2**64 - 1, shared[i], dtype=np.uint64, endpoint=True)
        a = np.concatenate((both, rng.integers(0, 2**64 - 1, only_a[i], dtype=np.uint64, endpoint=True)))
        b = np.concatenate((both, rng.integers(0, 2**64 - 1, only_b[i], dtype=np.uint64, endpoint=True)))
        docs += [np.full(len(a), 2 * i), np.full(len(b), 2 * i + 1)]
        hashes += [a, b]
    rows, _ = sketch_hashes(np.concatenate(docs), np.concatenate(hashes), 2 * count, DEFAULT_SCHEME, distinct=True)
    return rows, shared / union


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    rows, truth = generated(args.pairs, rng)
    a, b = rows[0::2], rows[1::2]
    t = DEFAULT_THRESHOLD
    estimate = estimate_many(a, b, DEFAULT_SCHEME)
    sure = certainty_of(estimate, sizes_of(a, DEFAULT_SCHEME), sizes_of(b, DEFAULT_SCHEME), t, DEFAULT_SCHEME)
    right = (estimate >= t) == (truth >= t)
    print(f"{args.pairs:,} generated pairs, J uniform 0.6-1.0, threshold {t}")
    print("| certainty | verdicts | mean certainty | right | wrong |")
    print("|---|---:|---:|---:|---:|")
    for lo, hi in zip(BANDS, BANDS[1:]):
        band = (sure >= lo) & (sure < hi)
        if band.any():
            label = f"{lo:g}-{min(hi, 1):g}" if hi <= 1 else f">= {lo:g}"
            print(f"| {label} | {band.sum():,} | {sure[band].mean():.4f} | {right[band].mean():.4f} | "
                  f"{(~right[band]).sum():,} |")
    print(f"sure (certainty >= {CERTAIN}): {np.mean(sure >= CERTAIN):.1%} of the verdicts; "
          f"wrong among them: {(~right[sure >= CERTAIN]).sum():,}")
    # The bins' spread against the model, near the line (J 0.75-0.85), by the union's size.
    raw = estimate_from_agreeing(agreeing_bins(a, b, DEFAULT_SCHEME.bits, DEFAULT_SCHEME.bin_bytes), DEFAULT_SCHEME)
    sa, sb = sizes_of(a, DEFAULT_SCHEME), sizes_of(b, DEFAULT_SCHEME)
    model = pair_spread(truth, sa, sb, DEFAULT_SCHEME)
    union = (sa + sb) / (1 + truth)
    near = (truth >= 0.75) & (truth <= 0.85)
    print("| union shingles | pairs (J 0.75-0.85) | measured sd | model sd |")
    print("|---|---:|---:|---:|")
    for lo, hi in ((20, 60), (60, 150), (150, 400), (400, 1000), (1000, 2500), (2500, 6001)):
        band = near & (union >= lo) & (union < hi)
        if band.sum() > 20:
            print(f"| {lo}-{hi} | {band.sum():,} | {np.std(raw[band] - truth[band]):.4f} | "
                  f"{np.sqrt(np.mean(model[band] ** 2)):.4f} |")


if __name__ == "__main__":
    main()
