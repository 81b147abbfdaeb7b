"""Sharpening the sketch's estimate near 0.8, on a tuning set: the size rule of version 2 sketches (what the
distinct-shingle count adds), and three other tries without more bytes.

    .venv/bin/python bench/estimate_rule.py TUNE_ZH.jsonl TUNE_EN.jsonl [--originals 300] [--seed 5] [--salts 8]
    .venv/bin/python bench/estimate_rule.py TUNE_ZH.jsonl TUNE_EN.jsonl --only tries   # 10 s: the three tries

## The size rule (--only rule)

Texts as in bench/quality.py (sections of the given documents, each with one perturbed copy of every
kind); truth: every pair with exact 5-shingle Jaccard >= 0.8. Judged pairs: the sketch-LSH candidates
with an estimate >= 0.55 (they hold every true pair; the script checks it). For each pair, P/R/F1 of
"value >= 0.8" where the value is:

- v1: the estimate of 960 one-bit bins (the sketch before version 2);
- v2 bins: the estimate of the 944 one-bit bins of version 2 alone (16 bins gave way to the count);
- v2 min: min(estimate, r), r = min(|A|, |B|) / max(|A|, |B|) of the recorded distinct counts (J <= r
  for any two sets);
- v2 snap c sd: r where |estimate - r| <= c standard deviations of the estimate at J = r (a containment,
  where J = r exactly), else min(estimate, r): sketch.sharpened, c = CONTAINMENT_SDS in the product;
- v2 snap 0.04: the same with a fixed width (the tries' snap below).

One sketch is one draw of the hashing: a single draw's F1 moves by about 0.005 from one hash to another.
So the sketches are also made with --salts - 1 other hash functions (the shingle hashes remixed with a
salt); the table gives the mean over all draws (draw 0 is the product's own hashing) and each rule's
mean gain over v1 on the same draws, with its smallest.

## Three tries (--only tries; the script estimate_limits.py before)

Judged pairs: the candidates of the product's sketches (sketch_many) with an estimate >= 0.6. P/R/F1 of:

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

from simhash_sqlite.core.features import char_units, mix, units_features
from simhash_sqlite.core.shingles import shingle_set
from simhash_sqlite.core.sketch import (
    DEFAULT_SCHEME,
    SCHEME_V1,
    SKETCH_FEATURES,
    agreeing_bins,
    estimate_from_agreeing,
    estimate_spread,
    sharpened,
    size_ratios,
    sketch_hashes,
    sketch_many,
)
from simhash_sqlite.find.sketch_pairs import sketch_pairs

THRESHOLD = 0.8


def prf(chosen: np.ndarray, keys: np.ndarray, truth: np.ndarray) -> np.ndarray:
    found = keys[chosen]
    tp = int(np.isin(found, truth).sum())
    p, r = tp / max(1, len(found)), tp / max(1, len(truth))
    return np.array([p, r, 2 * p * r / max(1e-9, p + r)])


def snapped(estimate: np.ndarray, ratio: np.ndarray, width: np.ndarray) -> np.ndarray:
    return np.where(np.abs(estimate - ratio) <= width, ratio, np.minimum(estimate, ratio))


def rules_of_one_draw(docs, hashes, n, left, right) -> dict[str, np.ndarray]:
    """The value of every rule for every judged pair, with sketches made from these shingle hashes."""
    v1, _ = sketch_hashes(docs, hashes, n, SCHEME_V1)
    v2, _ = sketch_hashes(docs, hashes, n, DEFAULT_SCHEME)
    old = estimate_from_agreeing(agreeing_bins(v1[left], v1[right], 1), SCHEME_V1)
    bins = estimate_from_agreeing(agreeing_bins(v2[left], v2[right], 1, DEFAULT_SCHEME.bin_bytes), DEFAULT_SCHEME)
    ratio = size_ratios(v2[left], v2[right], DEFAULT_SCHEME)
    spread = estimate_spread(ratio, DEFAULT_SCHEME)
    out = {"v1: 960 bins": old, "v2 bins alone (944)": bins, "v2 min(estimate, r)": np.minimum(bins, ratio)}
    for sds in (1.0, 1.5, 2.0, 2.5, 3.0):
        out[f"v2 snap within {sds:g} sd"] = snapped(bins, ratio, sds * spread)
    out["v2 snap within 0.04"] = snapped(bins, ratio, 0.04)
    # The product's own function (snap within CONTAINMENT_SDS): must equal its row above.
    out["v2 sketch.sharpened (product)"] = sharpened(bins, ratio, DEFAULT_SCHEME)
    return out


def prf_cell(keys: np.ndarray, truth: np.ndarray) -> str:
    p, r, f1 = prf(np.ones(len(keys), dtype=bool), keys, truth)
    return f"{p:.3f} | {r:.3f} | **{f1:.3f}**"


def size_rule(lang: str, corpus: list[str], truth: np.ndarray, salts: int) -> None:
    """The size rule's rows of one language: every rule on every draw of the hashing."""
    n = len(corpus)
    docs, hashes, _ = units_features([char_units(t) for t in corpus], SKETCH_FEATURES)
    v1, _ = sketch_hashes(docs, hashes, n, SCHEME_V1)
    parts = list(sketch_pairs(v1, 0.55, SCHEME_V1))
    left = np.concatenate([p.left for p in parts])
    right = np.concatenate([p.right for p in parts])
    keys = left * n + right
    if not np.isin(truth, keys).all():  # the rules below judge the candidates only: they must hold every true pair
        sys.exit(f"error: {lang}: a true pair is not among the judged candidates")
    scores: dict[str, list[np.ndarray]] = {}
    for salt in range(salts):
        drawn = hashes if salt == 0 else mix(hashes ^ np.uint64(salt * 0x9E3779B97F4A7C15 % 2**64))
        for name, value in rules_of_one_draw(docs, drawn, n, left, right).items():
            scores.setdefault(name, []).append(prf(value >= THRESHOLD - 1e-12, keys, truth))
    base = np.array(scores["v1: 960 bins"])
    for name, draws in scores.items():
        draws = np.array(draws)
        gain = draws[:, 2] - base[:, 2]
        p, r, f1 = draws.mean(axis=0)
        print(f"| {lang} | {name} | {p:.3f} | {r:.3f} | **{f1:.4f}** | {gain.mean():+.4f} | {gain.min():+.4f} |")


def tries(lang: str, corpus: list[str], sets: list, truth: np.ndarray) -> None:
    """The rows of tries 1 and 2 of one language: cuts, clamps and snaps of the product's estimate."""
    rows, _ = sketch_many(corpus)
    parts = list(sketch_pairs(rows, 0.6))
    left = np.concatenate([p.left for p in parts])
    right = np.concatenate([p.right for p in parts])
    estimate = np.concatenate([p.estimate for p in parts])
    keys = left * len(corpus) + right
    if not np.isin(truth, keys).all():
        sys.exit(f"error: {lang}: a true pair is not among the judged candidates")
    chars = np.array([len(t) for t in corpus], dtype=float)
    sizes = np.array([len(s) for s in sets], dtype=float)
    ratios = {"characters": np.minimum(chars[left], chars[right]) / np.maximum(chars[left], chars[right]),
              "shingle sets": np.minimum(sizes[left], sizes[right]) / np.maximum(sizes[left], sizes[right])}
    for cut in (0.79, 0.795, 0.8, 0.805, 0.81):
        print(f"| {lang} | estimate >= {cut} | {prf_cell(keys[estimate >= cut - 1e-12], truth)} |")
    for name, ratio in ratios.items():
        clamped = np.minimum(estimate, ratio)
        print(f"| {lang} | min(estimate, ratio of {name}) >= 0.8 | {prf_cell(keys[clamped >= 0.8], truth)} |")
        for delta in (0.02, 0.04):
            found = prf_cell(keys[snapped(estimate, ratio, np.float64(delta)) >= 0.8], truth)
            print(f"| {lang} | ... and snap to the ratio of {name} within {delta} | {found} |")


def odd_sketch_spread(rng: np.random.Generator, J: float, k: int, bits: int, trials: int) -> float:
    matches = rng.binomial(k, J, trials)
    differ = 2 * (k - matches)  # the symmetric difference of the two sets of (bin, minimum)
    odd = np.array([(np.bincount(rng.integers(0, bits, d), minlength=bits) % 2).sum() for d in differ])
    estimate = 1 - (-(bits / 2) * np.log(np.clip(1 - 2 * odd / bits, 1e-12, None))) / (2 * k)
    return float(estimate.std())


def odd_sketch(seed: int, trials: int) -> None:
    """Try 3: the estimate's spread of an odd sketch against the one-bit bins, by simulation."""
    rng = np.random.default_rng(seed)
    bits = DEFAULT_SCHEME.bins
    print(f"\n### Spread of the estimate: {bits} one-bit bins against an odd sketch of {bits} bits\n")
    print("| sketch | sd at J = 0.7 | J = 0.8 | J = 0.9 |")
    print("|---|---|---|---|")
    one_bit = [float((2 * rng.binomial(bits, (1 + J) / 2, trials * 5) / bits - 1).std()) for J in (0.7, 0.8, 0.9)]
    print(f"| {bits} one-bit bins (today) | " + " | ".join(f"{s:.4f}" for s in one_bit) + " |")
    for k in (256, 512, 1024, 1536):
        spreads = [odd_sketch_spread(rng, J, k, bits, trials) for J in (0.7, 0.8, 0.9)]
        print(f"| odd sketch of {k} MinHash values | " + " | ".join(f"{s:.4f}" for s in spreads) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="+", help="JSONL files with a 'text' field (the tuning set)")
    parser.add_argument("--originals", type=int, default=300)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--salts", type=int, default=8, help="draws of the hashing [default: %(default)s]")
    parser.add_argument("--trials", type=int, default=4000, help="simulated pairs per odd-sketch cell")
    parser.add_argument("--only", choices=("rule", "tries"), help="only the size rule, or only the three tries")
    args = parser.parse_args()
    print_machine()
    originals = load_originals(args.jsonl, args.originals, random.Random(args.seed))
    corpora = {}
    for lang, texts in originals.items():
        corpus = build_corpus(lang, texts, args.seed).texts
        sets = [shingle_set(t) for t in corpus]
        corpora[lang] = corpus, sets, truth_pairs(sets)[0]
    about = f"{', '.join(args.jsonl)}; {args.originals} originals, seed {args.seed}"
    if args.only != "tries":
        print(f"## The size rule ({about}, {args.salts} draws)\n")
        print("| lang | rule | P | R | F1 (mean of draws) | gain over v1, mean | smallest |")
        print("|---|---|---|---|---|---|---|")
        for lang, (corpus, _, truth) in corpora.items():
            size_rule(lang, corpus, truth, args.salts)
    if args.only != "rule":
        print(f"\n## Sharpening the estimate: three tries ({about})\n")
        print("| lang | rule | P | R | F1 |")
        print("|---|---|---|---|---|")
        for lang, (corpus, sets, truth) in corpora.items():
            tries(lang, corpus, sets, truth)
        odd_sketch(args.seed, args.trials)


if __name__ == "__main__":
    main()
