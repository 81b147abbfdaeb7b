"""Where the time of adding fingerprints into a large index goes, and what a segment design could reach.

    .venv/bin/python bench/block_index_cost.py --index /tmp/bigadd/base10m.db --add 1000000 --runs 2

--index: a large index made by bench/big_index_add.py (10M random fingerprints); it is copied afresh for
each measurement. The same --add new (key, fingerprint) rows (seed 2) are written four ways, each in one
transaction with add_fingerprints' page cache (3 GiB):

- `add_fingerprints`: as shipped, every index kept up row by row (the row, the key index, the content-hash
  index, four block indexes);
- rows and keys only: the same upserts after the four block indexes and the content-hash index are
  dropped: what any design that keeps one documents table with unique keys pays at least;
- postings by sort: for each block, the new rows' (block, fingerprint, id) entries inserted in order
  into a fresh WITHOUT ROWID table (how a segment of a segmented index would be built);
- CREATE INDEX: one block index built again over the base's whole table (what folding a segment in
  by rebuilding would cost).

The quick check SQLite runs before a connection's first write (storage.ensure_sound) is left out.

Prints CPU seconds (median of --runs) and documents/s of CPU, and the projection rows + keys + four
segments' postings, before any merging of segments.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path

import numpy as np
from common import Failures, load, print_machine

from simhash_sqlite import SimhashIndex
from simhash_sqlite.store.database import ensure_sound, write_transaction
from simhash_sqlite.store.writer import _UPSERT_FINGERPRINT, BULK_CACHE_MIB, _bulk_writes, _fingerprint_rows

DROPPED = ("documents_b0", "documents_b1", "documents_b2", "documents_b3", "documents_content_hash")


def fresh_copy(base: Path, work: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{work}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(base, work)


def cpu_of(action) -> float:
    start = time.process_time()
    action()
    return time.process_time() - start


def measure(base: Path, work: Path, rows: list[tuple], expected: int, failures: Failures) -> dict[str, float]:
    """CPU seconds of each way, on fresh copies of the base (each must end with `expected` documents)."""
    out = {}
    for name, drop in (("add_fingerprints (every index row by row)", ()), ("rows and keys only", DROPPED)):
        fresh_copy(base, work)
        with SimhashIndex(work) as index:
            for index_name in drop:
                index.conn.execute(f"DROP INDEX {index_name}")
            index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            ensure_sound(index.conn)  # the quick check before a connection's first write: not timed
            with _bulk_writes(index.conn, BULK_CACHE_MIB):

                def upsert():
                    with write_transaction(index.conn):
                        index.conn.executemany(_UPSERT_FINGERPRINT, rows)

                out[name] = cpu_of(upsert)
            count = index.conn.execute("SELECT count(*) FROM documents").get
            failures.expect(count == expected, f"{name}: {count:,} documents after the add, {expected:,} expected")
            if drop:  # the rows are in: now build each block's postings of the new rows by sort
                first = index.conn.execute("SELECT min(id) FROM documents WHERE key LIKE 'new-%'").get
                times = []
                for block in range(4):
                    index.conn.execute(
                        f"CREATE TABLE segment_b{block} (block INTEGER, fingerprint INTEGER, id INTEGER, "
                        "PRIMARY KEY (block, fingerprint, id)) WITHOUT ROWID"
                    )
                    sql = (f"INSERT INTO segment_b{block} SELECT b{block}, fingerprint, id FROM documents "
                           "WHERE id >= ? ORDER BY 1, 2, 3")

                    def postings(sql=sql):
                        with write_transaction(index.conn):
                            index.conn.execute(sql, (first,))

                    times.append(cpu_of(postings))
                out["postings by sort, four blocks"] = sum(times)
    fresh_copy(base, work)
    with SimhashIndex(work) as index:
        index.conn.execute("DROP INDEX documents_b0")
        index.conn.pragma("cache_size", -BULK_CACHE_MIB * 1024)
        ensure_sound(index.conn)

        def rebuild():
            with write_transaction(index.conn):
                index.conn.execute("CREATE INDEX documents_b0 ON documents (b0, fingerprint)")

        out["CREATE INDEX of one block over the whole table"] = cpu_of(rebuild)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{work}{suffix}").unlink(missing_ok=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, required=True,
                        help="a large index (bench/big_index_add.py builds one; built here with --build when missing)")
    parser.add_argument("--build", type=int, default=10_000_000,
                        help="random fingerprints (seed 1, as big_index_add.py) when --index is missing")
    parser.add_argument("--add", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None, help="folder for the copies (default: --index's)")
    args = parser.parse_args()
    print_machine()
    work = (args.work or args.index.parent) / "block_index_cost_work.db"
    if not args.index.exists():
        fps = np.random.default_rng(1).integers(0, 2**64, args.build, dtype=np.uint64, endpoint=False).tolist()
        with SimhashIndex(args.index, create=True) as index:
            index.add_fingerprints((f"doc-{i:09d}", fp) for i, fp in enumerate(fps))
            index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with SimhashIndex(args.index, readonly=True) as index:
        stored = len(index)
    new = np.random.default_rng(2).integers(0, 2**64, args.add, dtype=np.uint64, endpoint=False).tolist()
    rows = _fingerprint_rows([(f"new-{i:09d}", fp) for i, fp in enumerate(new)])
    load_average = load()
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    failures = Failures()
    runs = [measure(args.index, work, rows, stored + args.add, failures) for _ in range(args.runs)]
    medians = {name: statistics.median(run[name] for run in runs) for name in runs[0]}
    print(f"## {args.add:,} fingerprints into an index of {stored:,} (CPU seconds, median of {args.runs} runs)\n")
    print(f"Started {started} UTC, load average {load_average}.\n")
    print("| way | CPU s | documents/s of CPU |")
    print("|---|---:|---:|")
    for name, seconds in medians.items():
        count = stored if name.startswith("CREATE INDEX") else args.add  # the rebuild is over the base
        print(f"| {name} | {seconds:.2f} | {count / seconds:,.0f} |")
    projected = medians["rows and keys only"] + medians["postings by sort, four blocks"]
    print(f"| projection: rows and keys + four segments' postings (no merging) | {projected:.2f} | "
          f"{args.add / projected:,.0f} |")
    failures.exit()


if __name__ == "__main__":
    main()
