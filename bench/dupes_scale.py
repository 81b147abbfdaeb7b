"""Default `simq dupes` at scale, through the CLI, this tree against a baseline commit side by side.

    .venv/bin/python bench/dupes_scale.py CORPUS.jsonl ... --sizes 100000,1000000 [--baseline 3ab780e]

For each size, bench/crawl.py writes a JSONL crawl (seed 11), and each tree's `simq add` indexes it
without stored texts (one index file per tree: the baseline's schema has no sketches). Then each
tree's `simq dupes --format jsonl --out FILE` runs at its defaults, alternately, --repeats times:
the baseline checks candidates within k = 12 and, its texts out of reach, keeps those within 9; this
tree takes candidates from the sketches and keeps those whose estimated Jaccard is >= 0.8. Timed:
the whole command (start-up, loading the index, pairs, output), median; peak RSS of the child (wait4).
Also: the add's time and the index file's bytes per document for each tree, and whether each tree
found the same pairs (first, second) as the first tree listed.
The pairs' quality on the same crawl is bench/all_pairs.py's (the same function finds them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, SIMQ_SCRIPT, Failures, baseline_tree, load, print_machine, run_env


def child(tree: Path, script: Path, args: list[str], cwd: Path) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of one simq command run with the tree's code."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, str(script), *args], cwd=cwd, env=run_env(tree),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"simq {' '.join(args)} failed: {process.stderr.read().decode()}")
    return seconds, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="+", help="JSONL corpora for the crawl's text pieces")
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--baseline", default="3ab780e", help="a git commit, or 'none'")
    parser.add_argument("--baseline-max", type=int, default=1_000_000, help="largest size to run the baseline on")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--folder", help="where the crawls and indexes go [default: a temporary folder]")
    parser.add_argument("--reuse", action="store_true", help="keep index files a run in the same --folder made")
    args = parser.parse_args()
    print_machine()
    tmp = Path(args.folder or tempfile.mkdtemp(prefix="dupes_scale_"))
    tmp.mkdir(parents=True, exist_ok=True)
    script = tmp / "simq_script.py"
    script.write_text(SIMQ_SCRIPT)
    trees = {"this tree": ROOT}
    if args.baseline != "none":
        trees = {f"baseline {args.baseline}": baseline_tree(args.baseline, tmp), **trees}
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    started = f"{time.strftime('%H:%M', time.gmtime())} UTC, load average {load()}"
    rows = []
    failures = Failures()
    for n in (int(s) for s in args.sizes.split(",")):
        crawl = tmp / f"crawl{n}.jsonl"
        if not crawl.exists():
            subprocess.run([sys.executable, str(ROOT / "bench" / "crawl.py"), *args.jsonl, "--n", str(n),
                            "--seed", str(args.seed), "--out", str(crawl)], check=True)
        names = [name for name in trees if n <= args.baseline_max or not name.startswith("baseline")]
        dbs, add, size, times, peaks, pairs, found = {}, {}, {}, {}, {}, {}, {}
        for i, name in enumerate(names):
            dbs[name] = tmp / f"index{n}-{name.split()[-1]}.db"
            if args.reuse and dbs[name].exists():
                add[name] = float("nan")  # made by an earlier run
            else:
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{dbs[name]}{suffix}").unlink(missing_ok=True)
                add[name], _ = child(trees[name], script, ["add", "--db", str(dbs[name]), str(crawl)], tmp)
            size[name] = sum(p.stat().st_size for p in (dbs[name], Path(f"{dbs[name]}-wal")) if p.exists()) / n
            log(f"[{n}] {name}: add {add[name]:.0f}s, {size[name]:.0f} bytes/doc")
            times[name], peaks[name] = [], []
        for _ in range(args.repeats):
            for name in names:
                out = tmp / f"pairs{n}-{name.split()[-1]}.jsonl"
                seconds, peak = child(trees[name], script, ["dupes", "--db", str(dbs[name]), "--format", "jsonl",
                                                            "--out", str(out)], tmp)
                times[name].append(seconds)
                peaks[name].append(peak)
                with open(out, encoding="utf-8") as lines:
                    this_run = {tuple(sorted((r["first"], r["second"]))) for r in map(json.loads, lines)}
                failures.expect(found.setdefault(name, this_run) == this_run,
                                f"{n:,} pages, {name}: two runs of simq dupes found different pairs")
                pairs[name] = len(found[name])
                log(f"[{n}] {name}: dupes {seconds:.1f}s, {peak:.0f} MiB, {pairs[name]} pairs")
        for name in names:
            same = "yes" if found[name] == found[names[0]] else f"no ({len(found[name] ^ found[names[0]]):,} differ)"
            rows.append((n, name, add[name], size[name], statistics.median(times[name]), max(peaks[name]), pairs[name],
                         same))
    print(f"## Default `simq dupes` at scale (bench/crawl.py, seed {args.seed}; no stored texts; "
          f"medians of {args.repeats})\n")
    print(f"Started {started}; finished {time.strftime('%H:%M', time.gmtime())} UTC, load average {load()}.\n")
    print("| pages | tree | add s | index bytes/doc | `simq dupes` s | peak RSS MiB | pairs | same as the first |")
    print("|---|---|---|---|---|---|---|---|")
    for n, name, add_s, per_doc, seconds, peak, count, same in rows:
        print(f"| {n:,} | {name} | {add_s:.0f} | {per_doc:,.0f} | **{seconds:.1f}** | {peak:.0f} | {count:,} "
              f"| {same} |")
    failures.exit()


if __name__ == "__main__":
    main()
