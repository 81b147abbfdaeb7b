"""Fingerprint + sketch speed of one process: the numpy reference against the C core, side by side.

For each data set: MB/s (UTF-8 bytes of text per CPU-second of this process, which a busy shared
machine disturbs far less than wall time) of fingerprint.simhash_and_sketch_many (the
default settings and sketch scheme, what `simq add` computes) with SIMHASH_SQLITE_CORE=python and with
the core, the texts given as str (the core's column: each is encoded to UTF-8 on the way); the same
call given each text's UTF-8 as well ("given UTF-8": what `simq add` does, whose JSONL reader has the
bytes already, so nothing is encoded); and the core's raw batch call on the str texts (no Python lists
around it: "batch only"). Medians of --repeats runs taken in turns, the ratio of the str column to
the reference, and a check that every column gave the reference's bytes. Prints the CPU flags that choose the
kernels, the kernels the core runs, and the load average before and after. --kernels all times each
kernel this CPU runs (portable, avx2, avx512: the core's shc_set_kernel) in the same turns.

    python bench/core_speed.py DATA.jsonl [MORE.jsonl ...] [--field text] [--limit-mb 20] [--repeats 5]
    python bench/core_speed.py            # generated English-like and Chinese-like text instead
    python bench/core_speed.py --kernels all
    python bench/core_speed.py DATA.jsonl --kernels all --against OTHER/_simhash_core.so

--against times another build of the core library (say main's, to measure a change) through the same
Python code, in the same turns: the fair way to compare two trees on a busy machine.

A JSONL file is read whole (its --field of every line, up to --limit-mb of text).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

from common import read_field

from simhash_sqlite import native
from simhash_sqlite.core.fingerprint import simhash_and_sketch_many
from simhash_sqlite.core.settings import FingerprintSettings
from simhash_sqlite.core.sketch import DEFAULT_SCHEME


def generated(kind: str, mb: float, seed: int = 1) -> list[str]:
    """Pages of 150-6,000 characters: English-like words, or Chinese-like runs of common Han characters."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("etaoinshrdlcumwfgypbvkjxqz") for _ in range(rng.randint(1, 9))) for _ in range(5000)]
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    texts, size = [], 0
    while size < mb * 1e6:
        n = rng.randint(150, 6000)
        if kind == "en":
            out, length = [], 0
            while length < n:
                out.append(rng.choice(words))
                length += len(out[-1]) + 1
            text = " ".join(out)[:n]
        else:
            text = "".join(rng.choice(han) if rng.random() < 0.92 else rng.choice("，。、 ") for _ in range(n))
        texts.append(text)
        size += len(text.encode("utf-8"))
    return texts


def cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                wanted = ["sse4_2", "popcnt", "avx", "avx2", "bmi2", "fma", "avx512f", "avx512dq", "avx512bw",
                          "avx512vl", "avx512_vpopcntdq"]  # fmt: skip
                return " ".join(f for f in wanted if f in flags)
    except OSError:
        pass
    return "unknown"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def timed(function) -> tuple[float, object]:
    """CPU seconds of this process (a busy shared machine stretches wall time, far less CPU time)."""
    start = time.process_time()
    result = function()
    return time.process_time() - start, result


def run(name: str, texts: list[str], repeats: int, kernels: list[str], against=None) -> dict:
    utf8 = [t.encode("utf-8", "surrogatepass") for t in texts]  # (as the JSONL reader of `simq add` has them)
    mb = sum(map(len, utf8)) / 1e6
    settings = FingerprintSettings()
    lib = native.core()
    # the libraries timed: the package's core, and the one of --against through the same Python code
    libs = [("core", lib)] + ([("against", against)] if against is not None and lib is not None else [])
    times: dict[str, list[float]] = {"reference": []}
    results = {}
    package_core = native.core
    scratch: dict[str, object] = {}  # each library's scratch memory kept between its calls, as in one run
    switch = os.environ.get(native.SWITCH, "auto")  # the caller's, given back after each reference run
    for _ in range(repeats):  # in turns, so a change of load hits all alike
        os.environ[native.SWITCH] = "python"
        seconds, results["reference"] = timed(lambda: simhash_and_sketch_many(texts, settings, DEFAULT_SCHEME))
        times["reference"].append(seconds)
        os.environ[native.SWITCH] = switch
        if lib is not None:  # untimed: the first call after the reference's would pay for its memory's return
            simhash_and_sketch_many(texts, settings, DEFAULT_SCHEME)
        for kernel in kernels if lib is not None else []:
            for which, one in libs:
                native.use_kernels(one, kernel)
                native.core = lambda one=one: one  # (what simhash_and_sketch_many calls)
                native._local.scratch = scratch.get(which)
                try:
                    label = f"{which} ({native.kernels(one)})"
                    seconds, results[label] = timed(lambda: simhash_and_sketch_many(texts, settings, DEFAULT_SCHEME))
                    times.setdefault(label, []).append(seconds)
                    given = f"{label} given UTF-8"
                    seconds, results[given] = timed(
                        lambda: simhash_and_sketch_many(texts, settings, DEFAULT_SCHEME, utf8=utf8)
                    )
                    times.setdefault(given, []).append(seconds)
                    seconds, raw = timed(lambda: native.batch(one, texts, scheme=DEFAULT_SCHEME))
                    times.setdefault(f"{label} batch only", []).append(seconds)
                finally:
                    native.core = package_core
                    scratch[which] = getattr(native._local, "scratch", None)
        for _, one in libs if lib is not None else []:  # (no core built: the reference alone)
            native.use_kernels(one, "")
    row = {"data": name, "texts": len(texts), "MB": round(mb, 2)}
    for key, values in times.items():
        row[f"{key} MB/s"] = round(mb / statistics.median(values), 1)
    if lib is not None:
        cores = [key for key in results if key != "reference"]
        mine = [key for key in cores if key.startswith("core") and not key.endswith("given UTF-8")]
        best = statistics.median(times[mine[-1]])
        row["ratio core/reference"] = round(statistics.median(times["reference"]) / best, 2)
        row["identical"] = all(results[key] == results["reference"] for key in cores)
        row["declined"] = int((raw[2] & native.DECLINED != 0).sum())
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="*", type=Path, help="JSONL files (default: generated text)")
    parser.add_argument("--field", default="text")
    parser.add_argument("--limit-mb", type=float, default=20.0)
    parser.add_argument("--generated-mb", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kernels", default="best", help="best (the core's pick), all, portable, avx2 or avx512")
    parser.add_argument(
        "--against", type=Path, help="another build of the core library (another tree's _simhash_core.so), timed "
        "through the same Python code in the same turns: its columns are named 'against'",
    )  # fmt: skip
    args = parser.parse_args()
    lib = native.core()
    against = None
    if args.against is not None:
        loaded = native._load(str(args.against.resolve()))
        if loaded.lib is None:
            print(f"error: --against {args.against}: {loaded.why_not}", file=sys.stderr)
            return 1
        against = loaded.lib
    kernels = []  # those this CPU runs, of the ones asked for
    for kernel in {"best": [""], "all": ["portable", "avx2", "avx512"]}.get(args.kernels, [args.kernels]):
        try:
            if lib is not None:
                native.use_kernels(lib, kernel)
                kernels.append(kernel)
        except ValueError as exc:
            if args.kernels != "all":
                print(f"error: {exc}", file=sys.stderr)
                return 1
    if lib is not None:
        native.use_kernels(lib, "")
    sets = [(p.name, read_field(p, args.field, args.limit_mb)) for p in args.data] or [
        ("generated English", generated("en", args.generated_mb)),
        ("generated Chinese", generated("zh", args.generated_mb)),
    ]
    print(f"cpu: {cpu_model()}; flags: {cpu_flags()}; cores: {os.cpu_count()}")
    print(f"core: {native.describe()}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name, texts in sets:
        if not texts:
            print(f"error: no text in {name}", file=sys.stderr)
            return 1
        print(json.dumps(run(name, texts, args.repeats, kernels, against), ensure_ascii=False))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
