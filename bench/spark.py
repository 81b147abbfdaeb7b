"""Spark local mode against the single-machine path, on the same generated corpus.

    python bench/spark.py CORPUS.jsonl... --docs 200000 2000000 [--cores 2] [--k 3] [--work FOLDER]

Documents are paragraphs (80+ characters) of the JSONL files given ({"id", "text"} per line; BENCHMARKS.md
used the shared corpus's manpages_zh.jsonl and python_docs_en.jsonl) joined in ones to threes, and about a third of
them are perturbed copies of an earlier document (a word replaced, a header added, case changed), so
there are real near-duplicate clusters. For each size:

  single machine  `simq add` of the JSONL (one process, one core), a simhash() loop over a sample for
                  the pure fingerprint rate, then pairs within k with a numpy join on the same
                  20-table block scheme and components by numpy label propagation: the same
                  computation as the Spark job, in one process. Up to 200k documents a numpy brute
                  force over all pairs checks the pairs too.
  spark           run_dedup in local[cores] (Parquet in, everything written), its phase timings.

Both paths' fingerprints and distinct-fingerprint pairs are compared, and Spark's kept documents with
`simq dedup --no-check --k K` on the same JSONL (keep-first in input order, as spark-dedup; the numpy
components' count of one per cluster is shown beside, not compared). The script exits 1 on a difference. Results are
appended to WORK/results.jsonl as each step ends (a long run keeps what finished) and printed as
a table: wall seconds and documents per second per core.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import SIMQ, Failures, print_machine, read_jsonl

from simhash_sqlite import simhash
from simhash_sqlite.find.block_tables import BlockTables

# -- the corpus --------------------------------------------------------------------------------------


def paragraphs(corpus: list[Path]) -> list[str]:
    out = []
    for path in corpus:
        for line in path.open(encoding="utf-8"):
            text = json.loads(line)["text"]
            out += [p.strip() for p in re.split(r"\n\s*\n", text) if len(p.strip()) >= 80]
    return out


def generate(corpus: list[Path], n: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    paras = paragraphs(corpus)
    docs: list[str] = []
    picks = rng.integers(0, len(paras), size=(n, 3))
    counts = rng.integers(1, 4, size=n)
    copy_of = rng.random(n) < 0.33
    for i in range(n):
        if copy_of[i] and i:
            base = docs[int(rng.integers(max(0, i - 50_000), i))]
            kind = int(rng.integers(4))
            if kind == 0:
                words = base.split(" ")
                words[int(rng.integers(len(words)))] = f"w{int(rng.integers(1e6))}"
                docs.append(" ".join(words))
            elif kind == 1:
                docs.append(f"Posted {int(rng.integers(1, 29))} Nov 2026. " + base)
            elif kind == 2:
                docs.append(base.upper())
            else:
                docs.append(base + f" ({int(rng.integers(1e4))} views)")
        else:
            body = " ".join(paras[j] for j in picks[i, : counts[i]])
            docs.append(f"{body} #{i}")  # a new document, even when the paragraphs repeat
    return docs


def write_inputs(docs: list[str], folder: Path) -> tuple[Path, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    ids = [f"d{i:08d}" for i in range(len(docs))]
    parquet = folder / "docs.parquet"
    pq.write_table(pa.table({"id": ids, "text": docs}), parquet, row_group_size=50_000)
    jsonl = folder / "docs.jsonl"
    with jsonl.open("w", encoding="utf-8") as handle:
        for key, text in zip(ids, docs):
            handle.write(json.dumps({"id": key, "text": text}, ensure_ascii=False) + "\n")
    return parquet, jsonl


# -- the single-machine path ---------------------------------------------------------------------------


def numpy_pairs(fps: np.ndarray, k: int) -> np.ndarray:
    """(m, 2) uint64 pairs of distinct fingerprints within k: the same block tables as Spark, sorted runs."""
    scheme = BlockTables.for_k(k)
    found = []
    for t, mask in enumerate(scheme.table_masks):
        keys = fps & np.uint64(mask)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        offset = 1
        while offset < len(fps):
            same = sorted_keys[offset:] == sorted_keys[:-offset]
            if not same.any():
                break
            a, b = fps[order[:-offset][same]], fps[order[offset:][same]]
            xor = a ^ b
            keep = np.bitwise_count(xor) <= k
            for earlier in scheme.table_masks[:t]:  # each pair from its first table only
                keep &= (xor & np.uint64(earlier)) != 0
            found.append(np.stack([np.minimum(a, b)[keep], np.maximum(a, b)[keep]], axis=1))
            offset += 1
    return np.concatenate(found) if found else np.empty((0, 2), dtype=np.uint64)


def brute_force_count(fps: np.ndarray, k: int, chunk: int = 256) -> int:
    count = 0
    for start in range(0, len(fps), chunk):
        block = fps[start : start + chunk]
        d = np.bitwise_count(block[:, None] ^ fps[None, :])
        count += int((d <= k).sum()) - len(block)  # minus each one against itself
    return count // 2


def numpy_components(pairs: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Component label (an index) per node: min-label propagation with pointer jumping."""
    a, b = np.searchsorted(nodes, pairs[:, 0]), np.searchsorted(nodes, pairs[:, 1])
    labels = np.arange(len(nodes))
    while True:
        new = labels.copy()
        np.minimum.at(new, a, labels[b])
        np.minimum.at(new, b, labels[a])
        new = new[new]
        if np.array_equal(new, labels):
            return labels
        labels = new


def single_machine(docs, jsonl: Path, folder: Path, k: int, fp_sample: int, record) -> dict:
    import apsw

    db = folder / "single.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    sample = docs[:fp_sample]
    started = time.perf_counter()
    for text in sample:
        simhash(text)
    record("single", "simhash() loop", time.perf_counter() - started, len(sample), 1)

    started = time.perf_counter()
    subprocess.run([*SIMQ, "add", "--db", str(db), str(jsonl)], check=True, capture_output=True)
    record("single", "simq add (fingerprint + store)", time.perf_counter() - started, len(docs), 1)

    conn = apsw.Connection(str(db))
    rows = conn.execute("SELECT key, fingerprint FROM documents").fetchall()
    conn.close()
    stored = {key: (None if fp is None else fp & ((1 << 64) - 1)) for key, fp in rows}
    started = time.perf_counter()
    fps = np.unique(np.array([fp for fp in stored.values() if fp is not None], dtype=np.uint64))
    pairs = numpy_pairs(fps, k)
    record("single", f"numpy pairs (20-table join, k={k})", time.perf_counter() - started, len(docs), 1)
    started = time.perf_counter()
    nodes = np.unique(pairs) if len(pairs) else np.empty(0, dtype=np.uint64)
    labels = numpy_components(pairs, nodes)
    merged = len(nodes) - len(np.unique(labels))  # fingerprints folded into another's cluster
    kept = len(fps) - merged + sum(fp is None for fp in stored.values())
    record("single", "numpy components + kept", time.perf_counter() - started, len(docs), 1)
    result = {"stored": stored, "pairs": pairs, "kept": kept}
    out = folder / "single_kept.jsonl"
    started = time.perf_counter()
    subprocess.run([*SIMQ, "dedup", str(jsonl), "--out", str(out), "--no-check", "--k", str(k)], check=True,
                   capture_output=True)
    record("single", f"simq dedup --no-check --k {k} (reference)", time.perf_counter() - started, len(docs), 1)
    result["kept_dedup"] = sum(1 for _ in read_jsonl(out))
    if len(fps) <= 200_000:
        started = time.perf_counter()
        result["brute_force_pairs"] = brute_force_count(fps, k)
        record("single", "numpy brute force all pairs (check)", time.perf_counter() - started, len(docs), 1)
    return result


# -- the Spark path -------------------------------------------------------------------------------------


def spark_path(spark, parquet: Path, folder: Path, k: int, cores: int, record):
    from simhash_sqlite.spark import run_dedup

    out = folder / "spark_out"
    shutil.rmtree(out, ignore_errors=True)
    report = run_dedup(spark, str(parquet), str(out), k=k, check=False, overwrite=True)  # pairs by distance
    for phase, seconds in report.phases.items():
        record("spark", f"phase: {phase}", seconds, report.documents, cores)
    record("spark", "whole job", report.seconds, report.documents, cores)
    return report, out


def compare(spark, single: dict, report, out: Path) -> dict:
    import pyarrow.parquet as pq

    table = pq.read_table(out / "fingerprints", columns=["id", "fingerprint"]).to_pydict()
    mismatched = sum(
        (None if fp is None else fp & ((1 << 64) - 1)) != single["stored"].get(key, "missing")
        for key, fp in zip(table["id"], table["fingerprint"])
    )
    pairs = pq.read_table(out / "fingerprint_pairs").to_pydict()
    spark_pairs = {tuple(sorted((a & ((1 << 64) - 1), b & ((1 << 64) - 1)))) for a, b in zip(pairs["a"], pairs["b"])}
    numpy_set = {(int(a), int(b)) for a, b in single["pairs"]}
    return {
        "fingerprints_differing": mismatched,
        "documents": len(table["id"]),
        "pairs_equal": spark_pairs == numpy_set,
        "pairs": len(spark_pairs),
        "brute_force_pairs": single.get("brute_force_pairs"),
        "kept_spark": report.kept,
        "kept_simq_dedup": single["kept_dedup"],
        "components_single": single["kept"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path, nargs="+", help="JSONL files whose paragraphs make the documents")
    parser.add_argument("--docs", type=int, nargs="+", default=[200_000, 2_000_000])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--fp-sample", type=int, default=100_000, help="documents in the simhash() loop")
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for the inputs, outputs and results.jsonl [default: a new temporary one]")
    args = parser.parse_args()
    print_machine()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    args.work = args.work or Path(tempfile.mkdtemp(prefix="simq-spark-"))
    args.work.mkdir(parents=True, exist_ok=True)
    results = args.work / "results.jsonl"
    print(f"inputs, outputs and results.jsonl in {args.work} (kept)", flush=True)

    from simhash_sqlite.spark import session

    started = time.perf_counter()
    spark = session(f"local[{args.cores}]", **{"spark.driver.memory": "8g"})
    print(f"spark session: {time.perf_counter() - started:.1f} s (not counted below)", flush=True)
    failures = Failures()
    for n in args.docs:
        rows = []

        def record(path, step, seconds, documents, cores):
            row = {"docs": n, "path": path, "step": step, "seconds": round(seconds, 2),
                   "docs_per_s_per_core": round(documents / seconds / cores) if seconds else None}
            rows.append(row)
            with results.open("a") as handle:
                handle.write(json.dumps(row) + "\n")
            print(f"{n:>9,}  {path:6}  {step:40} {seconds:9.1f} s  {row['docs_per_s_per_core']:>8,} docs/s/core",
                  flush=True)

        folder = args.work / f"n{n}"
        started = time.perf_counter()
        docs = generate(args.corpus, n)
        parquet, jsonl = write_inputs(docs, folder)
        print(f"generated {n:,} documents ({sum(map(len, docs)) / n:.0f} characters on average) "
              f"in {time.perf_counter() - started:.0f} s", flush=True)
        report, out = spark_path(spark, parquet, folder, args.k, args.cores, record)
        single = single_machine(docs, jsonl, folder, args.k, args.fp_sample, record)
        check = compare(spark, single, report, out)
        with results.open("a") as handle:
            handle.write(json.dumps({"docs": n, "check": check}) + "\n")
        print(f"check: {json.dumps(check)}", flush=True)
        failures.expect(check["fingerprints_differing"] == 0, f"{n:,}: Spark's fingerprints differ from simq add's")
        failures.expect(check["pairs_equal"], f"{n:,}: Spark's pairs differ from the numpy join's")
        failures.expect(check["kept_spark"] == check["kept_simq_dedup"],
                        f"{n:,}: Spark kept {check['kept_spark']} documents, simq dedup {check['kept_simq_dedup']}")
        failures.expect(check["brute_force_pairs"] in (None, check["pairs"]),
                        f"{n:,}: {check['pairs']} pairs, the brute force found {check['brute_force_pairs']}")
        spark_job = next(r for r in rows if r["step"] == "whole job")
        single_job = sum(r["seconds"] for r in rows if r["path"] == "single" and "add" in r["step"] or
                         r["path"] == "single" and r["step"].startswith("numpy pairs") or
                         r["path"] == "single" and r["step"].startswith("numpy comp"))
        print(f"whole job, docs/s/core: spark {spark_job['docs_per_s_per_core']:,} vs single "
              f"{n / single_job:,.0f} "
              f"(single / spark per core: {n / single_job / spark_job['docs_per_s_per_core']:.2f})",
              flush=True)
    spark.stop()
    failures.exit()


if __name__ == "__main__":
    main()
