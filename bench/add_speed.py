"""How fast is `simq add`? Tokenization, the fingerprint and the whole pipeline, Chinese and English,
in MB/s of UTF-8 text, for this tree and a baseline commit side by side in the same run.

    .venv/bin/python bench/add_speed.py --zh ZH.jsonl --en EN.jsonl     # --copies 8 --runs 3, baseline efb0194
    .venv/bin/python bench/add_speed.py --zh ZH.jsonl --copies 2 --runs 5 --baseline main
    .venv/bin/python bench/add_speed.py --en EN.jsonl --baseline none --words

ZH.jsonl and EN.jsonl are JSONL files of {"id", "text"} (BENCHMARKS.md used the shared corpus's
manpages_zh.jsonl and python_docs_en.jsonl); the Chinese one also gets the jieba/rjieba rows.

Rows: jieba vs rjieba on the Han runs (HMM off, this process); the fingerprint alone in one process
(simhash_many over the corpus, start-up excluded); and the whole `simq add` of a JSONL file (a fresh
index each run, a subprocess running the CLI as the `simq` script does, start-up included) with
SIMQ_WORKERS=1 and with every core. The JSONL is the corpus repeated --copies times with distinct
ids, so every document is fingerprinted; larger copies amortize the start-up (~0.5 s: Python,
numpy, typer) and the pool's worker start. Each row runs the baseline (`git archive` of the commit,
imported through PYTHONPATH) and this tree alternately, so both meet the same machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apsw
from common import (
    CORES,
    ROOT,
    SIMQ_SCRIPT,
    Failures,
    baseline_tree,
    load,
    median_rate,
    parallel_headroom,
    print_machine,
    run_env,
    side_by_side,
)

from simhash_sqlite import FingerprintSettings
from simhash_sqlite.core.features import _HAN_RUN, _jieba, _rjieba, normalize

DEFAULT_BASELINE = "efb0194"  # main before issue 5's speed work

# Run with a tree on PYTHONPATH: seconds to fingerprint the corpus in one process, start-up excluded.
FINGERPRINT = """
import json, sys, time
from simhash_sqlite import FingerprintSettings
try:
    from simhash_sqlite.core.fingerprint import simhash_many
except ImportError:  # a baseline tree from before the layers (2be3bd3)
    from simhash_sqlite.fingerprint import simhash_many
texts = [json.loads(line)["text"] for line in open(sys.argv[1], encoding="utf-8")]
settings = FingerprintSettings.from_json(sys.argv[2])
simhash_many(texts[:20], settings)  # lazy imports and tables, as any add pays once
start = time.perf_counter()
simhash_many(texts, settings)
print(time.perf_counter() - start)
"""

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=8, help="repeat each corpus this many times for the add")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="a git commit to compare with, or 'none'")
    parser.add_argument("--words", action="store_true", help="also the whole add at words 3 (slow)")
    parser.add_argument("--zh", type=Path, help="Chinese JSONL corpus ({id, text} per line)")
    parser.add_argument("--en", type=Path, help="English JSONL corpus ({id, text} per line)")
    parser.add_argument("--only-add", action="store_true", help="only the whole `simq add` rows (and the index size)")
    args = parser.parse_args()
    print_machine()
    corpora = {lang: path for lang, path in (("zh", args.zh), ("en", args.en)) if path is not None}
    if not corpora:
        parser.error("give a corpus: --zh FILE and/or --en FILE")
    tmp = Path(tempfile.mkdtemp(prefix="add_speed_"))
    trees = {"this tree": ROOT}
    if args.baseline != "none":
        trees = {f"baseline {args.baseline}": baseline_tree(args.baseline, tmp), **trees}
    script = tmp / "simq_script.py"
    script.write_text(SIMQ_SCRIPT)
    started = f"{time.strftime('%H:%M', time.gmtime())} UTC, load average {load()}"
    rows: list[tuple[str, str, dict[str, float]]] = []
    failures = Failures()
    sizes: dict[tuple, float] = {}  # (lang, label, tree) -> index bytes per document after the add
    for lang, path in corpora.items():
        path = str(path.resolve())  # the fingerprint subprocess runs in a temporary folder
        texts = [json.loads(line)["text"] for line in open(path, encoding="utf-8")]
        mb = sum(len(t.encode()) for t in texts) / 1e6
        if lang == "zh" and not args.only_add:
            runs = [r.group() for t in texts for r in _HAN_RUN.finditer(normalize(t))]
            han_mb = sum(len(r.encode()) for r in runs) / 1e6
            jieba = _jieba()
            rate = median_rate(han_mb, args.runs, lambda: [jieba.lcut(r, HMM=False) for r in runs])
            rows.append((lang, f"tokenize Han runs ({han_mb:.1f} MB): jieba (HMM off)", {"this tree": rate}))
            rjieba = _rjieba()
            if rjieba is not None:
                rate = median_rate(han_mb, args.runs, lambda: [rjieba.cut(r, hmm=False) for r in runs])
                rows.append((lang, f"tokenize Han runs ({han_mb:.1f} MB): rjieba (HMM off)", {"this tree": rate}))
        settings_rows = (("default (chars 5, binary)", FingerprintSettings()),
                         ("chars 5, count", FingerprintSettings(weights="count")),
                         ("words 3, binary", FingerprintSettings(features="words", ngram=3)))
        for label, settings in settings_rows[: 0 if args.only_add else 3]:
            def fingerprint(tree: Path) -> float:
                done = subprocess.run([sys.executable, "-c", FINGERPRINT, path, settings.to_json()], cwd=tmp,
                                      env=run_env(tree), check=True, capture_output=True, text=True)
                return float(done.stdout.split()[-1])

            speeds = side_by_side(mb, args.runs, trees, fingerprint)
            rows.append((lang, f"fingerprint ({mb:.1f} MB), 1 process: {label}", speeds))
        jsonl = tmp / f"{lang}.jsonl"
        with open(jsonl, "w", encoding="utf-8") as f:
            for c in range(args.copies):
                for i, t in enumerate(texts):
                    f.write(json.dumps({"id": f"{c}/{i}", "text": t}, ensure_ascii=False) + "\n")
        add_mb = mb * args.copies
        settings_to_try = (("default", []), ("words 3", ["--features", "words", "--ngram", "3"]))
        for label, extra in settings_to_try[: 2 if args.words else 1]:
            for n in sorted({1, CORES}):
                def add(tree: Path) -> float:
                    db = tmp / "speed.db"
                    for suffix in ("", "-wal", "-shm"):
                        Path(f"{db}{suffix}").unlink(missing_ok=True)
                    t0 = time.perf_counter()
                    subprocess.run([sys.executable, str(script), "add", "--db", str(db), str(jsonl), *extra], cwd=tmp,
                                   env=run_env(tree, SIMQ_WORKERS=str(n)), check=True, stdout=subprocess.DEVNULL)
                    seconds = time.perf_counter() - t0
                    with apsw.Connection(str(db)) as conn:
                        stored = conn.execute("SELECT count(*) FROM documents").get
                    failures.expect(stored == len(texts) * args.copies,
                                    f"{tree}: {stored} documents in the index, {len(texts) * args.copies} added")
                    size = sum(Path(f"{db}{x}").stat().st_size for x in ("", "-wal") if Path(f"{db}{x}").exists())
                    sizes[(lang, label, tree)] = size / (len(texts) * args.copies)
                    return seconds

                what = (
                    f"whole `simq add` ({add_mb:.1f} MB, {len(texts) * args.copies:,} docs), {label}, {n} process(es)"
                )
                rows.append((lang, what, side_by_side(add_mb, args.runs, trees, add)))
    headroom = parallel_headroom(CORES)
    print(f"## simq add speed ({os.cpu_count()} cores; medians of {args.runs} runs; MB = 10^6 bytes of UTF-8)\n")
    print(f"Started {started}; finished {time.strftime('%H:%M', time.gmtime())} UTC, load average {load()}.")
    print(f"Machine check: a pure CPU loop on {CORES} processes ran {headroom:.2f}x as fast as on one "
          "(2.0 on an idle 2-core machine).\n")
    names = list(trees)
    speed_columns = " | ".join(f"{name} MB/s" for name in names)
    print("| corpus | what | " + speed_columns + " |" + (" ratio |" if len(names) > 1 else ""))
    print("|---|---|" + "---|" * (len(names) + (len(names) > 1)))
    for lang, what, rates in rows:
        cells = [f"{rates[name]:.2f}" if name in rates else "" for name in names]
        ratio = ""
        if len(names) > 1:
            ratio = f" {rates[names[1]] / rates[names[0]]:.2f}x |" if names[0] in rates else " |"
        print(f"| {lang} | {what} | " + " | ".join(cells) + " |" + ratio)
    if sizes:
        print("\nIndex file (with its WAL) after the whole add, bytes per document:\n")
        print("| corpus | add | " + " | ".join(names) + " |" + (" difference |" if len(names) > 1 else ""))
        print("|---|---|" + "---|" * (len(names) + (len(names) > 1)))
        for lang, label in dict.fromkeys((lang, label) for lang, label, _ in sizes):
            per = [sizes.get((lang, label, trees[name])) for name in names]
            cells = " | ".join("" if x is None else f"{x:,.0f}" for x in per)
            diff = f" {per[1] - per[0]:+,.0f} |" if len(per) > 1 and None not in per else ""
            print(f"| {lang} | {label} | {cells} |{diff}")
    subprocess.run(["rm", "-rf", str(tmp)], check=False)
    failures.exit()


if __name__ == "__main__":
    main()
