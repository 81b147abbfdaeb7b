"""Adding fingerprints into a large index: documents/s of add_fingerprints(), for this tree and a baseline
commit side by side, and what a reader's searches cost meanwhile.

    .venv/bin/python bench/big_index_add.py --index /tmp/base10m.db --base 10000000 --add 1000000
    .venv/bin/python bench/big_index_add.py --index /tmp/base2m.db --base 2000000 --add 300000 --runs 5
    .venv/bin/python bench/big_index_add.py --index /tmp/base10m.db --add 300000 --via add --baseline a236efe

--index is the large index: built once when missing (--base random fingerprints, keys doc-NNN, seed 1),
then copied afresh for every run, so each run adds --add new keys (seed 2) into the same --base documents.
Runs alternate between the trees. Columns: documents/s of wall time and of CPU time (median; on a shared
machine the wall time mostly measures the other jobs), and a digest of the answers of --queries
searches (k=3, exact, no check) after the add, which must be the same for every tree and run, and the
adding process's peak RSS. --via add writes through add() instead, as simq add does (FingerprintedDocuments
with content hashes, --batch-size per transaction; by default each tree's own default, as simq add). With
--reader, a second process (this tree) searches the index in a loop while the add runs: its median and
99th-percentile latency before and during the add.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, baseline_tree, load, print_machine, run_env

BUILD = """
import sys, numpy as np
from simhash_sqlite import SimhashIndex
path, n = sys.argv[1], int(sys.argv[2])
fps = np.random.default_rng(1).integers(0, 2**64, n, dtype=np.uint64, endpoint=False).tolist()
with SimhashIndex(path, create=True) as index:
    index.add_fingerprints((f"doc-{i:09d}", fp) for i, fp in enumerate(fps))
    index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
"""

# Run with a tree on PYTHONPATH: add --add new fingerprints, print wall and CPU seconds of the add, then
# a digest of exact search answers for queries near old and new documents, and the peak RSS in MiB.
ADD = """
import hashlib, resource, sys, time, numpy as np
from simhash_sqlite import SimhashIndex
from simhash_sqlite.index import FingerprintedDocument
path, m, queries, via, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
new = np.random.default_rng(2).integers(0, 2**64, m, dtype=np.uint64, endpoint=False).tolist()
items = [(f"new-{i:09d}", fp) for i, fp in enumerate(new)]
if via == "add":
    items = [FingerprintedDocument(key, fp, 100, hashlib.blake2b(key.encode(), digest_size=16).digest())
             for key, fp in items]
with SimhashIndex(path) as index:
    wall, cpu = time.perf_counter(), time.process_time()
    if via == "add":
        index.add(items, batch_size=batch) if batch else index.add(items)  # 0: the tree's default
    else:
        index.add_fingerprints(items, batch_size=batch)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rng = np.random.default_rng(3)
    digest = hashlib.sha256()
    for fp in rng.choice(np.array(new, dtype=np.uint64), queries).tolist():
        q = fp ^ (1 << int(rng.integers(64))) ^ (1 << int(rng.integers(64)))
        digest.update(repr([(m.key, m.distance) for m in index.near(fingerprint=q, k=3, check=False)]).encode())
import simhash_sqlite
print(wall, cpu, digest.hexdigest()[:12], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
      simhash_sqlite.__file__)
"""

# A reader: exact searches in a loop until the stop file appears; prints (time.time(), latency) of each.
READER = """
import os, sys, time, numpy as np
from simhash_sqlite import SimhashIndex
path, stop = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(4)
with SimhashIndex(path, readonly=True) as index:
    while not os.path.exists(stop):
        q = int(rng.integers(0, 2**64, dtype=np.uint64, endpoint=False))
        now, t = time.time(), time.perf_counter()
        index.near(fingerprint=q, k=3, check=False, plan="index")
        print(now, time.perf_counter() - t, flush=True)
"""


def latencies(lines: list[str], since: float, until: float) -> list[float]:
    return [float(b) for a, b in (line.split() for line in lines) if since <= float(a) < until]


def quantiles(values: list[float]) -> str:
    if len(values) < 2:
        return "n/a"
    values = sorted(values)
    return f"{statistics.median(values) * 1e3:.2f} / {values[int(len(values) * 0.99)] * 1e3:.2f} ms ({len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, required=True, help="the large index (built when missing)")
    parser.add_argument("--base", type=int, default=10_000_000, help="documents when building --index")
    parser.add_argument("--add", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--baseline", default="main", help="a git commit to compare with, or 'none'")
    parser.add_argument("--reader", action="store_true", help="measure a concurrent reader's latency")
    parser.add_argument("--via", choices=("add_fingerprints", "add"), default="add_fingerprints",
                        help="the write path: add_fingerprints, or add() as simq add uses it")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="documents per transaction (default: 1,000,000 for add_fingerprints; for add, the "
                        "tree's own default)")
    parser.add_argument("--work", type=Path, default=None, help="folder for the copies (default: --index's)")
    args = parser.parse_args()
    print_machine()
    tmp = Path(tempfile.mkdtemp(prefix="big_index_add_"))
    trees = {"this tree": ROOT}
    if args.baseline != "none":
        trees = {f"baseline {args.baseline}": baseline_tree(args.baseline, tmp), **trees}
    if not args.index.exists():
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", BUILD, str(args.index), str(args.base)], env=run_env(ROOT), cwd=tmp,
                       check=True)
        print(f"built {args.index} ({args.base:,} documents) in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    work = (args.work or args.index.parent) / "big_index_add_work.db"
    batch = args.batch_size or (1_000_000 if args.via == "add_fingerprints" else 0)
    started = f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load average {load()}"
    results: dict[str, list[tuple[float, float, str]]] = {name: [] for name in trees}
    reads: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in trees}
    for _ in range(args.runs):
        for name, tree in trees.items():
            for suffix in ("", "-wal", "-shm"):
                Path(f"{work}{suffix}").unlink(missing_ok=True)
            shutil.copyfile(args.index, work)
            reader = stop = None
            if args.reader:
                stop = tmp / "stop"
                stop.unlink(missing_ok=True)
                log = open(tmp / "reader.log", "w")  # a file, not a pipe: nobody reads until the add ends
                reader = subprocess.Popen([sys.executable, "-c", READER, str(work), str(stop)], env=run_env(ROOT),
                                          cwd=tmp, stdout=log)
                time.sleep(3)  # latency before the add
            add_start = time.time()
            done = subprocess.run([sys.executable, "-c", ADD, str(work), str(args.add), str(args.queries), args.via,
                                   str(batch)],
                                  env=run_env(tree), cwd=tmp, check=True, capture_output=True, text=True)
            wall, cpu, digest, rss, module = done.stdout.split()
            # python -c puts its working folder first on sys.path: the runs work in tmp, and this checks
            # that each tree's code, not the checkout's, was the one measured
            assert Path(module).resolve().is_relative_to(tree.resolve()), (name, module)
            results[name].append((float(wall), float(cpu), digest, int(rss)))
            if reader is not None:
                stop.touch()
                reader.wait()
                log.close()
                lines = (tmp / "reader.log").read_text().splitlines()
                reads[name][0].extend(latencies(lines, 0.0, add_start))
                reads[name][1].extend(latencies(lines, add_start, time.time()))
            print(f"{name}: {float(wall):.1f} s wall, {float(cpu):.1f} s CPU", file=sys.stderr, flush=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{work}{suffix}").unlink(missing_ok=True)
    digests = {d for runs in results.values() for _, _, d, _ in runs}
    transactions = f"batches of {batch:,}" if batch else "each tree's default transactions"
    print(f"## {args.via} ({transactions}) of {args.add:,} new documents into an index of {args.base:,} "
          f"(medians of {args.runs} runs)\n")
    same = "yes" if len(digests) == 1 else f"NO: {sorted(digests)}"
    print(f"Started {started}; finished {time.strftime('%H:%M', time.gmtime())} UTC, load average {load()}. "
          f"Search answers after the add identical in every run: {same}.\n")
    header = "| tree | documents/s (wall) | documents/s (CPU) | wall s | CPU s | peak RSS MiB |"
    if args.reader:
        header += " reader median / p99 before | reader median / p99 during the add |"
    print(header)
    print("|---|---|---|---|---|---|" + ("---|---|" if args.reader else ""))
    for name, runs in results.items():
        wall = statistics.median(w for w, _, _, _ in runs)
        cpu = statistics.median(c for _, c, _, _ in runs)
        rss = max(r for _, _, _, r in runs)
        line = f"| {name} | {args.add / wall:,.0f} | {args.add / cpu:,.0f} | {wall:.1f} | {cpu:.1f} | {rss:,} |"
        if args.reader:
            line += f" {quantiles(reads[name][0])} | {quantiles(reads[name][1])} |"
        print(line)
    if len(digests) != 1:
        sys.exit(1)
    subprocess.run(["rm", "-rf", str(tmp)], check=False)


if __name__ == "__main__":
    main()
