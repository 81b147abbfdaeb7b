"""Precision and recall of `simq dupes` outputs on a synthetic crawl, against the exact Jaccard.

    .venv/bin/python bench/crawl_quality.py FOLDER/crawl200000.jsonl FOLDER/pairs200000-*.jsonl

Input: a crawl from bench/crawl.py ({"id", "text", "family"}) and `simq dupes --format jsonl` outputs
over it (bench/dupes_scale.py --folder FOLDER keeps both, one output per tree). Truth: every pair with
exact 5-shingle Jaccard >= 0.8 (shingles.jaccard on the pages' texts) among the union of all pairs
inside a family and every pair any of the given outputs reports; pairs that none of these holds are not
counted (unrelated pages share few pieces: bench/all_pairs.py). Per output: precision, recall, F1, and
its pairs by checked_by; also by page size (both pages' stored short-text data, core/short_texts.py,
or not).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simhash_sqlite.core.shingles import jaccard_of_sets, shingle_set
from simhash_sqlite.core.short_texts import short_text_data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("crawl")
    parser.add_argument("pairs", nargs="+")
    args = parser.parse_args()
    texts, families = {}, collections.defaultdict(list)
    with open(args.crawl, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            texts[str(record["id"])] = record["text"]
            if record.get("family", -1) >= 0:
                families[record["family"]].append(str(record["id"]))
    found = {}
    kinds = {}
    for path in args.pairs:
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        found[path] = {tuple(sorted((r["first"], r["second"]))) for r in rows}
        kinds[path] = collections.Counter(r.get("checked_by") for r in rows)
    candidates = set().union(*found.values())
    for members in families.values():
        candidates |= {tuple(sorted((a, b))) for i, a in enumerate(members) for b in members[i + 1 :]}
    sets: dict[str, object] = {}

    def shingles(key: str):
        if key not in sets:
            sets[key] = shingle_set(texts[key])
        return sets[key]

    truth = {pair for pair in candidates if jaccard_of_sets(shingles(pair[0]), shingles(pair[1])) >= 0.8}
    short = {key: short_text_data(text) is not None for key, text in texts.items()}
    print(f"{args.crawl}: {len(texts):,} pages ({sum(short.values()):,} short), {len(truth):,} true pairs "
          f"among {len(candidates):,} candidates")
    for path, pairs in found.items():
        hits = len(pairs & truth)
        p, r = hits / max(len(pairs), 1), hits / max(len(truth), 1)
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        print(f"{path}: {len(pairs):,} pairs, precision {p:.4f}, recall {r:.4f}, F1 {f1:.4f}; {dict(kinds[path])}")
        for name, keep in (("both short", True), ("not both short", False)):
            part = {x for x in truth if (short[x[0]] and short[x[1]]) == keep}
            mine = {x for x in pairs if (short[x[0]] and short[x[1]]) == keep}
            if part or mine:
                hits = len(mine & part)
                print(f"  {name}: {len(part):,} true pairs, precision {hits / max(len(mine), 1):.4f}, "
                      f"recall {hits / max(len(part), 1):.4f}")


if __name__ == "__main__":
    main()
