"""How many exact checks `simq dupes` makes where the texts are stored, and what they cost.

    .venv/bin/python bench/exact_checks.py CORPUS.jsonl ... [--originals 400] [--seed 5] [--repeats 3]
    PYTHONPATH=OTHER_TREE .venv/bin/python bench/exact_checks.py ...     # another tree's code, the same run

Texts as in bench/accuracy.py (sections of real documents with planted copies, bench/quality.py); each
language's texts go into an index with stored texts, and `index.dupes()` runs at its defaults. Printed
per language: the candidates, how many were checked exactly (texts read, shingled, compared), how many
were decided by a sure estimate alone (no text read), the pairs kept, and the median time of dupes()
and of its check. With the verdict's rule only the unsure candidates are read; before it, every one.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here))
if "PYTHONPATH" not in os.environ:
    sys.path.insert(0, str(here.parent))

from quality import build_corpus, load_originals  # noqa: E402

from simhash_sqlite import Document, SimhashIndex  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="+")
    parser.add_argument("--originals", type=int, default=400)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    originals = load_originals(args.jsonl, args.originals, random.Random(args.seed))
    print("| lang | candidates | exact checks | sure estimates | pairs | dupes() s | check s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for lang, texts in originals.items():
        corpus = build_corpus(lang, texts, args.seed)
        with tempfile.TemporaryDirectory() as folder:
            with SimhashIndex(Path(folder) / "s.db", create=True, store_text=True) as index:
                index.add(Document(str(i), t) for i, t in enumerate(corpus.texts))
                times, checks = [], []
                for _ in range(args.repeats):
                    started = time.perf_counter()
                    found = index.dupes()
                    pairs = sum(1 for _ in found)
                    times.append(time.perf_counter() - started)
                    checks.append(found.report.check_seconds)
                r = found.report
                exact = r.checked + r.rejected
                sure = getattr(r, "sure", 0)
                print(f"| {lang} | {r.candidates:,} | {exact:,} | {sure:,} | {pairs:,} | "
                      f"{statistics.median(times):.2f} | {statistics.median(checks):.2f} |", flush=True)


if __name__ == "__main__":
    main()
