"""All near-duplicate pairs at scale: candidate generators on a synthetic crawl, 100k pages and up.

    .venv/bin/python bench/all_pairs.py CORPUS.jsonl ... --sizes 100000,300000,1000000 [--k12-max 300000]

Pages come from bench/crawl.py (mostly unrelated pages of 150-6,000 characters made of real text
pieces, a tenth in families of mirrored, re-framed, counter-changed, lightly edited, cut and 40%
rewritten copies). Fingerprints and sketches are made once per size (as `add` makes them, one pass,
fingerprint.simhash_and_sketch_many; not timed here). Then, on the in-memory arrays, timed:

- k12: today's exact candidates, every pair within Hamming distance 12 (pairs.near_pairs), the
  candidate set of the checked `dupes` before this change (run up to --k12-max pages: it grows faster
  than linearly);
- sketch LSH: sketch_pairs.sketch_pairs at threshold 0.8, the new default: candidates from 79 tables of
  24-bit windows of the sketch, each checked by the sketch's estimate.

Truth: every pair with exact 5-shingle Jaccard >= 0.8 (shingles.jaccard on the regenerated texts)
among the union of: all pairs inside a family, the k12 candidates (where run) and every sketch-LSH
candidate whatever its estimate. Pairs that none of these finds are not counted (unrelated pages share
few pieces; see BENCHMARKS.md for the check at 20k pages against all pairs by prefix filtering).
Memory: peak of numpy allocations during the timed call (tracemalloc, a separate untimed run).

Side by side up to --minhash-max pages: datasketch MinHashLSH (128 permutations, threshold 0.8, the same
character 5-shingles of the whitespace-folded text), its pairs as returned (it has no check of its
own); its time to make the signatures (our counterpart is part of `add`) and to insert and query all
pages, its peak memory (tracemalloc, the same run), and its pairs scored on the same truth (extended
by its own candidates).
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc

import numpy as np
from common import Failures, median_seconds, print_machine
from crawl import Crawl

from simhash_sqlite.core.fingerprint import simhash_and_sketch_many
from simhash_sqlite.core.shingles import jaccard_of_sets, shingle_set
from simhash_sqlite.core.sketch import as_rows
from simhash_sqlite.find.pairs import near_pairs
from simhash_sqlite.find.sketch_pairs import sketch_pairs

THRESHOLD = 0.8


def arrays(crawl: Crawl, n: int, batch: int = 20_000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fingerprints uint64, sketch rows, family) of the first n pages."""
    fps, rows, family = [], [], []
    for lo in range(0, n, batch):
        pages = [crawl.page(i) for i in range(lo, min(n, lo + batch))]
        f, s = simhash_and_sketch_many([p[0] for p in pages])
        fps.append(np.array([x or 0 for x in f], dtype=np.uint64))
        rows.append(as_rows(s)[0])
        family.extend(p[1] for p in pages)
    return np.concatenate(fps), np.concatenate(rows), np.array(family)


def codes_of(parts, n: int) -> np.ndarray:
    return np.unique(np.concatenate([p.left * n + p.right for p in parts] or [np.empty(0, np.int64)]))


def brute_force_codes(fps: np.ndarray, k: int) -> np.ndarray:
    """Every pair within Hamming distance k, by comparing each fingerprint with all later ones."""
    n = len(fps)
    out = [i * n + i + 1 + np.flatnonzero(np.bitwise_count(fps[i + 1 :] ^ fps[i]) <= k) for i in range(n - 1)]
    return np.concatenate(out).astype(np.int64) if out else np.empty(0, np.int64)


def peak_mib(run) -> float:
    tracemalloc.start()
    run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def family_codes(family: np.ndarray) -> np.ndarray:
    n = len(family)
    members = np.flatnonzero(family >= 0)
    out = []
    for f in np.unique(family[members]):
        m = members[family[members] == f]
        i, j = np.triu_indices(len(m), 1)
        out.append(m[i] * n + m[j])
    return np.concatenate(out) if out else np.empty(0, np.int64)


def exact_truth(crawl: Crawl, codes: np.ndarray, n: int) -> np.ndarray:
    """The codes among `codes` whose pages have exact Jaccard >= THRESHOLD."""
    left, right = np.divmod(codes, n)
    shingles = {i: shingle_set(crawl.page(i)[0]) for i in np.unique(np.concatenate((left, right))).tolist()}
    keep = [jaccard_of_sets(shingles[a], shingles[b]) >= THRESHOLD for a, b in zip(left.tolist(), right.tolist())]
    return codes[np.array(keep, dtype=bool)] if len(codes) else codes


def minhash_lsh(crawl: Crawl, n: int) -> tuple[np.ndarray, float, float, float]:
    """(pair codes, signature seconds, LSH seconds, peak MiB) of datasketch MinHashLSH on the first n pages."""
    from datasketch import MinHash, MinHashLSH

    from simhash_sqlite.core.shingles import fold_space

    baseline = _rss_mib("VmRSS")
    started = time.perf_counter()
    signatures = []
    for i in range(n):
        folded = fold_space(crawl.page(i)[0])
        grams = {folded[j : j + 5] for j in range(max(1, len(folded) - 4))}
        m = MinHash(num_perm=128)
        m.update_batch([g.encode("utf-8") for g in grams])
        signatures.append(m)
    signature_seconds = time.perf_counter() - started
    started = time.perf_counter()
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=128)
    for i, m in enumerate(signatures):
        lsh.insert(i, m)
    codes = set()
    for i, m in enumerate(signatures):
        codes.update(min(i, j) * n + max(i, j) for j in lsh.query(m) if j != i)
    lsh_seconds = time.perf_counter() - started
    return np.array(sorted(codes), dtype=np.int64), signature_seconds, lsh_seconds, _rss_mib("VmHWM") - baseline


def _rss_mib(field: str) -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field)) / 1024


def minhash_in_child(paths: list[str], seed: int, n: int) -> tuple[np.ndarray, float, float, float]:
    """minhash_lsh() in a fresh process, so its peak memory (VmHWM above the RSS after loading) is its own."""
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".npy") as out:
        command = [sys.executable, __file__, *paths, "--seed", str(seed), "--minhash-only", str(n),
                   "--minhash-out", out.name]
        result = subprocess.run(command, capture_output=True, text=True, check=True)
        codes = np.load(out.name)
    signature_seconds, lsh_seconds, mib = (float(x) for x in result.stdout.split())
    return codes, signature_seconds, lsh_seconds, mib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="+", help="JSONL corpora for the crawl's text pieces")
    parser.add_argument("--sizes", default="100000,300000,1000000")
    parser.add_argument("--k12-max", type=int, default=300_000, help="largest size for k12 [default: %(default)s]")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs (median) [default: %(default)s]")
    parser.add_argument("--minhash-max", type=int, default=20_000,
                        help="largest size for MinHashLSH [default: %(default)s]")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--exact-max", type=int, default=5_000,
                        help="largest size whose k12 pairs are compared with a brute-force scan [default: %(default)s]")
    parser.add_argument("--minhash-only", type=int, help=argparse.SUPPRESS)  # the child of minhash_in_child
    parser.add_argument("--minhash-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    crawl = Crawl(args.jsonl, args.seed)
    if args.minhash_only:
        codes, *figures = minhash_lsh(crawl, args.minhash_only)
        np.save(args.minhash_out, codes)
        print(*figures)
        return
    print_machine()
    failures = Failures()

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    table = []
    for n in (int(s) for s in args.sizes.split(",")):
        started = time.perf_counter()
        fps, rows, family = arrays(crawl, n)
        log(f"[{n}] pages, fingerprints and sketches in {time.perf_counter() - started:.0f}s")

        def lsh(rows=rows):
            return list(sketch_pairs(rows, THRESHOLD))

        lsh_seconds, lsh_parts = median_seconds(lsh, args.repeats)
        lsh_found = codes_of(lsh_parts, n)
        all_candidates = codes_of(list(sketch_pairs(rows, 0.0)), n)
        lsh_mib = peak_mib(lsh)
        log(f"[{n}] sketch LSH {lsh_seconds:.1f}s, {len(lsh_found)} pairs, {lsh_mib:.0f} MiB")
        k12_found, k12_seconds, k12_mib = None, None, None
        if n <= args.k12_max:
            k12_seconds, k12_parts = median_seconds(lambda fps=fps: list(near_pairs(fps, 12)), args.repeats)
            k12_found = codes_of(k12_parts, n)
            if n <= args.exact_max:
                failures.expect(np.array_equal(k12_found, brute_force_codes(fps, 12)),
                                f"{n:,} pages: near_pairs(fps, 12) differs from the brute-force pairs")
            k12_mib = peak_mib(lambda fps=fps: list(near_pairs(fps, 12)))
            log(f"[{n}] k12 {k12_seconds:.1f}s, {len(k12_found)} candidates, {k12_mib:.0f} MiB")
        minhash = minhash_in_child(args.jsonl, args.seed, n) if n <= args.minhash_max else None
        if minhash is not None:
            log(f"[{n}] MinHashLSH signatures {minhash[1]:.0f}s, LSH {minhash[2]:.0f}s, {len(minhash[0])} pairs, "
                f"{minhash[3]:.0f} MiB")
        extra = [c for c in (k12_found, None if minhash is None else minhash[0]) if c is not None]
        union = np.unique(np.concatenate([family_codes(family), all_candidates, *extra]))
        truth = exact_truth(crawl, union, n)
        log(f"[{n}] truth {len(truth)} pairs with J >= 0.8 among {len(union)}")
        tp = np.isin(lsh_found, truth).sum()
        row = {
            "n": n, "truth": len(truth), "lsh_s": lsh_seconds, "lsh_mib": lsh_mib,
            "lsh_candidate_recall": np.isin(truth, all_candidates).mean(), "lsh_candidates": len(all_candidates),
            "lsh_p": tp / max(1, len(lsh_found)), "lsh_r": tp / max(1, len(truth)),
            "k12_s": k12_seconds, "k12_mib": k12_mib,
            "k12_recall": None if k12_found is None else np.isin(truth, k12_found).mean(),
            "k12_candidates": None if k12_found is None else len(k12_found),
            "minhash": None,
        }
        if minhash is not None:
            hit = np.isin(minhash[0], truth).sum()
            row["minhash"] = (hit / max(1, len(minhash[0])), hit / max(1, len(truth)), *minhash[1:])
        table.append(row)
    print(f"## All pairs at scale (bench/crawl.py pages, seed {args.seed}; {', '.join(args.jsonl)})\n")
    print("| pages | truth pairs (J >= 0.8) | k12 candidates | k12 recall of truth | k12 s | k12 peak MiB | "
          "sketch-LSH candidates | their recall of truth | sketch-LSH dupes s | peak MiB | P | R | F1 |")
    print("|---" * 13 + "|")
    for r in table:
        f1 = 2 * r["lsh_p"] * r["lsh_r"] / max(1e-9, r["lsh_p"] + r["lsh_r"])
        k12 = ("-", "-", "-", "-") if r["k12_s"] is None else (
            r["k12_candidates"], f"{r['k12_recall']:.4f}", f"{r['k12_s']:.1f}", f"{r['k12_mib']:.0f}")
        print(f"| {r['n']:,} | {r['truth']} | {k12[0]} | {k12[1]} | {k12[2]} | {k12[3]} | {r['lsh_candidates']} | "
              f"{r['lsh_candidate_recall']:.4f} | {r['lsh_s']:.1f} | {r['lsh_mib']:.0f} | {r['lsh_p']:.4f} | "
              f"{r['lsh_r']:.4f} | {f1:.4f} |")
    print("\n| pages | method | bytes per page | make signatures s | pairs s | peak MiB | P | R | F1 |")
    print("|---" * 9 + "|")
    for r in table:
        if r["minhash"] is None:
            continue
        p, rec, sig_s, pair_s, mib = r["minhash"]
        f1 = 2 * p * rec / max(1e-9, p + rec)
        print(f"| {r['n']:,} | datasketch MinHashLSH 128/0.8 | 1,024 (signature) + LSH tables | {sig_s:.0f} | "
              f"{pair_s:.0f} | "
              f"{mib:.0f} | {p:.4f} | {rec:.4f} | {f1:.4f} |")
        f1 = 2 * r["lsh_p"] * r["lsh_r"] / max(1e-9, r["lsh_p"] + r["lsh_r"])
        print(f"| {r['n']:,} | sketch LSH + estimate (this) | 120 (sketch) | (in add) | {r['lsh_s']:.1f} | "
              f"{r['lsh_mib']:.0f} | "
              f"{r['lsh_p']:.4f} | {r['lsh_r']:.4f} | {f1:.4f} |")
    failures.exit()


if __name__ == "__main__":
    main()
