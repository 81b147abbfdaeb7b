"""What the sketch adds to `add`'s fingerprinting: simhash_many against simhash_and_sketch_many.

    .venv/bin/python bench/sketch_cost.py CORPUS.jsonl ... [--runs 7]

In one process, the two calls alternate on the same texts (so both meet the same machine load);
medians of --runs each, in MB/s of UTF-8 text, and the ratio. This is the CPU work `add` does per
text (its workers run exactly this); the whole `simq add` also reads, hashes and writes, so the
ratio there is closer to 1 (bench/add_speed.py --only-add).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from common import Failures, print_machine, read_texts

from simhash_sqlite.core.fingerprint import simhash_and_sketch_many, simhash_many


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="+")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print_machine()
    print("| corpus | MB | fingerprints MB/s | fingerprints + sketches MB/s | ratio |")
    print("|---|---|---|---|---|")
    failures = Failures()
    for path in args.jsonl:
        texts = read_texts([path])
        mb = sum(len(t.encode()) for t in texts) / 1e6
        simhash_and_sketch_many(texts[:20])  # lazy tables, once
        failures.expect(simhash_and_sketch_many(texts)[0] == simhash_many(texts),
                        f"{path}: the fingerprints made beside sketches differ from simhash_many's")
        plain, both = [], []
        for _ in range(args.runs):
            started = time.perf_counter()
            simhash_many(texts)
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            simhash_and_sketch_many(texts)
            both.append(time.perf_counter() - started)
        a, b = mb / statistics.median(plain), mb / statistics.median(both)
        print(f"| {Path(path).name} | {mb:.1f} | {a:.2f} | {b:.2f} | {b / a:.2f}x |")
    failures.exit()


if __name__ == "__main__":
    main()
