"""Do `simq add` and `simq dedup` scale with processes? The same JSONL through the CLI with SIMQ_WORKERS=1, 2, ...
for this tree and a baseline commit side by side, runs interleaved so both meet the same machine load.

    .venv/bin/python bench/add_scaling.py $CORPUS/manpages_zh.jsonl --copies 8 --baseline fcf9ce1 --this HEAD
    .venv/bin/python bench/add_scaling.py ZH.jsonl EN.jsonl --workers 1,2,4 --runs 5 --baseline main --no-dedup

Each input is repeated --copies times with distinct ids (every document fingerprinted; aim for 30-60 MB
per input so that start-up is a small part) into a temporary folder (--tmp). Each run adds into a fresh
index (a subprocess running the CLI as the `simq` script does, start-up included) and, unless --no-dedup,
runs `simq dedup` on the same file; within a tree the dedup outputs of every process count must be identical,
byte for byte, and so must the indexes' contents (every column but added_at): the script fails otherwise.
Across the two trees a difference is only reported (a tree may write another sketch format).

Columns, medians of --runs: MB/s of wall time; CPU seconds per MB of the main process (the writer: it
reads, hands out chunks, writes; with its threads) and of its pool's worker processes, user + system; peak RSS
of the largest process; for this tree, the speed-up over its own one-process run, MB per CPU-s (whole tree),
the idle-core bound (one process's CPU over the critical path's: the busiest of the main thread, another
thread, a worker process, or the whole CPU shared evenly over the workers; the speed-up idle cores would give,
whatever the load), and over the baseline. Below the
table: dedup's MB/s over add's (the aim: >= 0.8 on all cores). On a shared machine wall time mostly
measures the other jobs: the load average is printed per row, and a pure CPU loop's speed-up on
every core shows what the machine gave (2.0 on an idle 2-core machine); CPU s/MB is what the code
costs. A 2-core machine at load 2+ cannot show 2x whatever the code.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apsw
from common import CORES, ROOT, baseline_tree, commit_of, load, parallel_headroom, print_machine, run_env

# The CLI as the `simq` script runs it, writing its own CPU time and its workers' (reaped at exit) to a file.
# Threads (the C document path reads chunks on them) are counted apart: each thread's CPU is read from
# /proc/self/task as the thread pool shuts down, and the main thread's at exit; the busiest of them is the
# critical path, what the wall would be on idle cores.
SCRIPT = """import atexit, concurrent.futures, json, os, resource, sys, threading, time

_threads = {}

def _thread_ticks():
    try:
        for tid in os.listdir("/proc/self/task"):
            if int(tid) != threading.main_thread().native_id:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                used = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
                _threads[tid] = max(_threads.get(tid, 0), used)
    except OSError:
        pass

_shutdown = concurrent.futures.ThreadPoolExecutor.shutdown

def _counted_shutdown(self, *args, **kwargs):
    _thread_ticks()
    return _shutdown(self, *args, **kwargs)

concurrent.futures.ThreadPoolExecutor.shutdown = _counted_shutdown

def _usage():
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.environ["ADD_SCALING_USAGE"], "w") as f:
        json.dump({"writer": me.ru_utime + me.ru_stime, "workers": children.ru_utime + children.ru_stime,
                   "main": time.thread_time(), "busiest_thread": max(_threads.values(), default=0.0)}, f)

atexit.register(_usage)  # registered first, so it runs last: after the pool's shutdown reaped the workers
from simhash_sqlite.cli import main
if __name__ == "__main__":
    sys.exit(main())
"""


def repeated(source: Path, copies: int, target: Path) -> tuple[float, int]:
    """The JSONL repeated with ids copy/original; (MB of JSONL, documents)."""
    texts = [json.loads(line)["text"] for line in open(source, encoding="utf-8") if line.strip()]
    with open(target, "w", encoding="utf-8") as f:
        for c in range(copies):
            for i, text in enumerate(texts):
                f.write(json.dumps({"id": f"{c}/{i}", "text": text}, ensure_ascii=False) + "\n")
    return target.stat().st_size / 1e6, len(texts) * copies


def timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, ...]:
    """(wall s, CPU s of the main process (its threads too), CPU s of its worker processes, peak RSS MiB, CPU s
    of the critical path: the busiest of the main thread, another thread, a worker process on average) of one
    subprocess."""
    usage_file = cwd / "usage.json"
    usage_file.unlink(missing_ok=True)
    start = time.perf_counter()
    child = subprocess.Popen(command, env=dict(env, ADD_SCALING_USAGE=str(usage_file)), cwd=cwd,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{child.stderr.read().decode()}")
    child.stderr.close()
    split = json.loads(usage_file.read_text())
    processes = int(env.get("SIMQ_WORKERS", "1"))
    per_process = split["workers"] / (processes - 1) if processes > 1 else 0.0
    shared = (split["writer"] + split["workers"]) / processes  # n cores can do no better than share it all
    critical = max(split.get("main", split["writer"]), split.get("busiest_thread", 0.0), per_process, shared)
    return wall, split["writer"], split["workers"], usage.ru_maxrss / 1024, critical


def index_digest(db: Path) -> str:
    """A digest of every document row but added_at, in id order."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    digest = hashlib.sha256()
    columns = "id, key, fingerprint, b0, b1, b2, b3, length, content_hash, text, sketch"
    for row in conn.execute(f"SELECT {columns} FROM documents ORDER BY id"):
        digest.update(repr(row).encode())
    conn.close()
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", type=Path, help="JSONL files ({id, text} per line)")
    parser.add_argument("--copies", type=int, default=8, help="repeat each input this many times (new ids)")
    parser.add_argument("--workers", default=f"1,{CORES}", help="SIMQ_WORKERS values, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", default="main", help="a git commit to compare with, or 'none'")
    parser.add_argument("--no-dedup", action="store_true", help="time only simq add")
    parser.add_argument("--k", type=int, default=None, help="simq dedup's --k (default: its own, sketch LSH)")
    parser.add_argument("--tmp", type=Path, default=None, help="folder for the inputs and indexes (default: a new one)")
    parser.add_argument("--this", default=None, help="measure this commit (extracted) instead of the checkout as it "
                        "is, so that editing the checkout meanwhile changes nothing")
    args = parser.parse_args()
    for path in args.inputs:
        if not path.is_file():
            parser.error(f"no such file: {path}")
    print_machine()
    if args.tmp is not None:
        args.tmp.mkdir(parents=True, exist_ok=True)  # (a folder not there yet was a traceback)
    tmp = Path(tempfile.mkdtemp(prefix="add_scaling_", dir=args.tmp))
    trees = {"this tree": ROOT if args.this is None else baseline_tree(args.this, tmp, "this")}
    if args.baseline != "none":
        trees = {f"baseline {commit_of(args.baseline)}": baseline_tree(args.baseline, tmp), **trees}
    script = tmp / "simq_script.py"
    script.write_text(SCRIPT)
    workers = [int(w) for w in args.workers.split(",")]
    commands = ["add"] + ([] if args.no_dedup else ["dedup"])
    headroom = parallel_headroom(CORES)
    started = f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load average {load()}"
    rows = []
    same_across_trees = True
    for source in args.inputs:
        jsonl = tmp / f"{source.stem}.jsonl"
        mb, docs = repeated(source, args.copies, jsonl)
        digests: dict[str, set[str]] = {}
        for command in commands:
            for n in workers:
                runs: dict[str, list[tuple[float, ...]]] = {name: [] for name in trees}
                for _ in range(args.runs):
                    for name, tree in trees.items():
                        db, out = tmp / "scaling.db", tmp / "kept.jsonl"
                        for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), out):
                            path.unlink(missing_ok=True)
                        what = ["add", "--db", str(db), str(jsonl)] if command == "add" else [
                            "dedup", str(jsonl), "-o", str(out), *(["--k", str(args.k)] if args.k is not None else [])]
                        env = run_env(tree, SIMQ_WORKERS=str(n))
                        runs[name].append(timed([sys.executable, str(script), *what], env, tmp))
                        made = index_digest(db) if command == "add" else hashlib.sha256(out.read_bytes()).hexdigest()
                        digests.setdefault((command, name), set()).add(made)
                medians = {
                    name: tuple(statistics.median(r[i] for r in results) for i in range(5))
                    for name, results in runs.items()
                }
                rows.append((source.name, command, n, mb, docs, medians, load().split(",")[0]))
                print(f"{source.name} {command} x{n}: done", file=sys.stderr, flush=True)
        for (command, name), seen in digests.items():
            if len(seen) > 1:
                what = "indexes with different contents" if command == "add" else "different outputs"
                raise SystemExit(f"simq {command} made {what} for {source.name} across processes ({name})")
        if len({frozenset(seen) for seen in digests.values()}) > len(commands):
            same_across_trees = False
            print(f"{source.name}: the trees' outputs differ from each other (a format change between them, such as "
                  "the sketch's version); each tree's are the same on every process count", file=sys.stderr)
    names = list(trees)
    this = "this tree"
    print(f"## simq add / dedup by processes ({CORES} cores; medians of {args.runs} runs; MB = 10^6 bytes of JSONL)\n")
    measured = f"commit {commit_of(args.this)}" if args.this else f"the checkout {ROOT} (HEAD {commit_of('HEAD')})"
    print(f"This tree: {measured}.")
    print(f"Started {started}; finished {time.strftime('%H:%M', time.gmtime())} UTC, load average {load()}.")
    print(f"Machine check: a pure CPU loop on {CORES} processes ran {headroom:.2f}x as fast as on one "
          f"(2.0 on an idle 2-core machine). Every index content{' and dedup output' if 'dedup' in commands else ''} "
          "identical across process counts within each tree"
          f"{'' if same_across_trees else ' (the two trees differ: another format)'}.\n")
    header = ["input", "command", "processes", "load"]
    for name in names:
        header += [f"{name} MB/s", f"{name} CPU s/MB writer + workers", f"{name} peak RSS MiB"]
    header += [f"{this} vs its 1 process", f"{this} MB per CPU-s", f"{this} idle-core bound"]
    header += [f"{this} / baseline"] if len(names) > 1 else []
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    one = {(src, cmd): med[this] for src, cmd, n, _, _, med, _ in rows if n == min(workers)}
    for src, command, n, mb, docs, medians, row_load in rows:
        cells = [f"{src} ({mb:.0f} MB, {docs:,} docs)", command, str(n), row_load]
        for name in names:
            wall, writer, pool, rss, _ = medians[name]
            cells += [f"{mb / wall:.2f}", f"{writer / mb:.3f} + {pool / mb:.3f}", f"{rss:.0f}"]
        cells.append(f"{one[(src, command)][0] / medians[this][0]:.2f}x")
        # what n idle cores would give: one process's CPU over the busiest thread's or process's
        cells.append(f"{mb / (medians[this][1] + medians[this][2]):.1f}")
        one_cpu = one[(src, command)][1] + one[(src, command)][2]
        cells.append(f"{one_cpu / max(medians[this][4], 1e-9):.2f}x")
        if len(names) > 1:
            cells.append(f"{medians[names[0]][0] / medians[this][0]:.2f}x")
        print("| " + " | ".join(cells) + " |")
    if "dedup" in commands:
        walls = {(src, cmd, n): med[this][0] for src, cmd, n, _, _, med, _ in rows}
        ratios = [f"{src} x{n}: {walls[(src, 'add', n)] / walls[(src, 'dedup', n)]:.2f}"
                  for src, cmd, n, *_ in rows if cmd == "dedup"]
        print(f"\ndedup MB/s / add MB/s ({this}): " + ", ".join(ratios))
    subprocess.run(["rm", "-rf", str(tmp)], check=False)


if __name__ == "__main__":
    main()
