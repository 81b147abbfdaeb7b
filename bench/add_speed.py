"""How fast is `simq add`? Tokenization and the whole pipeline, Chinese and English, MB/s of UTF-8 text.

    .venv/bin/python bench/add_speed.py                 # /work/shared/corpus, 3 runs each, medians
    .venv/bin/python bench/add_speed.py --copies 4 --runs 5

Rows, side by side in the same run: jieba vs rjieba on the Han runs (HMM off); the fingerprint of
one process at the default and at word settings; and the whole `simq add` of a JSONL file (a fresh
index each run, as a subprocess) with SIMQ_WORKERS=1 (one process) and with every core. The JSONL
is the corpus repeated --copies times with distinct ids, so every document is fingerprinted.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simhash_sqlite.features import _HAN_RUN, _jieba, _rjieba, normalize  # noqa: E402
from simhash_sqlite.fingerprint import simhash  # noqa: E402
from simhash_sqlite.settings import FingerprintSettings  # noqa: E402

CORPORA = {"zh": "/work/shared/corpus/manpages_zh.jsonl", "en": "/work/shared/corpus/python_docs_en.jsonl"}
SIMQ = str(Path(sys.executable).with_name("simq"))
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def median_rate(megabytes: float, runs: int, action) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        action()
        times.append(time.perf_counter() - t0)
    return megabytes / statistics.median(times)


def core_simhash(text: str, settings: FingerprintSettings) -> int | None:
    """The fingerprint as the core (issue 2) computed it: NFKC always, np.unique, a 64-column bit
    matrix. Same output; the baseline for the fast paths."""
    import re
    import unicodedata

    import numpy as np

    from simhash_sqlite.features import _WORD, feature_weights, ngram_hashes

    norm = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()
    if not _WORD.search(norm):
        return None
    units = np.frombuffer(norm.encode("utf-32-le"), dtype="<u4").astype(np.uint64)
    hashes, counts = np.unique(ngram_hashes(units, settings.ngram), return_counts=True)
    w = feature_weights(counts, settings.weights).astype(np.float64)
    bits = np.unpackbits(hashes.astype(">u8").view(np.uint8)).reshape(-1, 64)
    return int.from_bytes(np.packbits((2.0 * (w @ bits) - w.sum()) > 0).tobytes(), "big")


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def parallel_headroom(processes: int) -> float:
    """Speed-up of a pure CPU loop on `processes` processes vs one: what the machine gives right now
    (other jobs share it), so the pool's figures can be read against it."""
    import multiprocessing

    n = 5_000_000
    t0 = time.perf_counter()
    for _ in range(processes):
        _spin(n)
    serial = time.perf_counter() - t0
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        pool.map(_spin, [1] * processes)  # start the workers first
        t0 = time.perf_counter()
        pool.map(_spin, [n] * processes)
        return serial / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=3, help="repeat each corpus this many times for the add")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="add_speed_"))
    for lang, path in CORPORA.items():
        texts = [json.loads(line)["text"] for line in open(path, encoding="utf-8")]
        mb = sum(len(t.encode()) for t in texts) / 1e6
        runs = [r.group() for t in texts for r in _HAN_RUN.finditer(normalize(t))]
        han_mb = sum(len(r.encode()) for r in runs) / 1e6
        if lang == "zh":
            jieba = _jieba()
            rows.append((lang, "tokenize Han runs: jieba (HMM off)", median_rate(han_mb, args.runs, lambda: [jieba.lcut(r, HMM=False) for r in runs])))
            rjieba = _rjieba()
            if rjieba is not None:
                rows.append((lang, "tokenize Han runs: rjieba (HMM off)", median_rate(han_mb, args.runs, lambda: [rjieba.cut(r, hmm=False) for r in runs])))
        base = FingerprintSettings(weights="count")
        rows.append((lang, "fingerprint, 1 process: chars 5, count, the core's code (baseline)",
                     median_rate(mb, args.runs, lambda: [core_simhash(t, base) for t in texts])))
        for label, settings in (("default (chars 5, binary)", FingerprintSettings()),
                                ("chars 5, count", FingerprintSettings(weights="count")),
                                ("words 3, binary", FingerprintSettings(features="words", ngram=3))):
            rows.append((lang, f"fingerprint, 1 process: {label}", median_rate(mb, args.runs, lambda: [simhash(t, settings) for t in texts])))
        jsonl = tmp / f"{lang}.jsonl"
        with open(jsonl, "w", encoding="utf-8") as f:
            for c in range(args.copies):
                for i, t in enumerate(texts):
                    f.write(json.dumps({"id": f"{c}/{i}", "text": t}, ensure_ascii=False) + "\n")
        add_mb = mb * args.copies
        for label, extra in (("default", []), ("words 3", ["--features", "words", "--ngram", "3"])):
            for n in sorted({1, CORES}):
                def add():
                    db = tmp / "speed.db"
                    for suffix in ("", "-wal", "-shm"):
                        Path(f"{db}{suffix}").unlink(missing_ok=True)
                    env = dict(os.environ, SIMQ_WORKERS=str(n))
                    subprocess.run([SIMQ, "add", "--db", str(db), str(jsonl), *extra], check=True, env=env,
                                   stdout=subprocess.DEVNULL)
                rows.append((lang, f"whole `simq add` ({add_mb:.1f} MB), {label}, {n} process(es)", median_rate(add_mb, args.runs, add)))
    headroom = parallel_headroom(CORES)
    print(f"## simq add speed ({os.cpu_count()} cores; medians of {args.runs} runs; MB = 10^6 bytes of UTF-8)\n")
    print(f"Machine check: a pure CPU loop on {CORES} processes ran {headroom:.2f}x as fast as on one "
          "(2.0 on an idle 2-core machine).\n")
    print("| corpus | what | MB/s |")
    print("|---|---|---|")
    for lang, what, rate in rows:
        print(f"| {lang} | {what} | {rate:.2f} |")


if __name__ == "__main__":
    main()
