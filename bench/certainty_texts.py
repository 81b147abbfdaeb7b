"""The certainty's calibration on real texts with planted copies (bench/quality.py's corpus).

    .venv/bin/python bench/certainty_texts.py TUNE_ZH.jsonl TUNE_EN.jsonl [--originals 400] [--seed 5]

Each language's texts (sections of real documents and their perturbed copies) are sketched as `simq add`
sketches them (sketch_many); the candidate pairs are those the sketches' LSH finds at an estimate of 0.6
or more (sketch_pairs), each with its estimate and certainty at 0.8 (find.verdict.estimated) and its
exact 5-shingle Jaccard. Printed per language: by band of certainty, the verdicts and how often the
true Jaccard is on the estimate's side of 0.8; and how many sure verdicts (certainty >= CERTAIN) were
wrong, which the exact check would have caught where texts are stored. Real texts differ from the
generated pairs of bench/certainty.py where the sketch's counts are rounded (16-bit log-coded sizes).

--set: the texts are a ready set of families (bench/short_texts.py's JSONL: "text" and "lang"), taken as
they are. --filter: for the sketch filter (find/verdict.py FILTER_CERTAIN), also printed per language: for
each candidate cut, the true pairs (exact >= 0.8) it would lose (estimate < 0.8 at that certainty or more)
and the share of candidates it decides unread; and how far the sketches' size ratio is from the exact
sets' (the size rule, sketch.RATIO_SLACK). Tune on one set, report on another:

    .venv/bin/python bench/certainty_texts.py tune_short.jsonl --set --filter
    .venv/bin/python bench/certainty_texts.py held_short.jsonl --set --filter
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from quality import build_corpus, load_originals  # noqa: E402

from simhash_sqlite.core.shingles import jaccard_of_sets, shingle_set  # noqa: E402
from simhash_sqlite.core.sketch import (  # noqa: E402
    RATIO_SLACK,  # noqa: E402
    sizes_of,
    sketch_many,
)
from simhash_sqlite.find.check import EXACT_MARGIN  # noqa: E402
from simhash_sqlite.find.sketch_pairs import sketch_pairs  # noqa: E402
from simhash_sqlite.find.verdict import CERTAIN, FILTER_CERTAIN, estimated  # noqa: E402

BANDS = (0.5, 0.8, 0.95, 0.99, CERTAIN, 1.0 + 1e-9)
CUTS = (0.999, 0.9995, 0.9999, 0.99999, 0.999999, 0.9999999, 1.0)


def filter_report(estimate, sure, truth, sizes_a, sizes_b, exact_sizes) -> None:
    """The sketch filter at each cut, and the size ratio of the sketches against the exact sets'."""
    low = estimate < 0.8
    true = truth >= 0.8
    print(f"sketch filter (estimate < 0.8 at a certainty of at least the cut; in use: {FILTER_CERTAIN}):")
    print("| cut | true pairs lost | of true pairs | candidates decided unread | lost pairs' estimate, exact |")
    print("|---|---:|---:|---:|---|")
    for cut in CUTS:
        filtered = low & (sure >= cut)
        lost = np.flatnonzero(filtered & true)
        shown = ", ".join(f"{estimate[i]:.3f}/{truth[i]:.3f}" for i in lost[:4].tolist())
        print(f"| {cut:.7g} | {len(lost)} | {true.sum():,} | {filtered.mean():.1%} | {shown} |")
    worst = sure[low & true]
    highest = worst.max() if len(worst) else float("nan")
    print(f"highest certainty of a below-line estimate of a true pair: {highest:.9f}")
    ratio = np.minimum(sizes_a, sizes_b) / np.maximum(sizes_a, sizes_b)
    exact_ratio = np.minimum(*exact_sizes) / np.maximum(*exact_sizes)
    gap = ratio - exact_ratio
    print(f"size ratio of the sketches minus the exact sets': median {np.median(gap):+.5f}, "
          f"largest {gap.max():+.5f}, smallest {gap.min():+.5f}")
    ruled = (ratio < 0.8 - RATIO_SLACK) & low
    print(f"size rule (ratio < 0.8 - {RATIO_SLACK}): {ruled.sum():,} ruled out, {int((ruled & true).sum())} true pairs "
          f"among them; at a slack of 0: {int(((ratio < 0.8) & low & true).sum())} true pairs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="+")
    parser.add_argument("--originals", type=int, default=400)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--set", action="store_true", help="the JSONL is a set of families (bench/short_texts.py)")
    parser.add_argument("--filter", action="store_true", help="report the sketch filter's cuts and the size rule")
    args = parser.parse_args()
    if args.set:
        texts_of: dict[str, list[str]] = {}
        for path in args.jsonl:
            for line in open(path, encoding="utf-8"):
                record = json.loads(line)
                texts_of.setdefault(record["lang"], []).append(record["text"])
        corpora = {lang: SimpleNamespace(texts=t, kind=["?"] * len(t)) for lang, t in sorted(texts_of.items())}
    else:
        originals = load_originals(args.jsonl, args.originals, random.Random(args.seed))
        corpora = {lang: build_corpus(lang, texts, args.seed) for lang, texts in originals.items()}
    for lang, corpus in corpora.items():
        rows, _ = sketch_many(corpus.texts)
        # The candidates dupes and dedup judge where texts may be at hand (EXACT_MARGIN below the line).
        parts = list(sketch_pairs(rows, 0.8 - EXACT_MARGIN if args.filter else 0.6))
        left = np.concatenate([p.left for p in parts])
        right = np.concatenate([p.right for p in parts])
        estimate, sure = estimated(rows[left], rows[right], 0.8)
        sets = [shingle_set(t) for t in corpus.texts]
        truth = np.array([jaccard_of_sets(sets[a], sets[b]) for a, b in zip(left.tolist(), right.tolist())])
        right_side = (estimate >= 0.8) == (truth >= 0.8)
        true = int((truth >= 0.8).sum())
        print(f"\n[{lang}] {len(corpus.texts):,} texts, {len(left):,} candidate pairs, {true:,} true")
        print("| certainty | verdicts | mean certainty | right |")
        print("|---|---:|---:|---:|")
        for lo, hi in zip(BANDS, BANDS[1:]):
            band = (sure >= lo) & (sure < hi)
            if band.any():
                print(f"| {lo:g}-{min(hi, 1):g} | {band.sum():,} | {sure[band].mean():.4f} | "
                      f"{right_side[band].mean():.4f} |")
        wrong = np.flatnonzero((sure >= CERTAIN) & ~right_side)
        print(f"sure verdicts: {(sure >= CERTAIN).sum():,}, wrong: {len(wrong)}")
        sizes_a, sizes_b = sizes_of(rows[left]), sizes_of(rows[right])
        if args.filter:
            counts = np.array([len(x) for x in sets], dtype=np.float64)
            filter_report(estimate, sure, truth, sizes_a, sizes_b, (counts[left], counts[right]))
        for i in wrong[:20].tolist():
            print(f"  estimate {estimate[i]:.3f} exact {truth[i]:.3f} sizes {sizes_a[i]:.0f}/{sizes_b[i]:.0f} "
                  f"kinds {corpus.kind[left[i]]}/{corpus.kind[right[i]]}")


if __name__ == "__main__":
    main()
