"""What the exact check of short texts costs simhash_near in the loadable extension, and that it answers as
the package does.

    .venv/bin/python bench/extension_short_texts.py                       # generated English and Chinese
    .venv/bin/python bench/extension_short_texts.py --jsonl TUNE_EN.jsonl --jsonl TUNE_ZH.jsonl --documents 4000

An index without stored texts of short texts (50-500 characters: JSONL lines' "text" cut to that, or
generated families of edited copies), so most pairs are checked exactly from documents.short_text. The
same text queries (--queries of the stored texts, lightly edited) at k = --k, --repeat rounds in turns:

- package: SimhashIndex.near(text, k) (what simq near and the package's own simhash_near run);
- extension: the installed build (with zlib) loaded into apsw, one `SELECT ... FROM simhash_near(?, k)`
  per query: it deflates each query to see if it is short and inflates each short candidate's data;
- extension without zlib: the same source compiled here without it (pairs of short texts estimated).

Prints the median per query of each (the median over rounds of each round's mean), the ratios, how the
rows were checked, and whether every answer of the zlib build equals the package's (keys, distances,
Jaccard, checked_by, certainty). The machine is shared: read the ratios of one run, and the load printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import apsw  # noqa: E402

from simhash_sqlite import Document, SimhashIndex  # noqa: E402
from simhash_sqlite.native.extension import ENTRY_POINT, loadable_path  # noqa: E402

NEAR = "SELECT key, distance, jaccard, checked_by, certainty FROM simhash_near(?, ?)"


def generated(rng: random.Random, documents: int) -> list[str]:
    words = ["".join(rng.choice("abcdefghijklmnoprstuw") for _ in range(rng.randint(2, 8))) for _ in range(3000)]
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 2500)]
    texts: list[str] = []
    while len(texts) < documents:
        chinese = rng.random() < 0.5
        units, join = (han, "".join) if chinese else (words, " ".join)
        base = [rng.choice(units) for _ in range(rng.randint(40, 160) if chinese else rng.randint(10, 70))]
        for rate in (0.0, 0.02, 0.05, 0.1):
            texts.append(join(u if rng.random() > rate else rng.choice(units) for u in base))
    return texts[:documents]


def from_jsonl(paths: list[Path], rng: random.Random, documents: int) -> list[str]:
    texts = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                text = json.loads(line).get("text") or ""
                if len(text) >= 50:
                    texts.append(text[: rng.randint(50, 500)])
    rng.shuffle(texts)
    return texts[:documents]


def without_zlib(folder: Path) -> str:
    native = Path(loadable_path()).parent
    subprocess.run([sys.executable, str(native / "gen_unicode_tables.py"), str(folder / "_unicode_tables.h")],
                   check=True)
    subprocess.run([sys.executable, str(native / "gen_rule_constants.py"), str(folder / "_rule_constants.h")],
                   check=True)
    out = folder / Path(loadable_path()).name
    subprocess.run([os.environ.get("CC", "cc"), "-O3", "-std=c99", "-fPIC", "-shared", "-ffp-contract=off",
                    f"-I{folder}", f"-I{native}", f"-I{native / 'vendor' / 'sqlite'}", "-o", str(out),
                    str(native / "sqlite_extension.c"),
                    str(native / "simhash_core.c"), "-lm"], check=True)
    return str(out)


def connection(path: Path, library: str) -> apsw.Connection:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.enable_load_extension(True)
    conn.load_extension(library, ENTRY_POINT)
    return conn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jsonl", type=Path, action="append", default=[], help="texts to cut (else generated)")
    parser.add_argument("--documents", type=int, default=4000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--k", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    texts = from_jsonl(args.jsonl, rng, args.documents) if args.jsonl else generated(rng, args.documents)
    work = Path(tempfile.mkdtemp(prefix="extension-short-"))
    path = work / "short.db"
    with SimhashIndex(path, create=True) as index:
        index.add(Document(f"d{i}", text) for i, text in enumerate(texts))
        kept = index.conn.execute("SELECT count(short_text) FROM documents").get
    queries = []
    for text in rng.sample(texts, min(args.queries, len(texts))):
        chars = list(text)
        for _ in range(max(1, len(chars) // 60)):
            chars[rng.randrange(len(chars))] = rng.choice(chars)
        queries.append("".join(chars))
    package = SimhashIndex(path, readonly=True)
    modes = {
        "package": lambda q: [(m.key, m.distance, m.jaccard, m.checked_by, m.certainty)
                              for m in package.near(q, k=args.k)],
    }
    for name, library in (("extension", loadable_path()), ("extension without zlib", without_zlib(work))):
        conn = connection(path, library)
        modes[name] = lambda q, conn=conn: conn.execute(NEAR, (q, args.k)).fetchall()
    times: dict[str, list[float]] = {name: [] for name in modes}
    answers: dict[str, list] = {}
    for _ in range(args.repeat):
        for name, run in modes.items():
            started = time.perf_counter()
            got = [run(q) for q in queries]
            times[name].append((time.perf_counter() - started) / len(queries))
            answers[name] = got
    same = all(
        [(k, d, j, how, None if c is None else round(c, 12)) for k, d, j, how, c in a]
        == [(k, d, j, how, None if c is None else round(c, 12)) for k, d, j, how, c in b]
        for a, b in zip(answers["package"], answers["extension"])
    )
    kinds: dict[str, dict[str, int]] = {}
    for name in ("extension", "extension without zlib"):
        counted: dict[str, int] = {}
        for rows in answers[name]:
            for row in rows:
                counted[str(row[3])] = counted.get(str(row[3]), 0) + 1
        kinds[name] = counted
    median = {name: statistics.median(values) for name, values in times.items()}
    print(json.dumps({
        "documents": len(texts), "keep_short_text_data": kept, "queries": len(queries), "k": args.k,
        "load_average": os.getloadavg()[0],
        "microseconds_per_query": {name: round(value * 1e6, 1) for name, value in median.items()},
        "extension / extension without zlib": round(median["extension"] / median["extension without zlib"], 3),
        "extension / package": round(median["extension"] / median["package"], 3),
        "checked_by": kinds, "every answer equals the package's": same,
    }, indent=1))
    package.close()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
