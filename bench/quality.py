"""How good are the fingerprints? Precision and recall of all near-duplicate pairs on real text.

    .venv/bin/python bench/quality.py ZH.jsonl EN.jsonl      # BENCHMARKS.md: the shared corpus's two files
    .venv/bin/python bench/quality.py my.jsonl --originals 300 --json out.json

Originals are sections of real documents (paragraphs joined up to a length drawn log-uniformly from
50 to 8,000 characters, so every length bucket is well filled); each gets one perturbed copy of every
kind below, made with a fixed seed. The truth: two texts are near-duplicates when the exact Jaccard
similarity of their character 5-shingle sets (whitespace folded) is >= 0.8, found for all pairs by
prefix filtering and checked exactly; the planted labels (same original, neither a 40% rewrite) are
reported too. For every feature choice, every pair within Hamming distance k is "found" (brute force
over all pairs in numpy: the same pairs an exact `dupes` returns), for k = 0..16. Side by side: the
`simhash` PyPI package (its default char 4-grams, and fed jieba/plain words) and datasketch MinHashLSH
(128 permutations, threshold 0.8, character 5-shingles). Needs the `[bench]` extra.

The real pipeline, measured in the same run: the texts are added with their texts stored to an index
file in a temporary folder (SimhashIndex(store_text=True), as `simq add --store-text`), and the pairs
`simq dupes` returns at its defaults (candidates within CONFIRM_K checked by exact Jaccard >= 0.8,
SimhashIndex.dupes, checked) are scored, next to `simq dupes --no-check` (distance <= RECOMMENDED_K) and
MinHashLSH; with the time of the plain pair search at CONFIRM_K and of the confirmed one (medians).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from common import Failures, median_seconds, print_machine

from simhash_sqlite import Document, FingerprintSettings, SimhashIndex
from simhash_sqlite.core.features import _HAN_RUN, _jieba, ngram_hashes, normalize, word_hash, words
from simhash_sqlite.core.fingerprint import simhash_of_features
from simhash_sqlite.core.settings import CONFIRM_K, RECOMMENDED_K
from simhash_sqlite.core.shingles import fold_space, shingle_set

THRESHOLD = 0.8
_d = FingerprintSettings()
DEFAULT_CHOICE = f"{_d.features} {_d.ngram} {_d.weights}"  # the product's default, as named below
KS = range(17)
# Length of the shorter text of a pair; the finer rows under 200 show where short texts give way.
BUCKETS = (("<200", 0, 200), ("200-1000", 200, 1000), (">1000", 1000, 1 << 62),
           ("<50", 0, 50), ("50-100", 50, 100), ("100-200", 100, 200))
KINDS = ("boilerplate", "advert", "numbers", "edit2", "edit5", "rewrite15", "rewrite40", "truncate")
NOT_PLANTED = {"rewrite40"}  # a 40% rewrite is a different text; every other copy is a planted duplicate

HEADERS = {
    "zh": ["本文转载自开源文档镜像站，版权归原作者所有。", "镜像站点 | 首页 | 文档 | 下载 | 关于我们",
           "【转载】来源：网络，如有侵权请联系删除"],
    "en": ["Mirrored from docs.example.org. Home | Docs | Downloads | About",
           "Reposted with permission. All rights reserved by the original authors.",
           "You are reading an archived copy of this page."],
}
FOOTERS = {
    "zh": ["Copyright © 2024 文档镜像站 京ICP备12345678号 联系我们 | 网站地图",
           "本站所有内容仅供学习交流，转载请注明出处。"],
    "en": ["Copyright 2024 Example Mirror. Privacy | Terms | Contact | Sitemap",
           "This page was mirrored automatically; report problems to the webmaster."],
}
ADVERTS = {
    "zh": ["【广告】限时特惠！云服务器新用户首年仅需 99 元，立即扫码领取优惠券，名额有限，先到先得。",
           "推荐阅读：十天学会 Linux 运维，从入门到精通，点击下方链接免费领取全套视频教程。"],
    "en": ["Sponsored: Get 50% off cloud hosting this week only. "
           "Sign up today and deploy in seconds with our one-click installer.",
           "Advertisement - Learn Python in 30 days with our award-winning online course. "
           "Enroll now and get a free certificate."],
}


# -- the documents ---------------------------------------------------------------------------


def language(text: str) -> str:
    han = sum(len(m.group()) for m in _HAN_RUN.finditer(text))
    letters = sum(c.isalpha() for c in text) or 1
    return "zh" if han / letters >= 0.2 else "en"


LENGTHS = (50, 8000)


def sections(text: str, rng: random.Random, lengths: tuple[int, int] = LENGTHS) -> list[str]:
    """Consecutive paragraphs joined until a log-uniform target length in `lengths` is reached
    (a paragraph longer than the target is cut at it, so short sections are short)."""
    lo, hi = math.log(lengths[0]), math.log(lengths[1])
    out, current, target = [], [], math.exp(rng.uniform(lo, hi))
    for para in re.split(r"\n\s*\n", text):
        if para.strip():
            current.append(para.strip())
        if sum(map(len, current)) >= target:
            out.append("\n\n".join(current)[: int(target * 1.5)])
            current, target = [], math.exp(rng.uniform(lo, hi))
    if current:
        out.append("\n\n".join(current))
    least = min(20, lengths[0] // 2)
    return [s for s in out if len(re.findall(r"\w", s)) >= least and len(s) <= lengths[1] * 1.5]


def load_originals(paths: list[str], per_language: int, rng: random.Random, lengths=LENGTHS) -> dict[str, list[str]]:
    pool: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                text = json.loads(line).get("text") or ""
                for section in sections(text, rng, lengths):
                    pool[language(section)].append(section)
    return {lang: rng.sample(texts, min(per_language, len(texts))) for lang, texts in sorted(pool.items())}


def _units(text: str, lang: str) -> list[str]:
    return list(text) if lang == "zh" else text.split()


def _join(units: list[str], lang: str) -> str:
    return "".join(units) if lang == "zh" else " ".join(units)


def edit(text: str, lang: str, share: float, rng: random.Random, vocab: list[str]) -> str:
    """Substitute, delete or insert `share` of the characters (Chinese) or words (English)."""
    units = _units(text, lang)
    out = []
    for u in units:
        if rng.random() < share:
            op = rng.randrange(3)
            if op == 0:
                out.append(rng.choice(vocab))
            elif op == 2:
                out.extend((u, rng.choice(vocab)))
        else:
            out.append(u)
    return _join(out, lang)


def rewrite(text: str, lang: str, share: float, rng: random.Random, vocab: list[str]) -> str:
    """Replace phrases (runs of 1-4 words or 2-6 characters) covering about `share` of the text."""
    units = _units(text, lang)
    lo, hi = (2, 6) if lang == "zh" else (1, 4)
    out, i = [], 0
    while i < len(units):
        if rng.random() < share / ((lo + hi) / 2):
            span = rng.randint(lo, hi)
            out.extend(rng.choice(vocab) for _ in range(rng.randint(lo, hi)))
            i += span
        else:
            out.append(units[i])
            i += 1
    return _join(out, lang)


def perturb(text: str, kind: str, lang: str, rng: random.Random, vocab: list[str]) -> str:
    if kind == "boilerplate":
        return f"{rng.choice(HEADERS[lang])}\n\n{text}\n\n{rng.choice(FOOTERS[lang])}"
    if kind == "advert":
        paras = text.split("\n\n")
        paras.insert(rng.randint(0, len(paras)), rng.choice(ADVERTS[lang]))
        return "\n\n".join(paras)
    if kind == "numbers":
        changed = re.sub(r"\d+", lambda m: str(rng.randrange(10 ** len(m.group()))), text)
        counter = f"阅读 {rng.randrange(100000)} 次" if lang == "zh" else f"{rng.randrange(100000)} views"
        return f"{changed}\n{counter}"
    if kind in ("edit2", "edit5"):
        return edit(text, lang, int(kind[4:]) / 100, rng, vocab)
    if kind in ("rewrite15", "rewrite40"):
        return rewrite(text, lang, int(kind[7:]) / 100, rng, vocab)
    if kind == "truncate":
        return text[: max(1, int(len(text) * rng.uniform(0.7, 0.95)))]
    raise ValueError(kind)


@dataclass
class Corpus:
    lang: str
    texts: list[str]
    family: np.ndarray  # index of the original each text comes from
    kind: list[str]  # "original" or the perturbation
    length: np.ndarray

    @property
    def n(self) -> int:
        return len(self.texts)


def build_corpus(lang: str, originals: list[str], seed: int) -> Corpus:
    rng = random.Random(f"{seed}-{lang}")
    vocab = [u for text in originals for u in _units(text, lang) if u.strip()]
    texts, family, kinds = [], [], []
    for i, text in enumerate(originals):
        texts.append(text), family.append(i), kinds.append("original")
        for kind in KINDS:
            texts.append(perturb(text, kind, lang, rng, vocab)), family.append(i), kinds.append(kind)
    return Corpus(lang, texts, np.array(family), kinds, np.array([len(t) for t in texts]))


# -- exact truth: all pairs with shingle Jaccard >= 0.8 ----------------------------------------


def truth_pairs(sets: list[np.ndarray], t: float = THRESHOLD) -> tuple[np.ndarray, np.ndarray]:
    """(pairs as i * n + j with i < j, their Jaccard) for every pair with Jaccard >= t. Exact.

    Prefix filtering: order shingles rarest first; if J(A, B) >= t then the first |A| - ceil(t|A|) + 1
    shingles of A and of B share one. Candidates from shared prefix shingles are then checked exactly.
    """
    n = len(sets)
    allv = np.concatenate(sets)
    vocab, inverse, df = np.unique(allv, return_inverse=True, return_counts=True)
    rank = np.empty(len(vocab), dtype=np.int64)
    rank[np.lexsort((vocab, df))] = np.arange(len(vocab))
    ranked, post_tok, post_doc, start = [], [], [], 0
    for d, s in enumerate(sets):
        r = np.sort(rank[inverse[start : start + len(s)]])
        start += len(s)
        ranked.append(r)
        p = len(s) - math.ceil(t * len(s)) + 1 if len(s) else 0
        post_tok.append(r[:p]), post_doc.append(np.full(p, d, dtype=np.int64))
    tok, doc = np.concatenate(post_tok), np.concatenate(post_doc)
    order = np.lexsort((doc, tok))
    tok, doc = tok[order], doc[order]
    bounds = np.flatnonzero(np.diff(tok)) + 1
    cands = set()
    for group in np.split(doc, bounds):
        if len(group) > 1:
            g = np.unique(group)
            ii, jj = np.triu_indices(len(g), 1)
            cands.update((g[ii] * n + g[jj]).tolist())
    sizes = np.array([len(s) for s in sets])
    keys, sims = [], []
    for key in cands:
        i, j = divmod(key, n)
        a, b = sizes[i], sizes[j]
        if min(a, b) < t * max(a, b):
            continue
        shared = len(np.intersect1d(ranked[i], ranked[j], assume_unique=True))
        sim = shared / (a + b - shared)
        if sim >= t:
            keys.append(key), sims.append(sim)
    order = np.argsort(keys)
    return np.array(keys, dtype=np.int64)[order], np.array(sims)[order]


# -- feature choices -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    name: str
    units: str  # "chars", "words", "words-hmm", "keywords"
    ngram: int
    weights: str  # count, log, idf, or keyword (jieba's TF-IDF weight)


def choices(lang: str, quick: bool) -> list[Choice]:
    out = []
    for weights in ("count", "log", "binary", "idf"):
        for n in (2, 3, 4, 5):
            out.append(Choice(f"chars {n}", "chars", n, weights))
        for n in (1, 2, 3, 4, 5):
            out.append(Choice(f"words {n}", "words", n, weights))
        if lang == "zh":
            out.append(Choice("words 1 hmm", "words-hmm", 1, weights))
            out.append(Choice("words 3 hmm", "words-hmm", 3, weights))
    if lang == "zh":
        out.append(Choice("jieba keywords 200", "keywords", 1, "keyword"))
    if quick:
        out = [c for c in out if c.weights in ("count", "binary") or c.name in ("chars 5", "words 3", "chars 4")]
    return out


def unit_arrays(texts: list[str], kind: str) -> list[np.ndarray]:
    if kind == "chars":
        out = []
        for t in texts:
            t = normalize(t)
            out.append(np.frombuffer(t.encode("utf-32-le"), dtype="<u4").astype(np.uint64))
        return out
    hmm = kind == "words-hmm"
    return [np.fromiter((word_hash(w) for w in words(t, hmm)), dtype=np.uint64) for t in texts]


def keyword_features(texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    import jieba.analyse

    _jieba()
    out = []
    for t in texts:
        tags = jieba.analyse.extract_tags(normalize(t), topK=200, withWeight=True)
        hashes = np.array([word_hash(w) for w, _ in tags], dtype=np.uint64)
        weights = np.array([max(1, round(1000 * w)) for _, w in tags], dtype=np.int64)
        out.append((hashes, weights))
    return out


def weighted(unit_list: list[np.ndarray], n: int, weights: str) -> list[tuple[np.ndarray, np.ndarray]]:
    feats = [np.unique(ngram_hashes(u, n), return_counts=True) if len(u) else (u, u.astype(np.int64))
             for u in unit_list]
    if weights == "count":
        return [(h, c.astype(np.int64)) for h, c in feats]
    if weights == "log":
        return [(h, np.rint(1000 * (1 + np.log(c))).astype(np.int64)) for h, c in feats]
    if weights == "binary":
        return [(h, np.ones(len(h), dtype=np.int64)) for h, c in feats]
    # IDF learned from this corpus: tf * ln(N / df), quantized like the product's log weights.
    vocab, df = np.unique(np.concatenate([h for h, _ in feats]), return_counts=True)
    idf = np.log(len(feats) / df)
    out = []
    for h, c in feats:
        w = np.rint(1000 * c * idf[np.searchsorted(vocab, h)]).astype(np.int64)
        out.append((h, np.maximum(w, 1)))
    return out


def fingerprints(feats: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    out = np.zeros(len(feats), dtype=np.uint64)
    for i, (h, w) in enumerate(feats):
        fp = simhash_of_features(h, w)
        out[i] = 0 if fp is None else fp
    return out


# -- evaluation ----------------------------------------------------------------------------------


def close_pairs(fps: np.ndarray, kmax: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i * n + j, i < j) within Hamming distance kmax, with its distance: brute force."""
    n = len(fps)
    keys, dists = [], []
    for i in range(n - 1):
        d = np.bitwise_count(fps[i + 1 :] ^ fps[i]).astype(np.int8)
        hit = np.flatnonzero(d <= kmax)
        keys.append(i * n + i + 1 + hit), dists.append(d[hit])
    return np.concatenate(keys), np.concatenate(dists)


def prf(tp: float, found: float, relevant: float) -> tuple[float, float, float]:
    p = tp / found if found else 1.0
    r = tp / relevant if relevant else 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


@dataclass
class Curves:
    """P/R/F1 per k, overall and per length bucket, from found pairs and their distances."""

    by_k: dict  # scope -> list of (p, r, f1) for k in KS

    @staticmethod
    def of(found: np.ndarray, dist: np.ndarray, truth: np.ndarray, pair_bucket) -> Curves:
        hit = np.isin(found, truth)
        scopes = {"all": (np.ones(len(found), bool), len(truth))}
        fb, tb = pair_bucket(found), pair_bucket(truth)
        for name, lo, hi in BUCKETS:
            scopes[name] = ((fb >= lo) & (fb < hi), int(((tb >= lo) & (tb < hi)).sum()))
        by_k = {}
        for scope, (mask, relevant) in scopes.items():
            tp = np.bincount(dist[mask & hit], minlength=17).cumsum()
            fd = np.bincount(dist[mask], minlength=17).cumsum()
            by_k[scope] = [prf(tp[k], fd[k], relevant) for k in KS]
        return Curves(by_k)

    def best(self, scope: str = "all") -> tuple[int, tuple[float, float, float]]:
        k = max(KS, key=lambda k: (self.by_k[scope][k][2], -k))
        return k, self.by_k[scope][k]


def balance(fps: np.ndarray) -> tuple[float, float, int, float]:
    """(lowest, highest share of ones per bit, largest block bucket, candidates vs uniform bits)."""
    bits = np.unpackbits(fps.astype(">u8").view(np.uint8)).reshape(-1, 64)
    share = bits.mean(axis=0)
    largest, pairs = 0, 0
    for b in range(4):
        _, counts = np.unique((fps >> np.uint64(16 * (3 - b))) & np.uint64(0xFFFF), return_counts=True)
        largest = max(largest, int(counts.max()))
        pairs += int((counts.astype(np.int64) ** 2).sum())
    uniform = 4 * len(fps) ** 2 / 65536 + 4 * len(fps)
    return float(share.min()), float(share.max()), largest, pairs / uniform


def _pair_keys(pairs, n: int) -> np.ndarray:
    """Pairs of keys str(i) as i * n + j (i < j), sorted."""
    out = [min(int(p.first), int(p.second)) * n + max(int(p.first), int(p.second)) for p in pairs]
    return np.array(sorted(out), dtype=np.int64)


def pipeline(corpus: Corpus, truth: np.ndarray, pair_bucket, repeats: int, log, k: int = CONFIRM_K) -> dict:
    """The product's own path: an index file with stored texts, `dupes` confirmed at the defaults
    (candidates within k, exact Jaccard >= 0.8) and `dupes --no-check`, scored on the truth
    (overall and per length bucket), timed."""
    n = corpus.n
    with (
        tempfile.TemporaryDirectory() as folder,
        SimhashIndex(Path(folder) / "bench.db", create=True, store_text=True) as index,
    ):
        t0 = time.perf_counter()
        index.add(Document(str(i), t) for i, t in enumerate(corpus.texts))
        add_seconds = time.perf_counter() - t0
        plain_seconds, plain = median_seconds(lambda: list(index.dupes(k, check=False)), repeats)
        distance_seconds, distance = median_seconds(lambda: list(index.dupes(RECOMMENDED_K, check=False)), repeats)
        reports = []

        def confirmed():
            checker = index.dupes(k, threshold=THRESHOLD)
            pairs = list(checker)
            reports.append(checker.report)
            return pairs

        confirmed_seconds, kept = median_seconds(confirmed, repeats)
    report = reports[-1]
    out = {"k": k, "add_seconds": add_seconds, "candidates": len(plain), "repeats": repeats,
           "dupes_seconds": plain_seconds, "confirmed_seconds": confirmed_seconds,
           "check_seconds": statistics.median(r.check_seconds for r in reports),
           "checked": report.checked, "unchecked": report.unchecked, "rejected": report.rejected}
    for name, pairs in (("confirmed", kept), ("distance", distance)):
        found = _pair_keys(pairs, n)
        hit = np.isin(found, truth)
        fb, tb = pair_bucket(found), pair_bucket(truth)
        out[name] = {
            "found": int(len(found)),
            "truth": prf(hit.sum(), len(found), len(truth)),
            "buckets": {b: prf((hit & (fb >= lo) & (fb < hi)).sum(), ((fb >= lo) & (fb < hi)).sum(),
                               ((tb >= lo) & (tb < hi)).sum())
                        for b, lo, hi in BUCKETS},
        }
    p, r, f = out["confirmed"]["truth"]
    log(f"[{corpus.lang}] {'pipeline: dupes (confirmed)':28s} k={k:2d} P={p:.3f} R={r:.3f} F1={f:.3f}  "
        f"{report.checked} checked, {report.unchecked} unchecked; "
        f"dupes {plain_seconds:.2f}s, confirmed {confirmed_seconds:.2f}s")
    return out


def run_language(corpus: Corpus, quick: bool, log, only_default: bool = False, repeats: int = 3,
                 confirm_k: int = CONFIRM_K) -> dict:
    t0 = time.perf_counter()
    sets = [shingle_set(t) for t in corpus.texts]
    truth, truth_sim = truth_pairs(sets)
    n = corpus.n
    fam = corpus.family
    ti, tj = np.divmod(truth, n)
    log(f"[{corpus.lang}] {n} texts ({len(set(fam))} originals), {len(truth)} truth pairs, "
        f"{time.perf_counter() - t0:.1f}s")

    # Planted labels: same original, neither copy a 40% rewrite.
    planted_ok = np.array([k not in NOT_PLANTED for k in corpus.kind])
    pl = []
    for f in np.unique(fam):
        members = np.flatnonzero((fam == f) & planted_ok)
        ii, jj = np.triu_indices(len(members), 1)
        pl.append(members[ii] * n + members[jj])
    planted = np.sort(np.concatenate(pl))

    def pair_bucket(keys):
        i, j = np.divmod(keys, n)
        return np.minimum(corpus.length[i], corpus.length[j])

    originals = np.array([k == "original" for k in corpus.kind])
    kind_arr = np.array(corpus.kind)
    # Pairs (original, its copy of a kind): the per-kind view.
    copy_idx = np.flatnonzero(~originals)
    orig_of = np.flatnonzero(originals)[fam[copy_idx]]
    kind_pairs = np.minimum(orig_of, copy_idx) * n + np.maximum(orig_of, copy_idx)
    kind_truth = np.isin(kind_pairs, truth)

    tb = pair_bucket(truth)
    result = {"texts": n, "truth_pairs": int(len(truth)), "planted_pairs": int(len(planted)), "choices": {},
              "bucket_truth_pairs": {name: int(((tb >= lo) & (tb < hi)).sum()) for name, lo, hi in BUCKETS}}
    result["kind_truth_share"] = {
        kind: float(kind_truth[kind_arr[copy_idx] == kind].mean()) for kind in KINDS
    }

    def evaluate(name: str, fps: np.ndarray, seconds: float) -> None:
        found, dist = close_pairs(fps)
        curves = Curves.of(found, dist, truth, pair_bucket)
        planted_curves = Curves.of(found, dist, planted, pair_bucket)
        lo, hi, largest, ratio = balance(fps[originals])
        # Per kind: recall of (original, copy) truth pairs and of planted pairs, at every k.
        d_kind = np.full(len(kind_pairs), 99)
        pos = np.searchsorted(found, kind_pairs)
        pos[pos >= len(found)] = 0
        match = found[pos] == kind_pairs
        d_kind[match] = dist[pos[match]]
        per_kind = {}
        for kind in KINDS:
            sel = kind_arr[copy_idx] == kind
            tsel = sel & kind_truth
            per_kind[kind] = {
                "truth_recall": [float((d_kind[tsel] <= k).mean()) if tsel.any() else None for k in KS],
                "found_share": [float((d_kind[sel] <= k).mean()) for k in KS],
            }
        result["choices"][name] = {
            "truth": curves.by_k, "planted": planted_curves.by_k, "kinds": per_kind,
            "bits": {"min_share": lo, "max_share": hi, "largest_bucket": largest, "candidates_vs_uniform": ratio},
            "seconds": seconds,
        }
        k, (p, r, f) = curves.best()
        log(f"[{corpus.lang}] {name:28s} best k={k:2d} P={p:.3f} R={r:.3f} F1={f:.3f}  "
            f"bits {lo:.2f}-{hi:.2f}  {seconds:.1f}s")

    result["pipeline"] = pipeline(corpus, truth, pair_bucket, repeats, log, confirm_k)

    cache: dict[str, list[np.ndarray]] = {}
    for choice in choices(corpus.lang, quick):
        if only_default and f"{choice.name} {choice.weights}" != DEFAULT_CHOICE:
            continue
        t0 = time.perf_counter()
        if choice.units == "keywords":
            feats = keyword_features(corpus.texts)
        else:
            if choice.units not in cache:
                cache[choice.units] = unit_arrays(corpus.texts, choice.units)
            feats = weighted(cache[choice.units], choice.ngram, choice.weights)
        fps = fingerprints(feats)
        evaluate(f"{choice.name} {choice.weights}", fps, time.perf_counter() - t0)

    # The simhash package: its default (char 4-grams of \w characters), and fed words.
    if not only_default:
        from simhash import Simhash

        t0 = time.perf_counter()
        fps = np.array([Simhash(t).value for t in corpus.texts], dtype=np.uint64)
        evaluate("pkg simhash default", fps, time.perf_counter() - t0)
        t0 = time.perf_counter()
        fps = np.array([Simhash(words(t) or [""]).value for t in corpus.texts], dtype=np.uint64)
        evaluate("pkg simhash words", fps, time.perf_counter() - t0)

    # datasketch MinHashLSH: candidate pairs as returned (no verification), like a user of it gets.
    t0 = time.perf_counter()
    found = minhash_pairs(corpus.texts)
    hit = np.isin(found, truth)
    p, r, f = prf(hit.sum(), len(found), len(truth))
    ph = np.isin(found, planted)
    pp, pr, pf = prf(ph.sum(), len(found), len(planted))
    fb, tb = pair_bucket(found), pair_bucket(truth)
    result["minhash"] = {
        "truth": (p, r, f), "found": int(len(found)), "planted": (pp, pr, pf), "seconds": time.perf_counter() - t0,
        "buckets": {name: prf((hit & (fb >= lo) & (fb < hi)).sum(), ((fb >= lo) & (fb < hi)).sum(),
                              ((tb >= lo) & (tb < hi)).sum())
                    for name, lo, hi in BUCKETS},
        "kinds": {kind: _share(np.isin(kind_pairs[(kind_arr[copy_idx] == kind) & kind_truth], found))
                  for kind in KINDS},
    }
    log(f"[{corpus.lang}] {'datasketch MinHashLSH':28s}            P={p:.3f} R={r:.3f} F1={f:.3f}  "
        f"{result['minhash']['seconds']:.1f}s")
    return result


def _share(flags: np.ndarray) -> float:
    return float(flags.mean()) if len(flags) else float("nan")


def minhash_pairs(texts: list[str]) -> np.ndarray:
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=128)
    hashes = []
    for i, t in enumerate(texts):
        folded = fold_space(t)
        grams = {folded[j : j + 5] for j in range(max(1, len(folded) - 4))}
        m = MinHash(num_perm=128)
        m.update_batch([g.encode("utf-8") for g in grams])
        lsh.insert(i, m)
        hashes.append(m)
    n = len(texts)
    keys = set()
    for i, m in enumerate(hashes):
        for j in lsh.query(m):
            if j != i:
                keys.add(min(i, j) * n + max(i, j))
    return np.array(sorted(keys), dtype=np.int64)


# -- report --------------------------------------------------------------------------------------


def fmt(x: float) -> str:
    return f"{x:.3f}"


def pipeline_report(results: dict) -> str:
    """The measured pipeline: quality next to MinHashLSH and the distance alone, and the time of the check."""
    out = ["### The real pipeline: an index with stored texts, `simq dupes` at its defaults\n",
           "| lang | method | pairs found | P | R | F1 |", "|---|---|---|---|---|---|"]
    for lang, res in results.items():
        pl, mh = res["pipeline"], res["minhash"]
        confirmed_name = f"`simq dupes` (default: candidates within {pl['k']}, exact Jaccard >= {THRESHOLD})"
        distance_name = f"`simq dupes --no-check` (distance <= {RECOMMENDED_K})"
        rows = ((confirmed_name, pl["confirmed"]["found"], pl["confirmed"]["truth"]),
                (distance_name, pl["distance"]["found"], pl["distance"]["truth"]),
                ("datasketch MinHashLSH, 128 perm., threshold 0.8", mh.get("found", "-"), mh["truth"]))
        for name, found, (p, r, f) in rows:
            out.append(f"| {lang} | {name} | {found} | {fmt(p)} | {fmt(r)} | {fmt(f)} |")
    out.append(f"\n### Time of the check (median of {next(iter(results.values()))['pipeline']['repeats']} runs each)\n")
    k = next(iter(results.values()))["pipeline"]["k"]
    out.append(f"| lang | texts | candidates within {k} | checked, kept | rejected | unchecked "
               f"| `dupes --no-check --k {k}` s | `dupes` (confirmed) s | ratio "
               f"| of which reading texts + Jaccard s |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for lang, res in results.items():
        pl = res["pipeline"]
        ratio = pl['confirmed_seconds'] / pl['dupes_seconds']
        out.append(f"| {lang} | {res['texts']} | {pl['candidates']} | {pl['checked']} | {pl['rejected']} "
                   f"| {pl['unchecked']} | {pl['dupes_seconds']:.3f} | {pl['confirmed_seconds']:.3f} | {ratio:.1f}x "
                   f"| {pl['check_seconds']:.3f} |")
    return "\n".join(out)


def report(results: dict, default: str, k_default: int, k_confirm: int) -> str:
    out = []
    langs = list(results)
    out.append("### Every feature choice: best k by F1 on the Jaccard >= 0.8 truth\n")
    lang_columns = " | ".join(f"{lang} best k | {lang} P | {lang} R | {lang} F1 | {lang} F1 @k={k_default} "
                              f"| {lang} bits min-max | {lang} largest bucket | {lang} cand. x uniform"
                              for lang in langs)
    out.append("| choice | " + lang_columns + " |")
    out.append("|---" * (1 + 8 * len(langs)) + "|")
    names = list(results[langs[0]]["choices"])
    for lang in langs[1:]:
        names += [n for n in results[lang]["choices"] if n not in names]
    for name in names:
        cells = [name]
        for lang in langs:
            c = results[lang]["choices"].get(name)
            if c is None:
                cells += ["-"] * 8
                continue
            k, (p, r, f) = Curves(c["truth"]).best()
            b = c["bits"]
            cells += [str(k), fmt(p), fmt(r), fmt(f), fmt(c["truth"]["all"][k_default][2]),
                      f"{b['min_share']:.2f}-{b['max_share']:.2f}", str(b["largest_bucket"]),
                      f"{b['candidates_vs_uniform']:.1f}"]
        out.append("| " + " | ".join(cells) + " |")
    cells = ["datasketch MinHashLSH 128/0.8"]
    for lang in langs:
        p, r, f = results[lang]["minhash"]["truth"]
        cells += ["-", fmt(p), fmt(r), fmt(f), fmt(f), "-", "-", "-"]
    out.append("| " + " | ".join(cells) + " |")

    for lang in langs:
        c = results[lang]["choices"][default]
        out.append(f"\n### {lang}: default `{default}` at every k (truth: Jaccard >= 0.8; planted labels)\n")
        out.append("| k | P | R | F1 | planted P | planted R | planted F1 "
                   "| F1 if checked exactly (derived: 2R/(1+R), P taken as 1) |")
        out.append("|---|---|---|---|---|---|---|---|")
        for k in KS:
            r = c["truth"]["all"][k][1]
            values = (*c["truth"]["all"][k], *c["planted"]["all"][k], 2 * r / (1 + r))
            out.append(f"| {k} | " + " | ".join(fmt(x) for x in values) + " |")
        mh = results[lang]["minhash"]
        out.append("| MinHashLSH | " + " | ".join(fmt(x) for x in (*mh["truth"], *mh["planted"])) + " | - |")

        out.append(f"\n### {lang}: by length bucket (shorter text of the pair), "
                   f"default at k={k_default} vs MinHashLSH\n")
        out.append("| bucket | truth pairs | P | R | F1 | MinHash P | MinHash R | MinHash F1 "
                   f"| best k here | F1 at best k | `simq dupes` (checked, k={k_confirm}) F1, measured |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, _, _ in BUCKETS:
            p, r, f = c["truth"][name][k_default]
            kb, (_, _, fb) = Curves(c["truth"]).best(name)
            mp, mr, mf = mh["buckets"][name]
            fc = results[lang]["pipeline"]["confirmed"]["buckets"][name][2]
            truth_pairs_here = results[lang]['bucket_truth_pairs'][name]
            out.append(f"| {name} | {truth_pairs_here} | {fmt(p)} | {fmt(r)} | {fmt(f)} "
                       f"| {fmt(mp)} | {fmt(mr)} | {fmt(mf)} | {kb} | {fmt(fb)} | {fmt(fc)} |")

        out.append(f"\n### {lang}: by perturbation kind, default at k={k_default} (pairs original-copy)\n")
        out.append("| kind | share with Jaccard >= 0.8 | recall of those (truth) | share of all copies found "
                   "| MinHash recall (truth) |")
        out.append("|---|---|---|---|---|")
        for kind in KINDS:
            kk = c["kinds"][kind]
            tr = kk["truth_recall"][k_default]
            minhash_recall = fmt(mh['kinds'][kind]) if not math.isnan(mh['kinds'][kind]) else '-'
            truth_share = fmt(results[lang]['kind_truth_share'][kind])
            out.append(f"| {kind} | {truth_share} | {'-' if tr is None else fmt(tr)} | "
                       f"{fmt(kk['found_share'][k_default])} | {minhash_recall} |")
    return "\n".join(out)


SUMMARY_ROWS = ("chars 5 binary", "chars 5 count", "chars 5 log", "chars 5 idf", "chars 4 binary", "chars 3 binary",
                "words 1 count", "words 1 hmm count", "words 2 binary", "words 3 binary", "words 3 idf",
                "jieba keywords 200 keyword", "pkg simhash default", "pkg simhash words")


def summary(results: dict, k_default: int, k_confirm: int) -> str:
    """The short table for the README: the main choices, both languages, at the best and the default k."""
    langs = list(results)
    head = " | ".join(f"{lang}: best k, F1 | {lang}: F1 at k={k_default} | {lang}: bits" for lang in langs)
    out = [f"| features, weights | {head} |", "|---" * (1 + 3 * len(langs)) + "|"]
    for name in SUMMARY_ROWS:
        cells = []
        for lang in langs:
            c = results[lang]["choices"].get(name)
            if c is None:
                cells += ["-", "-", "-"]
                continue
            k, (_, _, f) = Curves(c["truth"]).best()
            b = c["bits"]
            cells += [f"{k}, {f:.3f}", fmt(c["truth"]["all"][k_default][2]),
                      f"{b['min_share']:.2f}-{b['max_share']:.2f}"]
        label = (name.replace("pkg simhash default", "`simhash` package, its default")
                 .replace("pkg simhash words", "`simhash` package, jieba words"))
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    cells = []
    for lang in langs:
        cells += ["-, " + fmt(results[lang]["minhash"]["truth"][2]), "-", "-"]
    out.append("| datasketch MinHashLSH, 128 perm., threshold 0.8 | " + " | ".join(cells) + " |")
    cells = []
    for lang in langs:
        cells += [f"{k_confirm}, {results[lang]['pipeline']['confirmed']['truth'][2]:.3f}", "-", "-"]
    label = f"default, `simq dupes`: candidates at k={k_confirm} checked by exact Jaccard (measured)"
    out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def balance_table(paths: list[str], seed: int) -> str:
    """Bit balance and block buckets on every section of the corpora (not only the sampled originals):
    how many candidate pairs the four 16-bit block lookups meet, against what uniform bits would give."""
    rng = random.Random(seed)
    pool = load_originals(paths, 10**9, rng)
    names = [n for n in SUMMARY_ROWS if not n.startswith(("pkg", "jieba"))]
    lang_columns = " | ".join(f"{lang} ({len(sections)} sections): bits | {lang}: largest bucket "
                              f"| {lang}: candidates x uniform" for lang, sections in pool.items())
    out = ["| features, weights | " + lang_columns + " |",
           "|---" * (1 + 3 * len(pool)) + "|"]
    rows = {name: [] for name in names}
    for lang, texts in pool.items():
        cache: dict[str, list[np.ndarray]] = {}
        for name in names:
            parts = name.split()
            units_kind = "words-hmm" if "hmm" in parts else parts[0]
            if lang == "en" and units_kind == "words-hmm":
                rows[name] += ["-", "-", "-"]
                continue
            if units_kind not in cache:
                cache[units_kind] = unit_arrays(texts, units_kind)
            fps = fingerprints(weighted(cache[units_kind], int(parts[1]), parts[-1]))
            bits = np.unpackbits(fps.astype(">u8").view(np.uint8)).reshape(-1, 64).mean(axis=0)
            largest, pairs = 0, 0
            for b in range(4):
                _, counts = np.unique((fps >> np.uint64(16 * (3 - b))) & np.uint64(0xFFFF), return_counts=True)
                largest = max(largest, int(counts.max()))
                pairs += int((counts.astype(np.int64) * (counts - 1) // 2).sum())
            uniform = 4 * len(fps) * (len(fps) - 1) / 2 / 65536
            rows[name] += [f"{bits.min():.2f}-{bits.max():.2f}", str(largest), f"{pairs / uniform:.1f}"]
    for name in names:
        out.append(f"| {name} | " + " | ".join(rows[name]) + " |")
    return "\n".join(out)


def choose_default(results: dict) -> tuple[str, int, float]:
    """The choice and the one k that maximise the lower of the languages' F1 (ties: simpler, smaller k)."""
    best = None
    langs = list(results)
    for name in results[langs[0]]["choices"]:
        if not all(name in results[lang]["choices"] for lang in langs) or name.startswith("pkg"):
            continue
        for k in KS:
            score = min(results[lang]["choices"][name]["truth"]["all"][k][2] for lang in langs)
            if best is None or score > best[2] + 1e-9:
                best = (name, k, score)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="+", help="JSONL files with a 'text' field (each text's language is detected)")
    parser.add_argument("--originals", type=int, default=400,
                        help="originals per language (each gets %d copies)" % len(KINDS))
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--lengths", default="50,8000",
                        help="range of original lengths, characters [default: %(default)s]")
    parser.add_argument("--quick", action="store_true", help="count weights only (plus a few others)")
    parser.add_argument("--default", default=DEFAULT_CHOICE, help="report this choice in detail [default: %(default)s]")
    parser.add_argument("--k", type=int, default=RECOMMENDED_K, help="report at this k [default: %(default)s]")
    parser.add_argument("--confirm-k", type=int, default=CONFIRM_K,
                        help="k for candidates checked exactly [default: %(default)s]")
    parser.add_argument("--json", help="also write every number to this file")
    parser.add_argument("--only-default", action="store_true",
                        help="only the default choice, the pipeline and MinHashLSH")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed runs of each pipeline step (median) [default: %(default)s]")
    parser.add_argument("--balance", action="store_true", help="only the bit balance on every section of the corpora")
    args = parser.parse_args()
    print_machine()
    paths = args.jsonl
    if args.balance:
        print(f"## Bit balance and block buckets ({', '.join(paths)}; every section, seed {args.seed})\n")
        print(balance_table(paths, args.seed))
        return
    rng = random.Random(args.seed)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    lengths = tuple(int(x) for x in args.lengths.split(","))
    originals = load_originals(paths, args.originals, rng, lengths)
    results = {lang: run_language(build_corpus(lang, texts, args.seed), args.quick, log, args.only_default,
                                  args.repeats, args.confirm_k)
               for lang, texts in originals.items()}
    best, best_k, score = choose_default(results)
    name, k = args.default, args.k
    print(f"## Fingerprint quality ({', '.join(paths)}; {args.originals} originals per language of "
          f"{lengths[0]}-{lengths[1]} characters, seed {args.seed})\n")
    print(f"Best single choice for all languages by the lower F1: `{best}` at k={best_k} (F1 >= {score:.3f}). "
          f"Reported in detail: `{name}` at k={k}, and candidates at k={args.confirm_k} checked exactly.\n")
    print(summary(results, k, args.confirm_k) + "\n")
    print(pipeline_report(results) + "\n")
    print(report(results, name, k, args.confirm_k))
    if args.json:
        Path(args.json).write_text(json.dumps(results, default=float))
    failures = Failures()
    for lang, result in results.items():
        # Candidates checked by the exact Jaccard of their stored texts: no pair under the line is kept.
        precision = result["pipeline"]["confirmed"]["truth"][0]
        failures.expect(precision == 1.0, f"{lang}: the exactly checked `dupes` has precision {precision:.4f}, not 1")
    failures.exit()


if __name__ == "__main__":
    main()
