"""A set of short texts (50-500 characters) with near-duplicate variants, Chinese and English, as JSONL.

    apt-get download fortunes debian-faq debian-faq-zh-cn lilypond-doc-html-zh && for f in *.deb; do dpkg -x $f x; done
    .venv/bin/python bench/short_texts.py held.jsonl --fortunes x/usr/share/games/fortunes \
        --html x/usr/share/doc/debian/FAQ x/usr/share/doc/lilypond/html --seed 11
    .venv/bin/python bench/short_texts.py tune.jsonl --jsonl CORPUS/python_docs_en.jsonl CORPUS/manpages_zh.jsonl \
        --html MAINT_GUIDE_ZH/usr/share/doc/maint-guide-zh-cn/html --seed 7

Originals: each fortune of a fortune folder (the files between `%` lines), and the paragraphs of HTML
files (bench/debian_docs.py's crude markup stripping) or of JSONL texts ('text' field): a paragraph of
50-500 characters is taken as it is, shorter consecutive paragraphs are joined until 50 (a section),
a longer one is cut at the last sentence end (or space) before 500. Exact repeats (whitespace folded)
are taken once. Each text's language is detected as bench/quality.py does; up to --per-language
originals of each are sampled.

Every original gets --variants copies, each made by one edit drawn at random (fixed seed) from KINDS:
  typo1, typo2, typo3  1-3 character edits (substitute, delete or insert a character of the text)
  edit5                5% of the words (English) or characters (Chinese) substituted, deleted or inserted
  rewrite15            phrases covering about 15% of the text replaced (bench/quality.py)
  truncate             the first 70-95% of the text
  numbers              every number changed, a counter line added (bench/quality.py)
  tail                 an attribution appended ("-- Anonymous", "——佚名")
  width                punctuation between ASCII and full-width forms (Chinese), letter case of sentence
                       starts (English): what the sketch's normalisation folds and the exact check counts
The texts are written as {"id", "text", "lang", "family", "kind"} lines, originals and variants
shuffled. Tune on one set and report on another made from other sources and another seed.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from debian_docs import plain_text
from quality import _units, edit, language, perturb, rewrite

KINDS = ("typo1", "typo2", "typo3", "edit5", "rewrite15", "truncate", "numbers", "tail", "width")
SHORTEST, LONGEST = 50, 500
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])\s*")
_FULL = dict(zip(",.;:!?()", "，。；：！？（）"))
_HALF = {v: k for k, v in _FULL.items()}


def fortunes(folder: Path) -> list[tuple[str, str]]:
    """(source, text) of every fortune in the folder's data files (not the .dat indexes)."""
    out = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink() and p.suffix != ".dat"):
        data = path.read_text(encoding="utf-8", errors="replace")
        for n, text in enumerate(re.split(r"(?m)^%\s*$", data)):
            out.append((f"{path.name}:{n}", text.strip()))
    return out


def paragraphs(source: str, text: str) -> list[tuple[str, str]]:
    """Pieces of 50-500 characters: paragraphs as they are, short ones joined, long ones cut."""
    out, current = [], []
    for n, para in enumerate(p.strip() for p in re.split(r"\n\s*\n", text)):
        if not para:
            continue
        if len(para) > LONGEST:
            head = para[:LONGEST]
            ends = [m.start() for m in _SENTENCE_END.finditer(head) if m.start() >= SHORTEST]
            cut = ends[-1] if ends else head.rfind(" ")
            para = head[: cut if cut >= SHORTEST else LONGEST].strip()
        current.append(para)
        joined = "\n\n".join(current)
        if len(joined) >= SHORTEST:
            if len(joined) <= LONGEST:
                out.append((f"{source}:{n}", joined))
            current = []
    return out


def originals(args) -> dict[str, list[tuple[str, str]]]:
    pieces: list[tuple[str, str]] = []
    for folder in args.fortunes:
        pieces += [(s, t) for s, t in fortunes(folder) if SHORTEST <= len(t) <= LONGEST]
    for folder in args.html:
        for path in sorted(p for p in folder.rglob("*") if p.suffix in (".html", ".htm", ".page")):
            text = plain_text(path.read_text(encoding="utf-8", errors="replace"))
            pieces += paragraphs(f"{path.name}", text)
    for path in args.jsonl:
        with open(path, encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                pieces += paragraphs(str(record.get("id", "")), record.get("text") or "")
    seen, by_language = set(), defaultdict(list)
    for source, text in pieces:
        folded = " ".join(text.split())
        if folded in seen or len(re.findall(r"\w", text)) < 20:
            continue
        seen.add(folded)
        by_language[language(text)].append((source, text))
    return by_language


def typos(text: str, count: int, rng: random.Random) -> str:
    chars = list(text)
    alphabet = [c for c in chars if c.isalnum()] or ["x"]
    for _ in range(count):
        at = rng.randrange(len(chars))
        op = rng.randrange(3)
        if op == 0:
            chars[at] = rng.choice(alphabet)
        elif op == 1 and len(chars) > 1:
            del chars[at]
        else:
            chars.insert(at, rng.choice(alphabet))
    return "".join(chars)


def width(text: str, lang: str) -> str:
    if lang == "zh":
        table = _HALF if sum(c in _HALF for c in text) >= sum(c in _FULL for c in text) else _FULL
        return "".join(table.get(c, c) for c in text)
    return re.sub(r"(^|[.!?]\s+)(\w)", lambda m: m.group(1) + m.group(2).swapcase(), text)


def variant(text: str, kind: str, lang: str, rng: random.Random, vocab: list[str]) -> str:
    if kind.startswith("typo"):
        return typos(text, int(kind[4:]), rng)
    if kind == "edit5":
        return edit(text, lang, 0.05, rng, vocab)
    if kind == "rewrite15":
        return rewrite(text, lang, 0.15, rng, vocab)
    if kind == "tail":
        return text + ("\n——佚名" if lang == "zh" else "\n\t\t-- Anonymous")
    if kind == "width":
        return width(text, lang)
    return perturb(text, kind, lang, rng, vocab)  # truncate, numbers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--fortunes", type=Path, nargs="*", default=[], help="folders of fortune data files")
    parser.add_argument("--html", type=Path, nargs="*", default=[], help="folders of HTML or .page files")
    parser.add_argument("--jsonl", type=Path, nargs="*", default=[], help="JSONL files with a 'text' field")
    parser.add_argument("--per-language", type=int, default=2000, help="originals per language [default: %(default)s]")
    parser.add_argument("--variants", type=int, default=3, help="variants of each original [default: %(default)s]")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    records = []
    for lang, found in sorted(originals(args).items()):
        chosen = rng.sample(found, min(args.per_language, len(found)))
        vocab = [u for _, text in chosen for u in _units(text, lang) if u.strip()]
        for family, (source, text) in enumerate(chosen):
            records.append({"id": f"{lang}:{source}", "text": text, "lang": lang, "family": family, "kind": "original"})
            for kind in rng.sample(KINDS, args.variants):
                records.append({"id": f"{lang}:{source}:{kind}", "text": variant(text, kind, lang, rng, vocab),
                                "lang": lang, "family": family, "kind": kind})
        print(f"{lang}: {len(found)} originals found, {len(chosen)} taken, {len(chosen) * (1 + args.variants)} texts")
    rng.shuffle(records)
    with open(args.out, "w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
