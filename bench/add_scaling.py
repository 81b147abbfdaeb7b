"""Do `simq add` and `simq dedup` scale with processes? The same JSONL through the CLI with SIMQ_WORKERS=1, 2, ...
for this tree and a baseline commit side by side, runs interleaved so both meet the same machine load.

    .venv/bin/python bench/add_scaling.py /work/shared/corpus/manpages_zh.jsonl --copies 16
    .venv/bin/python bench/add_scaling.py A.jsonl B.jsonl --workers 1,2,4 --runs 5 --baseline main --no-dedup

Each input is repeated --copies times with distinct ids (every document fingerprinted; a large input made
by repetition shows whether memory stays bounded by the batch). Each run adds into a fresh index (a
subprocess running the CLI as the `simq` script does, start-up included) and, unless --no-dedup, runs
`simq dedup` on the same file; the dedup outputs of every tree and process count must be identical,
byte for byte (the script fails otherwise). Columns: MB/s of wall time (median); CPU seconds per MB
(the process and its pool workers, user + system: on a shared machine the wall time mostly measures
the other jobs, CPU time what the code costs); peak RSS of the largest process; and for this tree the
speed-up over its own one-process run. A 2-core machine at load 2+ cannot show 2x whatever the code.
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

from add_speed import SIMQ_SCRIPT, baseline_tree, load, parallel_headroom, run_env

ROOT = Path(__file__).resolve().parent.parent
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def repeated(source: Path, copies: int, target: Path) -> tuple[float, int]:
    """The JSONL repeated with ids copy/original; (MB of text, documents)."""
    texts = [json.loads(line)["text"] for line in open(source, encoding="utf-8") if line.strip()]
    with open(target, "w", encoding="utf-8") as f:
        for c in range(copies):
            for i, text in enumerate(texts):
                f.write(json.dumps({"id": f"{c}/{i}", "text": text}, ensure_ascii=False) + "\n")
    return sum(len(t.encode()) for t in texts) * copies / 1e6, len(texts) * copies


def timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """(wall s, CPU s of the process and its waited-for workers, peak RSS MiB) of one subprocess."""
    start = time.perf_counter()
    child = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{child.stderr.read().decode()}")
    child.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", type=Path, help="JSONL files ({id, text} per line)")
    parser.add_argument("--copies", type=int, default=16)
    parser.add_argument("--workers", default=f"1,{CORES}", help="SIMQ_WORKERS values, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", default="main", help="a git commit to compare with, or 'none'")
    parser.add_argument("--no-dedup", action="store_true", help="time only simq add")
    parser.add_argument("--k", type=int, default=3, help="simq dedup's k")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="add_scaling_"))
    trees = {"this tree": ROOT}
    if args.baseline != "none":
        trees = {f"baseline {args.baseline}": baseline_tree(args.baseline, tmp), **trees}
    script = tmp / "simq_script.py"
    script.write_text(SIMQ_SCRIPT)
    workers = [int(w) for w in args.workers.split(",")]
    commands = ["add"] + ([] if args.no_dedup else ["dedup"])
    started = f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load average {load()}"
    rows = []
    for source in args.inputs:
        jsonl = tmp / f"{source.stem}.jsonl"
        mb, docs = repeated(source, args.copies, jsonl)
        outputs: dict[str, set[str]] = {}
        for command in commands:
            for n in workers:
                runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in trees}
                for _ in range(args.runs):
                    for name, tree in trees.items():
                        db, out = tmp / "scaling.db", tmp / "kept.jsonl"
                        for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), out):
                            path.unlink(missing_ok=True)
                        what = ["add", "--db", str(db), str(jsonl)] if command == "add" else [
                            "dedup", str(jsonl), "-o", str(out), "--k", str(args.k)]
                        env = run_env(tree, SIMQ_WORKERS=str(n))
                        runs[name].append(timed([sys.executable, str(script), *what], env, tmp))
                        if command == "dedup":
                            outputs.setdefault("dedup", set()).add(hashlib.sha256(out.read_bytes()).hexdigest())
                medians = {
                    name: tuple(statistics.median(r[i] for r in results) for i in range(3))
                    for name, results in runs.items()
                }
                rows.append((source.name, command, n, mb, docs, medians))
                print(f"{source.name} {command} x{n}: done", file=sys.stderr, flush=True)
        if len(outputs.get("dedup", ())) > 1:
            raise SystemExit(f"simq dedup wrote different outputs for {source.name}: {sorted(outputs['dedup'])}")
    headroom = parallel_headroom(CORES)
    names = list(trees)
    print(f"## simq add / dedup by processes ({CORES} cores; medians of {args.runs} runs; MB = 10^6 bytes of UTF-8)\n")
    print(f"Started {started}; finished {time.strftime('%H:%M', time.gmtime())} UTC, load average {load()}.")
    print(f"Machine check: a pure CPU loop on {CORES} processes ran {headroom:.2f}x as fast as on one "
          "(2.0 on an idle 2-core machine). " + ("Every dedup output identical." if "dedup" in commands else "") + "\n")
    header = ["input", "command", "processes"]
    for name in names:
        header += [f"{name} MB/s", f"{name} CPU s/MB", f"{name} peak RSS MiB"]
    header += ["this/baseline MB/s"] if len(names) > 1 else []
    header += ["this tree vs its 1 process"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    one = {(src, cmd): med["this tree"] for src, cmd, n, _, _, med in rows if n == min(workers)}
    for src, command, n, mb, docs, medians in rows:
        cells = [f"{src} ({mb:.0f} MB, {docs:,} docs)", command, str(n)]
        for name in names:
            wall, cpu, rss = medians[name]
            cells += [f"{mb / wall:.2f}", f"{cpu / mb:.3f}", f"{rss:.0f}"]
        if len(names) > 1:
            cells.append(f"{medians[names[0]][0] / medians['this tree'][0]:.2f}x")
        cells.append(f"{one[(src, command)][0] / medians['this tree'][0]:.2f}x")
        print("| " + " | ".join(cells) + " |")
    subprocess.run(["rm", "-rf", str(tmp)], check=False)


if __name__ == "__main__":
    main()
