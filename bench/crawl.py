"""A synthetic crawl for the all-pairs benchmarks: mostly unrelated pages, a tenth in near-duplicate families.

    .venv/bin/python bench/crawl.py CORPUS.jsonl ... --n 100000 --out crawl.jsonl

Pages are made of real text pieces (sentences and lines of the given JSONL corpora, cut at 400
characters): a page draws pieces of one language at random until it reaches a length drawn
log-uniformly from 150 to 6,000 characters. Of every 60 pages, the first 6 are a family: an original
page and 5 copies, each of a kind drawn from KINDS (mirror: identical; boilerplate: the same text in
another site's header and footer; numbers: every number and a view counter changed; edit2: 2% of the
words or characters replaced, inserted or deleted; truncate: cut to 70-95%; rewrite40: 40% of the
phrases rewritten, a different text). Perturbations are bench/quality.py's. Every page is a pure
function of (seed, its number), so a benchmark can regenerate any page instead of keeping all texts.
Output: JSONL {"id", "text", "family", "kind"} (family -1 for unrelated pages).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
from collections.abc import Iterator
from functools import cached_property

from common import print_machine
from quality import _units, language, perturb

KINDS = ("mirror", "boilerplate", "numbers", "edit2", "truncate", "rewrite40")
BLOCK = 60  # pages per block; the first FAMILY of each block are one family
FAMILY = 6
LENGTHS = (150, 6000)
_PIECE = re.compile(r"(?<=[。！？!?.])\s+|(?<=[。！？])|\n+")


class Crawl:
    def __init__(self, paths: list[str], seed: int = 11) -> None:
        self.seed = seed
        pieces: dict[str, list[str]] = {"en": [], "zh": []}
        for path in paths:
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    for piece in _PIECE.split(json.loads(line).get("text") or ""):
                        piece = piece.strip()[:400]
                        if len(piece) >= 10:
                            pieces[language(piece)].append(piece)
        self.pieces = {lang: p for lang, p in pieces.items() if p}
        self.langs = sorted(self.pieces)

    @cached_property
    def vocab(self) -> dict[str, list[str]]:
        rng = random.Random(self.seed)
        return {lang: [u for p in rng.sample(p, min(2000, len(p))) for u in _units(p, lang) if u.strip()]
                for lang, p in self.pieces.items()}

    def _page(self, rng: random.Random) -> tuple[str, str]:
        lang = rng.choice(self.langs)
        target = math.exp(rng.uniform(math.log(LENGTHS[0]), math.log(LENGTHS[1])))
        parts, size = [], 0
        while size < target:
            piece = rng.choice(self.pieces[lang])
            parts.append(piece)
            size += len(piece) + 1
        return lang, ("\n" if rng.random() < 0.5 else " ").join(parts)[: int(target)]

    def family_of(self, i: int) -> int:
        return i // BLOCK if i % BLOCK < FAMILY else -1

    def page(self, i: int) -> tuple[str, int, str]:
        """(text, family or -1, kind) of page i."""
        block, offset = divmod(i, BLOCK)
        if offset >= FAMILY:
            return self._page(random.Random(f"{self.seed}/{i}"))[1], -1, "unrelated"
        lang, original = self._page(random.Random(f"{self.seed}/{block}/original"))
        if offset == 0:
            return original, block, "original"
        kind = random.Random(f"{self.seed}/{block}/kinds").choices(KINDS, k=FAMILY - 1)[offset - 1]
        if kind == "mirror":
            return original, block, kind
        return perturb(original, kind, lang, random.Random(f"{self.seed}/{i}"), self.vocab[lang]), block, kind

    def pages(self, n: int) -> Iterator[tuple[str, int, str]]:
        return (self.page(i) for i in range(n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="+", help="JSONL corpora with a 'text' field (the pieces)")
    parser.add_argument("--n", type=int, default=100_000, help="pages [default: %(default)s]")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", required=True, help="JSONL file to write")
    args = parser.parse_args()
    print_machine()
    crawl = Crawl(args.jsonl, args.seed)
    with open(args.out, "w", encoding="utf-8") as out:
        for i, (text, family, kind) in enumerate(crawl.pages(args.n)):
            page = {"id": str(i), "text": text, "family": family, "kind": kind}
            out.write(json.dumps(page, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
