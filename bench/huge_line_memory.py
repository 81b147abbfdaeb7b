"""Peak memory of one huge JSONL line: `simq dedup`, `simq add` and `simq add --store-text` of one record
whose text is N MB, for each size given, with one worker process and with several at once.

    .venv/bin/python bench/huge_line_memory.py --mb 30,60,120            # the sizes of issue 24
    .venv/bin/python bench/huge_line_memory.py --mb 12 --workers 1       # smoke run, 1 minute

The text is random words (a-p, 2-9 letters), generated into a temporary folder and deleted afterwards;
--lines copies of the line (each its own record) let several pool workers hold one at a time. Peak RSS
is the largest of the process and its pool workers (wait4's ru_maxrss, which covers reaped children);
the table gives it in MiB with the seconds. A text over fingerprint.LONG_TEXT characters is fingerprinted
in pieces; before that was done for texts under 32 MiB, dedup peaked at about 46 bytes a character.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIMQ = [sys.executable, "-m", "simhash_sqlite"]


def huge_line(path: Path, megabytes: float, copies: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    characters = int(megabytes * 1_000_000)
    text = " ".join(rng.choices(words, k=characters // 6 + 1))[:characters]
    with path.open("w", encoding="utf-8") as handle:
        for copy in range(copies):
            handle.write(json.dumps({"id": f"big{copy}", "text": text}) + "\n")


def peak(command: list[str], cwd: Path, workers: int) -> tuple[float, float, int]:
    """(peak RSS MiB, seconds, exit status) of one command."""
    env = {**os.environ, "SIMQ_WORKERS": str(workers), "NO_COLOR": "1"}
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    return usage.ru_maxrss / 1024, time.perf_counter() - start, os.waitstatus_to_exitcode(status)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", default="30,60,120", help="text sizes in MB (comma-separated)")
    parser.add_argument("--workers", default="1,2", help="SIMQ_WORKERS values (comma-separated)")
    parser.add_argument("--lines", type=int, default=2, help="copies of the line in the file (records)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="huge-line-"))
    try:
        print(f"{'MB':>6} {'workers':>7} {'command':<22} {'peak MiB':>9} {'s':>7} {'exit':>4}")
        for megabytes in (float(x) for x in args.mb.split(",")):
            source = folder / "big.jsonl"
            huge_line(source, megabytes, args.lines)
            for workers in (int(x) for x in args.workers.split(",")):
                for name, extra in (("dedup", ["dedup", "big.jsonl", "-o", "kept.jsonl"]),
                                    ("add", ["add", "big.jsonl", "--db", "n.db"]),
                                    ("add --store-text", ["add", "big.jsonl", "--db", "s.db", "--store-text"])):
                    for leftover in folder.glob("*.db*"):
                        leftover.unlink()
                    mib, seconds, code = peak([*SIMQ, *extra], folder, workers)
                    print(f"{megabytes:>6g} {workers:>7} {name:<22} {mib:>9.0f} {seconds:>7.1f} {code:>4}", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
