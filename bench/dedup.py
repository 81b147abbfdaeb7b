"""Streaming dedup (and spark-dedup), checked: recall of true pairs, false drops and throughput.

    .venv/bin/python bench/dedup.py CORPUS.jsonl ... [--originals 300] [--repeats 3] [--language zh] \
        [--baseline-src DIR] [--baseline-args '{}'] [--spark] [--json out.json]

The documents are bench/quality.py's: sections of real text, each with one perturbed copy of every
kind (boilerplate, advert, numbers, edit2, edit5, rewrite15, rewrite40, truncate), in a seeded random
order, written to one JSONL file (ids d000000... in input order). Truth: every pair with exact
5-shingle Jaccard >= 0.8 (quality.truth_pairs, all pairs). For each method, on the output:

- recall: the share of true pairs that are not both kept (one of them was dropped);
- false drops: dropped documents with no partner of Jaccard >= 0.8 at all, as a share of all
  documents (the issue's measure), and wrong verdicts: drops whose named duplicate_of is below 0.8;
- throughput: documents/s of Deduplicator.run over the file (Reader.entries, outputs written to
  memory), against fingerprinting alone (the same reader, simhash_many in the same batches): ratio
  of the two, medians of --repeats runs, each method in a fresh process.

With --pages, throughput only, on the corpus files' own documents (whole pages, as a crawl has them).

Methods: the default (sketch LSH candidates, the pair rule, dropped only on a sure verdict), the same with
--drop-uncertain (an unsure estimate >= 0.8 drops too), the same with --no-check
(distance <= RECOMMENDED_K), and, with --baseline-src (a checkout of an older commit, e.g. `git archive
3ab780e | tar -x -C DIR`), that code with --baseline-args (default {"k": 3}: distance; {} for its
default). With --spark, `simq spark-dedup` on the same file (local[2]): its kept set, scored the same way
and compared with the default's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import ROOT, SIMQ, Failures, print_machine

CHILD = r"""
import io, json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
path, kwargs, repeats = sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
try:
    from simhash_sqlite.pipeline.dedup import Deduplicator, BATCH
    from simhash_sqlite.core.fingerprint import simhash_many
    from simhash_sqlite.pipeline.sources import Reader
except ImportError:  # a baseline tree from before the layers (2be3bd3)
    from simhash_sqlite.dedup import Deduplicator, BATCH
    from simhash_sqlite.fingerprint import simhash_many
    from simhash_sqlite.sources import Reader

def entries():
    reader = Reader(jsonl=True)
    return reader.entries(reader.expand([path]))

def fingerprint_alone():
    batch = []
    for document, _ in entries():
        batch.append(document.text)
        if len(batch) >= BATCH:
            simhash_many(batch)
            batch = []
    simhash_many(batch)

def dedup():
    sink = io.BytesIO()
    deduplicator = Deduplicator(**kwargs)
    decisions = []
    for d in deduplicator.run(entries()):
        if d.kept:
            sink.write(d.output_line())
        decisions.append(d)
    return deduplicator, decisions

fp, dd = [], []
for _ in range(repeats):
    started = time.perf_counter(); fingerprint_alone(); fp.append(time.perf_counter() - started)
    started = time.perf_counter(); deduplicator, decisions = dedup(); dd.append(time.perf_counter() - started)
sketches = getattr(deduplicator, "sketches", None)
print(json.dumps({
    "kept": [d.kept for d in decisions],
    "duplicate_of": [d.duplicate_of for d in decisions],
    "checked_by": [getattr(d, "checked_by", None) for d in decisions],
    "fingerprint_seconds": statistics.median(fp), "dedup_seconds": statistics.median(dd),
    "kept_bytes": None if sketches is None else sketches.nbytes + deduplicator.labels.nbytes,
}))
"""


def build(paths: list[str], per_language: int, seed: int, language: str | None = None) -> tuple[list[str], list[str]]:
    """(texts in input order, their kinds), from bench/quality.py's machinery (language: that language's
    sections alone)."""
    from quality import build_corpus, load_originals

    rng = random.Random(seed)
    originals = load_originals(paths, per_language, rng)
    texts, kinds = [], []
    for lang, chosen in originals.items():
        if language is not None and lang != language:
            continue
        corpus = build_corpus(lang, chosen, seed)
        texts += corpus.texts
        kinds += corpus.kind
    order = list(range(len(texts)))
    random.Random(seed + 1).shuffle(order)
    return [texts[i] for i in order], [kinds[i] for i in order]


def truth(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(left, right) of every pair with exact Jaccard >= 0.8, left < right in input order."""
    from quality import truth_pairs

    from simhash_sqlite.core.shingles import shingle_set

    keys, _ = truth_pairs([shingle_set(t) for t in texts])
    return np.divmod(keys, len(texts))


def score(kept: np.ndarray, duplicate_of: list[int | None], pairs: tuple[np.ndarray, np.ndarray], texts) -> dict:
    from simhash_sqlite.core.shingles import jaccard

    left, right = pairs
    n = len(kept)
    has_partner = np.zeros(n, dtype=bool)
    has_partner[left] = has_partner[right] = True
    dropped = ~kept
    wrong = sum(1 for i, j in enumerate(duplicate_of) if j is not None and jaccard(texts[i], texts[j]) < 0.8)
    return {
        "documents": n,
        "kept": int(kept.sum()),
        "dropped": int(dropped.sum()),
        "true_pairs": len(left),
        "recall": float(np.mean(~(kept[left] & kept[right]))) if len(left) else 1.0,
        "false_drops": int((dropped & ~has_partner).sum()),
        "false_drop_share": float((dropped & ~has_partner).sum() / n),
        "wrong_verdicts": wrong,
    }


def run_child(src: Path, path: str, kwargs: dict, repeats: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(src), path, json.dumps(kwargs), str(repeats)],
        capture_output=True, text=True, env=env, check=True,
    )
    return json.loads(done.stdout)


def run_spark(path: str, folder: str) -> tuple[dict[str, str | None], float]:
    """{id: duplicate_of (None: kept)} from simq spark-dedup's clusters table, and its wall seconds."""
    import pyarrow.parquet as pq

    out = os.path.join(folder, "spark-out")
    started = time.perf_counter()
    subprocess.run(
        [*SIMQ, "spark-dedup", path, "--out", out, "--master", "local[2]",
         "--overwrite"],
        check=True, capture_output=True,
    )
    seconds = time.perf_counter() - started
    table = pq.read_table(os.path.join(out, "clusters"), columns=["id", "duplicate_of"]).to_pylist()
    return {r["id"]: r["duplicate_of"] for r in table}, seconds


def pages_throughput(args) -> None:
    """Throughput of each method on the corpus files' own documents (whole pages), concatenated."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "pages.jsonl")
        count = characters = 0
        with open(path, "w", encoding="utf-8") as out:
            for source in args.corpus:
                with open(source, encoding="utf-8") as handle:
                    for line in handle:
                        record = json.loads(line)
                        page = {"id": f"p{count:06d}", "text": record["text"]}
                        out.write(json.dumps(page, ensure_ascii=False) + "\n")
                        count, characters = count + 1, characters + len(record["text"])
        methods = {"checked (default)": (ROOT, {}), "--no-check (k <= 9)": (ROOT, {"check": False})}
        if args.baseline_src:
            methods[f"baseline: {args.baseline_src.name} {json.dumps(args.baseline_args)}"] = (
                args.baseline_src, args.baseline_args)
        print(f"{count:,} pages, {characters / count:,.0f} characters on average; medians of {args.repeats} runs\n")
        print("| method | kept | fingerprints alone s | dedup s | ratio | documents/s |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for name, (src, kwargs) in methods.items():
            got = run_child(src, path, kwargs, args.repeats)
            fp, dd = got["fingerprint_seconds"], got["dedup_seconds"]
            print(f"| {name} | {sum(got['kept']):,} | {fp:.2f} | {dd:.2f} | {fp / dd:.2f} | {count / dd:,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="+")
    parser.add_argument("--originals", type=int, default=300, help="originals per language")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--language", choices=["en", "zh"], help="that language's sections alone (default: all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline-src", type=Path, help="a checkout of the baseline commit (its simhash_sqlite/)")
    parser.add_argument("--baseline-args", type=json.loads, default={"k": 3},
                        help='the baseline\'s Deduplicator arguments (JSON; default {"k": 3}; {} for its default)')
    parser.add_argument("--spark", action="store_true", help="also run simq spark-dedup (local[2])")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--pages", action="store_true",
                        help="throughput only, on the corpus files' documents as they are (whole pages)")
    args = parser.parse_args()
    print_machine()
    if args.pages:
        pages_throughput(args)
        return

    texts, _ = build(args.corpus, args.originals, args.seed, args.language)
    pairs = truth(texts)
    results = {}
    failures = Failures()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "docs.jsonl")
        ids = [f"d{i:06d}" for i in range(len(texts))]
        with open(path, "w", encoding="utf-8") as handle:
            for key, text in zip(ids, texts):
                handle.write(json.dumps({"id": key, "text": text}, ensure_ascii=False) + "\n")
        position = {key: i for i, key in enumerate(ids)}
        methods = {"checked (default)": (ROOT, {}), "checked, --drop-uncertain": (ROOT, {"drop_uncertain": True}),
                   "--no-check (k <= 9)": (ROOT, {"check": False})}
        if args.baseline_src:
            methods[f"baseline: {args.baseline_src.name} {json.dumps(args.baseline_args)}"] = (
                args.baseline_src, args.baseline_args)
        for name, (src, kwargs) in methods.items():
            got = run_child(src, path, kwargs, args.repeats)
            kept = np.array(got["kept"])
            dup = [None if d is None else position[d] for d in got["duplicate_of"]]
            results[name] = score(kept, dup, pairs, texts) | {
                "fingerprint_seconds": got["fingerprint_seconds"],
                "dedup_seconds": got["dedup_seconds"],
                "ratio": got["fingerprint_seconds"] / got["dedup_seconds"],
                "bytes_per_kept": None if got["kept_bytes"] is None else got["kept_bytes"] / max(1, int(kept.sum())),
            }
            results[name]["kept_ids"] = [key for key, k in zip(ids, got["kept"]) if k]
            # every dropped document names a kept one before it as its original; every kept one names none
            failures.expect(all((d is None) == bool(k) and (d is None or (d < i and kept[d]))
                                for i, (k, d) in enumerate(zip(got["kept"], dup))),
                            f"{name}: a verdict's duplicate_of is not a kept document before it")
        if args.spark:
            verdicts, seconds = run_spark(path, folder)
            kept = np.array([verdicts[key] is None for key in ids])
            dup = [None if verdicts[key] is None else position[verdicts[key]] for key in ids]
            kept_ids = [key for key in ids if verdicts[key] is None]
            results["spark-dedup (local[2])"] = score(kept, dup, pairs, texts) | {
                "dedup_seconds": seconds,
                "same_kept_as_dedup": kept_ids == results["checked (default)"]["kept_ids"],
            }
    print(f"{len(texts):,} documents ({args.originals} originals per language"
          f"{'' if args.language is None else ', ' + args.language + ' alone'}, 8 copies each), "
          f"{len(pairs[0]):,} pairs with Jaccard >= 0.8; medians of {args.repeats} runs\n")
    print("| method | kept | dropped | recall of true pairs | false drops (share of all) | wrong verdicts "
          "| fingerprints alone s | dedup s | ratio | bytes per kept doc |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, r in results.items():
        fp = r.get("fingerprint_seconds")
        ratio = r.get("ratio")
        per = r.get("bytes_per_kept")
        fp, ratio, per = ("-" if x is None else f"{x:.{p}f}" for x, p in ((fp, 2), (ratio, 2), (per, 0)))
        print(f"| {name} | {r['kept']:,} | {r['dropped']:,} | {r['recall']:.3f} | {r['false_drops']} "
              f"({r['false_drop_share']:.2%}) | {r['wrong_verdicts']} | {fp} | {r['dedup_seconds']:.2f} | {ratio} "
              f"| {per} |")
    if "spark-dedup (local[2])" in results:
        same = results["spark-dedup (local[2])"]["same_kept_as_dedup"]
        print(f"\nspark-dedup kept set equal to simq dedup's: {same}")
        failures.expect(same, "spark-dedup kept another set than simq dedup")
    if args.json:
        for r in results.values():
            r.pop("kept_ids", None)
        args.json.write_text(json.dumps(results, indent=2))
    failures.exit()


if __name__ == "__main__":
    main()
