"""How close is add's writer to the floor? The same rows into the same schema by add's writer (the rows zipped
from columns, store.writer.Writer._packed_rows, then apsw's executemany of its upsert) and by a C program
(bench/insert_floor.c: one prepared statement, the same upsert), in the same transactions, into an empty index
whose search indexes are dropped (a bulk load's inserts; the indexes' build by sort is the same SQL for both and
left out). CPU seconds, medians of --runs, interleaved.

    .venv/bin/python bench/writer_floor.py INDEX.db [--runs 5]      # INDEX.db: made by simq add (its rows)
    .venv/bin/python bench/writer_floor.py --small                  # the smoke run: 2,000 rows of its own

The C program links the system's SQLite (libsqlite3-dev); apsw brings its own, often newer: the report names
both. Aim (issue 34): the writer within 1.5x of the floor.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apsw
import common  # noqa: F401  (this checkout's package first)
from common import BENCH, load, print_machine

from simhash_sqlite import SimhashIndex
from simhash_sqlite.core.fingerprint import to_unsigned
from simhash_sqlite.store.database import drop_search_indexes, write_transaction
from simhash_sqlite.store.documents import Document, FingerprintedBatch
from simhash_sqlite.store.writer import _UPSERT, ADD_CACHE_MIB, BULK_TRANSACTION


def batch_of(index: Path) -> FingerprintedBatch:
    """The index's documents as the columns add() writes."""
    conn = apsw.Connection(str(index), flags=apsw.SQLITE_OPEN_READONLY)
    rows = list(conn.execute("SELECT key, fingerprint, length, content_hash, sketch, short_text, text "
                             "FROM documents ORDER BY id"))
    conn.close()
    keys, fps, lengths, hashes, sketches, shorts, texts = (list(column) for column in zip(*rows))
    return FingerprintedBatch(keys, [None if fp is None else to_unsigned(fp) for fp in fps], lengths, hashes,
                              sketches, shorts, texts if any(t is not None for t in texts) else None)


def empty_target(folder: Path, store_text: bool) -> Path:
    """An index of the same schema with no documents, its search indexes dropped (as a bulk load's)."""
    path = folder / "empty.db"
    with SimhashIndex(path, create=True, store_text=store_text) as index:
        index.add([Document("x", "warm up")])
        index.remove(["x"])
        drop_search_indexes(index.conn)
    return path


def python_run(target: Path, batch: FingerprintedBatch) -> tuple[float, float]:
    """(CPU s to make the rows, CPU s to insert them) by add's writer."""
    with SimhashIndex(target) as index:
        writer = index._writer
        index.conn.pragma("cache_size", -ADD_CACHE_MIB * 1024)
        start = time.process_time()
        rows, _ = writer._packed_rows(batch)
        made = time.process_time()
        for first in range(0, len(rows), BULK_TRANSACTION):
            with write_transaction(index.conn):
                index.conn.executemany(_UPSERT, rows[first : first + BULK_TRANSACTION])
        return made - start, time.process_time() - made


def c_run(program: Path, source: Path, target: Path) -> tuple[float, str]:
    out = subprocess.run([str(program), str(source), str(target), str(BULK_TRANSACTION), str(ADD_CACHE_MIB)],
                         check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), out[2]


def small_index(folder: Path) -> Path:
    path = folder / "small.db"
    with SimhashIndex(path, create=True) as index:
        index.add([Document(f"d{i}", f"document {i} " + "words and more words " * (i % 30)) for i in range(2000)])
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("index", nargs="?", type=Path, help="an index made by simq add: its rows are inserted")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--small", action="store_true", help="a 2,000-row index of its own (the smoke run)")
    args = parser.parse_args()
    if args.index is None and not args.small:
        parser.error("give an index, or --small")
    cc = shutil.which("cc")
    if cc is None:
        print("no C compiler: nothing to compare with", file=sys.stderr)
        return 2
    print_machine()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        program = folder / "insert_floor"
        built = subprocess.run([cc, "-O2", "-o", str(program), str(BENCH / "insert_floor.c"), "-lsqlite3"],
                               capture_output=True, text=True)
        if built.returncode:
            print(f"bench/insert_floor.c did not build (libsqlite3-dev?): {built.stderr.strip()}", file=sys.stderr)
            return 2
        source = small_index(folder) if args.small else args.index
        batch = batch_of(source)
        empty = empty_target(folder, batch.texts is not None)
        made, inserted, floor = [], [], []
        version = ""
        for _ in range(args.runs if not args.small else 1):
            target = folder / "target.db"
            shutil.copy(empty, target)
            rows_s, insert_s = python_run(target, batch)
            made.append(rows_s)
            inserted.append(insert_s)
            shutil.copy(empty, target)
            seconds, version = c_run(program, source, target)
            floor.append(seconds)
        m, i, f = (statistics.median(x) for x in (made, inserted, floor))
        print(f"\n{len(batch):,} rows, medians of {len(floor)} runs, load {load()}; SQLite {apsw.sqlite_lib_version()}"
              f" (apsw) and {version} (the C program)\n")
        print("| writer: rows made | writer: executemany | writer in all | C floor | writer / floor |")
        print("|---|---|---|---|---|")
        print(f"| {m:.3f} s | {i:.3f} s | {m + i:.3f} s | {f:.3f} s | {(m + i) / f:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
