"""`simq dupes` at its defaults, with and without stored texts, against the exact truth and MinHashLSH.

    .venv/bin/python bench/accuracy.py HELD_OUT.jsonl ... [--originals 400] [--seed 5]

Texts as in bench/quality.py (sections of real documents, each with one perturbed copy of every kind, fixed
seed); truth: every pair whose exact 5-shingle Jaccard is >= 0.8 (quality.truth_pairs). Each language's texts
are added to two index files in a temporary folder, one with --store-text and one without, and `index.dupes()`
runs at its defaults (the check on: exact where texts are stored, the sketches' estimate where not; candidates
from the sketches); and a third index without stored texts added from the texts written as a JSONL file, as
`simq add` adds one: its lines are read again for the exact check. Side by side: the distance alone (`dupes
--no-check`, k = 9), and datasketch MinHashLSH (128 permutations, threshold 0.8, the same shingles), its pairs
as returned. Times are medians of --repeats runs (MinHashLSH: one run, signatures and LSH together); bytes per
document: the index file after the add (with its WAL), over the documents.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import Failures, median_seconds, print_machine
from quality import build_corpus, load_originals, minhash_pairs, prf, truth_pairs

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.core.settings import RECOMMENDED_K
from simhash_sqlite.core.shingles import shingle_set
from simhash_sqlite.pipeline.sources import Reader


def keys_of(pairs, n: int) -> np.ndarray:
    return np.array(sorted(min(int(p.first), int(p.second)) * n + max(int(p.first), int(p.second)) for p in pairs),
                    dtype=np.int64)


def scored(found: np.ndarray, truth: np.ndarray) -> tuple[float, float, float]:
    return prf(int(np.isin(found, truth).sum()), len(found), len(truth))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="+", help="JSONL files with a 'text' field (a set you did not tune on)")
    parser.add_argument("--originals", type=int, default=400, help="originals per language [default: %(default)s]")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print_machine()
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    originals = load_originals(args.jsonl, args.originals, random.Random(args.seed))
    rows = []
    failures = Failures()
    for lang, texts in originals.items():
        corpus = build_corpus(lang, texts, args.seed)
        n = corpus.n
        truth, _ = truth_pairs([shingle_set(t) for t in corpus.texts])
        log(f"[{lang}] {n} texts, {len(truth)} pairs with J >= 0.8")
        with tempfile.TemporaryDirectory() as folder:
            source = Path(folder) / "texts.jsonl"  # the texts as a JSONL file, for the index that reads its lines
            source.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(corpus.texts)),
                              encoding="utf-8")
            for store, jsonl in ((True, False), (False, True), (False, False)):
                path = Path(folder) / f"{store}-{jsonl}.db"
                with SimhashIndex(path, create=True, store_text=store) as index:
                    if jsonl:  # as `simq add texts.jsonl` adds it: each record's line recorded (migration 0006)
                        index.record_key_root(folder)
                        reader = Reader(key_root=index.key_root)
                        index.add(reader.packed_documents(reader.expand([str(source)]), index.settings, False,
                                                          index.sketch_scheme))
                    else:
                        index.add(Document(str(i), t) for i, t in enumerate(corpus.texts))
                    size = sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists()) / n
                    seconds, pairs = median_seconds(lambda index=index: list(index.dupes()), args.repeats)
                    kinds = collections.Counter(p.checked_by for p in pairs)
                    name = ("`dupes` (default), texts stored" if store else
                            "`dupes` (default), no texts, the JSONL file at hand" if jsonl else
                            "`dupes` (default), no texts")
                    rows.append((lang, name, *scored(keys_of(pairs, n), truth), seconds, size, dict(kinds)))
                    if not store and not jsonl:
                        seconds, plain = median_seconds(
                            lambda index=index: list(index.dupes(RECOMMENDED_K, check=False)), args.repeats)
                        rows.append((lang, f"`dupes --no-check` (distance <= {RECOMMENDED_K})",
                                     *scored(keys_of(plain, n), truth), seconds, size, {}))
        started = time.perf_counter()
        found = minhash_pairs(corpus.texts)
        rows.append((lang, "datasketch MinHashLSH, 128 perm., threshold 0.8", *scored(found, truth),
                     time.perf_counter() - started, 128 * 8, {}))
        log(f"[{lang}] done")
    print(f"## Accuracy of `simq dupes` ({', '.join(args.jsonl)}; {args.originals} originals per language, "
          f"seed {args.seed})\n")
    print("| lang | method | P | R | F1 | pairs s | bytes/doc | checked by |")
    print("|---|---|---|---|---|---|---|---|")
    for lang, name, p, r, f, seconds, size, kinds in rows:
        how = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
        print(f"| {lang} | {name} | {p:.3f} | {r:.3f} | **{f:.3f}** | {seconds:.2f} | {size:,.0f} | {how} |")
        # With the texts at hand every pair is checked by its exact Jaccard: none kept under the line.
        failures.expect(not name.endswith(("texts stored", "at hand")) or p == 1.0,
                        f"{lang}: {name} kept a pair under 0.8")
    failures.exit()


if __name__ == "__main__":
    main()
