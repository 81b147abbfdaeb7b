"""simhash_near in the stock sqlite3 shell (the loadable extension) against the same searches through the package.

    .venv/bin/python bench/extension_near.py /tmp/simq-1m.db --make 1000000     # build it first if absent
    .venv/bin/python bench/extension_near.py /tmp/simq-10m.db --make 10000000 --queries 2000

The index: an existing one, or with --make N one of N random fingerprints (add_fingerprints) made at
that path. Queries: stored fingerprints with up to k random bits flipped, so most have neighbours.
For each k (--ks, default 3 and 7), --repeat times:

- shell: one stock `sqlite3` process (`-readonly`) loads the extension, puts the queries in a TEMP table
  and runs `SELECT count(*), total(n.distance) FROM q, simhash_near(q.fp, k) AS n` once under `.timer on`
  (every query searched, the check at its default: an integer query is judged by distance);
- package: SimhashIndex.near(fingerprint=..., k=k) for every query in a loop (what `simq near --hash`
  and the package's own simhash_near table run), and the same loop through the extension loaded into
  apsw (`SELECT ... FROM simhash_near(?, k)`, one statement per query, the package's process and harness).

Prints the median time per query of each, the ratio shell / package, and whether every query's answer
(keys and distances) is the same in the shell as in the package. The machine is shared: read the
ratios of one run, and the load printed with them.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import apsw  # noqa: E402

from simhash_sqlite import SimhashIndex, to_signed, to_unsigned  # noqa: E402
from simhash_sqlite.native.extension import ENTRY_POINT, loadable_path  # noqa: E402


def make(path: Path, count: int, seed: int) -> None:
    rng = random.Random(seed)
    started = time.perf_counter()
    with SimhashIndex(path, create=True) as index:
        chunk = 200_000
        for start in range(0, count, chunk):
            index.add_fingerprints((f"doc{i:09}", rng.getrandbits(64)) for i in range(start, min(count, start + chunk)))
    print(f"made {path}: {count:,} fingerprints in {time.perf_counter() - started:.0f} s", flush=True)


def queries_for(path: Path, count: int, k: int, seed: int) -> list[int]:
    """Stored fingerprints with 0..k random bits flipped (signed, as SQL holds them)."""
    rng = random.Random(seed + k)
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    top = conn.execute("SELECT max(id) FROM documents").get or 0
    out = []
    while len(out) < count and top:
        fp = conn.execute("SELECT fingerprint FROM documents WHERE id = ?", (rng.randint(1, top),)).get
        if fp is None:
            continue
        fp = to_unsigned(fp)
        for bit in rng.sample(range(64), rng.randint(0, k)):
            fp ^= 1 << bit
        out.append(to_signed(fp))
    conn.close()
    return out


def shell_run(
    sqlite3: str, path: Path, extension: str, queries: list[int], k: int, answers: Path | None
) -> tuple[float, float]:
    """(wall, CPU) seconds of the one statement that searches every query, as the shell's .timer reports them."""
    values = ",".join(f"({q})" for q in queries)
    script = [f".load {extension}", "CREATE TEMP TABLE q (i INTEGER PRIMARY KEY, fp INTEGER);",
              f"INSERT INTO q (fp) VALUES {values};", ".timer on",
              f"SELECT count(*), total(n.distance) FROM q, simhash_near(q.fp, {k}) AS n;", ".timer off"]
    if answers is not None:
        script += [f".output {answers}", ".mode list",
                   f"SELECT q.i, n.key, n.distance FROM q, simhash_near(q.fp, {k}) AS n ORDER BY 1, 3, 2;"]
    run = subprocess.run([sqlite3, "-readonly", "-batch", "-bail", str(path)], input="\n".join(script) + "\n",
                         capture_output=True, text=True, timeout=3600)
    if run.returncode:
        raise SystemExit(f"sqlite3 failed: {run.stderr.strip()}")
    found = re.search(r"Run Time: real ([0-9.]+) user ([0-9.]+) sys ([0-9.]+)", run.stdout)
    if not found:
        raise SystemExit(f"no timing in the shell's output: {run.stdout[-500:]}")
    return float(found.group(1)), float(found.group(2)) + float(found.group(3))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path)
    parser.add_argument("--make", type=int, default=None, help="make an index of N random fingerprints if absent")
    parser.add_argument("--ks", default="3,7")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sqlite3 = shutil.which("sqlite3")
    if sqlite3 is None:
        raise SystemExit("error: the sqlite3 shell is not installed (Debian: apt-get install sqlite3)")
    extension = loadable_path()
    if not args.index.exists():
        if args.make is None:
            raise SystemExit(f"error: {args.index} does not exist (give --make N to make one)")
        make(args.index, args.make, args.seed)
    version = subprocess.run([sqlite3, "--version"], capture_output=True, text=True).stdout.split()[0]
    with SimhashIndex(args.index, readonly=True) as index:
        rows = index.conn.execute("SELECT count(*) FROM documents").get
    print(f"index {args.index}: {rows:,} documents; stock sqlite3 {version}, apsw's SQLite "
          f"{apsw.sqlite_lib_version()}; {args.queries} queries x {args.repeat}; load {os.getloadavg()[0]:.1f}",
          flush=True)
    print("ms per query, median of the repeats: CPU (user + sys) and, in brackets, wall")
    print(f"{'k':>3} {'shell':>16} {'package':>16} {'ratio':>11} {'ext in apsw':>16}  same answers")
    for k in (int(x) for x in args.ks.split(",")):
        queries = queries_for(args.index, args.queries, k, args.seed)
        with tempfile.TemporaryDirectory() as tmp:
            answers = Path(tmp) / "answers.txt"
            shell_run(sqlite3, args.index, extension, queries[:10], k, None)  # warm the page cache
            shell_times = [shell_run(sqlite3, args.index, extension, queries, k, answers if r == 0 else None)
                           for r in range(args.repeat)]
            shell_answer = answers.read_text().splitlines()
        package_times, extension_times = [], []  # (wall, CPU)
        with SimhashIndex(args.index, readonly=True) as index:
            expected = []
            for i, q in enumerate(queries, start=1):
                expected += [(i, m.key, m.distance) for m in index.near(fingerprint=to_unsigned(q), k=k)]
            expected.sort(key=lambda row: (row[0], row[2], row[1]))
            conn = apsw.Connection(str(args.index), flags=apsw.SQLITE_OPEN_READONLY)
            conn.enable_load_extension(True)
            conn.load_extension(extension, ENTRY_POINT)
            sql = f"SELECT count(*), total(distance) FROM simhash_near(?, {k})"
            for _ in range(args.repeat):
                started, cpu = time.perf_counter(), time.process_time()
                for q in queries:
                    index.near(fingerprint=to_unsigned(q), k=k)
                package_times.append((time.perf_counter() - started, time.process_time() - cpu))
                started, cpu = time.perf_counter(), time.process_time()
                for q in queries:
                    conn.execute(sql, (q,)).get
                extension_times.append((time.perf_counter() - started, time.process_time() - cpu))
            conn.close()
        same = shell_answer == [f"{i}|{key}|{d}" for i, key, d in expected]
        per = 1000 / len(queries)

        def ms(times: list[tuple[float, float]]) -> tuple[float, float]:
            return statistics.median(c for _, c in times) * per, statistics.median(w for w, _ in times) * per

        (shell_cpu, shell_wall), (package_cpu, package_wall) = ms(shell_times), ms(package_times)
        extension_cpu, extension_wall = ms(extension_times)
        print(f"{k:>3} {shell_cpu:>7.3f} ({shell_wall:>6.3f}) {package_cpu:>7.3f} ({package_wall:>6.3f}) "
              f"{shell_cpu / package_cpu:>4.2f} ({shell_wall / package_wall:>4.2f}) "
              f"{extension_cpu:>7.3f} ({extension_wall:>6.3f})  {'yes' if same else 'NO'} ({len(expected):,} rows)",
              flush=True)
        if not same:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
