"""Crash safety: SIGKILL `simq add` at random moments, and check the index after every kill.

    .venv/bin/python bench/crash_kills.py                  # 100 kills (about 10 minutes)
    .venv/bin/python bench/crash_kills.py --kills 10 --docs 5000

Each round starts `simq add --progress-json --batch-size B data.jsonl` on the same index, kills it
with SIGKILL after a random delay, then checks:
  - the file passes simhash_sqlite.checks.problems (PRAGMA integrity_check, blocks agree with
    fingerprints, no duplicate keys, the schema is there);
  - every document of every batch a run reported committed (the progress lines come after COMMIT)
    is present with the right content hash;
  - nothing is in the index that is not in the input.
When a run is not killed in time it finishes: then the full count is checked and the index is
deleted, so the next rounds kill fresh index creations and adds again. At the end the same add
runs to completion once more and must end with exactly the input's documents.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apsw
from common import SIMQ, print_machine

from simhash_sqlite.store.integrity import problems
from simhash_sqlite.store.texts import content_hash


def make_input(path: Path, docs: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(5000)]
    records = [(f"doc{i}", " ".join(rng.choices(vocabulary, k=60))) for i in range(docs)]
    with path.open("w", encoding="utf-8") as handle:
        for key, text in records:
            handle.write(json.dumps({"id": key, "text": text}) + "\n")
    return records


def stored(db: Path) -> dict[str, bytes]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return dict(conn.execute("SELECT key, content_hash FROM documents"))
    except apsw.SQLError:  # killed before the schema was committed: no table yet
        return {}
    finally:
        conn.close()


def run_add(db: Path, data: Path, batch: int, kill_after: float | None) -> tuple[int | None, int, float]:
    """(documents reported committed, return code, seconds). kill_after None: run to the end."""
    command = [*SIMQ, "add", "--db", str(db), "--batch-size", str(batch),
               "--progress-json", str(data)]
    with tempfile.TemporaryFile("w+") as log:
        start = time.monotonic()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, text=True)
        try:
            process.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait()
        elapsed = time.monotonic() - start
        log.seek(0)
        reported = None
        for line in log:
            if line.startswith("{"):
                try:
                    reported = json.loads(line)["documents"]
                except json.JSONDecodeError:
                    pass  # the last line may be cut off by the kill
            elif "Traceback" in line:
                raise SystemExit(f"traceback from simq add:\n{log.read()}")
    return reported, process.returncode, elapsed


def check(db: Path, records, hashes: dict[str, bytes], committed: int) -> tuple[list[str], list[str]]:
    """(integrity problems, losses) after a run: committed documents missing or wrong, unknown keys."""
    if not db.exists():
        return [], ([] if committed == 0 else [f"index gone but {committed} documents were reported committed"])
    broken = problems(db)  # a file killed before its schema's commit is empty, and that passes
    have = stored(db)
    lost = [key for key, _ in records[:committed] if have.get(key) != hashes[key]]
    losses = [f"{len(lost)} committed documents lost or wrong (first: {lost[0]})"] if lost else []
    unknown = set(have) - set(hashes)
    if unknown:
        broken.append(f"{len(unknown)} keys that are not in the input")
    return broken, losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--max-delay", type=float, default=6.0, help="kill after uniform(0.05, this) seconds")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print_machine()
    rng = random.Random(args.seed)

    work = Path(tempfile.mkdtemp(prefix="crash_kills_"))
    data, db = work / "data.jsonl", work / "index.db"
    records = make_input(data, args.docs, args.seed)
    hashes = {key: content_hash(text) for key, text in records}

    kills = completed = corrupt = lost_runs = fresh_kills = 0
    committed_max = 0
    started = time.monotonic()
    delays = []
    while kills < args.kills:
        fresh = not db.exists()
        delay = rng.uniform(0.05, args.max_delay)
        reported, code, elapsed = run_add(db, data, args.batch_size, delay)
        committed_max = max(committed_max, reported or 0)
        if code == 0:
            completed += 1
            broken, losses = check(db, records, hashes, args.docs)
            if len(stored(db)) != args.docs:
                losses.append("a completed add does not hold every document")
        else:
            kills += 1
            fresh_kills += fresh
            delays.append(elapsed)
            broken, losses = check(db, records, hashes, committed_max)
        corrupt += bool(broken)
        lost_runs += bool(losses)
        if broken or losses:
            print(f"round {kills}: {broken + losses}", flush=True)
        if code == 0:  # start over on a fresh file, so later kills hit creation and early batches too
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
            committed_max = 0
        if kills % 10 == 0 and code != 0:
            print(f"{kills} kills, {completed} completed runs, {corrupt} corrupt, {lost_runs} with losses", flush=True)

    reported, code, _ = run_add(db, data, args.batch_size, None)
    final = sum(check(db, records, hashes, args.docs), [])
    have = stored(db)
    exact = code == 0 and len(have) == args.docs and not final
    seconds = time.monotonic() - started
    print()
    print("| kills | of them on a fresh file | runs that finished | corrupt indexes | runs losing committed documents "
          "| final re-run: documents (expected) | exact | seconds |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    print(f"| {kills} | {fresh_kills} | {completed} | {corrupt} | {lost_runs} | {len(have):,} ({args.docs:,}) "
          f"| {'yes' if exact else 'NO: ' + '; '.join(final)} | {seconds:.0f} |")
    print(f"kill delays: median {sorted(delays)[len(delays) // 2]:.2f} s, max {max(delays):.2f} s; "
          f"batch size {args.batch_size}; work folder {work}")
    if corrupt or lost_runs or not exact:
        sys.exit(1)


if __name__ == "__main__":
    main()
