"""Loading many documents through add(), as `simq add` writes them: documents/s of this tree and a baseline
commit side by side, into an empty index (or one of --into documents), with the rows' shape of a crawl.

    .venv/bin/python bench/bulk_add.py --add 1000000 --baseline 0ae5b18 --runs 3
    .venv/bin/python bench/bulk_add.py --add 10000000 --baseline none --runs 1 --work /big/disk
    .venv/bin/python bench/bulk_add.py --add 2000000 --into 1000000 --baseline 0ae5b18

Each document is a FingerprintedDocument as a JSONL add makes it in its workers (so only the writer is
measured): a random fingerprint, a URL-like key of about 45 characters, a 16-byte content hash, a
120-byte sketch and, for one in five, a 234-byte short text (the averages of a bench/crawl.py index).
Columns: wall and CPU seconds of the add() call (median of --runs; making the documents is part of it,
and "documents alone" says how much), documents/s of wall, the process's peak RSS, the file's size, and
two digests that must be equal for every tree and run (the script fails otherwise): of every row, and of
--queries exact searches (k=3) near added documents.
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

from common import ROOT, Failures, baseline_tree, load, print_machine, run_env

# Run with a tree on PYTHONPATH. argv: path, documents to add, documents already there (made first, not
# timed), queries. Prints wall, CPU, rows digest, search digest, peak RSS MiB, file bytes.
ADD = """
import hashlib, os, resource, sys, time, numpy as np
from simhash_sqlite import SimhashIndex
from simhash_sqlite.index import FingerprintedDocument
path, m, base, queries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(2)
fps = rng.integers(0, 2**64, base + m, dtype=np.uint64, endpoint=False).tolist()
sketches = [bytes(row) for row in rng.integers(0, 256, (997, 120), dtype=np.uint8)]
shorts = [bytes(row) for row in rng.integers(0, 256, (991, 234), dtype=np.uint8)]

def documents(start, stop):
    for i in range(start, stop):
        digest = hashlib.blake2b(i.to_bytes(8, "little"), digest_size=16).digest()
        yield FingerprintedDocument(f"https://site{i % 4999}.example.org/pages/{digest.hex()[:20]}", fps[i], 1500,
                                    digest, sketches[i % 997], None, shorts[i % 991] if i % 5 == 0 else None)

if sys.argv[5] == "documents":  # the cost of making them alone
    cpu = time.process_time()
    for _ in documents(0, m):
        pass
    print(time.process_time() - cpu)
    sys.exit()
with SimhashIndex(path, create=True) as index:
    if base:
        index.add(documents(0, base))
    wall, cpu = time.perf_counter(), time.process_time()
    index.add(documents(base, base + m))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rows = hashlib.sha256()
    for row in index.conn.execute("SELECT key, fingerprint, b0, b1, b2, b3, length, content_hash, sketch, short_text "
                                  "FROM documents ORDER BY key"):
        rows.update(repr(row).encode())
    answers = hashlib.sha256()
    picks = np.random.default_rng(3)
    for i in picks.integers(base, base + m, queries).tolist():
        q = fps[i] ^ (1 << int(picks.integers(64))) ^ (1 << int(picks.integers(64)))
        answers.update(repr([(x.key, x.distance) for x in index.near(fingerprint=q, k=3, check=False)]).encode())
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
print(wall, cpu, rows.hexdigest()[:12], answers.hexdigest()[:12], peak, os.path.getsize(path))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--add", type=int, default=1_000_000, help="documents to add")
    parser.add_argument("--into", type=int, default=0, help="documents in the index before (not timed)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--baseline", default="0ae5b18", help="a git commit to compare with, or 'none'")
    parser.add_argument("--work", type=Path, default=None, help="folder for the index files (default: a temporary one)")
    args = parser.parse_args()
    print_machine()
    checks = Failures()
    tmp = Path(tempfile.mkdtemp(prefix="bulk_add_"))
    work = args.work or tmp
    trees = {"this tree": ROOT}
    if args.baseline != "none":
        trees = {f"baseline {args.baseline}": baseline_tree(args.baseline, tmp), **trees}
    started = f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load average {load()}"
    alone = subprocess.run([sys.executable, "-c", ADD, "-", str(args.add), "0", "0", "documents"], env=run_env(ROOT),
                           cwd=tmp, check=True, capture_output=True, text=True).stdout
    results: dict[str, list[list[str]]] = {name: [] for name in trees}
    for _ in range(args.runs):
        for name, tree in trees.items():
            path = work / "bulk_add.db"
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            out = subprocess.run([sys.executable, "-c", ADD, str(path), str(args.add), str(args.into),
                                  str(args.queries), "add"], env=run_env(tree), cwd=tmp, check=True,
                                 capture_output=True, text=True).stdout.split()
            results[name].append(out)
    print(f"\n{args.add:,} documents added into {args.into:,}; {args.runs} run(s) each, alternating; {started}; "
          f"ended with load {load()}; making the documents alone: {float(alone):.1f} CPU-s")
    print("| tree | wall s | CPU s | documents/s (wall) | peak RSS MiB | file MB | rows | answers |")
    print("|---|---|---|---|---|---|---|---|")
    digests = set()
    for name, runs in results.items():
        wall = statistics.median(float(r[0]) for r in runs)
        cpu = statistics.median(float(r[1]) for r in runs)
        digests.update((r[2], r[3]) for r in runs)
        print(f"| {name} | {wall:.1f} | {cpu:.1f} | {args.add / wall:,.0f} | {max(int(r[4]) for r in runs):,} | "
              f"{int(runs[-1][5]) / 1e6:,.0f} | {runs[-1][2]} | {runs[-1][3]} |")
    checks.expect(len(digests) == 1, f"every tree and run stores the same rows and answers the same ({digests})")
    shutil.rmtree(tmp, ignore_errors=True)
    checks.exit()


if __name__ == "__main__":
    main()
