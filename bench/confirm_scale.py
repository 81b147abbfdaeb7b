"""The exact check at scale: time and peak memory of `simq dupes --k 12` (checked) against
`simq dupes --no-check --k 12` (the same candidates, unchecked) on indexes of growing size.

    .venv/bin/python bench/confirm_scale.py                  # 25k, 50k, 100k documents
    .venv/bin/python bench/confirm_scale.py --sizes 10000 --repeats 1

Documents are families made with a fixed seed: a random text of 60-160 words from a 20,000-word
vocabulary and three copies with 0.5-8% of the words replaced (so candidate pairs within 12 bits are
mostly true near-duplicates, some near the 0.8 line), about 600 characters each. They are added with
`simq add --store-text` to an index in a temporary folder; each `dupes` runs in its own process
(median of --repeats runs), writing JSONL to /dev/null; peak RSS is the child's ru_maxrss. If memory
is bounded, the checked run's peak grows with the fingerprint arrays (16 bytes a document), not with
the pairs or the texts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import SIMQ, Failures, print_machine, read_jsonl


def make_jsonl(path: Path, documents: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    vocab = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(20_000)]
    with path.open("w", encoding="utf-8") as handle:
        for family in range(documents // 4):
            words = [rng.choice(vocab) for _ in range(rng.randint(60, 160))]
            handle.write(json.dumps({"id": f"{family}", "text": " ".join(words)}) + "\n")
            for copy in range(3):
                edited = [rng.choice(vocab) if rng.random() < rng.uniform(0.005, 0.08) else w for w in words]
                handle.write(json.dumps({"id": f"{family}.{copy}", "text": " ".join(edited)}) + "\n")


def run(args: list[str]) -> tuple[float, int, str]:
    """(seconds, peak RSS of this child alone in MiB (wait4), stderr) of one simq process."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errors:
        started = time.perf_counter()
        child = subprocess.Popen(SIMQ + args, stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        errors.seek(0)
        stderr = errors.read()
    if child.returncode != 0:
        sys.exit(f"simq {' '.join(args)} failed: {stderr}")
    return seconds, usage.ru_maxrss // 1024, stderr


def pairs_in(path: Path) -> dict[tuple[str, str], float]:
    """{(first, second): jaccard (1.0 when not checked)} of a `simq dupes --format jsonl` output."""
    pairs = {}
    for record in read_jsonl(path):
        jaccard = record.get("jaccard")
        pairs[tuple(sorted((record["first"], record["second"])))] = 1.0 if jaccard is None else jaccard
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="25000,50000,100000", help="documents per index [default: %(default)s]")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print_machine()
    rows = []
    failures = Failures()
    with tempfile.TemporaryDirectory() as folder:
        for size in sorted(int(s) for s in args.sizes.split(",")):
            source, db = Path(folder) / f"{size}.jsonl", Path(folder) / f"{size}.db"
            make_jsonl(source, size)
            add_seconds, _, _ = run(["add", "--db", str(db), "--store-text", str(source)])
            plain, checked, peaks, summary = [], [], {}, ""
            plain_out, checked_out = Path(folder) / "plain.jsonl", Path(folder) / "checked.jsonl"
            for _ in range(args.repeats):
                seconds, peak, _ = run(["dupes", "--db", str(db), "--no-check", "--k", "12", "--format", "jsonl",
                                        "--out", str(plain_out)])
                plain.append(seconds)
                peaks["plain"] = peak
                seconds, peak, summary = run(["dupes", "--db", str(db), "--k", "12", "--format", "jsonl",
                                              "--out", str(checked_out)])
                checked.append(seconds)
                peaks["checked"] = peak
            # The check only removes candidates, and keeps exactly those whose Jaccard is >= 0.8.
            candidates, kept = pairs_in(plain_out), pairs_in(checked_out)
            failures.expect(kept.keys() <= candidates.keys(), f"{size:,}: the checked run kept a pair beyond k = 12")
            failures.expect(all(score >= 0.8 for score in kept.values()),
                            f"{size:,}: the checked run kept a pair under Jaccard 0.8")
            rows.append((size, os.path.getsize(source) / 1e6, add_seconds,
                         statistics.median(plain), statistics.median(checked),
                         peaks["plain"], peaks["checked"], summary.strip().splitlines()[0]))
            print(f"{size}: done", file=sys.stderr, flush=True)
    print(f"## `simq dupes` checked vs unchecked at k=12 "
          f"(median of {args.repeats}; load average {os.getloadavg()[0]:.2f})\n")
    print("| documents | JSONL MB | add --store-text s | dupes --no-check --k 12 s | dupes (checked) s | ratio "
          "| peak RSS unchecked MiB | peak RSS checked MiB | summary of the checked run |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size, mb, add_s, p, c, rp, rc, summary in rows:
        print(f"| {size:,} | {mb:.0f} | {add_s:.1f} | {p:.2f} | {c:.2f} | {c / p:.1f}x | {rp} | {rc} | {summary} |")
    failures.exit()


if __name__ == "__main__":
    main()
