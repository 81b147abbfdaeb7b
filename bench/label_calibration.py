"""Is the threshold that 200 labels recommend as good as its estimate says? On an index without stored
texts (pairs scored by the sketches' estimated Jaccard, as `simq dupes` scores them then), a person is
simulated who labels a pair "duplicate" exactly when the texts' exact 5-shingle Jaccard is >= 0.8. The
200 pairs come from the review sample (find/review.py: stratified by Jaccard and distance band, the band
near 0.8 over-sampled); `calibrate --labels` recommends a threshold with its precision and recall; the
full truth (every candidate pair's exact Jaccard) gives the real precision and recall at that threshold.

    .venv/bin/python bench/label_calibration.py /usr/share/doc --documents 4000 --seeds 20

The set: real text cut from the files under the folder (plain files, and .gz ones such as Debian
changelogs), in pieces of 800-3000 characters at paragraph ends; a third of the pieces get 1-3 copies
edited word by word at a rate drawn from 1-30% (words replaced, dropped or inserted from the set's own
vocabulary; some copies also get a header or footer), so that the pairs spread over Jaccard 0.4-1.0.
The folder's own repeated text (licences, boilerplate) adds near-duplicates nobody planted. Recall is
over the candidate pairs (those dupes finds at Jaccard >= 0.5), the population the sample is drawn from.
"""

from __future__ import annotations

import argparse
import gzip
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.core.shingles import jaccard_of_sets, shingle_set
from simhash_sqlite.find.review import calibrate_labels, draw_sample, population
from simhash_sqlite.store.labels import Label

TRUTH = 0.8


def pieces(folder: Path, wanted: int, seed: int) -> list[str]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    random.Random(seed).shuffle(files)
    out: list[str] = []
    for path in files:
        try:
            raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
            continue
        if "\x00" in text:
            continue
        current = ""
        for paragraph in text.split("\n\n"):
            current += paragraph + "\n\n"
            if len(current) >= 800:
                if len(current) <= 3000:
                    out.append(current.strip())
                current = ""
                if len(out) >= wanted:
                    return out
    return out


def edited(text: str, rate: float, vocab: list[str], rng: random.Random) -> str:
    words = []
    for word in text.split(" "):
        roll = rng.random()
        if roll < rate / 3:
            words.append(rng.choice(vocab))
        elif roll < 2 * rate / 3:
            continue
        elif roll < rate:
            words.extend((word, rng.choice(vocab)))
        else:
            words.append(word)
    out = " ".join(words)
    if rng.random() < 0.3:
        out = "Mirrored from an archive; retrieved for the collection.\n\n" + out
    if rng.random() < 0.3:
        out += "\n\n-- end of the copy --"
    return out


def corpus(folder: Path, documents: int, seed: int) -> list[Document]:
    rng = random.Random(seed)
    base = pieces(folder, documents, seed)
    vocab = sorted({w for text in base[:500] for w in text.split() if w.isalpha()})
    docs = []
    for i, text in enumerate(base):
        docs.append(Document(f"doc{i}", text))
        if rng.random() < 1 / 3:
            for copy in range(rng.randint(1, 3)):
                docs.append(Document(f"doc{i}-copy{copy}", edited(text, rng.uniform(0.01, 0.30), vocab, rng)))
    return docs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="real text to cut pieces from, e.g. /usr/share/doc")
    parser.add_argument("--documents", type=int, default=4000, help="pieces of real text (before the copies)")
    parser.add_argument("--labels", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=20, help="samples of labels drawn (one recommendation each)")
    parser.add_argument("--bootstrap", type=int, default=100)
    parser.add_argument("--method", choices=("isotonic", "logistic", "strata"), default="logistic")
    args = parser.parse_args()
    docs = corpus(args.folder, args.documents, 0)
    if not docs:
        sys.exit(f"error: no pieces of 800-3000 characters of text in {args.folder}")
    texts = {d.key: d.text for d in docs}
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        with SimhashIndex(Path(folder) / "held.db", create=True, store_text=False) as index:
            index.add(docs)
            pop = population(index)
            made = time.perf_counter() - started
            shingles = {}

            def exact(a: str, b: str) -> float:
                for key in (a, b):
                    if key not in shingles:
                        shingles[key] = shingle_set(texts[key])
                return jaccard_of_sets(shingles[a], shingles[b])

            truth = {(p.first, p.second): exact(p.first, p.second) >= TRUTH for p in pop.pairs}
            scores = np.array([p.jaccard for p in pop.pairs])
            real = np.array([truth[(p.first, p.second)] for p in pop.pairs])
            print(f"{len(docs):,} documents ({args.documents:,} pieces of real text and their copies), "
                  f"{len(pop.pairs):,} candidate pairs at estimated Jaccard >= 0.5 ({int(real.sum()):,} with exact "
                  f">= {TRUTH}), {pop.unscored} judged by distance only; {made:.0f} s")
            print(f"checked_by of the candidates: {dict(pop.checked_by)}")

            def full_truth(t: float) -> tuple[float, float]:
                above = scores >= t - 1e-12
                return float(real[above].mean()) if above.any() else float("nan"), float(real[above].sum() / real.sum())

            best = max((round(t, 2) for t in np.arange(0.5, 1.001, 0.01)),
                       key=lambda t: (lambda p, r: 2 * p * r / (p + r) if p + r else 0)(*full_truth(t)))
            p, r = full_truth(best)
            print(f"full truth: best threshold {best:.2f} (precision {p:.3f}, recall {r:.3f}); "
                  f"at 0.80: precision {full_truth(0.8)[0]:.3f}, recall {full_truth(0.8)[1]:.3f}")
            print("seed  recommended  [90% interval]   est P  [90% interval]  true P  |dP|   est R  [90% interval]  "
                  "true R  |dR|")
            errors = []
            covered = []  # (the true precision inside its interval, the true recall inside its)
            failed = False
            for seed in range(args.seeds):
                sample = draw_sample(pop, args.labels, TRUTH, seed=seed)
                labels = [Label(s.first, s.second, "duplicate" if truth[(s.first, s.second)] else "not_duplicate",
                                "simulated", "") for s in sample]
                result = calibrate_labels(index, pop, labels=labels, bootstrap=args.bootstrap, seed=seed,
                                          method=args.method)
                if result.recommended is None:  # too few labels of a kind: nothing to recommend
                    why = getattr(result, "missing", None) or "no labelled duplicate"
                    print(f"{seed:4d}  no recommendation from the sample of {len(labels)} labels: {why}")
                    errors.append((1.0, 1.0))
                    failed = True
                    continue
                tp, tr = full_truth(result.recommended)
                dp, dr = abs(result.precision - tp), abs(result.recall - tr)
                errors.append((dp, dr))
                low, high = result.interval or (float("nan"), float("nan"))
                p_low, p_high = result.precision_interval or (float("nan"), float("nan"))
                r_low, r_high = result.recall_interval or (float("nan"), float("nan"))
                covered.append((p_low <= tp <= p_high, r_low <= tr <= r_high))
                print(f"{seed:4d}  {result.recommended:11.2f}  [{low:.2f}-{high:.2f}]  {result.precision:6.3f}"
                      f"  [{p_low:.3f}-{p_high:.3f}]  {tp:6.3f}  {dp:.3f}  {result.recall:6.3f}"
                      f"  [{r_low:.3f}-{r_high:.3f}]  {tr:6.3f}  {dr:.3f}")
    dps, drs = [e[0] for e in errors], [e[1] for e in errors]
    within = sum(dp <= 0.03 and dr <= 0.03 for dp, dr in errors)
    print(f"method {args.method}, {args.labels} labels a sample")
    print(f"|precision error|: median {statistics.median(dps):.3f}, max {max(dps):.3f}; |recall error|: median "
          f"{statistics.median(drs):.3f}, max {max(drs):.3f}; both within 0.03 in {within} of {len(errors)} samples")
    print(f"the true precision inside its 90% interval in {sum(p for p, _ in covered)} of {len(covered)} samples, "
          f"the true recall inside its in {sum(r for _, r in covered)} of {len(covered)}")
    if failed:
        sys.exit("error: a sample held too few labels of a kind, so nothing was recommended")


if __name__ == "__main__":
    main()
