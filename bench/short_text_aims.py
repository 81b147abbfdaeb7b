"""Short texts without stored texts: `dupes` F1, `dedup` (and `spark-dedup`) recall and false drops, and the
index's bytes per document, by language, on a set from bench/short_texts.py.

    .venv/bin/python bench/short_text_aims.py held.jsonl [--src DIR] [--spark] [--json out.json]

--src: a checkout whose simhash_sqlite is measured (default: this one), e.g. `git archive main | tar -x -C
DIR` for the code before exact short texts; the script runs the same way against either, through the
public API only (SimhashIndex, Document, dedup).

Per language (the set's 'lang'), in the set's order: truth is every pair of exact 5-shingle Jaccard >= 0.8
(bench/quality.py's truth_pairs). `dupes`: an index made without stored texts (SimhashIndex.add of the
texts), index.dupes() at its defaults; precision, recall, F1 of its pairs, how they were checked, and its
median time of --repeats; the same with texts stored (an index made with store_text, the aims: F1 >= 0.997 and
every reported verdict exact). Bytes per document: the index file (with its WAL) over the documents. `dedup`:
dedup() at its defaults over the texts in order; recall (a true pair not both kept) and false drops (a
dropped text with no partner of Jaccard >= 0.8, over all texts), as bench/dedup.py scores them. --spark:
`simq spark-dedup` on the same texts (local[2]), scored the same way.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl")
    parser.add_argument("--src", type=Path, default=HERE.parent, help="the checkout to measure [default: this one]")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--spark", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    sys.path.insert(0, str(args.src))
    sys.path.insert(1, str(HERE))
    # simhash_sqlite first: bench/quality.py puts this checkout on sys.path.
    import simhash_sqlite  # noqa: I001
    from simhash_sqlite import Document, SimhashIndex, dedup
    from simhash_sqlite.core.shingles import shingle_set
    from dedup import run_spark, score
    from quality import prf, truth_pairs

    print(f"measuring {Path(simhash_sqlite.__file__).parent}")
    by_language: dict[str, list[dict]] = collections.defaultdict(list)
    with open(args.jsonl, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            by_language[record["lang"]].append(record)
    results = {}
    for lang, records in sorted(by_language.items()):
        texts = [r["text"] for r in records]
        keys = [f"d{i:07d}" for i in range(len(texts))]
        number = {key: i for i, key in enumerate(keys)}
        truth, _ = truth_pairs([shingle_set(t) for t in texts])
        n = len(texts)
        out: dict = {"texts": n, "true_pairs": len(truth)}
        with tempfile.TemporaryDirectory() as folder:
            db = os.path.join(folder, "x.db")
            with SimhashIndex(db, create=True) as index:
                index.add(Document(k, t) for k, t in zip(keys, texts))
                out["bytes_per_document"] = sum(
                    os.path.getsize(p) for p in (db, db + "-wal") if os.path.exists(p)) / n
                try:
                    out["short_text_bytes_per_document"] = index.conn.execute(
                        "SELECT coalesce(sum(length(short_text)), 0) FROM documents").get / n
                except Exception:  # noqa: BLE001 (an index made before short texts)
                    out["short_text_bytes_per_document"] = 0.0
                times = []
                for _ in range(args.repeats):
                    started = time.perf_counter()
                    pairs = list(index.dupes())
                    times.append(time.perf_counter() - started)
            def scored(pairs, seconds) -> dict:
                found = np.array(sorted(min(number[p.first], number[p.second]) * n
                                        + max(number[p.first], number[p.second]) for p in pairs), dtype=np.int64)
                p, r, f1 = prf(int(np.isin(found, truth).sum()), len(found), len(truth))
                return {"precision": p, "recall": r, "f1": f1, "seconds": seconds,
                        "checked_by": dict(collections.Counter(x.checked_by for x in pairs))}

            out["dupes"] = scored(pairs, statistics.median(times))
            stored = os.path.join(folder, "stored.db")
            with SimhashIndex(stored, create=True, store_text=True) as index:
                index.add(Document(k, t) for k, t in zip(keys, texts))
                started = time.perf_counter()
                pairs = list(index.dupes())
                out["dupes_stored"] = scored(pairs, time.perf_counter() - started)
            decisions = list(dedup(Document(k, t) for k, t in zip(keys, texts)))
            kept = np.array([d.kept for d in decisions])
            duplicate_of = [None if d.kept else number[d.duplicate_of] for d in decisions]
            left, right = np.divmod(truth, n)
            out["dedup"] = score(kept, duplicate_of, (left, right), texts)
            out["dedup"]["checked_by"] = dict(collections.Counter(d.checked_by for d in decisions if not d.kept))
            if args.spark:
                path = os.path.join(folder, "in.jsonl")
                with open(path, "w", encoding="utf-8") as f:
                    for k, t in zip(keys, texts):
                        f.write(json.dumps({"id": k, "text": t}, ensure_ascii=False) + "\n")
                verdicts, seconds = run_spark(path, folder)
                spark_kept = np.array([verdicts[k] is None for k in keys])
                spark_of = [None if verdicts[k] is None else number[verdicts[k]] for k in keys]
                out["spark"] = score(spark_kept, spark_of, (left, right), texts) | {"seconds": seconds}
        results[lang] = out
        d, e = out["dupes"], out["dedup"]
        print(f"{lang}: {n} texts, {len(truth)} true pairs, {out['bytes_per_document']:.0f} bytes a document "
              f"(index file with its WAL; exact data of short texts {out['short_text_bytes_per_document']:.0f})")
        print(f"  dupes: precision {d['precision']:.4f} recall {d['recall']:.4f} F1 {d['f1']:.4f} "
              f"({d['seconds']:.2f} s; {d['checked_by']})")
        d = out["dupes_stored"]
        print(f"  dupes, texts stored: precision {d['precision']:.4f} recall {d['recall']:.4f} F1 {d['f1']:.4f} "
              f"({d['seconds']:.2f} s; {d['checked_by']})")
        print(f"  dedup: recall {e['recall']:.4f}, false drops {e['false_drops']} ({e['false_drop_share']:.2%}), "
              f"wrong verdicts {e['wrong_verdicts']} ({e['checked_by']})")
        if "spark" in out:
            s = out["spark"]
            print(f"  spark-dedup: recall {s['recall']:.4f}, false drops {s['false_drops']} "
                  f"({s['false_drop_share']:.2%}), wrong verdicts {s['wrong_verdicts']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
