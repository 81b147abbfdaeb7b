"""The texts of tests/golden/sketches.jsonl, made again from fixed seeds (the file holds their digests and
sketches, not the texts). Run this module to write the file: only when a sketch format change is meant
(a new SKETCH_VERSION), since stored sketches must stay comparable."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden" / "sketches.jsonl"
# Schemes beside the default, so every field width's packing and small bin counts are pinned too.
SCHEMES = [(960, 1), (480, 1), (240, 2), (120, 4), (60, 8), (30, 16), (3, 8), (8, 1)]

_WORDS = ("the of and to in is for on that with as by this are from it be an or at not list file "
          "value return function module class object string default index python sqlite near duplicate").split()
_HAN = [chr(c) for c in range(0x4E00, 0x4E00 + 600)]
_PUNCT = list("!?.,;:-_()[]{}<>/\\|@#$%^&*+=~`'\" \n\t。，、；：！？（）《》")
_FIXED = ["", " ", "\n\t ", "!!! ...", "。，、", "x", "ab", "abcd", "abcde", "abcdef", "Hello   World\n", "hello world",
          "ＡＢＣ　ａｂｃ", "近", "近似", "近似重复", "近似重复检", "近似重复检测", "12345", "1", "a b c d e f g",
          "The quick brown fox jumps over the lazy dog.", "近似重复检测：同一段文字的两个副本。", "é" * 9, "\u0301abc"]


def _english(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) + (str(rng.randrange(100)) if rng.random() < 0.2 else "") for _ in range(words))


def _chinese(rng: random.Random, characters: int) -> str:
    return "".join(rng.choice(_HAN) if rng.random() < 0.9 else rng.choice("，。、 ") for _ in range(characters))


def _either(rng: random.Random, words: tuple[int, int], characters: tuple[int, int]) -> str:
    return _english(rng, rng.randrange(*words)) if rng.random() < 0.5 else _chinese(rng, rng.randrange(*characters))


def golden_texts() -> list[str]:
    """About 400 texts: fixed ones, then short (a few shingles: most bins empty), medium and long, English,
    Chinese, mixed, and texts with no letter or digit."""
    rng = random.Random(20261125)
    texts = list(_FIXED)
    for _ in range(120):  # short: 1 to 12 shingles
        texts.append(_either(rng, (1, 4), (1, 16)))
    for _ in range(120):  # medium: tens to hundreds of shingles
        texts.append(_either(rng, (5, 120), (16, 600)))
    for _ in range(60):  # long: thousands (few empty bins or none)
        texts.append(_either(rng, (400, 3000), (1000, 8000)))
    for _ in range(40):  # mixed
        texts.append(_english(rng, rng.randrange(1, 60)) + _chinese(rng, rng.randrange(1, 60)))
    for _ in range(30):  # no letter or digit
        texts.append("".join(rng.choice(_PUNCT) for _ in range(rng.randrange(0, 40))))
    return texts


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def golden_rows() -> list[dict]:
    from simhash_sqlite.core.sketch import SketchScheme, sketch_many

    texts = golden_texts()
    out = []
    for bins, bits in SCHEMES:
        scheme = SketchScheme(bins=bins, bits=bits)
        # The default scheme for every text, the others for every fourth (their packing and small bins).
        chosen = texts if (bins, bits) == SCHEMES[0] else texts[::4]
        rows, present = sketch_many(chosen, scheme)
        for text, row, there in zip(chosen, rows, present.tolist()):
            hexed = row.tobytes().hex() if there else None
            out.append({"bins": bins, "bits": bits, "text": digest(text), "sketch": hexed})
    return out


if __name__ == "__main__":
    GOLDEN.write_text("".join(json.dumps(row) + "\n" for row in golden_rows()), encoding="utf-8")
    print(f"wrote {GOLDEN}")
