"""Does `simq add` take workers when the machine frees up? The old rule (decided once, at the start, from
the 1-minute load average) against the new one (core/pool.py's Room: idle CPU, decided every 2 s).

    .venv/bin/python bench/workers_follow.py CRAWL.jsonl                # --busy 6 --runs 3 --baseline main
    .venv/bin/python bench/crawl.py CORPUS.jsonl ... --n 80000 --out CRAWL.jsonl   # a crawl to add

Each run starts a CPU-bound process that spins for --busy seconds and then ends, and at once a
`simq add` of the crawl into a new index, as a user's long add starts while another job is busy. The
two rules run alternately (old, new, old, ...) so both meet the same load. The old rule's tree is this
checkout's package (with its built C core) with core/pool.py taken from --baseline, so the rule is the
only difference. Reported per rule, medians of --runs: wall and CPU seconds of the add (its workers
included: the CPU the kernel reports for the process and the children it waited for) and CPU / wall,
the processes it kept busy on average; over the add's wall time, the CPUs idle and those other jobs
used (not the add, not the spinner: /proc/stat), which say whether there was room for a worker at
all; the load average before each run. Without SIMQ_WORKERS: each rule decides. Exit 1 if the two
rules' indexes differ.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apsw
from common import CORES, ROOT, SIMQ_SCRIPT, Failures, commit_of, load, print_machine

SPIN = """import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    pass
"""


def rule_tree(ref: str, tmp: Path) -> Path:
    """This checkout's package (the C core as built here) and migrations, with core/pool.py as it is at ref."""
    tree = tmp / "old"
    shutil.copytree(ROOT / "migrations", tree / "migrations")
    shutil.copytree(ROOT / "simhash_sqlite", tree / "simhash_sqlite", ignore=shutil.ignore_patterns("__pycache__"))
    old = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:simhash_sqlite/core/pool.py"], check=True,
                         capture_output=True, text=True).stdout
    (tree / "simhash_sqlite" / "core" / "pool.py").write_text(old)
    return tree


def cpu_ticks() -> tuple[int, int]:
    """(all CPUs' ticks, idle ones) from /proc/stat; (0, 0) where there is none."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0, 0
    return sum(fields), fields[3] + fields[4]


def one_add(tree: Path, crawl: str, db: Path, busy: float, tmp: Path) -> tuple[float, float, float, float]:
    """(wall, CPU seconds, idle CPUs, CPUs other jobs used) of a `simq add` started alongside a process
    busy for `busy` seconds; the last two are means over the add's wall time (nan without /proc/stat)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "SIMQ_WORKERS"}
    env["PYTHONPATH"] = str(tree)
    total0, idle0 = cpu_ticks()
    spinner = subprocess.Popen([sys.executable, "-c", SPIN, str(busy)])
    started = time.perf_counter()
    add = subprocess.Popen([sys.executable, str(tmp / "simq_script.py"), "add", "--db", str(db), crawl], cwd=tmp,
                           env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(add.pid, 0)
    wall = time.perf_counter() - started
    total1, idle1 = cpu_ticks()
    add.returncode = os.waitstatus_to_exitcode(status)
    _, _, spun = os.wait4(spinner.pid, 0)
    spinner.returncode = 0
    if add.returncode != 0:
        sys.exit(f"error: simq add exited {add.returncode} (tree {tree})")
    cpu = usage.ru_utime + usage.ru_stime
    if total1 <= total0:
        return wall, cpu, math.nan, math.nan
    ticks = os.sysconf("SC_CLK_TCK")
    cpus = (total1 - total0) / ticks / wall  # the CPUs the ticks came from
    idle = (idle1 - idle0) / ticks / wall
    others = cpus - idle - (cpu + spun.ru_utime + spun.ru_stime) / wall
    return wall, cpu, idle, max(others, 0.0)


def rows(db: Path) -> list[tuple]:
    with apsw.Connection(str(db)) as conn:
        query = "SELECT key, fingerprint, length, content_hash, sketch FROM documents ORDER BY key"
        return conn.execute(query).fetchall()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("crawl", help="a JSONL crawl of {id, text} (bench/crawl.py)")
    parser.add_argument("--busy", type=float, default=6.0, help="seconds the other process spins at the start")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", default="main", help="the commit whose core/pool.py is the old rule")
    args = parser.parse_args()
    if not os.path.isfile(args.crawl):
        sys.exit(f"error: no such file: {args.crawl}")
    print_machine()
    crawl = str(Path(args.crawl).resolve())
    print(f"{crawl}: {os.path.getsize(crawl) / 1e6:.1f} MB; another process busy for the first {args.busy:g} s; "
          f"{CORES} cores")
    tmp = Path(tempfile.mkdtemp(prefix="workers_follow_"))
    try:
        (tmp / "simq_script.py").write_text(SIMQ_SCRIPT)
        trees = {f"old rule ({commit_of(args.baseline)})": rule_tree(args.baseline, tmp), "new rule": ROOT}
        results: dict[str, list[tuple[float, float, float, float, str]]] = {name: [] for name in trees}
        for i in range(args.runs):
            for name, tree in trees.items():
                before = load()
                wall, cpu, idle, others = one_add(tree, crawl, tmp / f"{name.split()[0]}.db", args.busy, tmp)
                results[name].append((wall, cpu, idle, others, before))
                print(f"  run {i + 1} {name:22} wall {wall:6.2f} s  cpu {cpu:6.2f} s  cpu/wall {cpu / wall:4.2f}"
                      f"  idle CPUs {idle:4.2f}  other jobs' CPUs {others:4.2f}  load before {before}", flush=True)
        failures = Failures()
        failures.expect(rows(tmp / "old.db") == rows(tmp / "new.db"), "the two rules' indexes hold the same rows")
        print(f"\nmedians of {args.runs} (interleaved):")
        print("| rule | wall s | CPU s | CPU / wall | idle CPUs | other jobs' CPUs |")
        print("|---|---|---|---|---|---|")
        for name, runs in results.items():
            wall, cpu, idle, others = (statistics.median(r[k] for r in runs) for k in range(4))
            ratio = statistics.median(r[1] / r[0] for r in runs)
            print(f"| {name} | {wall:.2f} | {cpu:.2f} | {ratio:.2f} | {idle:.2f} | {others:.2f} |")
        old, new = (statistics.median(r[0] for r in runs) for runs in results.values())
        print(f"\nnew rule's wall over the old one's: {new / old:.2f}x")
        failures.exit()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
