"""Run every bench script's small mode and fail on any wrong answer.

    python bench/smoke.py                  # all of them, on generated corpora, in a temporary folder
    python bench/smoke.py search pairs     # only the scripts whose name contains one of these words
    python bench/smoke.py --list           # the registry: script, arguments, optional packages

Each script runs as `python bench/NAME.py ARGS` from a scratch folder (not the checkout), on two small
generated JSONL corpora (`{en}`, `{zh}`: bench/common.py's write_corpus) or on data it generates
itself. A script checks its own answers (exactness against a brute-force scan, identical outputs across
trees, no lost key...) and exits non-zero when one is wrong: the runner fails on any non-zero exit
status, a time-out, or a traceback. Scripts whose optional packages are absent are skipped with the
reason. A script added to bench/ is added here with one line in SMOKE, the registry bench/run.py runs
too: its small mode, its suite and its full-size arguments.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from common import BENCH, print_machine, write_corpus


@dataclass(frozen=True)
class Smoke:
    """One run of a script: its small mode (this runner) and its full size (bench/run.py), in one suite."""

    script: str  # file in bench/
    args: str | None  # its small mode; {en}, {zh}: generated corpora, {docs}: the checkout's docs/, {tmp}: its own
    # folder; None: no small mode (a sanitizer build of minutes), run only at full size
    needs: tuple[str, ...] = ()  # importable modules without which it is skipped
    programs: tuple[str, ...] = ()  # programs on PATH without which it is skipped
    first: tuple[tuple[str, str], ...] = ()  # (script, args) run before its small mode in the same folder: its data
    built: str | None = None  # a library of the checkout's own C build it needs (bench/common.py imports the checkout)
    long: bool = False  # takes tens of seconds (a JVM, a sanitizer build): started first, beside the others
    suite: str = ""  # bench/run.py's group (run.SUITES)
    full: str | None = None  # its full-size arguments (the command BENCHMARKS.md quotes); {zh}, {en}, {crawl},
    # {short}: data given to bench/run.py, {out}: its output folder, {tmp}: the run's own folder, {docs}: docs/;
    # None: a second small-mode line of a script whose full run is another line


# One line a run. Small modes take seconds: a check that the script still works and still gets the right
# answers, not a measurement. In a suite, bench/run.py runs the lines in this order: a line whose full
# arguments read what another wrote under {out} comes after it.
SMOKE = [
    Smoke("accuracy.py", "{en} {zh} --originals 12", ("datasketch",), suite="quality", full="{zh} {en}"),
    Smoke("add_scaling.py", "{en} --copies 1 --runs 1 --workers 1,2 --baseline none",
          suite="add", full="{zh} {en} --copies 8 --runs 3 --baseline fcf9ce1"),
    Smoke("add_speed.py", "--zh {zh} --en {en} --baseline none --runs 1 --copies 1",
          suite="add", full="--zh {zh} --en {en} --copies 8 --runs 3"),
    Smoke("all_pairs.py", "{en} {zh} --sizes 1500 --minhash-max 0",
          suite="pairs", full="{zh} {en} --sizes 100000,300000,1000000"),
    Smoke("all_pairs.py", "{en} --sizes 600 --minhash-max 600", ("datasketch",), suite="pairs"),
    Smoke("big_index_add.py", "--index {tmp}/b.db --base 20000 --add 3000 --runs 1 --baseline none",
          suite="add", full="--index {tmp}/base10m.db --base 10000000 --add 1000000"),
    Smoke("bulk_add.py", "--add 3000 --into 500 --runs 1 --baseline none --queries 20",
          suite="add", full="--add 1000000 --baseline 0ae5b18 --runs 1"),
    Smoke("big_input.py", "{en} --gib 0.005 --every 0.2", suite="memory", full="{zh} {en} --gib 10 --every 15"),
    Smoke("big_text.py", "1 --jsonl-mib 1", suite="memory", full="1024"),
    Smoke("block_index_cost.py", "--index {tmp}/b.db --build 20000 --add 3000 --runs 1",
          suite="decisions", full="--index {tmp}/base10m.db --build 10000000 --add 1000000 --runs 2"),
    Smoke("concurrency.py", "--writers 1 --readers 1 --seconds 2 --docs-per-file 50", suite="safety", full=""),
    Smoke("confirm_scale.py", "--sizes 1500 --repeats 1", suite="pairs", full=""),
    Smoke("crash_kills.py", "--kills 2 --docs 300 --max-delay 0.5",
          suite="safety", full="--kills 100 --docs 3000 --max-delay 1.5"),
    Smoke("crawl.py", "{en} {zh} --n 300 --out {tmp}/crawl.jsonl",
          suite="data", full="{zh} {en} --n 100000 --out {out}/data/crawl.jsonl"),
    Smoke("debian_docs.py", "{tmp} {tmp}/docs.jsonl --sample --min-chars 10",
          suite="data", full="/usr/share/doc {out}/data/debian_docs.jsonl"),
    Smoke("dedup.py", "{en} {zh} --originals 10 --repeats 1",
          suite="dedup", full="{zh} {en} --originals 300 --repeats 3"),
    Smoke("dupes_model_scale.py", "--sizes 20000 --folder {tmp} --candidate-recall",
          suite="scale", full="--sizes 100000,1000000,3000000,10000000 --folder {tmp} --candidate-recall"),
    Smoke("dupes_scale.py", "{en} --sizes 1500 --baseline none",
          suite="pairs", full="{zh} {en} --sizes 100000,1000000 --folder {out}/data/dupes_scale"),
    Smoke("estimate_rule.py", "{en} {zh} --originals 40 --salts 2", suite="decisions", full="{zh} {en}"),
    Smoke("memory.py", "--text-mib 1 --jsonl-docs 300", suite="memory", full=""),
    Smoke("pairs.py", "--quick --size 20000 --corpus {en} --docs 300", suite="pairs", full="--corpus {en}"),
    Smoke("quality.py", "{en} {zh} --originals 12 --only-default --repeats 1", ("simhash", "datasketch"),
          suite="quality", full="{zh} {en} --json {out}/quality.json"),
    Smoke("search.py", "--sizes 20000 --skewed 20000 --queries 20 --scan-queries 5 --check 20",
          suite="search", full="--sizes 10000000 --skewed 10000000 --dir {tmp}"),
    Smoke("sketch_choice.py", "{en} {zh} --originals 12", suite="decisions", full="{zh} {en}"),
    Smoke("sketch_cost.py", "{en} {zh} --runs 1", suite="decisions", full="{zh} {en}"),
    Smoke("spark.py", "{en} --docs 500 --work {tmp}/spark", ("pyspark",), ("java",), long=True,
          suite="dedup", full="{zh} {en} --docs 200000 1000000"),
    Smoke("sql_surface.py", "--docs 3000 --queries 10", suite="search", full=""),
    Smoke("vs_simhash_package.py", "{en} --repeat 1", ("simhash",), suite="add", full="{zh} {en} --repeat 5"),
    Smoke("web_search.py", "{en} --size 3000 --texts 10 --queries 3", ("datasette",), suite="web", full="{en} {zh}"),
    Smoke("certainty.py", "--pairs 500", suite="decisions", full="--pairs 20000"),
    Smoke("certainty_texts.py", "{zh} {en} --originals 30", suite="decisions", full="{zh} {en}"),
    Smoke("exact_checks.py", "{zh} {en} --originals 30 --repeats 1", suite="decisions", full="{zh} {en}"),
    Smoke("huge_line_memory.py", "--mb 2 --workers 1", suite="memory", full="--mb 30,60,120"),
    Smoke("core_speed.py", "--generated-mb 0.2 --repeats 1",
          suite="native", full="{en} {zh} --repeats 5 --kernels all"),
    Smoke("core_alone.py", "{en} {zh} --turns 1 --kernels all --limit-mb 0.3", built="_simhash_core.so",
          suite="native", full="{zh} {en} --kernels all"),
    Smoke("fuzz_core.py", "--seconds 2 --failures {tmp}/failures.jsonl", built="_simhash_core.so",
          suite="safety", full="--seconds 300 --failures {out}/fuzz_core-failures.jsonl"),
    Smoke("native_sanitize.sh", None, programs=("cc",), suite="safety", full="300"),
    Smoke("startup.py", "--documents 200 --runs 2 --baseline none", suite="search",
          full="--documents 2000 --runs 30 --baseline none"),
    Smoke("writer_floor.py", "--small", programs=("cc",), suite="add", full="--small --runs 5"),
    Smoke("dedup_kills.py", "--pages 3000 --kills 3", suite="safety", full="--pages 30000 --kills 20"),
    Smoke("scale.py", "run 2000 --memory 1M", suite="scale", full="run 1000000"),
    Smoke("scale.py", "dupes --pages 4000 --budgets 64G,1M --clusters", suite="scale",
          full="dupes --pages 1000000 --budgets 64G,default,256M,64M --clusters"),
    Smoke("scale.py", "candidates --sizes 10000,20000 --memory 1M", suite="scale",
          full="candidates {crawl} --sizes 250000,500000,1000000"),
    Smoke("extension_near.py", "{tmp}/small.db --make 20000 --queries 50 --repeat 1", programs=("sqlite3",),
          built="simhash.so", suite="native", full="{tmp}/simq-1m.db --make 1000000"),
    Smoke("near_k.py", "{tmp}/near.db {en} --make --ks 3,32 --queries 3 --repeat 1", programs=("sqlite3",),
          built="simhash.so", suite="search", full="{tmp}/near.db {crawl} --make"),
    Smoke("fuzz_extension.py", "--seconds 3", programs=("cc",), long=True, suite="safety", full="--seconds 600"),
    Smoke("extension_sanitize.sh", None, programs=("cc",), suite="safety", full=""),
    Smoke("browser_search.py", "{en} --index {tmp}/browser.db --queries 5", ("playwright",), programs=("chromium",),
          suite="web", full="{crawl} --index {tmp}/browser.db --k 7"),
    Smoke("extension_memory.py", "--mb 1", programs=("/usr/bin/time",), built="simhash.so", suite="native",
          full="--mb 10,50"),
    Smoke("extension_short_texts.py", "--documents 400 --queries 30 --repeat 1", programs=("cc",),
          built="simhash.so", suite="native", full=""),
    Smoke("short_texts.py", "{tmp}/short.jsonl --jsonl {en} {zh} --per-language 40",
          suite="data", full="{out}/data/short.jsonl --jsonl {en} {zh} --seed 7"),
    Smoke("short_text_cost.py", "{tmp}/short.jsonl --cuts 0,352",
          first=(("short_texts.py", "{tmp}/short.jsonl --jsonl {en} {zh} --per-language 40"),),
          suite="decisions", full="{short}"),
    Smoke("short_text_aims.py", "{tmp}/short.jsonl --repeats 1",
          first=(("short_texts.py", "{tmp}/short.jsonl --jsonl {en} {zh} --per-language 40"),),
          suite="quality", full="{short}"),
    Smoke("foreign_reads.py", "--rounds 2 --labels 3 --documents 50", ("datasette",), ("sqlite3",),
          suite="web", full="--rounds 20"),
    Smoke("label_latency.py", "--documents 20000 --labels 20 --folder {tmp} --port 8797", ("datasette",),
          suite="web", full="--documents 1000000 --labels 500 --folder {tmp}"),
    Smoke("label_calibration.py", "{docs} --documents 120 --labels 60 --seeds 2 --bootstrap 10",
          suite="quality", full="/usr/share/doc --documents 4000 --seeds 20"),
    Smoke("end_to_end.py", "{tmp}/crawl.jsonl --runs 2 --one-process", built="_simhash_core.so",
          first=(("crawl.py", "{en} {zh} --n 600 --out {tmp}/crawl.jsonl"),), suite="scale", full="{crawl} --runs 3"),
    Smoke("end_to_end.py", "{tmp}/crawl.jsonl --runs 1 --cores native --rensa", ("rensa",), built="_simhash_core.so",
          first=(("crawl.py", "{en} {zh} --n 600 --out {tmp}/crawl.jsonl"),),
          suite="scale", full="{crawl} --runs 3 --cores native --rensa"),
    Smoke("crawl_scale.py", "{tmp}/crawl.jsonl --sizes 300,600",
          first=(("crawl.py", "{en} {zh} --n 600 --out {tmp}/crawl.jsonl"),),
          suite="scale", full="{crawl} --sizes 100000,1000000 --folder {tmp}"),
    Smoke("threads_vs_pool.py", "{tmp}/crawl.jsonl --runs 1",
          first=(("crawl.py", "{en} {zh} --n 600 --out {tmp}/crawl.jsonl"),),
          suite="decisions", full="{crawl} --workers 2 --runs 3"),
    Smoke("workers_follow.py", "{tmp}/crawl.jsonl --runs 1 --busy 0.5 --baseline HEAD",
          first=(("crawl.py", "{en} {zh} --n 600 --out {tmp}/crawl.jsonl"),),
          suite="decisions", full="{crawl} --busy 6 --runs 3"),
    Smoke("crawl_quality.py", "{tmp}/crawl1500.jsonl {tmp}/pairs1500-tree.jsonl",
          first=(("dupes_scale.py", "{en} --sizes 1500 --baseline none --folder {tmp}"),),
          suite="pairs", full="{out}/data/dupes_scale/crawl100000.jsonl {out}/data/dupes_scale/pairs100000-*.jsonl"),
]


_NO = re.compile(r"(^|[|:=] *)NO\b")  # a correctness cell or line saying NO (the scripts' convention)


def missing(smoke: Smoke) -> str | None:
    """Why the script cannot run here, or None."""
    absent = [name for name in smoke.needs if importlib.util.find_spec(name) is None]
    absent += [name for name in smoke.programs if shutil.which(name) is None]
    if smoke.built and not (BENCH.parent / "simhash_sqlite" / "native" / smoke.built).exists():
        absent.append(f"the checkout's own C build (native/{smoke.built}: pip install -e . builds it in place)")
    return f"needs {', '.join(absent)}" if absent else None


def command(script: str, arguments: str, values: dict[str, object]) -> list[str]:
    """The command line of a bench script with its placeholders filled; a `*` in an argument is a file pattern."""
    words = []
    for word in shlex.split(arguments.format(**values)):
        found = sorted(glob.glob(word)) if "*" in word else []
        words += found or [word]
    runner = ["bash"] if script.endswith(".sh") else [sys.executable]
    return [*runner, str(BENCH / script), *words]


def run(smoke: Smoke, corpora: dict[str, Path], tmp: Path, timeout: float | None,
        full: bool = False) -> tuple[str, float, str]:
    """(status: ok / FAILED / skipped, seconds, detail) of one registry line, run in the new folder tmp: its small
    mode, or with full, its full-size arguments (no data made first: bench/run.py's suites make it). What the
    script printed, stdout then stderr, is left in tmp/output.txt."""
    reason = missing(smoke)
    arguments = smoke.full if full else smoke.args
    if arguments is None:
        reason = reason or ("no full-size run (another line of this script has it)" if full else "no small mode")
    if reason:
        return "skipped", 0.0, reason
    assert arguments is not None
    values = {**corpora, "tmp": tmp}
    tmp.mkdir(parents=True)
    started = time.perf_counter()
    for script, first in () if full else smoke.first:
        made = subprocess.run(command(script, first, values), cwd=tmp, capture_output=True, text=True, timeout=timeout)
        if made.returncode != 0:
            return "FAILED", time.perf_counter() - started, f"its data ({script} {first}): {made.stderr[-2000:]}"
    line = command(smoke.script, arguments, values)
    # A session of its own, so that a time-out ends what the script started too (a JVM, a server, a pool).
    process = subprocess.Popen(line, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return "FAILED", time.perf_counter() - started, f"over {timeout:.0f} s: {shlex.join(line)}"
    except BaseException:  # the runner stopped (Ctrl-C, SIGTERM): what it started stops with it
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    seconds = time.perf_counter() - started
    output = stdout + stderr
    (tmp / "output.txt").write_text(output)
    wrong = [line for line in output.splitlines() if _NO.search(line)]
    if process.returncode != 0 or "Traceback (most recent call last)" in output or wrong:
        tail = "\n".join((wrong or output.strip().splitlines())[-15:])
        why = (f"exit status {process.returncode}" if process.returncode
               else "a wrong answer (NO) with exit status 0" if wrong else "a traceback with exit status 0")
        return "FAILED", seconds, f"{why}: {shlex.join(line)}\n{tail}"
    return "ok", seconds, ""


def small_corpora(folder: Path) -> dict[str, Path]:
    """The small modes' data: two generated corpora in folder, and the checkout's docs/ (real text in
    paragraphs, for label_calibration.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    corpora = {lang: write_corpus(folder / f"{lang}.jsonl", lang, documents=40, seed=3) for lang in ("en", "zh")}
    corpora["docs"] = BENCH.parent / "docs"
    return corpora


def default_timeout() -> float:
    """Seconds allowed to one small mode: 300, times the load per CPU where above 1 (a busy shared machine runs
    every script slower)."""
    return 300 * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="run only the scripts whose name contains one of these")
    parser.add_argument("--list", action="store_true", help="print the registry and stop")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds allowed to one script (default: 300, times the load per CPU where above 1)")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep what the scripts wrote")
    parser.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 4),
                        help="scripts run at once (default: the CPUs, at most 4)")
    args = parser.parse_args()
    if args.timeout is None:
        args.timeout = default_timeout()
    small = [s for s in SMOKE if s.args is not None]  # the sanitizer builds run only at full size (bench/run.py)
    chosen = [s for s in small if not args.only or any(word in s.script for word in args.only)]
    if args.list:
        for smoke in small:
            print(f"{smoke.script:24s} {smoke.args}" + (f"   [needs {', '.join(smoke.needs + smoke.programs)}]"
                                                         if smoke.needs or smoke.programs else ""))
        return
    if not chosen:
        sys.exit(f"error: no script matches {' '.join(args.only)}")
    print_machine()
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="simq-smoke-"))
    scratch.mkdir(parents=True, exist_ok=True)
    failed = []
    started = time.perf_counter()
    try:
        corpora = small_corpora(scratch / "data")
        # Each script in a folder of its own, so they run side by side (each is a process, or a few: the
        # suite's wall time, not a measurement); the long ones start first. Reported in the registry's order.
        numbered = list(enumerate(chosen))
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            futures = {number: pool.submit(run, smoke, corpora, scratch / f"{number:02d}-{Path(smoke.script).stem}",
                                           args.timeout)
                       for number, smoke in sorted(numbered, key=lambda item: not item[1].long)}
            for number, smoke in numbered:
                status, seconds, detail = futures[number].result()
                reason = f"  ({detail})" if status == "skipped" else ""
                print(f"{status:8s} {seconds:6.1f} s  {smoke.script}{reason}", flush=True)
                if status == "FAILED":
                    print("    " + detail.replace("\n", "\n    "), flush=True)
                    failed.append(smoke.script)
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"{len(chosen) - len(failed)} of {len(chosen)} passed or skipped in {time.perf_counter() - started:.0f} s"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
