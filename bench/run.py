"""Run suites of benchmarks: each script at its full size on the data given, or in its small mode.

    python bench/run.py add search --zh ZH.jsonl --en EN.jsonl --out /tmp/b   # two suites at full size
    python bench/run.py all --zh ZH.jsonl --en EN.jsonl --crawl CRAWL.jsonl --out /tmp/b
    python bench/run.py pairs --only dupes --zh ZH.jsonl --en EN.jsonl --out /tmp/b   # scripts named *dupes*
    python bench/run.py native --small --out /tmp/b   # the small modes, on generated corpora (seconds each)
    python bench/run.py --list                        # the suites, each run's full and small arguments

The runs and their arguments are bench/smoke.py's registry (SMOKE: one line a run, with its suite and its
full-size arguments, the commands BENCHMARKS.md quotes). A run's data placeholders come from the options:
{zh}, {en}, {crawl} (a bench/crawl.py crawl; default: the data suite's {out}/data/crawl.jsonl), {short}
(a bench/short_texts.py set; default: the data suite's {out}/data/short.jsonl), {out}; {tmp} is the run's
own folder (OUT/work/NAME, its working directory), {docs} the checkout's docs/. A run whose data is not
given or not there is skipped, saying what it needs. One run at a time, in the registry's order.

Each run's output (its Markdown tables, then what it wrote to stderr) goes to OUT/NAME.md (NAME: the
script without .py; NAME-2.md for its second line), the summary (machine line, each run's status,
seconds and command) to OUT/summary.md and the terminal. The exit status is 1 if any run failed: a
non-zero exit status, a traceback, a NO in a correctness column (bench/smoke.py's rule), or a time-out.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import signal
import string
import sys
import time
from pathlib import Path

from common import BENCH, machine
from smoke import SMOKE, Smoke, command, default_timeout, run, small_corpora

# Each suite: what its runs measure. `all` runs them in this order (data first: other suites read it).
SUITES = {
    "data": "data sets the other suites read: a synthetic crawl, short texts, Debian docs (into OUT/data)",
    "quality": "precision, recall and F1 of pairs against the exact Jaccard; dedup's and calibration's aims",
    "search": "near() and its SQL faces: latency against a scan and faiss, exactness",
    "pairs": "all pairs: candidate generators, `simq dupes` on a crawl, all pairs within k",
    "dedup": "`simq dedup` and `simq spark-dedup`: recall, false drops, throughput",
    "add": "`simq add` and add() speed: MB/s, processes, bulk loads, large indexes, baselines",
    "scale": "crawls end to end and growing sizes: CPU seconds, peak RSS, index size",
    "memory": "peak RSS against big inputs: one big text, a huge line, a stream of many GB",
    "native": "the C core and the SQLite extension against the numpy reference and the package",
    "web": "`simq serve`: the search page, saving labels, foreign readers",
    "safety": "crashes, concurrency, fuzzing and sanitizer builds of the C parts: no lost key, no report",
    "decisions": "one-off measurements that chose a default (cited by docs/quality.md and BENCHMARKS-LOG.md)",
}


def names(lines: list[Smoke]) -> list[str]:
    """Each line's output name: the script's stem, -2, -3... for its further lines."""
    seen: dict[str, int] = {}
    out = []
    for line in lines:
        stem = Path(line.script).stem
        seen[stem] = seen.get(stem, 0) + 1
        out.append(stem if seen[stem] == 1 else f"{stem}-{seen[stem]}")
    return out


def absent_data(arguments: str, values: dict[str, object]) -> str | None:
    """What the arguments need that was not given or is not there, or None."""
    for _, field, _, _ in string.Formatter().parse(arguments):
        if field is None or field in ("tmp", "out", "docs"):
            continue
        value = values.get(field)
        if value is None:
            return f"needs --{field}"
        if not Path(str(value)).exists():
            return f"needs {value} (--{field}, or the data suite first)"
    return None


def shown_command(script: str, arguments: str, values: dict[str, object]) -> str:
    """The command as a person would type it in the checkout: `python bench/NAME.py ARGS`."""
    words = command(script, arguments, values)
    return shlex.join(["bash" if script.endswith(".sh") else "python", f"bench/{script}", *words[2:]])


def listing() -> str:
    lines = names(SMOKE)
    out = []
    for suite, what in SUITES.items():
        out.append(f"{suite}: {what}")
        for name, line in zip(lines, SMOKE):
            if line.suite == suite:
                full = "(another line)" if line.full is None else line.full or "(its defaults)"
                out.append(f"  {name:24s} full:  {full}")
                out.append(f"  {'':24s} small: {line.args if line.args is not None else '(none)'}")
    return "\n".join(out)


def stopped(signum: int, frame: object) -> None:
    raise SystemExit(f"error: stopped by signal {signum}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suites", nargs="*", metavar="SUITE", help=f"all, or some of: {', '.join(SUITES)}")
    parser.add_argument("--zh", type=Path, help="Chinese JSONL ({id, text} a line)")
    parser.add_argument("--en", type=Path, help="English JSONL ({id, text} a line)")
    parser.add_argument("--crawl", type=Path, help="a crawl's JSONL (default: OUT/data/crawl.jsonl)")
    parser.add_argument("--short", type=Path, help="a short-text set's JSONL (default: OUT/data/short.jsonl)")
    parser.add_argument("--out", type=Path, help="folder for the outputs, the summary and the runs' files")
    parser.add_argument("--small", action="store_true", help="each run's small mode, on generated corpora")
    parser.add_argument("--only", action="append", metavar="WORD", default=[],
                        help="only the scripts whose name contains WORD (repeatable)")
    parser.add_argument("--timeout", type=float, help="seconds allowed to one run (default: none; --small: 300, "
                        "times the load per CPU where above 1)")
    parser.add_argument("--list", action="store_true", help="print the suites and their runs, and stop")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, stopped)  # a run in its own session ends with the runner (smoke.run kills it)
    if args.list:
        print(listing())
        return
    unknown = [s for s in args.suites if s != "all" and s not in SUITES]
    if not args.suites or unknown:
        sys.exit(f"error: {'unknown suite ' + ', '.join(unknown) if unknown else 'name a suite'}: "
                 f"all, or some of {', '.join(SUITES)}")
    if args.out is None:
        sys.exit("error: --out DIR is required (each run's output and the summary go there)")
    suites = list(SUITES) if "all" in args.suites else [s for s in SUITES if s in args.suites]
    named = list(zip(names(SMOKE), SMOKE))
    chosen = [(name, line) for suite in suites for name, line in named
              if line.suite == suite and (not args.only or any(word in line.script for word in args.only))]
    if not chosen:
        sys.exit(f"error: no run in {', '.join(suites)} matches {' '.join(args.only)}")

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.small:
        values: dict[str, object] = {**small_corpora(out / "data" / "small"), "out": out}
        timeout = args.timeout or default_timeout()
    else:
        values = {"zh": args.zh, "en": args.en, "out": out, "docs": BENCH.parent / "docs",
                  "crawl": args.crawl or out / "data" / "crawl.jsonl",
                  "short": args.short or out / "data" / "short.jsonl"}
        values = {key: Path(value).resolve() if isinstance(value, Path) else value for key, value in values.items()}
        timeout = args.timeout
    (out / "data").mkdir(exist_ok=True)
    header = machine()
    print(header, flush=True)
    rows = []
    started = time.perf_counter()
    for name, line in chosen:
        arguments = line.args if args.small else line.full
        tmp = out / "work" / name
        shutil.rmtree(tmp, ignore_errors=True)  # a run starts in an empty folder: a rerun's outputs replace the last
        reason = absent_data(arguments, values) if arguments is not None else None
        if reason:
            status, seconds, detail = "skipped", 0.0, reason
        else:
            status, seconds, detail = run(line, values, tmp, timeout, full=not args.small)  # type: ignore[arg-type]
        shown = shown_command(line.script, arguments, {**values, "tmp": tmp}) if arguments is not None else ""
        report = out / f"{name}.md"
        printed = tmp / "output.txt"
        if status == "skipped":
            report.unlink(missing_ok=True)
        else:
            report.write_text(f"`{shown}`\n\n" + (printed.read_text() if printed.exists() else "")
                              + (f"\n\n{status}: {detail}\n" if detail else ""))
        rows.append((line.suite, name, status, seconds, shown, detail))
        skipped = f"  ({detail})" if status == "skipped" else ""
        print(f"{status:8s} {seconds:7.1f} s  {line.suite:9s} {name}{skipped}", flush=True)
        if status == "FAILED":
            print("    " + detail.replace("\n", "\n    "), flush=True)
    failed = [row[1] for row in rows if row[2] == "FAILED"]
    counts = {status: sum(row[2] == status for row in rows) for status in ("ok", "FAILED", "skipped")}
    total = (f"{counts['ok']} ok, {counts['FAILED']} failed, {counts['skipped']} skipped in "
             f"{time.perf_counter() - started:.0f} s" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    table = ["| suite | run | status | seconds | command or reason |", "|---|---|---|---|---|"]
    table += [f"| {suite} | [{name}]({name}.md) | {status} | {seconds:.1f} | "
              + (detail if status == "skipped" else f"`{shown}`") + " |"
              for suite, name, status, seconds, shown, detail in rows]
    mode = "small modes" if args.small else "full size"
    (out / "summary.md").write_text(f"# bench/run.py {' '.join(args.suites)} ({mode})\n\n{header}\n\n"
                                    + "\n".join(table) + f"\n\n{total}\n")
    print(total)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
