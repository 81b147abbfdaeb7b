"""Concurrency: several `simq add` processes writing one index while `simq near`/`stats` read it.

    .venv/bin/python bench/concurrency.py                          # 4 writers, 4 readers, 60 s
    .venv/bin/python bench/concurrency.py --writers 2 --readers 2 --seconds 10

Every writer runs `simq add` again and again, each time on a new JSONL file of its own (keys
w<writer>-<round>-<i>), and every third round also on a shared file that all writers add (the
same keys at the same time: upserts that must not duplicate). Each reader is a process running the
library's near() and len() in a loop (reopening the index every 50 queries), beside a thread
calling `simq near --json`. The run fails on any non-zero exit, any "locked" or traceback on
stderr, a document count that goes down between two reads of one reader, and at the end unless
the index passes simhash_sqlite.checks.problems and holds exactly the keys of the files whose
add succeeded.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import apsw
from common import SIMQ, print_machine

from simhash_sqlite.store.integrity import problems


def write_jsonl(path: Path, keys: list[str], rng: random.Random, vocabulary: list[str]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for key in keys:
            text = " ".join(rng.choices(vocabulary, k=50))
            handle.write(json.dumps({"id": key, "text": text}) + "\n")


class Run:
    def __init__(self, work: Path, docs_per_file: int, seed: int):
        self.work, self.db, self.docs = work, work / "index.db", docs_per_file
        rng = random.Random(seed)
        self.vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(3000)]
        self.lock = threading.Lock()
        self.expected: set[str] = set()
        self.errors: list[str] = []
        self.counts = {"adds": 0, "queries": 0, "opens": 0, "cli_queries": 0}
        self.shared: dict[int, Path] = {}

    def shared_file(self, round_: int) -> Path:
        with self.lock:  # made once, by whichever writer gets there first
            if round_ not in self.shared:
                path = self.work / f"shared-{round_}.jsonl"
                keys = [f"shared-{round_}-{i}" for i in range(self.docs)]
                write_jsonl(path, keys, random.Random(round_), self.vocabulary)
                self.shared[round_] = path
            return self.shared[round_]

    def simq(self, *args: str) -> subprocess.CompletedProcess:
        result = subprocess.run([*SIMQ, *args, "--db", str(self.db)], capture_output=True, text=True)
        if result.returncode != 0 or "locked" in result.stderr or "Traceback" in result.stderr:
            with self.lock:
                self.errors.append(f"simq {args[0]} exit {result.returncode}: {result.stderr.strip()[-300:]}")
        return result

    def writer(self, number: int, until: float) -> None:
        rng = random.Random(number)
        round_ = 0
        while time.monotonic() < until:
            path = self.work / f"w{number}-{round_}.jsonl"
            keys = [f"w{number}-{round_}-{i}" for i in range(self.docs)]
            write_jsonl(path, keys, rng, self.vocabulary)
            files = [path] + ([self.shared_file(round_)] if round_ % 3 == 0 else [])
            result = self.simq("add", "--batch-size", "100", *map(str, files))
            if result.returncode == 0:
                with self.lock:
                    self.expected.update(keys)
                    if round_ % 3 == 0:
                        self.expected.update(f"shared-{round_}-{i}" for i in range(self.docs))
                    self.counts["adds"] += 1
            round_ += 1

    def reader(self, number: int, until: float) -> None:
        """A reader process of its own (reader_loop below), plus `simq near` calls from here."""
        while not self.db.exists() and time.monotonic() < until:
            time.sleep(0.05)
        time.sleep(1.0)  # let the first writer create the index
        seconds = max(0.0, until - time.monotonic())
        process = subprocess.Popen([sys.executable, __file__, "--reader-loop", str(self.db), str(seconds), str(number)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rng = random.Random(100 + number)
        while time.monotonic() < until:
            result = self.simq("near", " ".join(rng.choices(self.vocabulary, k=50)), "--k", "12", "--json")
            if result.returncode == 0:
                json.loads(result.stdout)
                with self.lock:
                    self.counts["cli_queries"] += 1
        stdout, stderr = process.communicate()
        if process.returncode != 0:
            with self.lock:
                self.errors.append(f"reader {number}: {stderr.strip()[-500:]}")
            return
        summary = json.loads(stdout)
        with self.lock:
            self.counts["queries"] += summary["queries"]
            self.counts["opens"] += summary["opens"]
            self.errors.extend(summary["errors"])


def reader_loop(db: str, seconds: float, number: int) -> None:
    """Library reads for `seconds`: near() and len(), reopening the index every 50 queries."""
    from simhash_sqlite import SimhashIndex

    rng = random.Random(number)
    until = time.monotonic() + seconds
    queries = opens = last = 0
    errors: list[str] = []
    while time.monotonic() < until:
        try:
            with SimhashIndex(db) as index:
                opens += 1
                for _ in range(50):
                    index.near(fingerprint=rng.getrandbits(64), k=3, check=False)
                    count = len(index)
                    if count < last:
                        errors.append(f"reader {number}: documents went from {last} down to {count}")
                    last = count
                    queries += 1
        except Exception as exc:  # every failure is a finding: count it, do not stop
            errors.append(f"reader {number}: {type(exc).__name__}: {exc}")
    print(json.dumps({"queries": queries, "opens": opens, "errors": errors[:20]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--docs-per-file", type=int, default=500)
    parser.add_argument("--reader-loop", nargs=3, metavar=("DB", "SECONDS", "NUMBER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reader_loop:  # the child reader process: its stdout is its JSON summary alone
        reader_loop(args.reader_loop[0], float(args.reader_loop[1]), int(args.reader_loop[2]))
        return
    print_machine()

    run = Run(Path(tempfile.mkdtemp(prefix="concurrency_")), args.docs_per_file, seed=1)
    # A writer or reader thread that dies is an error of the run, not a traceback beside a passing table.
    threading.excepthook = lambda hook: run.errors.append(f"{hook.thread.name}: {hook.exc_type.__name__}: "
                                                          f"{hook.exc_value}")
    started = time.monotonic()
    until = started + args.seconds
    threads = [threading.Thread(target=run.writer, args=(w, until)) for w in range(args.writers)]
    threads += [threading.Thread(target=run.reader, args=(r, until)) for r in range(args.readers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started

    conn = apsw.Connection(str(run.db), flags=apsw.SQLITE_OPEN_READONLY)
    stored = {key for (key,) in conn.execute("SELECT key FROM documents")}
    rows = conn.execute("SELECT count(*) FROM documents").get
    conn.close()
    broken = problems(run.db)
    exact = stored == run.expected and rows == len(run.expected)
    print("| writers | readers | seconds | simq add runs | library queries (index opens) | simq near runs | errors "
          "| documents (expected) | duplicate keys | integrity | exact |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    print(f"| {args.writers} | {args.readers} | {elapsed:.0f} | {run.counts['adds']} | {run.counts['queries']:,} "
          f"({run.counts['opens']:,}) | {run.counts['cli_queries']} | {len(run.errors)} "
          f"| {rows:,} ({len(run.expected):,}) | {rows - len(stored)} "
          f"| {'ok' if not broken else '; '.join(broken)} | {'yes' if exact else 'NO'} |")
    for error in run.errors[:10]:
        print("error:", error)
    if run.errors or broken or not exact:
        sys.exit(1)


if __name__ == "__main__":
    main()
