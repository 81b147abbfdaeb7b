"""Run every bench script's small mode and fail on any wrong answer.

    python bench/smoke.py                  # all of them, on generated corpora, in a temporary folder
    python bench/smoke.py search pairs     # only the scripts whose name contains one of these words
    python bench/smoke.py --list           # the registry: script, arguments, optional packages

Each script runs as `python bench/NAME.py ARGS` from a scratch folder (not the checkout), on two small
generated JSONL corpora (`{en}`, `{zh}`: bench/common.py's write_corpus) or on data it generates
itself. A script checks its own answers (exactness against a brute-force scan, identical outputs across
trees, no lost key...) and exits non-zero when one is wrong: the runner fails on any non-zero exit
status, a time-out, or a traceback. Scripts whose optional packages are absent are skipped with the
reason. A script added to bench/ is added here with one line in SMOKE.
"""

from __future__ import annotations

import argparse
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
    script: str  # file in bench/
    args: str  # its small mode; {en}, {zh}: generated corpora, {docs}: the checkout's docs/, {tmp}: its own folder
    needs: tuple[str, ...] = ()  # importable modules without which it is skipped
    programs: tuple[str, ...] = ()  # programs on PATH without which it is skipped
    first: tuple[tuple[str, str], ...] = ()  # (script, args) run before it in the same folder: its data
    built: str | None = None  # a library of the checkout's own C build it needs (bench/common.py imports the checkout)
    long: bool = False  # takes tens of seconds (a JVM, a sanitizer build): started first, beside the others


# One line a script. Keep each run to seconds: this is a check that the script still works and still
# gets the right answers, not a measurement.
SMOKE = [
    Smoke("accuracy.py", "{en} {zh} --originals 12", ("datasketch",)),
    Smoke("add_scaling.py", "{en} --copies 1 --runs 1 --workers 1,2 --baseline none"),
    Smoke("add_speed.py", "--zh {zh} --en {en} --baseline none --runs 1 --copies 1"),
    Smoke("all_pairs.py", "{en} {zh} --sizes 1500 --minhash-max 0"),
    Smoke("all_pairs.py", "{en} --sizes 600 --minhash-max 600", ("datasketch",)),
    Smoke("big_index_add.py", "--index {tmp}/b.db --base 20000 --add 3000 --runs 1 --baseline none"),
    Smoke("bulk_add.py", "--add 3000 --into 500 --runs 1 --baseline none --queries 20"),
    Smoke("big_input.py", "{en} --gib 0.005 --every 0.2"),
    Smoke("big_text.py", "1 --jsonl-mib 1"),
    Smoke("block_index_cost.py", "--index {tmp}/b.db --build 20000 --add 3000 --runs 1"),
    Smoke("concurrency.py", "--writers 1 --readers 1 --seconds 2 --docs-per-file 50"),
    Smoke("confirm_scale.py", "--sizes 1500 --repeats 1"),
    Smoke("crash_kills.py", "--kills 2 --docs 300 --max-delay 0.5"),
    Smoke("crawl.py", "{en} {zh} --n 300 --out {tmp}/crawl.jsonl"),
    Smoke("debian_docs.py", "{tmp} {tmp}/docs.jsonl --sample --min-chars 10"),
    Smoke("dedup.py", "{en} {zh} --originals 10 --repeats 1"),
    Smoke("dedup_kills.py", "--pages 3000 --kills 3"),
    Smoke("scale.py", "run 2000 --memory 1M"),
    Smoke("dupes_model_scale.py", "--sizes 20000 --folder {tmp} --candidate-recall"),
    Smoke("dupes_scale.py", "{en} --sizes 1500 --baseline none"),
    Smoke("estimate_limits.py", "{en} {zh} --originals 30"),
    Smoke("estimate_rule.py", "{en} {zh} --originals 40 --salts 2"),
    Smoke("memory.py", "--text-mib 1 --jsonl-docs 300"),
    Smoke("pairs.py", "--quick --size 20000 --corpus {en} --docs 300"),
    Smoke("quality.py", "{en} {zh} --originals 12 --only-default --repeats 1", ("simhash", "datasketch")),
    Smoke("search.py", "--sizes 20000 --skewed 20000 --queries 20 --scan-queries 5 --check 20"),
    Smoke("sketch_choice.py", "{en} {zh} --originals 12"),
    Smoke("sketch_cost.py", "{en} {zh} --runs 1"),
    Smoke("spark.py", "{en} --docs 500", ("pyspark",), ("java",), long=True),
    Smoke("sql_surface.py", "--docs 3000 --queries 10"),
    Smoke("vs_simhash_package.py", "{en} --repeat 1", ("simhash",)),
    Smoke("web_search.py", "{en} --size 3000 --texts 10 --queries 3", ("datasette",)),
    Smoke("certainty.py", "--pairs 500"),
    Smoke("certainty_texts.py", "{zh} {en} --originals 30"),
    Smoke("exact_checks.py", "{zh} {en} --originals 30 --repeats 1"),
    Smoke("huge_line_memory.py", "--mb 2 --workers 1"),
    Smoke("core_speed.py", "--generated-mb 0.2 --repeats 1"),
    Smoke("core_alone.py", "{en} {zh} --turns 1 --kernels all --limit-mb 0.3", built="_simhash_core.so"),
    Smoke("fuzz_core.py", "--seconds 5 --failures {tmp}/failures.jsonl", built="_simhash_core.so"),
    Smoke("extension_near.py", "{tmp}/small.db --make 20000 --queries 50 --repeat 1", programs=("sqlite3",),
          built="simhash.so"),
    Smoke("fuzz_extension.py", "--seconds 10", programs=("cc",), long=True),
    Smoke("extension_short_texts.py", "--documents 400 --queries 30 --repeat 1", programs=("cc",),
          built="simhash.so"),
    Smoke("short_texts.py", "{tmp}/short.jsonl --jsonl {en} {zh} --per-language 40"),
    Smoke("short_text_cost.py", "{tmp}/short.jsonl --cuts 0,352",
          first=(("short_texts.py", "{tmp}/short.jsonl --jsonl {en} {zh} --per-language 40"),)),
    Smoke("short_text_aims.py", "{tmp}/short.jsonl --repeats 1",
          first=(("short_texts.py", "{tmp}/short.jsonl --jsonl {en} {zh} --per-language 40"),)),
    Smoke("label_latency.py", "--documents 20000 --labels 20 --folder {tmp} --port 8797", ("datasette",)),
    Smoke("label_calibration.py", "{docs} --documents 120 --labels 60 --seeds 2 --bootstrap 10"),
    Smoke("end_to_end.py", "{tmp}/crawl.jsonl --runs 2 --one-process", built="_simhash_core.so",
          first=(("crawl.py", "{en} {zh} --n 600 --out {tmp}/crawl.jsonl"),)),
    Smoke("end_to_end.py", "{tmp}/crawl.jsonl --runs 1 --cores native --rensa", ("rensa",), built="_simhash_core.so",
          first=(("crawl.py", "{en} {zh} --n 600 --out {tmp}/crawl.jsonl"),)),
    Smoke("crawl_scale.py", "{tmp}/crawl.jsonl --sizes 300,600",
          first=(("crawl.py", "{en} {zh} --n 600 --out {tmp}/crawl.jsonl"),)),
    Smoke("threads_vs_pool.py", "{tmp}/crawl.jsonl --runs 1",
          first=(("crawl.py", "{en} {zh} --n 600 --out {tmp}/crawl.jsonl"),)),
    Smoke("workers_follow.py", "{tmp}/crawl.jsonl --runs 1 --busy 0.5 --baseline HEAD",
          first=(("crawl.py", "{en} {zh} --n 600 --out {tmp}/crawl.jsonl"),)),
    Smoke("crawl_quality.py", "{tmp}/crawl1500.jsonl {tmp}/pairs1500-tree.jsonl",
          first=(("dupes_scale.py", "{en} --sizes 1500 --baseline none --folder {tmp}"),)),
]


_NO = re.compile(r"(^|[|:=] *)NO\b")  # a correctness cell or line saying NO (the scripts' convention)


def missing(smoke: Smoke) -> str | None:
    """Why the script cannot run here, or None."""
    absent = [name for name in smoke.needs if importlib.util.find_spec(name) is None]
    absent += [name for name in smoke.programs if shutil.which(name) is None]
    if smoke.built and not (BENCH.parent / "simhash_sqlite" / "native" / smoke.built).exists():
        absent.append(f"the checkout's own C build (native/{smoke.built}: pip install -e . builds it in place)")
    return f"needs {', '.join(absent)}" if absent else None


def run(smoke: Smoke, corpora: dict[str, Path], tmp: Path, timeout: float) -> tuple[str, float, str]:
    """(status: ok / FAILED / skipped, seconds, detail) of one registry line, run in the new folder tmp."""
    reason = missing(smoke)
    if reason:
        return "skipped", 0.0, reason
    tmp.mkdir()
    started = time.perf_counter()
    for script, arguments in smoke.first:
        made = subprocess.run([sys.executable, str(BENCH / script), *shlex.split(arguments.format(tmp=tmp, **corpora))],
                              cwd=tmp, capture_output=True, text=True, timeout=timeout)
        if made.returncode != 0:
            return "FAILED", time.perf_counter() - started, f"its data ({script} {arguments}): {made.stderr[-2000:]}"
    args = shlex.split(smoke.args.format(tmp=tmp, **corpora))
    command = [sys.executable, str(BENCH / smoke.script), *args]
    # A session of its own, so that a time-out ends what the script started too (a JVM, a server, a pool).
    process = subprocess.Popen(command, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return "FAILED", time.perf_counter() - started, f"over {timeout:.0f} s: {shlex.join(command)}"
    seconds = time.perf_counter() - started
    output = stdout + stderr
    (tmp / "output.txt").write_text(output)
    wrong = [line for line in output.splitlines() if _NO.search(line)]
    if process.returncode != 0 or "Traceback (most recent call last)" in output or wrong:
        tail = "\n".join((wrong or output.strip().splitlines())[-15:])
        why = (f"exit status {process.returncode}" if process.returncode
               else "a wrong answer (NO) with exit status 0" if wrong else "a traceback with exit status 0")
        return "FAILED", seconds, f"{why}: {shlex.join(command)}\n{tail}"
    return "ok", seconds, ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="run only the scripts whose name contains one of these")
    parser.add_argument("--list", action="store_true", help="print the registry and stop")
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed to one script")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep what the scripts wrote")
    parser.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 4),
                        help="scripts run at once (default: the CPUs, at most 4)")
    args = parser.parse_args()
    chosen = [s for s in SMOKE if not args.only or any(word in s.script for word in args.only)]
    if args.list:
        for smoke in SMOKE:
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
        data = scratch / "data"
        data.mkdir(exist_ok=True)
        corpora = {lang: write_corpus(data / f"{lang}.jsonl", lang, documents=40, seed=3) for lang in ("en", "zh")}
        corpora["docs"] = BENCH.parent / "docs"  # Markdown in paragraphs: real text for label_calibration.py
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
