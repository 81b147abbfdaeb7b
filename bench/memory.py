"""Memory stays bounded: peak RSS of `simq add` against file size and against document count.

    .venv/bin/python bench/memory.py                 # text files up to 1 GiB, JSONL up to 300k documents
    .venv/bin/python bench/memory.py --quick         # 64 MiB and 30k documents

Part 1 adds one generated text file (English and Chinese lines) of growing size. Files over 32 MiB
are fingerprinted piece by piece; the baseline is a 30 MiB file, which is still read whole.
Part 2 adds JSONL files of growing document counts, sampling the process's RSS after each
committed batch (--progress-json) to show it does not grow with the number of documents.
Peak RSS is the child's ru_maxrss. Inputs go to a temporary folder and are deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import SIMQ, print_machine

LINES = [
    "SimHash maps a text to sixty-four bits so that similar texts get similar fingerprints.",
    "The index keeps every fingerprint in one SQLite file with four block columns.",
    "相似的文本得到相似的指纹，汉明距离衡量它们的差异。",
    "A crawl holds many mirrors of the same page with a different header or footer.",
]


def text_file(path: Path, size: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    block = "".join(f"{rng.choice(LINES)} {rng.randrange(10**6)}\n" for _ in range(20_000)).encode("utf-8")
    with path.open("wb") as handle:
        written = 0
        while written + len(block) <= size:
            handle.write(block)
            written += len(block)
        handle.write(b"x" * (size - written))  # ASCII: the file ends on a whole character


def jsonl_file(path: Path, documents: int, seed: int = 2) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(documents):
            handle.write(json.dumps({"id": f"d{i}", "text": f"{rng.choice(LINES)} {rng.choice(LINES)} {i}"}) + "\n")


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def measure(args: list[str]) -> tuple[float, int, list[tuple[int, int]]]:
    """(seconds, peak RSS in KiB, [(documents committed, RSS KiB)]) of one simq add in a fresh wrapper."""
    wrapper = (
        "import resource, subprocess, sys, json\n"
        "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
        "print(json.dumps({'pid': p.pid}), flush=True)\n"
        "for line in p.stderr:\n"
        "    print(line.rstrip(), flush=True)\n"
        "code = p.wait()\n"
        "print(json.dumps({'code': code, 'maxrss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n"
    )
    start = time.monotonic()
    process = subprocess.Popen([sys.executable, "-c", wrapper, *args], stdout=subprocess.PIPE, text=True)
    pid, samples, result = None, [], {}
    for line in process.stdout:
        if not line.startswith("{"):
            continue
        data = json.loads(line)
        if "pid" in data:
            pid = data["pid"]
        elif "committed_batches" in data:
            samples.append((data["documents"], rss_kib(pid) or 0))
        elif "maxrss" in data:
            result = data
    process.wait()
    if result.get("code") != 0:
        raise SystemExit(f"simq add failed: {args}")
    return time.monotonic() - start, result["maxrss"], samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--text-mib", help="comma-separated text file sizes in MiB (default 30,64,256,1024)")
    parser.add_argument("--jsonl-docs", help="comma-separated JSONL document counts (default 3000,30000,300000)")
    args = parser.parse_args()
    print_machine()
    sizes = [30 << 20, 64 << 20] if args.quick else [30 << 20, 64 << 20, 256 << 20, 1 << 30]
    counts = [3_000, 30_000] if args.quick else [3_000, 30_000, 300_000]
    if args.text_mib is not None:
        sizes = [int(x) << 20 for x in args.text_mib.split(",") if x]
    if args.jsonl_docs is not None:
        counts = [int(x) for x in args.jsonl_docs.split(",") if x]
    work = Path(tempfile.mkdtemp(prefix="memory_"))
    try:
        print("| text file | read | seconds | MB/s | peak RSS (MiB) |")
        print("| ---: | --- | ---: | ---: | ---: |")
        for size in sizes:
            path = work / f"text_{size >> 20}MiB.txt"
            text_file(path, size)
            db = work / f"text_{size >> 20}.db"
            seconds, peak, _ = measure([*SIMQ, "add", "--db", str(db), "--weights", "count", str(path)])
            how = "whole (baseline)" if size <= 32 << 20 else "in pieces"
            print(f"| {size >> 20:,} MiB | {how} | {seconds:.1f} | {size / seconds / 1e6:.1f} | {peak / 1024:.0f} |",
                  flush=True)
            path.unlink()
        print()
        print("| JSONL documents | seconds | docs/s | RSS after 10% (MiB) | RSS after 50% | RSS at the end "
              "| peak RSS |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for count in counts:
            path = work / f"docs_{count}.jsonl"
            jsonl_file(path, count)
            db = work / f"docs_{count}.db"
            seconds, peak, samples = measure([*SIMQ, "add", "--db", str(db), "--progress-json", str(path)])

            def at(share: float) -> str:
                docs, rss = next(s for s in samples if s[0] >= share * count)
                return f"{rss / 1024:.0f}"

            print(f"| {count:,} | {seconds:.1f} | {count / seconds:,.0f} | {at(0.1)} | {at(0.5)} | {at(1.0)} "
                  f"| {peak / 1024:.0f} |", flush=True)
            path.unlink()
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
