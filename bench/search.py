"""Exact near-duplicate search at scale: simhash-sqlite against a numpy scan and faiss, side by side.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/search.py                          # quick: 1M random + 1M skewed
    .venv/bin/python bench/search.py --sizes 10000000 --skewed 10000000 --dir /tmp/simq-bench

For each data set: N random 64-bit fingerprints plus planted neighbours (for every query, one
fingerprint at distance exactly k for each k asked), or a skewed set where a quarter of all block
values come from 64 hot values (Zipf weights), so many fingerprints share block values and queries
land in hot buckets. Then, one data set at a time and in the same process:

- build: a new index through add_fingerprints (seconds, bytes per document after a checkpoint),
  then adding --add more fingerprints to it (the index-maintenance case);
- per-query p50/p99 for each k: SimhashIndex.near() one query at a time, near_many() over the same
  queries (throughput), the numpy scan (np.bitwise_count of the XOR over all fingerprints in memory),
  and faiss IndexBinaryMultiHash (4 x 16-bit tables, nflip = k // 4, exact like ours);
- recall of the planted neighbours (must be 1.0) and whether every answer equals the numpy scan's.

The machine is shared: compare figures from one run, and read the ratios, not single numbers.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import Failures, print_machine, yes_no

from simhash_sqlite import Query, SimhashIndex
from simhash_sqlite.index import BULK_CACHE_MIB

try:
    import faiss
except ImportError:  # the [bench] extra
    faiss = None

HOT_SHARE = 0.25
HOT_VALUES = 64


def random_fps(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**64, size=n, dtype=np.uint64)


def skewed_fps(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random fingerprints whose blocks are, each with probability HOT_SHARE, one of HOT_VALUES hot
    values drawn with Zipf weights (1/rank): the top value of each block is held by ~5% of all rows."""
    fps = random_fps(rng, n)
    weights = 1.0 / np.arange(1, HOT_VALUES + 1)
    weights /= weights.sum()
    for shift in (48, 32, 16, 0):
        hot_values = rng.choice(1 << 16, size=HOT_VALUES, replace=False).astype(np.uint64)
        hot = rng.random(n) < HOT_SHARE
        values = hot_values[rng.choice(HOT_VALUES, size=int(hot.sum()), p=weights)]
        mask = np.uint64(0xFFFF) << np.uint64(shift)
        fps[hot] = (fps[hot] & ~mask) | (values << np.uint64(shift))
    return fps


def flip_bits(rng: np.random.Generator, fp: int, d: int) -> int:
    for bit in rng.choice(64, size=d, replace=False):
        fp ^= 1 << int(bit)
    return fp


def make_set(kind: str, n: int, queries: int, ks: list[int], seed: int):
    """(fingerprints of the index, query fingerprints, planted {query index: [(id, distance)]})."""
    rng = np.random.default_rng(seed)
    base = (skewed_fps if kind == "skewed" else random_fps)(rng, n + queries)
    fps, qs = base[:n], base[n:]
    planted_fps, planted = [], {}
    for i, q in enumerate(qs.tolist()):
        for d in ks:
            planted.setdefault(i, []).append((n + len(planted_fps), d))
            planted_fps.append(flip_bits(rng, q, d))
    return np.concatenate([fps, np.array(planted_fps, dtype=np.uint64)]), qs, planted


def pcts(seconds: list[float]) -> tuple[float, float]:
    ms = np.array(seconds) * 1e3
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def bench_set(name, fps, qs, planted, ks, args, rows_out, build_out):
    path = Path(args.dir) / f"{name}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    keys = [f"d{i}" for i in range(len(fps))]
    extra = random_fps(np.random.default_rng(99), args.add)

    started, cpu = time.perf_counter(), time.process_time()
    with SimhashIndex(path, create=True) as index:
        index.add_fingerprints(zip(keys, fps.tolist()))
        index.conn.pragma("wal_checkpoint(TRUNCATE)")
    build = time.perf_counter() - started
    size = os.path.getsize(path)
    build_out.append((name, "simhash-sqlite: new index", len(fps), build, time.process_time() - cpu, size / len(fps)))
    if args.add:
        started, cpu = time.perf_counter(), time.process_time()
        with SimhashIndex(path) as index:
            index.add_fingerprints(zip((f"x{i}" for i in range(args.add)), extra.tolist()))
        build_out.append((name, f"simhash-sqlite: add {args.add:,} to it", args.add, time.perf_counter() - started,
                          time.process_time() - cpu, None))
    everything = np.concatenate([fps, extra])
    print(f"[{name}] built {len(fps):,} + {args.add:,} rows", file=sys.stderr, flush=True)

    index_faiss = None
    if faiss is not None and not args.no_faiss:
        started, cpu = time.perf_counter(), time.process_time()
        index_faiss = faiss.IndexBinaryMultiHash(64, 4, 16)
        index_faiss.add(everything.byteswap().view(np.uint8).reshape(-1, 8))
        build_out.append((name, "faiss IndexBinaryMultiHash", len(everything), time.perf_counter() - started,
                          time.process_time() - cpu, None))

    qlist = [int(q) for q in qs]

    def key_of(row: int) -> str:  # the key of a row of `everything`
        return f"d{row}" if row < len(fps) else f"x{row - len(fps)}"

    with SimhashIndex(path) as index:
        for k in ks:
            truth = [np.nonzero(np.bitwise_count(everything ^ np.uint64(q)) <= k)[0] for q in qlist[: args.check]]
            want = {i: {pid for pid, d in planted[i] if d <= k} for i in range(len(qlist))}

            # near(): one call per query, as a user would make them.
            times, found_ok, planted_hit, planted_all, cands, plans = [], True, 0, 0, [], {}
            for i, q in enumerate(qlist):
                started = time.perf_counter()
                result = index.search(fingerprint=q, k=k, check=False)
                times.append(time.perf_counter() - started)
                got = {int(m.key[1:]) for m in result.matches if m.key.startswith("d")}
                planted_hit += len(want[i] & got)
                planted_all += len(want[i])
                cands.append(result.candidates)
                plans[result.plan.kind] = plans.get(result.plan.kind, 0) + 1
                if i < args.check:
                    exp = {key_of(j) for j in truth[i].tolist()}
                    found_ok &= {m.key for m in result.matches} == exp
            p50, p99 = pcts(times)
            plan = "/".join(f"{kind} {count}" for kind, count in sorted(plans.items()))
            rows_out.append((name, k, "simhash-sqlite near()", p50, p99, planted_hit / planted_all, found_ok,
                             int(statistics.median(cands)), plan))

            # near_many(): the batch API over the same queries (loads block counts once, plans hot buckets),
            # unchecked like near() above and the scan: every fingerprint within k, no Jaccard check.
            answers, times = [], []
            started = time.perf_counter()
            for pair in index.near_many((Query(fingerprint=q) for q in qlist), k=k, check=False):
                now = time.perf_counter()
                times.append(now - started)  # per query, as the batch yields them
                answers.append(pair)
                started = time.perf_counter()
            p50, p99 = pcts(times)
            batch_ok = len(answers) == len(qlist) and all(
                {m.key for m in a.matches} == {key_of(j) for j in truth[i].tolist()}
                for i, (_, a) in enumerate(answers[: args.check])
            )
            bplans = {}
            for _, a in answers:
                bplans[a.plan.kind] = bplans.get(a.plan.kind, 0) + 1
            rows_out.append((name, k, "simhash-sqlite near_many()", p50, p99, None, batch_ok,
                             int(statistics.median(a.candidates for _, a in answers)),
                             "/".join(f"{kind} {c}" for kind, c in sorted(bplans.items()))))

            # numpy brute-force scan over the fingerprints in memory.
            times = []
            for q in qlist[: args.scan_queries]:
                started = time.perf_counter()
                np.nonzero(np.bitwise_count(everything ^ np.uint64(q)) <= k)
                times.append(time.perf_counter() - started)
            p50, p99 = pcts(times)
            rows_out.append((name, k, "numpy scan", p50, p99, 1.0, True, len(everything), "scan"))

            if index_faiss is not None:
                index_faiss.nflip = k // 4
                codes = np.array(qlist, dtype=np.uint64).byteswap().view(np.uint8).reshape(-1, 8)
                times, hit, ok = [], 0, True
                for i in range(len(qlist)):
                    started = time.perf_counter()
                    lims, _, ids = index_faiss.range_search(codes[i : i + 1], k + 1)  # distance < k + 1
                    times.append(time.perf_counter() - started)
                    got = set(ids.tolist())
                    hit += len(want[i] & got)
                    if i < args.check:
                        ok &= got == set(truth[i].tolist())
                p50, p99 = pcts(times)
                rows_out.append((name, k, "faiss IndexBinaryMultiHash", p50, p99, hit / planted_all, ok, None,
                                 f"nflip {k // 4}"))
            print(f"[{name}] k={k} done", file=sys.stderr, flush=True)
    if not args.keep:
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000", help="random set sizes, comma-separated")
    parser.add_argument("--skewed", default="1000000", help="skewed set sizes, comma-separated ('' for none)")
    parser.add_argument("--ks", default="3,7,11")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--scan-queries", type=int, default=100, help="queries timed for the numpy scan")
    parser.add_argument("--check", type=int, default=100, help="queries compared with the numpy scan")
    parser.add_argument("--add", type=int, default=None, help="rows added after the build [default: N/10]")
    parser.add_argument("--dir", default=None, help="where the index files go [default: a temp folder]")
    parser.add_argument("--keep", action="store_true", help="keep the index files")
    parser.add_argument("--no-faiss", action="store_true")
    args = parser.parse_args()
    print_machine()
    ks = [int(k) for k in args.ks.split(",")]
    made_dir = args.dir is None
    args.dir = args.dir or tempfile.mkdtemp(prefix="simq-bench-")
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    sets = [("random", int(n)) for n in args.sizes.split(",") if n] + [
        ("skewed", int(n)) for n in args.skewed.split(",") if n
    ]
    rows, builds = [], []
    failures = Failures()
    add_given = args.add
    try:
        for kind, n in sets:
            args.add = n // 10 if add_given is None else add_given
            fps, qs, planted = make_set(kind, n, args.queries, ks, seed=n + (kind == "skewed"))
            bench_set(f"{kind}-{n // 1_000_000}M" if n >= 1_000_000 else f"{kind}-{n}", fps, qs, planted, ks, args,
                      rows, builds)
    finally:
        if made_dir and not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)

    print(f"\nqueries per k: {args.queries} (numpy scan: {args.scan_queries}); "
          f"page cache for loads: {BULK_CACHE_MIB} MiB")
    print("\n| set | engine | rows | seconds | CPU seconds | bytes/doc |\n| --- | --- | ---: | ---: | ---: | ---: |")
    for name, engine, n, secs, cpu, per_doc in builds:
        print(f"| {name} | {engine} | {n:,} | {secs:.1f} | {cpu:.1f} | {'' if per_doc is None else f'{per_doc:.0f}'} |")
    print("\n| set | k | engine | p50 ms | p99 ms | planted recall | = numpy scan | median candidates | plans |")
    print("| --- | ---: | --- | ---: | ---: | ---: | --- | ---: | --- |")
    for name, k, engine, p50, p99, recall, ok, cands, plan in rows:
        print(
            f"| {name} | {k} | {engine} | {p50:.3f} | {'' if p99 is None else f'{p99:.3f}'} | "
            f"{'' if recall is None else f'{recall:.3f}'} | {yes_no(ok)} | "
            f"{'' if cands is None else f'{cands:,}'} | {plan} |"
        )
        failures.expect(ok, f"{name} k={k} {engine}: an answer differs from the numpy scan's")
        failures.expect(recall is None or recall == 1.0, f"{name} k={k} {engine}: planted recall {recall}")
    # Ratios within the same run, per set and k.
    print("\n| set | k | near() p50 / faiss p50 | numpy scan p50 / near() p50 |\n| --- | ---: | ---: | ---: |")
    for name in dict.fromkeys(r[0] for r in rows):
        for k in ks:
            by = {r[2]: r for r in rows if r[0] == name and r[1] == k}
            ours = by["simhash-sqlite near()"][3]
            fa = by.get("faiss IndexBinaryMultiHash")
            faiss_ratio = '' if fa is None else f'{ours / fa[3]:.2f}x'
            scan = by["numpy scan"][3] / ours
            print(f"| {name} | {k} | {faiss_ratio} | {scan:.0f}x |" if scan >= 10
                  else f"| {name} | {k} | {faiss_ratio} | {scan:.1f}x |")
    failures.exit()


if __name__ == "__main__":
    main()
