"""Threads against the process pool: the fingerprint + sketch stage of `simq add` of a JSONL crawl.

    .venv/bin/python bench/threads_vs_pool.py CRAWL.jsonl                 # --workers 2 --runs 3
    .venv/bin/python bench/crawl.py CORPUS.jsonl ... --n 40000 --out CRAWL.jsonl   # a crawl to read

The stage is what `simq add` does with a JSONL file before SQLite: sources.Reader cuts it into chunks
of lines and core.pool.map_in_order computes each chunk (jsonl.read_chunk: parse the records, content
hashes, fingerprints and sketches through the C core, short-text data) on the workers and in the
calling process, which builds the documents in order. Each run is a fresh process (the pool's start
included, as in `simq add`) with SIMQ_WORKERS fixed, running the same chunks on
  serial   one process (SIMQ_WORKERS=1),
  process  today's process pool (SIMQ_WORKERS=--workers: that many processes, the caller included),
  threads  a thread pool of as many threads (map_in_order(threads=True)): the core releases the GIL
           while it fingerprints, everything else in a chunk holds it.
Runs are interleaved (serial, process, threads, serial, ...) so all meet the same load; the medians of
--runs go side by side: wall seconds, CPU seconds (the process and its reaped workers), the load
before each run. The documents of every run are hashed: all must be equal (exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from common import CORES, Failures, load, print_machine

# One run in a fresh interpreter: prints {"wall", "cpu", "digest", "documents"}.
STAGE = """
import functools, hashlib, json, os, sys, time
from simhash_sqlite.core import pool
from simhash_sqlite.core.settings import FingerprintSettings
from simhash_sqlite.pipeline import sources

path, threads = sys.argv[1], sys.argv[2] == "threads"
if threads:
    sources.map_in_order = functools.partial(pool.map_in_order, threads=True)
reader = sources.Reader()
digest, n = hashlib.sha256(), 0
before, started = os.times(), time.perf_counter()
for doc, _ in reader._jsonl_files([path], FingerprintSettings()):
    digest.update(repr((doc.key, doc.fingerprint, doc.length, doc.content_hash, doc.sketch, doc.short_text)).encode())
    n += 1
wall = time.perf_counter() - started
for executor in pool._started:
    executor.shutdown(wait=True)  # its processes reaped: their CPU counts in os.times()
after = os.times()
cpu = sum(after[:4]) - sum(before[:4])
print(json.dumps({"wall": wall, "cpu": cpu, "digest": digest.hexdigest(), "documents": n}))
"""

KINDS = ("serial", "process", "threads")


def one_run(path: str, kind: str, workers: int) -> dict:
    env = dict(os.environ, SIMQ_WORKERS="1" if kind == "serial" else str(workers))
    done = subprocess.run(
        [sys.executable, "-c", STAGE, path, kind], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"error: the {kind} run failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("crawl", help="a JSONL crawl of {id, text} (bench/crawl.py)")
    parser.add_argument("--workers", type=int, default=2, help="processes or threads, the caller included")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not os.path.isfile(args.crawl):
        sys.exit(f"error: no such file: {args.crawl}")
    if args.workers < 2 or args.runs < 1:
        sys.exit("error: --workers must be 2 or more and --runs 1 or more")
    print_machine()
    megabytes = os.path.getsize(args.crawl) / 1e6
    print(f"{args.crawl}: {megabytes:.1f} MB; {args.workers} workers (caller included) on {CORES} cores")
    runs: dict[str, list[dict]] = {kind: [] for kind in KINDS}
    for i in range(args.runs):
        for kind in KINDS:
            before = load()
            result = one_run(args.crawl, kind, args.workers)
            result["load"] = before
            runs[kind].append(result)
            print(f"  run {i + 1} {kind:8} wall {result['wall']:6.2f} s  cpu {result['cpu']:6.2f} s  load {before}")
    failures = Failures()
    digests = {r["digest"] for rs in runs.values() for r in rs}
    failures.expect(len(digests) == 1, "every run gives the same documents")
    serial_wall = statistics.median(r["wall"] for r in runs["serial"])
    print(f"\nmedians of {args.runs} (interleaved):")
    print("| way | wall s | CPU s | MB/s | MB per CPU-s | wall vs serial |")
    print("|---|---|---|---|---|---|")
    for kind in KINDS:
        wall = statistics.median(r["wall"] for r in runs[kind])
        cpu = statistics.median(r["cpu"] for r in runs[kind])
        rates = f"{megabytes / wall:.1f} | {megabytes / cpu:.1f}"
        print(f"| {kind} | {wall:.2f} | {cpu:.2f} | {rates} | {wall / serial_wall:.2f}x |")
    process = statistics.median(r["wall"] for r in runs["process"])
    threads = statistics.median(r["wall"] for r in runs["threads"])
    print(f"\nthreads' wall over the process pool's: {threads / process:.2f}x; results equal: {len(digests) == 1}")
    failures.exit()


if __name__ == "__main__":
    main()
