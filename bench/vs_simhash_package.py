"""Fingerprinting speed: simhash-sqlite against the `simhash` package on the same features.

    python bench/vs_simhash_package.py CORPUS.jsonl... [--repeat 5]

CORPUS.jsonl: {"id", "text"} per line (BENCHMARKS.md used the shared corpus's manpages_zh.jsonl and
python_docs_en.jsonl); the paragraphs of the last one are a third, short-document corpus.

For each corpus and feature choice it times, on the same documents and in the same run:
  tokenize   producing the feature strings (jieba words, or character 5-grams), reported apart;
  ours       simhash-sqlite: for character n-grams from the text (its own n-gram hashing
             counted); for jieba words from the same tokens the package gets;
  simhash()  ours one text at a time from the text (jieba included for words), for reference;
  package    simhash.Simhash fed the ready feature strings with the same count weights
             (its tokenization is not counted: the comparison favours the package);
  simq add   the whole add into a fresh index file (read JSONL, fingerprint, write SQLite).
Figures are medians of --repeat runs; the ratio is package time / our time.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
from common import Failures, median_seconds, print_machine

from simhash_sqlite import Document, FingerprintSettings, SimhashIndex, simhash
from simhash_sqlite.core.features import normalize, units_features, word_units, words
from simhash_sqlite.core.fingerprint import simhash_many, simhash_of_batch


def load(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle if line.strip()]


def char_grams(text: str, n: int = 5) -> list[str]:
    t = normalize(text)
    return [t[i : i + n] for i in range(max(len(t) - n + 1, 1))]


def seconds_of(function, repeat: int) -> float:
    return median_seconds(function, repeat)[0]


def package_fingerprints(feature_lists: list[list[str]]) -> None:
    from simhash import Simhash

    for features in feature_lists:
        # simhash 2.1.2 under numpy 2 overflows (uint8 * int) for a weight above 255; such rare
        # weights go in as np.int64, which takes the package's own large-weight path unchanged.
        Simhash([(f, w if w <= 255 else np.int64(w)) for f, w in Counter(features).items()])


def simq_add(texts: list[str], settings: FingerprintSettings) -> None:
    with tempfile.TemporaryDirectory() as folder:
        fields = {
            "features": settings.features, "ngram": settings.ngram, "weights": settings.weights, "hmm": settings.hmm
        }
        with SimhashIndex(os.path.join(folder, "b.db"), create=True, **fields) as index:
            index.add(Document(str(i), t) for i, t in enumerate(texts))


def paragraphs(texts: list[str], limit: int = 30_000) -> list[str]:
    """Short documents: the paragraphs (blank-line separated, 80+ characters) of a corpus."""
    out = [p.strip() for t in texts for p in t.split("\n\n") if len(p.strip()) >= 80]
    return out[:limit]


def run(name: str, texts: list[str], repeat: int, failures: Failures) -> list[dict]:
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    choices = [
        # Count weights on both sides, as the package is fed (feature, count) pairs.
        ("chars 5-grams", FingerprintSettings(features="chars", ngram=5, weights="count"), char_grams),
        ("jieba words", FingerprintSettings(features="words", ngram=1, weights="count"), words),
    ]
    rows = []
    for label, settings, tokenize in choices:
        words("预热")  # load jieba's dictionary outside the timings
        tokens = [tokenize(t) for t in texts]
        t_tok = seconds_of(lambda: [tokenize(t) for t in texts], repeat)
        if settings.features == "chars":  # ours starts from the text: its n-gram hashing is counted
            ours = lambda: simhash_many(texts, settings)  # noqa: E731
        else:  # ours starts from the same jieba tokens the package gets
            ours = lambda: simhash_of_batch(  # noqa: E731
                *units_features([word_units(w) for w in tokens], settings), len(tokens)
            )
        one_by_one = seconds_of(lambda: [simhash(t, settings) for t in texts], repeat)
        if settings.features == "chars":  # the batch and the one-text call give the same fingerprints
            failures.expect(simhash_many(texts, settings) == [simhash(t, settings) for t in texts],
                            f"{name}, {label}: simhash_many differs from simhash one text at a time")
        t_ours = seconds_of(ours, repeat)
        t_pkg = seconds_of(lambda: package_fingerprints(tokens), repeat)
        t_add = seconds_of(lambda: simq_add(texts, settings), max(1, repeat // 2))
        rows.append(
            {
                "corpus": name,
                "features": label,
                "docs": len(texts),
                "MB": megabytes,
                "tokenize_s": t_tok,
                "ours_s": t_ours,
                "one_by_one_s": one_by_one,
                "package_s": t_pkg,
                "add_s": t_add,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+", type=Path, help="JSONL files with a 'text' field")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print_machine()
    corpora = args.corpora
    print(f"numpy {np.__version__}, {os.cpu_count()} cores, medians of {args.repeat} runs\n")
    header = (
        f"{'corpus':<27} {'features':<14} {'docs':>5} {'MB':>6} {'tokenize s':>10} {'ours s':>8} "
        f"{'package s':>9} {'package/ours':>12} {'simhash() s':>11} "
        f"{'simq add s':>10} {'add docs/s':>10} {'add MB/s':>8}"
    )
    print(header)
    print("-" * len(header))
    runs = [(c.name, load(c)) for c in corpora]
    runs.append((f"{corpora[-1].stem} paragraphs", paragraphs(runs[-1][1])))
    failures = Failures()
    for name, texts in runs:
        for r in run(name, texts, args.repeat, failures):
            print(
                f"{r['corpus']:<27} {r['features']:<14} {r['docs']:>5} {r['MB']:>6.1f} {r['tokenize_s']:>10.2f} "
                f"{r['ours_s']:>8.2f} {r['package_s']:>9.2f} {r['package_s'] / r['ours_s']:>12.1f} "
                f"{r['one_by_one_s']:>11.2f} "
                f"{r['add_s']:>10.2f} {r['docs'] / r['add_s']:>10.0f} {r['MB'] / r['add_s']:>8.2f}"
            )
    failures.exit()


if __name__ == "__main__":
    main()
