"""`simq near` against the loadable extension's simhash_near at every k, in-process and as whole processes.

    .venv/bin/python bench/near_k.py /tmp/s100k.db /tmp/s100k/docs.jsonl --make
    .venv/bin/python bench/near_k.py INDEX TEXTS.jsonl --ks 3,7,12,16,24,32,48,64 --queries 20 --repeat 3

INDEX: an index made by `simq add` (with or without --store-text); TEXTS: JSONL of {"id", "text"}, whose
first --queries texts (seeded choice) are the queries (the index's own texts find themselves and their
near-copies). For each k:

- in-process: the package, SimhashIndex.search(text, k=k) on one open index (the first query loads what the
  plan keeps, as a long-lived process would), and the extension loaded into apsw on a connection to the
  same file (`SELECT ... FROM simhash_near(?, k)`), one after the other for each query; the median CPU
  seconds a query of each (time.process_time: the machine is shared), and their ratio; and the package's
  near_many over all the queries at once (its bulk path), CPU seconds a query;
- whole processes: `simq near --file Q --k k --format jsonl` (wall seconds, and its CPU seconds) and the stock
  `sqlite3` shell loading the extension (`simq extension` prints its path) and running
  simhash_near(CAST(readfile(Q) AS TEXT), k), one query, median of --repeat;
- answers: the candidate sets agree exactly (simhash_near(q, k, 0) against near(check=False): keys and
  distances); the package's checked answer (which runs the extension's C code where it answers the same,
  find/native_near.py) equals its numpy reference path's (SearchResult: matches, verdicts, counts) and
  near_many's; the extension's rows equal the package's kept matches (key, distance, Jaccard, checked_by),
  where the package reads no file the extension cannot (an index made from JSONL: none), else they are
  counted as differing.

The machine is shared: read the ratios of one run beside the load printed with them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import SIMQ, Failures, print_machine

import apsw  # isort: skip

from simhash_sqlite import SimhashIndex  # noqa: E402
from simhash_sqlite.find.queries import Query  # noqa: E402
from simhash_sqlite.native.extension import loadable_path  # noqa: E402

NEAR = "SELECT key, distance, jaccard, checked_by FROM simhash_near(?, ?)"
CANDIDATES = "SELECT key, distance FROM simhash_near(?, ?, 0)"


def queries_from(path: Path, count: int, seed: int) -> list[str]:
    texts = [json.loads(line)["text"] for line in path.open(encoding="utf-8") if line.strip()]
    return random.Random(seed).sample(texts, min(count, len(texts)))


def timed(action) -> tuple[float, object]:
    started = time.perf_counter()
    answer = action()
    return time.perf_counter() - started, answer


def child_cpu_timed(action) -> tuple[float, object]:
    """CPU seconds (user + system) of the child processes that action() ran and waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    answer = action()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, answer


def cpu_timed(action) -> tuple[float, object]:
    started = time.process_time()
    answer = action()
    return time.process_time() - started, answer


def answer_of(result):
    """What a SearchResult answers: its matches, uncertain verdicts and counts (not the plan, nor the rows
    it read: a batch that has loaded the scan's arrays scans where a single search probes)."""
    report = None if result.report is None else dataclasses.replace(result.report, check_seconds=0.0)
    return result.matches, result.uncertain, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("index", type=Path)
    parser.add_argument("texts", type=Path)
    parser.add_argument("--ks", default="3,7,12,16,24,32,48,64")
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3, help="whole-process runs per k")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--make", action="store_true", help="make the index from TEXTS first (simq add) if absent")
    args = parser.parse_args()
    print_machine()
    sqlite3 = shutil.which("sqlite3")
    if sqlite3 is None:
        raise SystemExit("error: the sqlite3 shell is not installed (Debian: apt-get install sqlite3)")
    extension = loadable_path()
    if args.make and not args.index.exists():
        subprocess.run([*SIMQ, "add", str(args.texts), "--db", str(args.index)], check=True, capture_output=True)
    ks = [int(k) for k in args.ks.split(",")]
    queries = queries_from(args.texts, args.queries, args.seed)
    failures = Failures()
    index = SimhashIndex(args.index, readonly=True)
    reference = SimhashIndex(args.index, readonly=True)
    reference._native._usable = False  # the numpy path (find/native_near.py's reference)
    conn = apsw.Connection(str(args.index), flags=apsw.SQLITE_OPEN_READONLY)
    conn.enable_load_extension(True)
    conn.load_extension(extension)
    print(f"\n{len(index):,} documents, {len(queries)} queries, in-process times are medians a query\n")
    print("| k | matches a query | package ms | extension ms | package / extension | near_many ms a query |"
          " whole simq s (CPU s) | whole sqlite3 s | candidates agree | same as the reference | rows differing |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        query_file = Path(tmp) / "q.txt"
        query_file.write_text(queries[0], encoding="utf-8")
        for k in ks:
            mine, theirs, matches, answers = [], [], [], []
            candidates_agree = same_as_reference = True
            differing = 0
            for n, text in enumerate(queries):  # timed side by side first, each first on every other query
                for side in (0, 1) if n % 2 else (1, 0):
                    if side == 0:
                        mine.append(cpu_timed(lambda: index.search(text, k=k))[0])
                    else:
                        theirs.append(cpu_timed(lambda: conn.execute(NEAR, (text, k)).fetchall())[0])
            for text in queries:
                result, rows = index.search(text, k=k), conn.execute(NEAR, (text, k)).fetchall()
                matches.append(len(result.matches))
                answers.append(answer_of(result))
                same_as_reference &= answers[-1] == answer_of(reference.search(text, k=k))
                plain = {(m.key, m.distance) for m in index.near(text, k=k, check=False)}
                candidates_agree &= plain == set(conn.execute(CANDIDATES, (text, k)).fetchall())
                ours = [(m.key, m.distance, m.jaccard, m.checked_by) for m in result.matches]
                differing += len(set(ours) ^ set(rows))
            batch_seconds, batch = cpu_timed(lambda: list(index.near_many([Query(text=t) for t in queries], k=k)))
            same_as_reference &= [answer_of(answer) for _, answer in batch] == answers
            failures.expect(candidates_agree, f"k {k}: the candidate sets differ")
            failures.expect(same_as_reference, f"k {k}: the package's answer differs from its reference path's")
            simq_runs, shell_runs, simq_cpu = [], [], []
            for _ in range(args.repeat):
                command = [*SIMQ, "near", "--db", str(args.index), "--file", str(query_file), "--k", str(k),
                           "--format", "jsonl"]
                seconds, done = timed(lambda: child_cpu_timed(lambda: subprocess.run(command, capture_output=True,
                                                                                     text=True)))
                cpu, done = done
                failures.expect(done.returncode == 0, f"simq near failed: {done.stderr.strip()[-300:]}")
                simq_runs.append(seconds)
                simq_cpu.append(cpu)
                sql = (f"SELECT count(*) FROM simhash_near(CAST(readfile('{query_file}') AS TEXT), {k});")
                seconds, done = timed(lambda: subprocess.run(
                    [sqlite3, "-readonly", "-batch", "-bail", str(args.index), f".load {extension}", sql],
                    capture_output=True, text=True))
                failures.expect(done.returncode == 0, f"sqlite3 failed: {done.stderr.strip()[-300:]}")
                shell_runs.append(seconds)
            package, ext = statistics.median(mine), statistics.median(theirs)
            print(f"| {k} | {statistics.median(matches):g} | {package * 1e3:.2f} | {ext * 1e3:.2f} | "
                  f"{package / ext:.2f} | {batch_seconds / len(queries) * 1e3:.2f} | "
                  f"{statistics.median(simq_runs):.2f} ({statistics.median(simq_cpu):.2f}) | "
                  f"{statistics.median(shell_runs):.2f} | "
                  f"{'yes' if candidates_agree else 'NO'} | {'yes' if same_as_reference else 'NO'} | {differing} |",
                  flush=True)
    index.close()
    reference.close()
    failures.exit()


if __name__ == "__main__":
    sys.exit(main())
