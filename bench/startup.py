"""Start-up: `simq near --key`, `simq near --file` and `simq hash` as whole processes, this tree and a baseline side
by side.

A search of one key answers in milliseconds; what a user waits for is Python starting and simq's
imports. Each command runs `--runs` times per tree, the trees alternating so both meet the same load;
the table gives the median wall time, the median CPU time of the process (less disturbed by other
jobs on a shared machine) and, from one run under `python -X importtime`, how many modules it imported
and their summed import time; with --callgrind, the instructions of one run under valgrind (the same
on a busy machine as on a quiet one). Both trees must print the same answer.

    .venv/bin/python bench/startup.py --baseline main --runs 30
    .venv/bin/python bench/startup.py --baseline main --runs 5 --callgrind
    .venv/bin/python bench/startup.py --db corpus.db --key docs/a.txt --baseline none
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, Failures, baseline_tree, commit_of, compiled, console_script, load, print_machine, run_env

from simhash_sqlite import Document, SimhashIndex

TEXT = "the quick brown fox jumps over the lazy dog, then naps in the afternoon sun by the river"


def small_index(path: Path, documents: int) -> str:
    """An index of generated texts; returns a key in it."""
    with SimhashIndex(path, create=True) as index:
        index.add(Document(f"doc{i}", f"{TEXT} {i} " + " ".join(str(i * j % 97) for j in range(60)))
                  for i in range(documents))
    return "doc1"


def with_native(tree: Path) -> None:
    """Give an extracted tree this checkout's compiled C core where the C sources are the same (an
    extracted tree has none, and would time the numpy fallback instead)."""
    here, there = ROOT / "simhash_sqlite" / "native", tree / "simhash_sqlite" / "native"
    if all((here / name).read_bytes() == (there / name).read_bytes()
           for name in os.listdir(here) if name.endswith((".c", ".h")) and (there / name).exists()):
        for built in here.iterdir():
            if built.suffix == ".so" or built.name == "_build.json":
                shutil.copy2(built, there / built.name)


def one_run(command: list[str], env: dict, cwd: Path) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"error: {' '.join(command)} failed ({done.returncode}): {done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def imports(command: list[str], env: dict, cwd: Path) -> tuple[int, float]:
    """(modules imported, their summed self import time in ms) of one run under -X importtime."""
    done = subprocess.run([command[0], "-X", "importtime", *command[1:]], env=env, cwd=cwd,
                          capture_output=True, text=True)
    rows = [line.split("|") for line in done.stderr.splitlines() if line.startswith("import time:")][1:]
    return len(rows), sum(int(row[0].split(":")[1]) for row in rows) / 1000


def instructions(command: list[str], env: dict, cwd: Path, scratch: Path) -> int:
    """Instructions executed by one run under valgrind's callgrind."""
    out = scratch / "callgrind.out"
    done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command], env=env,
                          cwd=cwd, capture_output=True, text=True)
    found = [line for line in done.stderr.splitlines() if "Collected :" in line]
    if done.returncode != 0 or not found:
        raise SystemExit(f"error: valgrind failed: {done.stderr[-500:]}")
    out.unlink()
    return int(found[-1].split(":")[-1].strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="an index to search (default: a generated one)")
    parser.add_argument("--key", help="a key in --db")
    parser.add_argument("--documents", type=int, default=2000, help="documents of the generated index")
    parser.add_argument("--runs", type=int, default=20, help="runs of each command per tree")
    parser.add_argument("--baseline", default="main", help="a git commit to compare with, or 'none'")
    parser.add_argument("--callgrind", action="store_true", help="also count instructions under valgrind")
    args = parser.parse_args()
    if (args.db is None) != (args.key is None):
        parser.error("--db and --key go together")
    print_machine()
    failures = Failures()
    with tempfile.TemporaryDirectory(prefix="simq-startup-") as scratch:
        tmp = Path(scratch)
        db, key = (args.db.resolve(), args.key) if args.db else (tmp / "index.db", small_index(tmp / "index.db",
                                                                                              args.documents))
        empty = tmp / "empty"  # hash runs where there is no simhash.db
        empty.mkdir()
        trees = {"this tree": ROOT}
        if args.baseline != "none":
            trees = {f"baseline {commit_of(args.baseline)}": baseline_tree(args.baseline, tmp), **trees}
        scripts = {}
        for number, (name, tree) in enumerate(trees.items()):
            if tree != ROOT:
                with_native(tree)
            compiled(tree)  # as installed: bytecode written (else each run compiles what it imports)
            scripts[name] = [sys.executable, str(console_script(tree, tmp / f"simq_{number}.py"))]
        envs = {name: run_env(tree, OPENBLAS_NUM_THREADS="1") for name, tree in trees.items()}
        query = tmp / "query.txt"  # near --file: the README's first search
        query.write_text(TEXT + "\n", encoding="utf-8")
        commands = {
            "simq near --key K": (["near", "--key", key, "--db", str(db)], tmp),
            "simq near --file F": (["near", "--file", str(query), "--db", str(db)], tmp),
            'simq hash "text"': (["hash", TEXT], empty),
        }
        loads = [load()]
        rows = []
        for label, (arguments, cwd) in commands.items():
            walls: dict[str, list[float]] = {name: [] for name in trees}
            cpus: dict[str, list[float]] = {name: [] for name in trees}
            answers: dict[str, set[str]] = {name: set() for name in trees}
            for name in trees:  # a first run of each, untimed: the file cache
                one_run(scripts[name] + arguments, envs[name], cwd)
            for _ in range(args.runs):
                for name in trees:
                    wall, cpu, answer = one_run(scripts[name] + arguments, envs[name], cwd)
                    walls[name].append(wall)
                    cpus[name].append(cpu)
                    answers[name].add(answer)
            for name in trees:
                modules, import_ms = imports(scripts[name] + arguments, envs[name], cwd)
                counted = instructions(scripts[name] + arguments, envs[name], cwd, tmp) if args.callgrind else None
                rows.append((label, name, statistics.median(walls[name]) * 1e3, statistics.median(cpus[name]) * 1e3,
                             modules, import_ms, counted))
            distinct = {answer for found in answers.values() for answer in found}
            failures.expect(len(distinct) == 1, f"{label}: the trees (or runs) answered differently")
            rows.append((label, "same answer", None, None, None, "yes" if len(distinct) == 1 else "NO", None))
        loads.append(load())
    print(f"\nload before and after: {loads[0]} / {loads[1]}; {args.runs} runs each, alternating\n")
    print("| command | tree | median wall ms | median CPU ms | modules imported | import ms (-X importtime) "
          "| instructions (callgrind) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, name, wall, cpu, modules, import_ms, counted in rows:
        if wall is None:
            print(f"| {label} | {name} | | | | {import_ms} | |")
        else:
            shown = "" if counted is None else f"{counted / 1e6:,.0f} M"
            print(f"| {label} | {name} | {wall:.0f} | {cpu:.0f} | {modules} | {import_ms:.0f} | {shown} |")
    failures.exit()


if __name__ == "__main__":
    main()
