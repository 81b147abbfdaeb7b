"""The C core alone, several builds side by side: MB/s of shc_batch on the corpora's UTF-8, no Python around it.

Each JSONL file's --field texts are encoded once and cut into the runs native.batch hands the core (about
BATCH_BYTES each); every library given (a build of _simhash_core.so: this tree's, another tree's) is loaded
side by side and runs them all, in turns, --turns times per kernel, with its own scratch memory kept
between its passes. MB/s: UTF-8 bytes per CPU-second of this process, median of the turns; the ratio is
against the first library; and whether every library gave the first one's fingerprints, sketches and
statuses (exit status 1 where they did not). The default settings and sketch scheme (what `simq add`
computes).

    python bench/core_alone.py DATA.jsonl [MORE.jsonl ...] --libs OTHER/_simhash_core.so [--libs ...]
        [--kernels all] [--turns 15] [--field text] [--limit-mb 20]

The package's own library comes last unless --no-package. Prints the load average before and after.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from common import read_field

from simhash_sqlite import native
from simhash_sqlite.core.sketch import DEFAULT_SCHEME


def read_runs(path: Path, field: str, limit_mb: float) -> tuple[list[tuple[bytes, np.ndarray, int, int]], int, int]:
    """The file's texts as native.batch cuts them: (buffer, offsets, first text, end) runs; bytes, texts."""
    parts = [text.encode("utf-8", "surrogatepass") for text in read_field(path, field, limit_mb)]
    size = sum(map(len, parts))
    sizes = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    runs = [(*native.encode_parts(parts[a:b]), a, b) for a, b in native._runs(sizes, native.BATCH_BYTES)]
    return runs, size, len(parts)


def one_pass(lib, work, runs, n: int, scheme, nbytes: int) -> tuple[float, tuple[bytes, bytes, bytes]]:
    fps, rows, status = np.zeros(n, np.uint64), np.zeros((n, nbytes), np.uint8), np.zeros(n, np.uint8)
    start = time.process_time()
    for buf, offsets, a, b in runs:
        code = lib.shc_batch(
            work, buf, offsets.ctypes.data, b - a, 5, native.WEIGHTS["binary"], ctypes.byref(scheme),
            fps[a:].ctypes.data, rows[a:].ctypes.data, status[a:].ctypes.data,
        )  # fmt: skip
        if code:
            raise SystemExit(f"error: the core refused a batch (error {code})")
    return time.process_time() - start, (fps.tobytes(), rows.tobytes(), status.tobytes())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", type=Path, help="JSONL files")
    parser.add_argument("--libs", type=Path, action="append", default=[], help="a build of the core library")
    parser.add_argument("--no-package", action="store_true", help="leave out the package's own library")
    parser.add_argument("--kernels", default="best", help="best (each library's pick), all, portable, avx2, avx512")
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--field", default="text")
    parser.add_argument("--limit-mb", type=float, default=20.0)
    args = parser.parse_args()
    paths = [p.resolve() for p in args.libs] + ([] if args.no_package else [native.library_path("_simhash_core")])
    libs = []
    for path in paths:
        loaded = native._load(str(path))
        if loaded.lib is None:
            print(f"error: {path}: {loaded.why_not}", file=sys.stderr)
            return 1
        libs.append((path, loaded.lib, loaded.lib.shc_work_new()))
    if len({id(lib) for _, lib, _ in libs}) < len(libs):
        print("error: the same library twice (copy one to another path to time it against itself)", file=sys.stderr)
        return 1
    kernels = {"best": [""], "all": ["portable", "avx2", "avx512"]}.get(args.kernels, [args.kernels])
    scheme = native.scheme_struct(DEFAULT_SCHEME)
    nbytes = libs[0][1].shc_sketch_bytes(ctypes.byref(scheme))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    differ = 0
    for data in args.data:
        runs, size, n = read_runs(data, args.field, args.limit_mb)
        for kernel in kernels:
            try:
                for _, lib, _ in libs:
                    native.use_kernels(lib, kernel)
            except ValueError:
                continue  # (a kernel this CPU does not run)
            times: list[list[float]] = [[] for _ in libs]
            results = []
            for _ in range(args.turns):
                for k, (_, lib, work) in enumerate(libs):
                    seconds, result = one_pass(lib, work, runs, n, scheme, nbytes)
                    times[k].append(seconds)
                    if len(results) < len(libs):
                        results.append(result)
            first = statistics.median(times[0])
            row = {"data": data.name, "MB": round(size / 1e6, 2), "texts": n, "kernels": native.kernels(libs[0][1])}
            for (path, _, _), values in zip(libs, times):
                row[str(path)] = {"MB/s": round(size / 1e6 / statistics.median(values), 1),
                                  "ratio": round(first / statistics.median(values), 3)}  # fmt: skip
            row["identical"] = all(result == results[0] for result in results)
            differ += not row["identical"]
            print(json.dumps(row))
    for _, lib, work in libs:
        native.use_kernels(lib, "")
        lib.shc_work_free(work)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if differ:
        print(f"error: the libraries gave different results in {differ} runs", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
