"""All pairs within k, clusters and keep-first dedup: speed against a plain numpy baseline.

    .venv/bin/python bench/pairs.py --corpus EN.jsonl           # 1M and 10M, skewed sets, 100k-document dedup
    .venv/bin/python bench/pairs.py --corpus EN.jsonl --quick   # 1M only, 20k documents
    .venv/bin/python bench/pairs.py --quick --size 20000        # a smoke run: no dedup rows without --corpus

EN.jsonl: English JSONL {"id", "text"} to cut the dedup documents from (BENCHMARKS.md used the shared
corpus's python_docs_en.jsonl).

Prints one table. The baseline is the obvious numpy method: for each of the four 16-bit blocks,
argsort, compare every pair inside each group of equal block values, and remove the pairs found on
several blocks with a final sort. Both must find the same pairs (checked).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import SIMQ, Failures, median_seconds, print_machine

from simhash_sqlite import simhash
from simhash_sqlite.find.clusters import component_labels
from simhash_sqlite.find.pairs import near_pairs, within_groups

K = 3
BASELINE_BUDGET = 4e9  # candidate pairs; beyond this the baseline's time is estimated, not run


# -- data ----------------------------------------------------------------------------------------


def random_fingerprints(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, 1 << 63, n, dtype=np.int64).astype(np.uint64) ^ (
        rng.integers(0, 2, n, dtype=np.int64).astype(np.uint64) << np.uint64(63)
    )


def flip_bits(values: np.ndarray, count: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    out = values.copy()
    for round_ in range(int(count.max(initial=0))):
        bit = rng.integers(0, 64, len(out)).astype(np.uint64)
        out ^= np.where(count > round_, np.uint64(1) << bit, np.uint64(0))
    return out


def planted(n: int, rng: np.random.Generator) -> np.ndarray:
    """n fingerprints: 90% random, 10% copies of them at distance 0-4 (clusters of 2-6 and chains)."""
    base = random_fingerprints(n - n // 10, rng)
    sources = base[rng.integers(0, len(base) // 20, n // 10)]  # a few sources get several copies
    copies = flip_bits(sources, rng.integers(0, 5, len(sources)), rng)
    values = np.concatenate((base, copies))
    rng.shuffle(values)
    return values


def skewed(n: int, rng: np.random.Generator) -> np.ndarray:
    """Boilerplate-heavy: 30% share one 32-bit template half, 2,000 are one identical page (hot exact
    copies: 2M pairs), 20% have a block value drawn from only 16 values; the rest random, 10% near-copies."""
    values = planted(n, rng)
    template = np.uint64(rng.integers(0, 1 << 32)) << np.uint64(32)
    part = rng.permutation(n)
    a, b, c = part[: int(0.3 * n)], part[int(0.3 * n) : int(0.3 * n) + 2000], part[int(0.35 * n) : int(0.55 * n)]
    values[a] = template | (values[a] & np.uint64(0xFFFFFFFF))
    values[b] = values[part[-1]]
    common = rng.integers(0, 1 << 16, 16).astype(np.uint64)
    values[c] = (values[c] & ~np.uint64(0xFFFF << 16)) | (common[rng.integers(0, 16, len(c))] << np.uint64(16))
    return values


# -- the two methods -------------------------------------------------------------------------------


def ours(values: np.ndarray) -> tuple[int, np.ndarray]:
    count, codes = 0, []
    for part in near_pairs(values, K):
        count += len(part.left)
        codes.append(part.left * len(values) + part.right)
    return count, np.concatenate(codes) if codes else np.empty(0, np.int64)


def baseline_candidates(values: np.ndarray) -> int:
    """How many pairs the baseline would compare: the sum over blocks of size^2/2 of each group."""
    total = 0
    for block in range(4):
        sizes = np.bincount(((values >> np.uint64(48 - 16 * block)) & np.uint64(0xFFFF)).astype(np.int64))
        total += int((sizes * (sizes - 1) // 2).sum())
    return total


def baseline(values: np.ndarray) -> tuple[int, np.ndarray]:
    """Group by each 16-bit block, compare within groups, deduplicate the pair codes at the end."""
    found = []
    for block in range(4):
        keys = (values >> np.uint64(48 - 16 * block)) & np.uint64(0xFFFF)
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        sizes = np.diff(np.concatenate((starts, [len(values)])))
        for i, j in within_groups(starts, sizes):
            a, b = order[i], order[j]
            close = np.bitwise_count(values[a] ^ values[b]) <= K
            a, b = a[close], b[close]
            found.append(np.minimum(a, b) * len(values) + np.maximum(a, b))
    codes = np.sort(np.concatenate(found)) if found else np.empty(0, np.int64)
    codes = codes[np.concatenate(([True], codes[1:] != codes[:-1]))] if len(codes) else codes
    return len(codes), codes


# -- end-to-end dedup of real documents ------------------------------------------------------------


def documents(corpus: Path, count: int, rng: random.Random) -> list[dict]:
    """Windows of about 600 characters from an English corpus, plus perturbed copies:
    a changed word or two, a dropped sentence, a header line, up to `count` documents."""
    windows = []
    for line in corpus.open(encoding="utf-8"):
        page = json.loads(line)
        paragraphs = [p.strip() for p in re.split(r"\n\s*\n", page["text"]) if len(p.strip()) > 40]
        window = ""
        for paragraph in paragraphs:
            window = f"{window}\n\n{paragraph}" if window else paragraph
            if len(window) >= 600:
                windows.append((page["id"], window))
                window = ""
    records = [{"id": f"{pid}#{i}", "text": w, "source": pid} for i, (pid, w) in enumerate(windows)]
    originals = records[:]
    while len(records) < count:
        src = rng.choice(originals)
        words = src["text"].split(" ")
        kind = rng.randrange(3)
        if kind == 0:
            for _ in range(rng.randint(1, 2)):
                words[rng.randrange(len(words))] = rng.choice(["the", "a", "Python", "value"])
        elif kind == 1:
            del words[rng.randrange(len(words)) : rng.randrange(len(words)) + 6]
        else:
            words.insert(0, f"Mirror {rng.randrange(1000)} |")
        records.append(
            {"id": f"copy{len(records)}", "text": " ".join(words), "source": src["source"], "copy_of": src["id"]}
        )
    rng.shuffle(records)
    return records[:count]


def dedup_run(corpus: Path, count: int) -> list[tuple[str, str]]:
    rng = random.Random(1)
    records = documents(corpus, count, rng)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "docs.jsonl", Path(tmp) / "kept.jsonl"
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        start = time.perf_counter()
        done = subprocess.run(
            [*SIMQ, "dedup", data, "--out", out, "--k", str(K)], capture_output=True, text=True, check=True
        )
        wall = time.perf_counter() - start
        summary = done.stderr.strip().splitlines()[-1]
        kept = sum(1 for _ in out.open(encoding="utf-8"))
        # The floor: fingerprinting alone, in this process, the same texts.
        start = time.perf_counter()
        for record in records:
            simhash(record["text"])
        floor = time.perf_counter() - start
    fp = float(re.search(r"fingerprints ([\d.]+) s", summary).group(1))
    search = float(re.search(r"search ([\d.]+) s", summary).group(1))
    rows.append((f"simq dedup, {count:,} English documents (k={K})", f"{wall:.1f} s wall",
                 f"{count / wall:,.0f} docs/s", f"kept {kept:,}"))
    rows.append(("  of which fingerprinting / search", f"{fp:.1f} s / {search:.2f} s",
                 f"search {search / max(fp, 1e-9):.1%} of fingerprinting", ""))
    rows.append(("  baseline: fingerprinting alone (no search, no I/O)", f"{floor:.1f} s",
                 f"{count / floor:,.0f} docs/s", f"dedup/floor {wall / floor:.2f}x"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1M fingerprints and 20k documents only")
    parser.add_argument("--no-baseline-10m", action="store_true", help="skip the baseline on 10M (minutes)")
    parser.add_argument("--corpus", type=Path, help="English JSONL for the dedup rows (left out without it)")
    parser.add_argument("--size", type=int, default=1_000_000, help="fingerprints in the smaller sets [default: 1M]")
    parser.add_argument("--docs", type=int, help="documents for the dedup rows [default: 100k, 20k with --quick]")
    args = parser.parse_args()
    print_machine()
    rng = np.random.default_rng(42)
    small = f"{args.size / 1e6:g}M" if args.size >= 1_000_000 else f"{args.size:,}"
    sets = [(f"{small} random, planted clusters", planted(args.size, rng), 5),
            (f"{small} skewed", skewed(args.size, rng), 3)]
    if not args.quick:
        sets.append(("10M random, planted clusters", planted(10_000_000, rng), 1))
        sets.append(("10M skewed", skewed(10_000_000, rng), 1))
    rows = []
    failures = Failures()
    baseline_rate = 0.0  # seconds per candidate pair, from the first run
    for name, values, repeat in sets:
        t_ours, (count, codes) = median_seconds(lambda: ours(values), repeat)
        big = len(values) >= 10_000_000
        candidates = baseline_candidates(values)
        if (big and args.no_baseline_10m) or candidates > BASELINE_BUDGET:
            # Hot blocks: the baseline would compare this many pairs; estimate from its 1M rate.
            t_base = candidates * baseline_rate if baseline_rate else float("nan")
            same = f"not run: {candidates:.2g} candidate pairs, est."
        else:
            t_base, (base_count, base_codes) = median_seconds(lambda: baseline(values), 1 if big else 3)
            same = "same pairs" if np.array_equal(np.sort(codes), base_codes) else "NO: different pairs"
            failures.expect(same == "same pairs", f"{name}: other pairs than the numpy baseline's")
            baseline_rate = baseline_rate or t_base / max(candidates, 1)
        t_clusters, labels = median_seconds(lambda: component_labels(values, K), 1)
        in_clusters = int((np.bincount(labels, minlength=len(values))[labels] > 1).sum())
        rows.append(
            (
                f"all pairs k={K}, {name}",
                f"{t_ours:.2f} s",
                f"baseline {t_base:.2f} s ({t_base / t_ours:.1f}x), {same}",
                f"{count:,} pairs; clusters {t_clusters:.2f} s, {in_clusters:,} clustered",
            )
        )
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    if args.corpus:
        rows += dedup_run(args.corpus, args.docs or (20_000 if args.quick else 100_000))
    else:
        print("no --corpus: the dedup rows are left out", file=sys.stderr)
    width = [max(len(r[i]) for r in rows) for i in range(4)]
    print(f"medians of {sets[0][2]} runs on {small}, 1 run on 10M")
    print(" | ".join(h.ljust(w) for h, w in zip(("what", "ours", "against", "notes"), width)))
    print("-+-".join("-" * w for w in width))
    for row in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(row, width)))
    failures.exit()


if __name__ == "__main__":
    main()
