"""Can the sketch's estimate be sharpened near the 0.8 line without more bytes? Three tries, on a tuning set.

    .venv/bin/python bench/estimate_limits.py TUNE_ZH.jsonl TUNE_EN.jsonl [--originals 300] [--seed 5]

Texts as in bench/quality.py (sections of the given documents, each with one perturbed copy of every
kind); truth: every pair with exact 5-shingle Jaccard >= 0.8. Judged pairs: the sketch-LSH candidates
with an estimate >= 0.6 (they hold every true pair; the script says so). For each, P/R/F1 of:

1. the cut on the estimate itself (is 0.8 the best place to cut a noisy estimate?);
2. the estimate clamped by a size ratio: J <= min(|A|, |B|) / max(|A|, |B|) holds for any two sets, and
   is tight for a cut copy; with the characters' ratio (the index stores `length`) and with the exact
   shingle-set sizes (which the index would have to store); "snap" also takes the ratio itself when the
   estimate is within delta of it (a cut copy's J is its size ratio);
3. an odd sketch (Mitzenmacher, Pagh, Pham 2014) of the same 960 bits over k MinHash values, against
   today's 960 one-bit bins: the standard deviation of the estimate at J = 0.7, 0.8, 0.9 by simulation
   of the binomial model (no text).
"""

from __future__ import annotations

import argparse
import random
import sys

import numpy as np
from common import print_machine
from quality import build_corpus, load_originals, truth_pairs

from simhash_sqlite.core.shingles import shingle_set
from simhash_sqlite.core.sketch import DEFAULT_SCHEME, sketch_many
from simhash_sqlite.find.sketch_pairs import sketch_pairs


def prf(keys: np.ndarray, truth: np.ndarray) -> str:
    tp = int(np.isin(keys, truth).sum())
    p, r = tp / max(1, len(keys)), tp / max(1, len(truth))
    return f"{p:.3f} | {r:.3f} | **{2 * p * r / max(1e-9, p + r):.3f}**"


def judged(texts: list[str]):
    sets = [shingle_set(t) for t in texts]
    truth, _ = truth_pairs(sets)
    rows, _ = sketch_many(texts)
    parts = list(sketch_pairs(rows, 0.6))
    left = np.concatenate([p.left for p in parts])
    right = np.concatenate([p.right for p in parts])
    estimate = np.concatenate([p.estimate for p in parts])
    chars = np.array([len(t) for t in texts], dtype=float)
    sizes = np.array([len(s) for s in sets], dtype=float)
    return truth, left * len(texts) + right, estimate, {
        "characters": np.minimum(chars[left], chars[right]) / np.maximum(chars[left], chars[right]),
        "shingle sets": np.minimum(sizes[left], sizes[right]) / np.maximum(sizes[left], sizes[right]),
    }


def odd_sketch_spread(rng: np.random.Generator, J: float, k: int, bits: int, trials: int) -> float:
    matches = rng.binomial(k, J, trials)
    differ = 2 * (k - matches)  # the symmetric difference of the two sets of (bin, minimum)
    odd = np.array([(np.bincount(rng.integers(0, bits, d), minlength=bits) % 2).sum() for d in differ])
    estimate = 1 - (-(bits / 2) * np.log(np.clip(1 - 2 * odd / bits, 1e-12, None))) / (2 * k)
    return float(estimate.std())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="+", help="JSONL files with a 'text' field (the tuning set)")
    parser.add_argument("--originals", type=int, default=300)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--trials", type=int, default=4000, help="simulated pairs per odd-sketch cell")
    args = parser.parse_args()
    print_machine()
    originals = load_originals(args.jsonl, args.originals, random.Random(args.seed))
    print(f"## Sharpening the estimate ({', '.join(args.jsonl)}; {args.originals} originals, seed {args.seed})\n")
    print("| lang | rule | P | R | F1 |")
    print("|---|---|---|---|---|")
    for lang, texts in originals.items():
        truth, keys, estimate, ratios = judged(build_corpus(lang, texts, args.seed).texts)
        if not np.isin(truth, keys).all():  # the rules below judge the candidates only: they must hold every true pair
            sys.exit(f"error: {lang}: a true pair is not among the judged candidates")
        for cut in (0.79, 0.795, 0.8, 0.805, 0.81):
            print(f"| {lang} | estimate >= {cut} | {prf(keys[estimate >= cut - 1e-12], truth)} |")
        for name, ratio in ratios.items():
            clamped = np.minimum(estimate, ratio)
            print(f"| {lang} | min(estimate, ratio of {name}) >= 0.8 | {prf(keys[clamped >= 0.8], truth)} |")
            for delta in (0.02, 0.04):
                snapped = np.where(np.abs(estimate - ratio) <= delta, ratio, clamped)
                found = prf(keys[snapped >= 0.8], truth)
                print(f"| {lang} | ... and snap to the ratio of {name} within {delta} | {found} |")
    rng = np.random.default_rng(args.seed)
    bits = DEFAULT_SCHEME.bins
    print(f"\n### Spread of the estimate: {bits} one-bit bins against an odd sketch of {bits} bits\n")
    print("| sketch | sd at J = 0.7 | J = 0.8 | J = 0.9 |")
    print("|---|---|---|---|")
    one_bit = [float((2 * rng.binomial(bits, (1 + J) / 2, args.trials * 5) / bits - 1).std()) for J in (0.7, 0.8, 0.9)]
    print(f"| {bits} one-bit bins (today) | " + " | ".join(f"{s:.4f}" for s in one_bit) + " |")
    for k in (256, 512, 1024, 1536):
        spreads = [odd_sketch_spread(rng, J, k, bits, args.trials) for J in (0.7, 0.8, 0.9)]
        print(f"| odd sketch of {k} MinHash values | " + " | ".join(f"{s:.4f}" for s in spreads) + " |")


if __name__ == "__main__":
    main()
