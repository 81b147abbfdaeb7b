"""Default `simq dupes` from 100k to 10M documents: time, memory and candidate recall, on model sketches.

    .venv/bin/python bench/dupes_model_scale.py --sizes 100000,1000000,3000000,10000000 --folder /tmp/dms \
        --candidate-recall

Making 10M sketches from text takes hours on two cores, so this bench writes index files of MODEL
documents: a tenth of them in pairs (an original and a copy), the rest unrelated. An unrelated
document's sketch is random bits; a copy's sketch agrees with its original's on each bit with
probability (1 + J) / 2 (what a one-permutation one-bit MinHash gives for Jaccard J), J drawn uniformly
from 0.6-1.0; fingerprints are random, a copy's with Binomial(64, 0.1) bits flipped. The rows go in
with SQL (bulk insert, indexes built after), through a file made by SimhashIndex(create=True), so
the file is an ordinary index. Then `simq dupes --format jsonl --out FILE` runs at its defaults
(candidates from the sketches' LSH, kept by the estimate >= 0.8) as a user runs it: the whole
process timed, peak RSS by wait4.

Columns: the pairs found; recall of planted pairs with J >= 0.8 and of those with J >= 0.85 (a pair
at J = 0.8 is kept half the time by an unbiased estimate: the candidates are what scale, the check's
spread is bench/accuracy.py's subject); planted pairs found below 0.8 (false positives of the model);
other pairs found (two unrelated random sketches: none expected). --candidate-recall runs `simq dupes
--threshold 0.6` too (untimed): a planted pair at J >= 0.8 has an estimate >= 0.6 but for a chance of
about 1e-20, so the share of them it finds is the recall of the LSH candidates alone. "windows" is
sketch_pairs.window_plan's width/step (tables) for n. Quality on real text is
bench/accuracy.py's and bench/all_pairs.py's; this bench measures how time and memory grow.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from common import SIMQ, Failures, print_machine

from simhash_sqlite import SimhashIndex, to_signed
from simhash_sqlite.core.fingerprint import blocks
from simhash_sqlite.core.sketch import DEFAULT_SCHEME
from simhash_sqlite.find.sketch_pairs import _windows, window_plan

NBYTES = DEFAULT_SCHEME.nbytes
BIN_BYTES = DEFAULT_SCHEME.bins * DEFAULT_SCHEME.bits // 8


def model(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sketch rows, fingerprints, planted J of each copy: row n - pairs + i copies row i)."""
    rng = np.random.default_rng(seed)
    pairs = n // 20
    rows = rng.integers(0, 256, (n, NBYTES), dtype=np.uint8)
    # The bins are the model; a size field after them (version 2) says "unknown" (code 0), so the
    # estimate is the bins' alone, as for a text whose count was not recorded.
    rows[:, BIN_BYTES:] = 0
    fps = rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
    jaccard = rng.uniform(0.6, 1.0, pairs)
    for lo in range(0, pairs, 100_000):
        hi = min(pairs, lo + 100_000)
        flip = rng.random((hi - lo, BIN_BYTES * 8)) < ((1 - jaccard[lo:hi]) / 2)[:, None]
        flipped = np.zeros((hi - lo, NBYTES), dtype=np.uint8)
        flipped[:, :BIN_BYTES] = np.packbits(flip, axis=1, bitorder="little")
        rows[n - pairs + lo : n - pairs + hi] = rows[lo:hi] ^ flipped
        bits = rng.random((hi - lo, 64)) < 0.1
        fps[n - pairs + lo : n - pairs + hi] = fps[lo:hi] ^ np.packbits(bits, axis=1).view(">u8").ravel()
    return rows, fps, jaccard


def build(path: Path, rows: np.ndarray, fps: np.ndarray) -> float:
    started = time.perf_counter()
    with SimhashIndex(path, create=True) as index:
        conn = index.conn
        with conn:
            definitions = conn.execute(
                "SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'documents' "
                "AND sql IS NOT NULL").fetchall()
            for name, _sql in definitions:
                conn.execute(f'DROP INDEX "{name}"')
            conn.executemany(
                "INSERT INTO documents (id, key, fingerprint, b0, b1, b2, b3, length, sketch) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 1000, ?)",
                ((i + 1, f"doc-{i}", to_signed(fp), *blocks(fp), rows[i].tobytes())
                 for i, fp in enumerate(fps.tolist())))
            for _name, sql in definitions:
                conn.execute(sql)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return time.perf_counter() - started


def dupes(path: Path, out: Path, *options: str) -> tuple[float, int, str]:
    started = time.perf_counter()
    proc = subprocess.Popen([*SIMQ, "dupes", "--db", str(path), "--format", "jsonl", "--out", str(out), *options],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    said = proc.stdout.read().decode(errors="replace").strip().splitlines()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"simq dupes failed: {said}")
    return seconds, usage.ru_maxrss * 1024, said[-1] if said else ""


def scored(out: Path, n: int, jaccard: np.ndarray) -> dict:
    pairs = n // 20
    found_planted = np.zeros(pairs, dtype=bool)
    other = 0
    with open(out, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            a, b = sorted(int(record[k].removeprefix("doc-")) for k in ("first", "second"))
            if b == a + n - pairs:
                found_planted[a] = True
            else:
                other += 1
    line80, line85 = jaccard >= 0.8, jaccard >= 0.85
    return dict(found=int(found_planted.sum()) + other, recall80=found_planted[line80].mean(),
                recall85=found_planted[line85].mean(), below=int((found_planted & ~line80).sum()), other=other)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000", help="documents, comma-separated")
    parser.add_argument("--folder", type=Path, required=True, help="where the index files go (kept for re-runs)")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--candidate-recall", action="store_true",
                        help="also run dupes --threshold 0.6 (untimed): the recall of the candidates alone")
    args = parser.parse_args()
    print_machine()
    args.folder.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"## Default `simq dupes` on model sketches (started {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, "
          f"load {load[0]:.1f}; {os.cpu_count()} cores)\n")
    print("| documents | windows | build s | index bytes/doc | `simq dupes` s | peak RSS MiB | pairs found | "
          "recall J >= 0.8 | recall J >= 0.85 | planted < 0.8 kept | unrelated kept | candidate recall J >= 0.8 | "
          "load after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    failures = Failures()
    for n in (int(s) for s in args.sizes.split(",")):
        path = args.folder / f"model-{n}.db"
        rows, fps, jaccard = model(n, args.seed)
        built = float("nan")
        if not path.exists():
            built = build(path, rows, fps)
        del rows, fps
        out = args.folder / f"pairs-{n}.jsonl"
        seconds, peak, said = dupes(path, out)
        s = scored(out, n, jaccard)
        candidate_recall = "-"
        if args.candidate_recall:
            _, _, said_low = dupes(path, out, "--threshold", "0.6")
            candidate_recall = f"{scored(out, n, jaccard)['recall80']:.4f}"
            print(f"    simq --threshold 0.6 said: {said_low}", file=sys.stderr)
        width, step = window_plan(n, DEFAULT_SCHEME.bins * DEFAULT_SCHEME.bits)
        tables = len(_windows(DEFAULT_SCHEME.bins * DEFAULT_SCHEME.bits, width, step))
        print(f"| {n:,} | {width}/{step} ({tables}) | {built:.0f} | {path.stat().st_size / n:.0f} | {seconds:.1f} | "
              f"{peak / 2**20:,.0f} | {s['found']:,} | {s['recall80']:.4f} | {s['recall85']:.4f} | {s['below']:,} | "
              f"{s['other']:,} | {candidate_recall} | {os.getloadavg()[0]:.1f} |", flush=True)
        print(f"    simq said: {said}", file=sys.stderr)
        # Unrelated random sketches agree on half their bits: none may pass the check, and the planted
        # pairs well above the line must all be found (0.9999 at every published size).
        failures.expect(s["other"] == 0, f"{n:,}: {s['other']} unrelated pairs kept")
        failures.expect(s["recall85"] >= 0.99, f"{n:,}: recall at J >= 0.85 is {s['recall85']:.4f}")
    failures.exit()


if __name__ == "__main__":
    main()
