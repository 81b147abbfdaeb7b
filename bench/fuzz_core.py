"""Differential fuzzing of the C core through its Python face, for a bounded time.

Random texts (every plane, combining marks, compatibility forms, multi-character folds, surrogates,
controls, mutations of the previous texts, long runs) in random batches, with random settings and
schemes; random sketch rows for the estimate. Every entry point is compared with the numpy reference:
simhash_many, simhash_and_sketch_many, sketch_many, estimate_many, the raw batch (no fallback)
where the core did not decline, the LSH tables of sketch_pairs (random rows with near copies, random
windows and thresholds, against the reference's deduplicated codes), and add's document path (JSONL chunks of
those texts, escaped and mutated byte by byte, read by pipeline/jsonl.read_chunk in C against python_chunk), and
dedup's exact check (the shingle sets of those lines and texts, native/documents.shingle_sets against
core/shingles.shingle_set of the text the Python path reads, and the Jaccards of pairs of them, jaccard_of_pairs
against jaccard_of_sets), and dedup's kept-set codes (native/codes.py: runs of the sorted window codes of random
rows merged, searched and marked in a bit map, against numpy's stable sort, a brute force and bitwise_or.at).
A difference is written to --failures (JSON lines, made at the first difference: a clean run writes no
file) and counted.

    python bench/fuzz_core.py --seconds 300 [--seed 1] [--failures fuzz_failures.jsonl]

The memory-safety half is bench/native_sanitize.sh (the C harness under ASan and UBSan).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

import numpy as np

from simhash_sqlite import native
from simhash_sqlite.core.fingerprint import (
    reference_simhash_and_sketch_many,
    reference_simhash_many,
    simhash_and_sketch_many,
    simhash_many,
)
from simhash_sqlite.core.settings import FingerprintSettings
from simhash_sqlite.core.shingles import jaccard_of_pairs, jaccard_of_sets, shingle_set
from simhash_sqlite.core.sketch import (
    DEFAULT_SCHEME,
    SCHEME_V1,
    SketchScheme,
    estimate_many,
    reference_estimate_many,
    reference_sketch_many,
    sketch_many,
)
from simhash_sqlite.find.sketch_pairs import _estimated, _windows, _words, candidate_codes, table_pairs
from simhash_sqlite.native import codes as native_codes
from simhash_sqlite.native import documents as native_documents
from simhash_sqlite.pipeline.dedup import sorted_codes
from simhash_sqlite.pipeline.jsonl import RecordRules, parse_record, python_chunk, read_chunk

CHUNK_FIELDS = ("skips", "lines", "starts", "ends", "keys", "lengths", "hashes", "fingerprints", "sketches",
                "short_texts", "failures")  # fmt: skip

RANGES = [(0x20, 0x7E), (0, 0x20), (0x7F, 0xA0), (0x300, 0x36F), (0x4E00, 0x9FFF), (0xFF00, 0xFFEF), (0x3000, 0x303F),
          (0xAC00, 0xD7A3), (0x1100, 0x11FF), (0x1F300, 0x1FAFF), (0xD800, 0xDFFF), (0x80, 0x24F), (0x2000, 0x206F),
          (0xFB00, 0xFDFF), (0x1D400, 0x1D7FF), (0x0590, 0x08FF), (0x0900, 0x0DFF), (0, 0x10FFFF)]  # fmt: skip
SPECIAL = "ßİŉﬁﬀ…\u00a0\u2028\x85\x1c\u3000ＡＺａｚ０\ufdfa\u212a\u2126ǅ\u0345\u1e9eΣς"
SCHEMES = [DEFAULT_SCHEME, SCHEME_V1, SketchScheme(bins=240, bits=2), SketchScheme(bins=30, bits=16, size_bits=16),
           SketchScheme(bins=120, bits=4, size_bits=16), SketchScheme(bins=3, bits=8),
           SketchScheme(bins=8, bits=1)]  # fmt: skip


def random_text(rng: random.Random, previous: list[str]) -> str:
    kind = rng.random()
    if previous and kind < 0.2:  # a mutation of an earlier text
        text = list(rng.choice(previous))
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(len(text) + 1)
            text[at:at] = rng.choice(SPECIAL + "abc 中")
        return "".join(text)
    length = rng.choice([0, 1, 2, 4, 5, 6, 12, 40, 200, 3000])
    out = []
    for _ in range(length):
        if rng.random() < 0.15:
            out.append(rng.choice(SPECIAL))
        else:
            lo, hi = rng.choice(RANGES)
            out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def outcome(function, *args):
    try:
        return function(*args)
    except Exception as exc:  # noqa: BLE001 - compared with what the reference raises
        return type(exc).__name__


def same(a, b) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.tobytes() == b.tobytes()
    return a == b


def _pairs(parts) -> dict[tuple[int, int], bytes]:
    return {(a, b): np.float64(e).tobytes() for x, y, z in parts for a, b, e in zip(x.tolist(), y.tolist(), z.tolist())}


def lsh_tables(lib, rng: random.Random, scheme: SketchScheme, fail) -> int:
    """sketch_pairs' tables by the core against the reference on random rows, a third near copies."""
    n = rng.randrange(2, 200)
    rows = np.frombuffer(rng.randbytes(n * scheme.nbytes), dtype=np.uint8).reshape(n, -1).copy()
    for i in range(n // 3):
        rows[n - 1 - i] = rows[i]
        flips = np.frombuffer(rng.randbytes(scheme.bin_bytes), dtype=np.uint8) & np.uint8(rng.choice([0, 1, 17, 255]))
        rows[n - 1 - i, : scheme.bin_bytes] ^= flips
    nbits = scheme.bins * scheme.bits
    width, step = rng.randrange(1, min(28, nbits) + 1), rng.randrange(1, 13)
    if not _windows(nbits, width, step):
        return 0
    rows = np.unique(rows, axis=0)  # the tables see distinct rows (sketch_pairs folds copies first)
    words = _words(rows[:, : scheme.bin_bytes])
    threshold = rng.choice([0.0, 0.3, 0.5, 0.7, 0.9, 1.0])
    expected = _pairs(_estimated(candidate_codes(words, nbits, width, step), len(rows), len(rows), rows, None,
                                 threshold, scheme))  # fmt: skip
    found = _pairs(table_pairs(lib, rows, None, words, nbits, threshold, scheme, width, step, rng.choice([1, 2])))
    if found != expected:
        fail("lsh tables", rows=rows.tobytes().hex(), scheme=scheme, width=width, step=step, threshold=threshold)
    return 1


def jsonl_chunk(rng: random.Random, texts: list[str]) -> bytes:
    """JSONL lines of these texts, fields and escapes drawn at random, then mutated: bytes changed, cut short."""
    lines = []
    for i, text in enumerate(texts):
        record = {"id": rng.choice([str(i), i, f"k\\u{i:04x}", None]), "text": text}
        if rng.random() < 0.3:
            record["extra"] = rng.choice([[1, {"a": None}], 1.5e300, "x" * rng.randrange(50), True])
        line = json.dumps(record, ensure_ascii=rng.random() < 0.5)
        if rng.random() < 0.1:
            line = line.replace('"text"', '"te\\u0078t"')
        lines.append(line.encode("utf-8", "surrogatepass"))
    data = bytearray(b"\n".join(lines))
    for _ in range(rng.choice([0, 0, 0, 1, 3])):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    if data and rng.random() < 0.1:
        del data[rng.randrange(len(data)) :]
    return bytes(data)


def exact_sets(lib, rng: random.Random, texts: list[str], data: bytes, fail) -> int:
    """dedup's exact check's sets in C (shingle_sets) of the chunk's lines and of the texts against the Python
    path's (parse_record, then shingle_set; a text over whole_most characters out of reach); how many compared."""
    lines = data.splitlines(keepends=True)
    items = [(native_documents.SET_LINE, line) for line in lines]
    items += [(native_documents.SET_TEXT, text.encode("utf-8", "surrogatepass")) for text in texts]
    rng.shuffle(items)
    fields = native_documents.LineFields(b"text", b"id", 1 << 27, rng.choice([1 << 25, 40]))
    made = native_documents.shingle_sets(lib, [d for _, d in items], [k for k, _ in items], fields, 5)
    if made is None:
        fail("shingle_sets refused", data=data.hex())
        return 0
    rules = RecordRules()
    for (kind, raw), status, ours in zip(items, *made):
        if status == native_documents.SET_PYTHON:
            continue
        as_text = kind == native_documents.SET_TEXT
        text = raw.decode("utf-8", "surrogatepass") if as_text else parse_record(raw, rules)[2]
        expected = None if text is None or len(text) > fields.whole_most else shingle_set(text)
        if text is None or (status == native_documents.SET_LONG) != (expected is None) or (
                expected is not None and not np.array_equal(ours, expected)):
            fail("shingle_sets", raw=raw.hex(), kind=kind, status=status)
    sets = [found for found in made[1] if found is not None]
    if sets:
        a = [rng.choice(sets) for _ in range(rng.randrange(1, 10))]
        b = [rng.choice(sets) for _ in a]
        if jaccard_of_pairs(a, b).tolist() != [jaccard_of_sets(x, y) for x, y in zip(a, b)]:
            fail("jaccard_of_pairs", a=[x.tolist() for x in a], b=[y.tolist() for y in b])
    return len(items)


def kept_codes(rng: random.Random, fail) -> int:
    """dedup's kept-set codes in C: two runs of sorted_codes of random rows (some near copies, so that codes are
    shared) merged as KeptSketches merges them, one searched for the other's codes, and a bit map marked; how many
    codes compared."""
    rows = np.frombuffer(rng.randbytes(rng.randrange(1, 40) * DEFAULT_SCHEME.nbytes), dtype=np.uint8)
    rows = rows.reshape(-1, DEFAULT_SCHEME.nbytes).copy()
    for i in range(1, len(rows)):
        if rng.random() < 0.3:
            rows[i, : DEFAULT_SCHEME.bin_bytes] = rows[rng.randrange(i), : DEFAULT_SCHEME.bin_bytes]
    cut = rng.randrange(len(rows) + 1)
    older, newer = sorted_codes(rows[:cut]), sorted_codes(rows[cut:])
    expected = np.sort(np.concatenate((older, newer + np.uint64(cut))), kind="stable")
    merged = np.empty(len(expected) + rng.randrange(3), dtype=np.uint64)
    in_place = rng.random() < 0.5  # older at the start of the output, merged where it lies
    if in_place:
        merged[: len(older)] = older
    done = native_codes.merge_into(merged, merged[: len(older)] if in_place else older, newer, cut)
    if not done or not np.array_equal(merged[: len(expected)], expected):
        fail("codes merged", older=older.tolist(), newer=newer.tolist(), add=cut, in_place=in_place)
    found = native_codes.found(older, newer, 32)
    high = np.uint64(0xFFFFFFFF00000000)
    brute = [(int(y & np.uint64(0xFFFFFFFF)), int(x & np.uint64(0xFFFFFFFF))) for y in newer for x in older
             if x & high == y & high]
    if found is None or list(zip(found[0].tolist(), found[1].tolist())) != brute:
        fail("codes found", older=older.tolist(), newer=newer.tolist())
    bits = rng.randrange(3, 24)
    seen, reference = np.zeros(1 << (bits - 3), dtype=np.uint8), np.zeros(1 << (bits - 3), dtype=np.uint8)
    slots = expected >> np.uint64(63 - bits)
    np.bitwise_or.at(reference, (slots >> np.uint64(3)).astype(np.intp), (1 << (slots & np.uint64(7))).astype(np.uint8))
    if not native_codes.marked(seen, expected, bits) or not np.array_equal(seen, reference):
        fail("codes marked", codes=expected.tolist(), bits=bits)
    return len(expected)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--failures", default="fuzz_failures.jsonl")
    args = parser.parse_args()
    lib = native.core()
    if lib is None:
        print(f"the C core is not in use: {native.describe()}", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    previous: list[str] = []
    counts = {"batches": 0, "texts": 0, "declined": 0, "estimates": 0, "tables": 0, "chunks": 0, "sets": 0,
              "codes": 0, "failures": 0}
    start = time.monotonic()
    written: list = []  # the failures file, opened at the first failure: a clean run leaves none behind

    def fail(what: str, **data) -> None:
        counts["failures"] += 1
        if not written:
            written.append(open(args.failures, "w", encoding="utf-8"))  # noqa: SIM115 (closed below)
        written[0].write(json.dumps({"what": what, **data}, default=repr) + "\n")
        written[0].flush()

    while time.monotonic() - start < args.seconds:
        batch = [random_text(rng, previous) for _ in range(rng.randrange(1, 10))]
        previous = (previous + batch)[-50:]
        settings = FingerprintSettings(ngram=rng.choice([1, 2, 3, 4, 5, 5, 5, 8, 16]),
                                       weights=rng.choice(["binary", "count", "log"]))  # fmt: skip
        scheme = rng.choice(SCHEMES)
        checks = [
            ("simhash_many", simhash_many, reference_simhash_many, (batch, settings)),
            ("simhash_and_sketch_many", simhash_and_sketch_many, reference_simhash_and_sketch_many,
             (batch, settings, scheme)),
            ("sketch_many", sketch_many, reference_sketch_many, (batch, scheme)),
        ]  # fmt: skip
        for name, mine, reference, call in checks:
            got, expected = outcome(mine, *call), outcome(reference, *call)
            if not same(got, expected):
                fail(name, texts=batch, settings=settings, scheme=scheme)
        values, rows, status = native.batch(
            lib, batch, ngram=settings.ngram, weights=settings.weights, scheme=scheme
        )
        whole = outcome(reference_simhash_and_sketch_many, batch, settings, scheme)
        for i, code in enumerate(status.tolist()):
            if code & native.DECLINED:
                counts["declined"] += 1
                continue
            # (where one text of the batch makes the reference raise, each text on its own)
            alone = whole if not isinstance(whole, str) else None
            expected = (alone[0][i], alone[1][i]) if alone else None
            if expected is None:
                one = outcome(reference_simhash_and_sketch_many, [batch[i]], settings, scheme)
                if isinstance(one, str):
                    fail("raw core computed what the reference refuses", text=batch[i], error=one)
                    continue
                expected = (one[0][0], one[1][0])
            fingerprint = int(values[i]) if code & native.HAS_FINGERPRINT else None
            blob = rows[i].tobytes() if code & native.HAS_SKETCH else None
            if (fingerprint, blob) != expected:
                fail("raw core", text=batch[i], settings=settings, scheme=scheme)
        pairs = rng.randrange(1, 20)
        raw = np.frombuffer(rng.randbytes(2 * pairs * scheme.nbytes), dtype=np.uint8).reshape(2 * pairs, -1)
        a, b = raw[:pairs], raw[pairs:].copy()
        if rng.random() < 0.5:
            b[:, : scheme.bin_bytes] = a[:, : scheme.bin_bytes]
        if not same(estimate_many(a, b, scheme), reference_estimate_many(a, b, scheme)):
            fail("estimate_many", a=a.tobytes().hex(), b=b.tobytes().hex(), scheme=scheme)
        if counts["batches"] % 10 == 0:
            counts["tables"] += lsh_tables(lib, rng, scheme, fail)
        data = jsonl_chunk(rng, batch)
        rules = RecordRules(settings=settings, scheme=scheme,
                            short_texts=rng.random() < 0.7, stream_over=rng.choice([None, 50, 1 << 25]))
        ours, reference = outcome(read_chunk, data, rules), outcome(python_chunk, data, rules)
        if isinstance(ours, str) or isinstance(reference, str):
            if ours != reference:
                fail("read_chunk", data=data.hex(), settings=settings, scheme=scheme, ours=ours, reference=reference)
        elif any(getattr(ours, name) != getattr(reference, name) for name in CHUNK_FIELDS):
            fail("read_chunk", data=data.hex(), settings=settings, scheme=scheme)
        counts["chunks"] += 1
        counts["sets"] += exact_sets(native_documents.library(), rng, batch, data, fail)
        counts["codes"] += kept_codes(rng, fail)
        counts["batches"] += 1
        counts["texts"] += len(batch)
        counts["estimates"] += pairs
    for handle in written:
        handle.close()
    print(json.dumps({**counts, "seconds": round(time.monotonic() - start), "core": native.describe()}))
    return 1 if counts["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
