"""The certainty's calibration on real texts with planted copies (bench/quality.py's corpus).

    .venv/bin/python bench/certainty_texts.py TUNE_ZH.jsonl TUNE_EN.jsonl [--originals 400] [--seed 5]

Each language's texts (sections of real documents and their perturbed copies) are sketched as `simq add`
sketches them (sketch_many); the candidate pairs are those the sketches' LSH finds at an estimate of 0.6
or more (sketch_pairs), each with its estimate and certainty at 0.8 (find.verdict.estimated) and its
exact 5-shingle Jaccard. Printed per language: by band of certainty, the verdicts and how often the
true Jaccard is on the estimate's side of 0.8; and how many sure verdicts (certainty >= CERTAIN) were
wrong, which the exact check would have caught where texts are stored. Real texts differ from the
generated pairs of bench/certainty.py where the sketch's normalized shingles (case folded, NFKC) and the
exact check's (as written) disagree.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from quality import build_corpus, load_originals  # noqa: E402

from simhash_sqlite.core.shingles import jaccard_of_sets, shingle_set  # noqa: E402
from simhash_sqlite.core.sketch import sizes_of, sketch_many  # noqa: E402
from simhash_sqlite.find.sketch_pairs import sketch_pairs  # noqa: E402
from simhash_sqlite.find.verdict import CERTAIN, estimated  # noqa: E402

BANDS = (0.5, 0.8, 0.95, 0.99, CERTAIN, 1.0 + 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="+")
    parser.add_argument("--originals", type=int, default=400)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    originals = load_originals(args.jsonl, args.originals, random.Random(args.seed))
    for lang, texts in originals.items():
        corpus = build_corpus(lang, texts, args.seed)
        rows, _ = sketch_many(corpus.texts)
        parts = list(sketch_pairs(rows, 0.6))
        left = np.concatenate([p.left for p in parts])
        right = np.concatenate([p.right for p in parts])
        estimate, sure = estimated(rows[left], rows[right], 0.8)
        sets = [shingle_set(t) for t in corpus.texts]
        truth = np.array([jaccard_of_sets(sets[a], sets[b]) for a, b in zip(left.tolist(), right.tolist())])
        right_side = (estimate >= 0.8) == (truth >= 0.8)
        print(f"\n[{lang}] {len(corpus.texts):,} texts, {len(left):,} candidate pairs (estimate >= 0.6)")
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
        for i in wrong[:20].tolist():
            print(f"  estimate {estimate[i]:.3f} exact {truth[i]:.3f} sizes {sizes_a[i]:.0f}/{sizes_b[i]:.0f} "
                  f"kinds {corpus.kind[left[i]]}/{corpus.kind[right[i]]}")


if __name__ == "__main__":
    main()
