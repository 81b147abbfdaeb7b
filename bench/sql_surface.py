"""What the SQL surface costs: simhash_near against SimhashIndex.near, the README's pure-SQL block
lookup in Python's sqlite3 (no functions of ours), and opening a file with schema verification.

    .venv/bin/python bench/sql_surface.py [--docs 100000] [--queries 300]

Prints medians per query (ms) and ratios against SimhashIndex.near, all measured in the same run.
"""

from __future__ import annotations

import argparse
import random
import re
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import apsw
from common import ROOT, Failures, print_machine

from simhash_sqlite import SimhashIndex, to_signed
from simhash_sqlite.store.database import expected_schema, schema_problems

README = (ROOT / "README.md").read_text(encoding="utf-8")
PORTABLE = next(b for b in re.findall(r"```sql\n(.*?)```", README, re.S) if "WITH RECURSIVE" in b)
# The README looks up a stored key; here the query is a fingerprint, as simhash_near gets it.
PORTABLE_FP = PORTABLE.replace(
    "q(fp) AS (SELECT fingerprint FROM documents WHERE key = 'examples/sqlite_intro.txt')", "q(fp) AS (SELECT ?)"
)


def median_ms(run, arguments) -> float:
    times = []
    for argument in arguments:
        start = time.perf_counter()
        run(argument)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    print_machine()
    rng = random.Random(6)
    centres = [rng.getrandbits(64) for _ in range(args.docs // 10)]
    items = []
    for i in range(args.docs):
        fp = centres[i % len(centres)]
        for _ in range(rng.randint(0, 6)):
            fp ^= 1 << rng.randrange(64)
        items.append((f"doc{i}", fp))
    queries = [rng.choice(centres) if i % 2 else rng.getrandbits(64) for i in range(args.queries)]

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.db"
        with SimhashIndex(path, create=True) as index:
            index.add_fingerprints(items)
        index = SimhashIndex(path)
        plain = sqlite3.connect(path)
        rows = []
        failures = Failures()
        for k in (3, 8):
            # every way answers the same: the table function, and (k = 3) the README's pure SQL
            for q in queries[:10]:
                want = sorted((m.key, m.distance) for m in index.near(fingerprint=q, k=k, check=False))
                got = index.conn.execute("SELECT key, distance FROM simhash_near(?, ?)", (to_signed(q), k)).fetchall()
                failures.expect(sorted(map(tuple, got)) == want, f"simhash_near(fp, {k}) differs from near()")
                if k == 3:
                    pure = plain.execute(PORTABLE_FP, (to_signed(q),)).fetchall()
                    failures.expect(sorted(pure) == want, "the README's pure SQL differs from near()")
            base = median_ms(lambda q: index.near(fingerprint=q, k=k, check=False), queries)
            rows.append((f"SimhashIndex.near, k={k}", base, 1.0))
            table = median_ms(
                lambda q: index.conn.execute("SELECT * FROM simhash_near(?, ?)", (to_signed(q), k)).fetchall(), queries
            )
            rows.append((f"SELECT * FROM simhash_near(fp, {k})", table, table / base))
            if k == 3:
                pure = median_ms(lambda q: plain.execute(PORTABLE_FP, (to_signed(q),)).fetchall(), queries)
                rows.append(("README pure SQL in Python's sqlite3, k=3", pure, pure / base))
        index.close()
        plain.close()

        def raw_open(_):
            apsw.Connection(str(path)).close()

        def checked_open(_):
            SimhashIndex(path).close()

        def verify_only(_):
            conn = apsw.Connection(str(path))
            schema_problems(conn, 1)
            conn.close()

        expected_schema(1)  # built once per process, like in real use
        opens = range(200)
        raw = median_ms(raw_open, opens)
        rows.append(("open: apsw.Connection + close", raw, None))
        rows.append(("open: + schema verification", median_ms(verify_only, opens), None))
        rows.append(("open: SimhashIndex (all checks, functions)", median_ms(checked_open, opens), None))

    print(f"{args.docs:,} fingerprints, {args.queries} queries (half near a stored cluster), medians")
    print(f"{'what':48} {'ms':>9} {'vs near':>8}")
    for name, ms, ratio in rows:
        print(f"{name:48} {ms:9.3f} {'' if ratio is None else f'{ratio:7.2f}x':>8}")
    failures.exit()


if __name__ == "__main__":
    main()
