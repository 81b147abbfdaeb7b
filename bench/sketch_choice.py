"""Which sketch, and how big? F1 of "estimated Jaccard >= 0.8" against the exact Jaccard, per variant.

    .venv/bin/python bench/sketch_choice.py TUNE.jsonl ... [--originals 300] [--sizes 32,64,96,120]

Texts as in bench/quality.py (sections of real documents, each with one perturbed copy of every
kind: boilerplate, advert, numbers, 2% and 5% edits, 15% and 40% rewrites, truncation; fixed seed).
Judged pairs: every pair of one family (an original and its copies) plus every pair of the whole set
whose exact 5-shingle Jaccard is >= 0.8 (quality.truth_pairs, exact). Pairs of unrelated texts have a
Jaccard near 0 and no variant here ever estimates them near 0.8 (checked: the "unrelated >= 0.5" column).
For each variant (one-permutation MinHash with b-bit values, sketch.SketchScheme) of each size,
precision, recall and F1 of est >= 0.8 versus exact >= 0.8, and the error of the estimate on the
pairs whose exact Jaccard is within 0.6-1.0 (where the decision is made).
"""

from __future__ import annotations

import argparse
import random
import sys
import time

import numpy as np
from common import print_machine
from quality import build_corpus, load_originals, prf, truth_pairs

from simhash_sqlite.core.shingles import jaccard_of_sets, shingle_set
from simhash_sqlite.core.sketch import SketchScheme, estimate_many, sketch_many

THRESHOLD = 0.8


def judged_pairs(texts: list[str], family: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(left, right, exact Jaccard) of every in-family pair and every pair with Jaccard >= 0.8."""
    sets = [shingle_set(t) for t in texts]
    n = len(texts)
    keys, sims = truth_pairs(sets, THRESHOLD)
    known = dict(zip(keys.tolist(), sims.tolist()))
    for f in np.unique(family):
        members = np.flatnonzero(family == f)
        ii, jj = np.triu_indices(len(members), 1)
        for a, b in zip(members[ii].tolist(), members[jj].tolist()):
            if a * n + b not in known:
                known[a * n + b] = jaccard_of_sets(sets[a], sets[b])
    order = sorted(known)
    left, right = np.divmod(np.array(order, dtype=np.int64), n)
    return left, right, np.array([known[k] for k in order])


def unrelated_sample(n: int, family: np.ndarray, rng: np.random.Generator, count: int = 200_000):
    a, b = rng.integers(0, n, count), rng.integers(0, n, count)
    keep = family[a] != family[b]
    return a[keep], b[keep]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="+", help="JSONL files with a 'text' field (the TUNING set)")
    parser.add_argument("--originals", type=int, default=300, help="originals per language [default: %(default)s]")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--sizes", default="32,64,96,120", help="sketch sizes in bytes [default: %(default)s]")
    parser.add_argument("--bits", default="1,2,4,8,16", help="bits per bin [default: %(default)s]")
    args = parser.parse_args()
    print_machine()
    originals = load_originals(args.jsonl, args.originals, random.Random(args.seed))
    sizes = [int(x) for x in args.sizes.split(",")]
    bit_choices = [int(x) for x in args.bits.split(",")]
    rows: dict[tuple[int, int], list[str]] = {}
    langs = []
    for lang, texts in originals.items():
        corpus = build_corpus(lang, texts, args.seed)
        t0 = time.perf_counter()
        left, right, exact = judged_pairs(corpus.texts, corpus.family)
        far_a, far_b = unrelated_sample(corpus.n, corpus.family, np.random.default_rng(args.seed))
        positives = int((exact >= THRESHOLD).sum())
        near = (exact >= 0.6) & (exact < 1.0)
        langs.append(f"{lang} ({corpus.n} texts, {len(exact)} judged pairs, {positives} with J >= 0.8)")
        print(f"[{lang}] {corpus.n} texts, {len(exact)} judged pairs, {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        for size in sizes:
            for bits in bit_choices:
                if size * 8 % bits:
                    continue
                scheme = SketchScheme(bins=size * 8 // bits, bits=bits)
                rows_, _ = sketch_many(corpus.texts, scheme)
                est = estimate_many(rows_[left], rows_[right], scheme)
                found = est >= THRESHOLD
                p, r, f = prf(int((found & (exact >= THRESHOLD)).sum()), int(found.sum()), positives)
                error = est[near] - exact[near]
                unrelated = int((estimate_many(rows_[far_a], rows_[far_b], scheme) >= 0.5).sum())
                rows.setdefault((size, bits), []).append(
                    f"{p:.3f} | {r:.3f} | **{f:.3f}** | {np.sqrt(np.mean(error**2)):.3f} | {unrelated}"
                )
    print(f"## Sketch choice ({', '.join(args.jsonl)}; {args.originals} originals per language, seed {args.seed})\n")
    print("Languages: " + "; ".join(langs) + "\n")
    head = " | ".join(f"{lang.split()[0]} P | R | F1 | RMSE (J 0.6-1) | unrelated est >= 0.5" for lang in langs)
    print(f"| bytes | bits | bins | {head} |")
    print("|---|---|---|" + "---|" * (5 * len(langs)))
    for (size, bits), cells in rows.items():
        print(f"| {size} | {bits} | {size * 8 // bits} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
