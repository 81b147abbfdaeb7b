"""Generate the core's Unicode tables (a C header) from this interpreter's unicodedata.

Run at build time by hatch_build.py with the interpreter that builds the package, so the tables equal
the unicodedata of the Python that will use them (the version is recorded in the library and checked
at import: simhash_sqlite.native.core). One record per code point, 32 bits:

    bits 0..16   the case fold as a signed 17-bit delta to the code point (0x20 for all whitespace)
    bit 17       SPACE   the folded character is whitespace (str.isspace)
    bit 18       ALNUM   the folded character is a letter or digit (str.isalnum, what [^\\W_] matches)
    bit 19       MULTI   it case-folds to several characters (listed apart: shc_fold_*)
    bit 20       UNSAFE  NFKC may change a text holding it: NFKC(c) != c, or c can compose with a
                         preceding character (the second of a canonical pair, Hangul V and T jamo)
    bit 28       MAPPED  NFKC changes it to one character x that NFKC leaves alone and that composes
                         with nothing before it: the record is then x's (its fold, flags and class),
                         the fold's delta taken from c, so the core's one pass treats c as x
    bit 29       EXPANDS NFKC changes it to several characters, each one NFKC leaves alone, that composes
                         with nothing before it and has combining class 0 (an ellipsis, a ligature):
                         the core's one pass takes them from the NFKC list below
    bit 30       AFTER   a character whose only trouble is that it composes with some preceding starters:
                         NFKC leaves it alone and it has no canonical decomposition (vowel signs of
                         Bengali or Tamil, the nukta, combining accents): blocked from the last starter,
                         or after one without a decomposition with which it forms no composite
                         (shc_pairs), it changes nothing
    bit 31       DECOMP  it has a canonical decomposition
    bits 21..27  the rank of its canonical combining class among all classes (0 for class 0), which
                 orders as the class does

as a two-stage table: stage1[cp >> 8] picks a block of 256 records (identical blocks shared).

Beside it, NFKC(c) of every code point NFKC changes (sorted code points, offsets into their
replacements): replacing each such character of a text by it and finding the result certainly
normalized gives NFKC of the text (docs/native.md says why).
Usage: python gen_unicode_tables.py OUT.h
"""

from __future__ import annotations

import sys
import unicodedata

SPACE, ALNUM, MULTI, UNSAFE, MAPPED, EXPANDS = 1 << 17, 1 << 18, 1 << 19, 1 << 20, 1 << 28, 1 << 29
AFTER, DECOMP = 1 << 30, 1 << 31
DELTA_BITS = 17
LIMIT = 0x110000


def second_elements() -> set[int]:
    """Code points that can compose with a preceding character (NFC/NFKC quick check Maybe, or more)."""
    out = set()
    for c in range(LIMIT):
        parts = unicodedata.decomposition(chr(c)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            out.add(int(parts[1], 16))
    for c in range(0x1100, 0x1200):  # conjoining jamo: L + V and LV + T compose algorithmically
        for base in ("\u1100", "\uac00"):
            if len(unicodedata.normalize("NFC", base + chr(c))) == 1:
                out.add(c)
    return out


def record(c: int, seconds: set[int], ranks: dict[int, int]) -> int:
    ch = chr(c)
    if 0xD800 <= c <= 0xDFFF:  # never reached: the decoder declines surrogates
        return MULTI | UNSAFE
    folded = ch.casefold()
    flags = 0
    if len(folded) != 1:
        flags |= MULTI
        target = c
    else:
        target = ord(folded)
        if folded.isspace():
            flags |= SPACE
            target = 0x20
        if folded.isalnum():
            flags |= ALNUM
    if unicodedata.normalize("NFKC", ch) != ch or c in seconds:
        flags |= UNSAFE
    delta = target - c
    if not -(1 << (DELTA_BITS - 1)) <= delta < 1 << (DELTA_BITS - 1):
        raise SystemExit(f"case fold of U+{c:04X} too far for a {DELTA_BITS}-bit delta")
    parts = unicodedata.decomposition(ch).split()
    if parts and not parts[0].startswith("<"):
        flags |= DECOMP
    elif (
        c in seconds
        and unicodedata.normalize("NFKC", ch) == ch
        and not 0x1100 <= c <= 0x11FF  # conjoining jamo compose algorithmically: not in the pairs
    ):
        flags |= AFTER
    return (delta & ((1 << DELTA_BITS) - 1)) | flags | (ranks[unicodedata.combining(ch)] << 21)


def main(out_path: str) -> None:
    seconds = second_elements()
    classes = sorted({unicodedata.combining(chr(c)) for c in range(LIMIT)})
    if len(classes) > 128:
        raise SystemExit(f"{len(classes)} combining classes do not fit 7 bits")
    ranks = {value: rank for rank, value in enumerate(classes)}  # class 0 is rank 0
    records = [record(c, seconds, ranks) for c in range(LIMIT)]
    mask = (1 << DELTA_BITS) - 1
    for c in range(LIMIT):
        if 0xD800 <= c <= 0xDFFF:
            continue
        mapped = unicodedata.normalize("NFKC", chr(c))
        if mapped == chr(c) or len(mapped) != 1:
            continue
        x = ord(mapped)
        target = records[x]
        if target & (UNSAFE | MULTI | MAPPED):
            continue
        folded = x + ((target & mask) ^ (1 << (DELTA_BITS - 1))) - (1 << (DELTA_BITS - 1))
        delta = folded - c
        if -(1 << (DELTA_BITS - 1)) <= delta < 1 << (DELTA_BITS - 1):
            records[c] = (target & ~mask) | (delta & mask) | MAPPED
    for c in range(LIMIT):
        if 0xD800 <= c <= 0xDFFF or records[c] & MAPPED:
            continue
        mapped = unicodedata.normalize("NFKC", chr(c))
        if len(mapped) < 2:
            continue
        plain = all(not records[ord(x)] & (UNSAFE | MULTI | MAPPED) and not unicodedata.combining(x) for x in mapped)
        if plain:
            records[c] |= EXPANDS
    blocks: dict[tuple[int, ...], int] = {}
    stage1 = []
    for start in range(0, LIMIT, 256):
        block = tuple(records[start : start + 256])
        stage1.append(blocks.setdefault(block, len(blocks)))
    lines = [
        "/* Generated by gen_unicode_tables.py from Python's unicodedata: do not edit. */",
        f'#define SHC_UNIDATA_VERSION "{unicodedata.unidata_version}"',
        f"#define SHC_STAGE1_SIZE {len(stage1)}",
        f"#define SHC_STAGE2_BLOCKS {len(blocks)}",
        "static const uint16_t shc_stage1[SHC_STAGE1_SIZE] = {",
    ]
    for i in range(0, len(stage1), 16):
        lines.append("    " + ", ".join(map(str, stage1[i : i + 16])) + ",")
    lines.append("};")
    lines.append("static const uint32_t shc_stage2[SHC_STAGE2_BLOCKS * 256] = {")
    for block in blocks:
        for i in range(0, 256, 8):
            lines.append("    " + ", ".join(f"0x{v:08x}u" for v in block[i : i + 8]) + ",")
    lines.append("};")
    # ASCII as the core's branch-free ASCII loop reads it: the unit (whitespace already a space), bit 8
    # SPACE, bit 9 ALNUM. It relies on ASCII needing nothing else (no NFKC change, class 0, no composition).
    ascii_units = []
    for c in range(128):
        if records[c] & ~(mask | SPACE | ALNUM):
            raise SystemExit(f"U+{c:04X} needs more than the ASCII loop does")
        unit = c + ((records[c] & mask) ^ (1 << (DELTA_BITS - 1))) - (1 << (DELTA_BITS - 1))
        ascii_units.append(unit | (0x100 if records[c] & SPACE else 0) | (0x200 if records[c] & ALNUM else 0))
        # ... and the core's 16-byte ASCII loop (ascii16) has these rules written out: they must agree
        space = 9 <= c <= 13 or 0x1C <= c <= 0x20
        folded = 0x20 if space else c + 0x20 if 0x41 <= c <= 0x5A else c
        rule = folded | (0x100 if space else 0) | (0x200 if chr(folded).isascii() and chr(folded).isalnum() else 0)
        if ascii_units[-1] != rule:
            raise SystemExit(f"U+{c:04X} is not as ascii16 in simhash_core.c takes it")
    lines.append("static const uint16_t shc_ascii[128] = {")
    lines.extend("    " + ", ".join(f"0x{v:03x}" for v in ascii_units[i : i + 16]) + "," for i in range(0, 128, 16))
    lines.append("};")
    changed = [c for c in range(LIMIT) if not 0xD800 <= c <= 0xDFFF and unicodedata.normalize("NFKC", chr(c)) != chr(c)]
    data: list[int] = []
    starts = []
    for c in changed:
        starts.append(len(data))
        data.extend(map(ord, unicodedata.normalize("NFKC", chr(c))))
    starts.append(len(data))
    lines.append(f"#define SHC_NFKC_COUNT {len(changed)}")
    lines.append("static const uint32_t shc_nfkc_cp[SHC_NFKC_COUNT] = {")
    lines.extend("    " + ", ".join(map(str, changed[i : i + 16])) + "," for i in range(0, len(changed), 16))
    lines.append("};")
    lines.append("static const uint32_t shc_nfkc_at[SHC_NFKC_COUNT + 1] = {")
    lines.extend("    " + ", ".join(map(str, starts[i : i + 16])) + "," for i in range(0, len(starts), 16))
    lines.append("};")
    lines.append(f"static const uint32_t shc_nfkc_data[{max(1, len(data))}] = {{")
    lines.extend("    " + ", ".join(map(str, data[i : i + 16])) + "," for i in range(0, len(data), 16))
    lines.append("};")
    # Pairs (first, second) that compose (a primary composite), for the AFTER characters' second.
    pairs = set()
    for c in range(LIMIT):
        if 0xD800 <= c <= 0xDFFF:
            continue
        parts = unicodedata.decomposition(chr(c)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            first, second = int(parts[0], 16), int(parts[1], 16)
            if records[second] & AFTER and unicodedata.normalize("NFC", chr(first) + chr(second)) == chr(c):
                pairs.add(first << 21 | second)
    pairs_sorted = sorted(pairs)
    lines.append(f"#define SHC_PAIR_COUNT {len(pairs_sorted)}")
    lines.append(f"static const uint64_t shc_pairs[{max(1, len(pairs_sorted))}] = {{")
    lines.extend(
        "    " + ", ".join(f"{v}ull" for v in pairs_sorted[i : i + 8]) + "," for i in range(0, len(pairs_sorted), 8)
    )
    lines.append("};")
    # Case folds of several characters (MULTI): each folded character folds to itself, so the core
    # takes its flags from its own record.
    multi = [c for c in range(LIMIT) if not 0xD800 <= c <= 0xDFFF and len(chr(c).casefold()) > 1]
    fold_data: list[int] = []
    fold_starts: list[int] = []
    for c in multi:
        fold = chr(c).casefold()
        if any(x.casefold() != x for x in fold):
            raise SystemExit(f"the case fold of U+{c:04X} is not stable under case folding")
        fold_starts.append(len(fold_data))
        fold_data.extend(map(ord, fold))
    fold_starts.append(len(fold_data))
    lines.append(f"#define SHC_FOLD_COUNT {len(multi)}")
    lines.append("static const uint32_t shc_fold_cp[SHC_FOLD_COUNT] = {")
    lines.extend("    " + ", ".join(map(str, multi[i : i + 16])) + "," for i in range(0, len(multi), 16))
    lines.append("};")
    lines.append("static const uint32_t shc_fold_at[SHC_FOLD_COUNT + 1] = {")
    lines.extend("    " + ", ".join(map(str, fold_starts[i : i + 16])) + "," for i in range(0, len(fold_starts), 16))
    lines.append("};")
    lines.append(f"static const uint32_t shc_fold_data[{max(1, len(fold_data))}] = {{")
    lines.extend("    " + ", ".join(map(str, fold_data[i : i + 16])) + "," for i in range(0, len(fold_data), 16))
    lines.append("};")
    # Full NFKC for the texts the one pass cannot take (nfkc.h): NFKD of every code point it changes (Hangul
    # syllables apart: they decompose by arithmetic), and every primary composite, (first << 21 | second)
    # sorted, beside what it composes to (Hangul LV and LVT apart, by arithmetic too).
    decomposed = [
        c for c in range(LIMIT)
        if not 0xD800 <= c <= 0xDFFF and not 0xAC00 <= c <= 0xD7A3 and unicodedata.normalize("NFKD", chr(c)) != chr(c)
    ]  # fmt: skip
    nfkd_data: list[int] = []
    nfkd_starts: list[int] = []
    for c in decomposed:
        nfkd_starts.append(len(nfkd_data))
        nfkd_data.extend(map(ord, unicodedata.normalize("NFKD", chr(c))))
    nfkd_starts.append(len(nfkd_data))
    lines.append(f"#define SHC_NFKD_COUNT {len(decomposed)}")
    lines.append(f"#define SHC_NFKD_LONGEST {max(b - a for a, b in zip(nfkd_starts, nfkd_starts[1:]))}")
    for name, values in (("shc_nfkd_cp", decomposed), ("shc_nfkd_at", nfkd_starts), ("shc_nfkd_data", nfkd_data)):
        lines.append(f"static const uint32_t {name}[{len(values)}] = {{")
        lines.extend("    " + ", ".join(map(str, values[i : i + 16])) + "," for i in range(0, len(values), 16))
        lines.append("};")
    composites = {}
    for c in range(LIMIT):
        if 0xD800 <= c <= 0xDFFF or 0xAC00 <= c <= 0xD7A3:
            continue
        parts = unicodedata.decomposition(chr(c)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            first, second = int(parts[0], 16), int(parts[1], 16)
            if unicodedata.normalize("NFC", chr(first) + chr(second)) == chr(c):
                composites[first << 21 | second] = c
    keys = sorted(composites)
    lines.append(f"#define SHC_COMPOSE_COUNT {len(keys)}")
    lines.append(f"static const uint64_t shc_compose_key[{max(1, len(keys))}] = {{")
    lines.extend("    " + ", ".join(f"{v}ull" for v in keys[i : i + 8]) + "," for i in range(0, len(keys), 8))
    lines.append("};")
    lines.append(f"static const uint32_t shc_compose_to[{max(1, len(keys))}] = {{")
    targets = [composites[v] for v in keys]
    lines.extend("    " + ", ".join(map(str, targets[i : i + 16])) + "," for i in range(0, len(targets), 16))
    lines.append("};")
    with open(out_path, "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
