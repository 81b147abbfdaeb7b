"""Fuzz the loadable SQLite extension's SQL entry points under AddressSanitizer and UBSan, for a bounded time.

    .venv/bin/python bench/fuzz_extension.py --seconds 300
    .venv/bin/python bench/fuzz_extension.py --seconds 60 --seed 7 --keep out/   # keep the failing batch

Builds simhash_sqlite/native/sqlite_extension.c (with the core, and zlib: short texts' exact data) with
-fsanitize=address,undefined and no recovery, and bench/extension_host.c, a small C host linked with the
system's libsqlite3 (the stock sqlite3 shell is not instrumented). Then, until the time is up, batches of
random statements run in the host against a fresh copy of one of several databases: a real index (texts
stored or not), one whose sketches are random blobs of any length, tampered simhash_meta settings,
missing tables, a `documents` of the wrong shape and types, one whose short texts' exact data
(documents.short_text, core/short_texts.py) is hostile: truncated, bit-flipped, of other encodings, not
deflate, zip bombs to the read limit and far past it, streams padded with empty stored blocks, valid
deflate of invalid UTF-8 / UTF-16. Statements call every function with random arguments (every SQL type,
0 to 3 of them, edge integers, invalid UTF-8, huge texts, blobs of any length), simhash_near with random
arguments, hidden columns, joins and orders, and now and then change the file under it (simhash_meta
rewritten with random JSON, short_texts and store_text tampered, sketches and short texts' data replaced,
tables dropped), so the settings cache is exercised too; most queries are short texts, so the exact check of short pairs
(inflate, decode, Jaccard) runs on every candidate that keeps data.

An SQL error is the expected answer to bad input; a sanitizer report, a crash or a leak (LeakSanitizer at
the host's exit) stops the run, prints the report and keeps the batch that caused it. Needs a C compiler,
libsqlite3-dev, zlib.h (zlib1g-dev) and the compiler's sanitizer runtimes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "simhash_sqlite" / "native"
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g", "-O1"]
FUNCTIONS = ("simhash", "hamming", "simhash_similarity", "simhash_block", "simhash_hex", "simhash_from_hex")


# --coverage: the same run without sanitizers, the extension built for gcov, and the lines each function of
# sqlite_extension.c ran printed at the end (how much of the short-text check the statements reach).
COVERAGE = ["--coverage", "-O0", "-g"]
COVERED = ("short_text_codes", "is_short_text", "shingles_of_codes", "utf8_codes", "near_rows", "near_filter",
           "read_settings")


def build(work: Path, coverage: bool = False) -> tuple[Path, Path]:
    cc = os.environ.get("CC", "cc")
    tables = work / "_unicode_tables.h"
    subprocess.run([sys.executable, str(NATIVE / "gen_unicode_tables.py"), str(tables)], check=True)
    subprocess.run([sys.executable, str(NATIVE / "gen_rule_constants.py"), str(tables.parent / "_rule_constants.h")],
                   check=True)
    extension = work / "simhash.so"
    flags = COVERAGE if coverage else SANITIZE
    subprocess.run(
        [cc, *flags, "-std=c99", "-fPIC", "-shared", "-ffp-contract=off", "-DSIMHASH_HAVE_ZLIB", f"-I{work}",
         f"-I{NATIVE}", f"-I{NATIVE / 'vendor' / 'sqlite'}", "-o", str(extension), str(NATIVE / "sqlite_extension.c"),
         str(NATIVE / "simhash_core.c"),
         "-lm", "-lz"],
        check=True,
    )
    host = work / "host"
    host_flags = ["-O1", "-g"] if coverage else SANITIZE
    subprocess.run([cc, *host_flags, "-o", str(host), str(ROOT / "bench" / "extension_host.c"), "-lsqlite3"],
                   check=True)
    return extension, host


def databases(work: Path, seed: int) -> list[Path]:
    """The databases the statements run against (each batch on a fresh copy)."""
    sys.path.insert(0, str(ROOT))
    import apsw

    from simhash_sqlite import Document, SimhashIndex

    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 7))) for _ in range(300)]
    texts = {}
    for f in range(40):
        base = [rng.choice(words) for _ in range(rng.randint(5, 120))]
        for v in range(4):
            edited = [w if rng.random() > 0.05 * v else rng.choice(words) for w in base]
            texts[f"f{f}/v{v}"] = " ".join(edited)
    texts["zh"] = "近似重复的网页在互联网上非常常见" * 5
    made = []
    for store in (False, True):
        path = work / f"index_{'texts' if store else 'sketches'}.db"
        with SimhashIndex(path, create=True, store_text=store) as index:
            index.add(Document(key, text) for key, text in texts.items())
            index.add_fingerprints([("bare", 12345)])
        made.append(path)

    def variant(name: str, *statements: str) -> None:
        path = work / f"{name}.db"
        shutil.copy(made[0], path)
        conn = apsw.Connection(str(path))
        conn.execute("PRAGMA journal_mode = DELETE")
        for sql in statements:
            conn.execute(sql)
        conn.close()
        made.append(path)

    variant("sketch_blobs", "UPDATE documents SET sketch = randomblob(abs(random()) % 300) WHERE id % 2 = 0",
            "UPDATE documents SET sketch = randomblob(120) WHERE id % 2 = 1")
    variant("meta_words", "UPDATE simhash_meta SET value = '{\"features\": \"words\"}' WHERE key = 'fingerprint'")
    variant("meta_bad", "UPDATE simhash_meta SET value = '{\"ngram\": ' WHERE key = 'fingerprint'",
            "INSERT OR REPLACE INTO simhash_meta VALUES ('sketch', '{\"bins\": 70000, \"bits\": 16}')")
    rng_blobs = random.Random(seed + 1)
    variant("short_blobs", *(f"UPDATE documents SET short_text = {short_blob(rng_blobs)} WHERE id = {i}"
                             for i in range(1, len(texts) + 1) if i % 4))
    variant("no_meta", "DROP TABLE simhash_meta")
    variant("no_documents", "DROP TABLE clusters", "DROP TABLE documents")
    variant("loose_documents", "DROP TABLE clusters", "ALTER TABLE documents RENAME TO old",
            "CREATE TABLE documents (id INTEGER PRIMARY KEY, key, fingerprint, b0, b1, b2, b3, sketch, text)",
            "INSERT INTO documents SELECT id, "
            "CASE WHEN id % 5 = 0 THEN NULL WHEN id % 5 = 1 THEN x'00ff' ELSE key END, "
            "CASE WHEN id % 7 = 0 THEN 'abc' WHEN id % 7 = 1 THEN 1.5 ELSE fingerprint END, b0, b1, b2, b3, "
            "CASE WHEN id % 3 = 0 THEN 'text' ELSE sketch END, CASE WHEN id % 4 = 0 THEN x'80ff' ELSE key END FROM old",
            "CREATE INDEX loose_b0 ON documents (b0, fingerprint)")
    empty = work / "empty.db"
    apsw.Connection(str(empty)).close()
    made.append(empty)
    return made


def _deflated(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


def short_blob(rng: random.Random) -> str:
    """A documents.short_text value as an SQL literal: now and then a valid stored form, mostly a damaged or
    hostile one (core/short_texts.py's format: an encoding byte, then a raw deflate stream)."""
    kind = rng.randrange(14)
    text = "".join(rng.choice("abc de fgh 近似重复的网页 \U0001F600\t\n") for _ in range(rng.randint(0, 300)))
    encoding = rng.choice([0, 1])
    plain = text.encode("utf-16-le" if encoding else "utf-8")
    if kind == 0:
        blob = bytes((encoding,)) + _deflated(plain)  # valid
    elif kind == 1:
        blob = bytes((encoding,)) + _deflated(plain)[: rng.randint(0, 40)]  # truncated
    elif kind == 2:  # bits flipped
        flipped = bytearray(bytes((encoding,)) + _deflated(plain))
        for _ in range(rng.randint(1, 4)):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        blob = bytes(flipped)
    elif kind == 3:
        blob = bytes((rng.choice([2, 3, 127, 255]),)) + _deflated(plain)  # another encoding
    elif kind == 4:
        blob = rng.randbytes(rng.choice([0, 1, 2, 5, 100, 352, 3000]))  # noise
    elif kind == 5:  # a zip bomb at the read limit, one byte past it, or far past it
        size = rng.choice([2047, 2048, 2049, 4096, 1 << 20, 16 << 20])
        blob = bytes((rng.choice([0, 1]),)) + _deflated(rng.choice([b"a", b"\x00", b"ab"]) * (size // 2 + size % 2))
    elif kind == 6:  # empty stored blocks before the stream: long, still valid
        blob = bytes((0,)) + b"\x00\x00\x00\xff\xff" * rng.choice([1, 1000, 100_000]) + _deflated(b"abc defgh")
    elif kind == 7:  # valid deflate of bytes that are no text: invalid UTF-8, odd UTF-16, lone surrogates
        payload = rng.choice([rng.randbytes(rng.randint(0, 200)), b"\xed\xa0\x80abcde", "ab\ud800cd".encode(
            "utf-16-le", "surrogatepass"), b"abc", b"\x00" * 9])
        blob = bytes((rng.choice([0, 1]),)) + _deflated(payload)
    elif kind == 8:  # trailing bytes after the stream's end
        blob = bytes((encoding,)) + _deflated(plain) + rng.randbytes(rng.randint(1, 50))
    elif kind == 9:
        return rng.choice(["NULL", "zeroblob(0)", "x'00'", "x'01'", "zeroblob(400)", "randomblob(352)"])
    elif kind == 10:  # a whole document's data, cut at any byte
        return f"substr(short_text, 1, {rng.randint(0, 400)})"
    elif kind == 11:  # level-0 (stored) and level-1 streams of the text
        packer = zlib.compressobj(rng.choice([0, 1]), zlib.DEFLATED, -15)
        blob = bytes((encoding,)) + packer.compress(plain) + packer.flush()
    elif kind == 12:  # one stream after another, or a stream of two blocks with a sync flush between
        packer = zlib.compressobj(9, zlib.DEFLATED, -15)
        blob = bytes((encoding,)) + packer.compress(plain) + packer.flush(zlib.Z_SYNC_FLUSH) + packer.flush()
    else:
        blob = bytes((encoding,)) + _deflated(plain) * 2
    return f"x'{blob.hex()}'"


class Values:
    def __init__(self, rng: random.Random, big: int) -> None:
        self.rng, self.big = rng, big

    def integer(self) -> str:
        r = self.rng
        return str(r.choice([0, 1, -1, 2, 3, 4, 9, 12, 63, 64, 65, -65, 2**63 - 1, -(2**63), 65535, 65536,
                             r.getrandbits(64) - 2**63, r.randint(-100, 100)]))

    def real(self) -> str:
        return self.rng.choice(["1.5", "0.0", "-0.0", "3.0", "1e308", "9e999", "-9e999", "0.8", "12.0000001"])

    def small_text(self) -> str:
        """A text of any kind but huge (a huge stored text makes every later search of a batch slow, not wrong)."""
        text = self.text()
        return text if not text.startswith("replace(") else "'stored'"

    def text(self) -> str:
        r = self.rng
        kind = r.randrange(8)
        if kind == 0:  # invalid UTF-8, surrogates, overlong forms
            raw = bytes(r.choice([0xFF, 0xFE, 0xC0, 0x80, 0xED, 0xA0, 0xF4, 0x90, 0xE2, 0x28, 0x41, 0x20, 0x00])
                        for _ in range(r.randint(1, 30)))
            return f"CAST(x'{raw.hex()}' AS TEXT)"
        if kind == 1:  # a huge text
            n = r.choice([1000, 100_000, self.big])
            return f"replace(hex(zeroblob({n})), '00', '{r.choice(['ab ', 'x', ' ', '字'])}')"
        if kind == 2:
            return "''"
        chars = []
        for _ in range(r.randint(1, 200)):
            pick = r.randrange(10)
            if pick < 5:
                chars.append(r.choice("abcdefghij ABCDEF0123456789 \t\n.,!"))
            elif pick == 5:
                marks = [0x301, 0x308, 0x200D, 0xFE0F, 0x1F600, 0x1F468, 0x10FFFF, 0x85, 0xA0, 0x3000]
                chars.append(chr(r.choice(marks)))
            elif pick == 6:
                chars.append(chr(r.randint(0x4E00, 0x9FFF)))
            elif pick == 7:
                chars.append(chr(r.randint(1, 0x1F)))
            elif pick == 8:
                chars.append(chr(r.choice([0xDF, 0xFB01, 0xFF21, 0x2167, 0x1E9E, 0x130, 0x3392, 0xF900])))
            else:
                chars.append(chr(r.randint(0x80, 0x2FFFF)) if r.random() < 0.5 else "'")
        text = "".join(c for c in chars if not 0xD800 <= ord(c) <= 0xDFFF)
        return "'" + text.replace("'", "''").replace("\x00", "") + "'"

    def blob(self) -> str:
        r = self.rng
        n = r.choice([0, 1, 7, 118, 119, 120, 121, 240, 5000])
        return r.choice([f"randomblob({n})", f"zeroblob({n})", f"x'{r.randbytes(min(n, 64)).hex()}'"])

    def any(self) -> str:
        r = self.rng.randrange(10)
        if r < 3:
            return self.integer()
        if r < 6:
            return self.text()
        if r < 7:
            return self.real()
        if r < 8:
            return self.blob()
        if r < 9:
            return "NULL"
        return self.rng.choice(["(SELECT fingerprint FROM documents ORDER BY random() LIMIT 1)",
                                "(SELECT text FROM documents ORDER BY random() LIMIT 1)",
                                "(SELECT short_text FROM documents ORDER BY random() LIMIT 1)",
                                "(SELECT sketch FROM documents ORDER BY random() LIMIT 1)",
                                "simhash_from_hex('59e111d408338701')"])


def random_json(rng: random.Random) -> str:
    fields = ["features", "ngram", "weights", "hmm", "hash", "version", "bins", "bits", "size_bits", "colour"]
    values = ['"chars"', '"words"', "5", "0", "17", "1", "-3", "944", "960", "16", "2", "true", "null", "5.0",
              '"binary"', '"log"', '"count"', '"blake2b64+splitmix64"', "[1]", "{}", "1e3", "99999999999"]
    body = ", ".join(f'"{rng.choice(fields)}": {rng.choice(values)}' for _ in range(rng.randint(0, 5)))
    return rng.choice(["{" + body + "}", "[" + body + "]", "{" + body, "7", '"x"', ""])


ARITY = {"simhash": 1, "hamming": 2, "simhash_similarity": 2, "simhash_block": 2, "simhash_hex": 1,
         "simhash_from_hex": 1}


def near_arguments(rng: random.Random, values: Values) -> str:
    """Mostly arguments that reach the search and the check; sometimes anything at all."""
    query = rng.choice([values.any(), values.text(), values.integer(), values.text(),
                        "(SELECT text FROM documents ORDER BY random() LIMIT 1)",
                        "(SELECT fingerprint FROM documents ORDER BY random() LIMIT 1)"])
    k = str(rng.randint(0, 64)) if rng.random() < 0.7 else values.any()
    checked = rng.choice(["0", "1"]) if rng.random() < 0.7 else values.any()
    arguments = [query, k, checked]
    count = rng.choice([1, 2, 2, 3, 3, 3]) if rng.random() < 0.9 else rng.choice([0, 4])
    return ", ".join((arguments + [values.any()])[:count])


def statement(rng: random.Random, values: Values) -> str:
    kind = rng.randrange(20)
    if kind < 7:
        name = rng.choice(FUNCTIONS)
        count = ARITY[name] if rng.random() < 0.85 else rng.randint(0, 3)
        args = ", ".join(values.any() for _ in range(count))
        return f"SELECT {name}({args})"
    if kind < 14:
        args = near_arguments(rng, values)
        columns = rng.choice(["*", "key, distance", "query, k, checked", "count(*)", "jaccard, checked_by"])
        order = rng.choice(["", " ORDER BY distance", " ORDER BY distance DESC, key", " ORDER BY key"])
        return f"SELECT {columns} FROM simhash_near({args}){order} LIMIT {rng.choice([1, 10, 1000])}"
    if kind < 16:
        column = rng.choice(["fingerprint", "text", "sketch", "key", "id"])
        return (f"SELECT d.id, n.key, n.distance FROM documents AS d, simhash_near(d.{column}, {values.integer()}, "
                f"{rng.choice(['0', '1', values.any()])}) AS n LIMIT 200")
    if kind < 17:
        return (f"SELECT * FROM simhash_near WHERE query = {values.any()} AND k = {values.integer()}"
                + rng.choice(["", f" AND checked = {values.any()}", f" AND query = {values.any()}"]))
    if kind < 18 or rng.random() < 0.6:
        return rng.choice(["CREATE VIRTUAL TABLE temp.v USING simhash_near",
                           "CREATE VIRTUAL TABLE temp.v USING simhash_near(1)",
                           "SELECT * FROM simhash_near", "INSERT INTO simhash_near(key) VALUES ('x')",
                           "DELETE FROM simhash_near", "SELECT * FROM pragma_function_list WHERE name LIKE 'simhash%'"])
    # Change the file under the extension's cached settings.
    return rng.choice([
        f"INSERT OR REPLACE INTO simhash_meta (key, value) VALUES ('fingerprint', '{random_json(rng)}')",
        f"INSERT OR REPLACE INTO simhash_meta (key, value) VALUES ('sketch', '{random_json(rng)}')",
        f"UPDATE documents SET sketch = {values.blob()} WHERE id % {rng.randint(1, 9)} = 0",
        f"UPDATE documents SET text = {values.small_text()} WHERE id % {rng.randint(1, 9)} = 0",
        f"UPDATE documents SET short_text = {short_blob(rng)} WHERE id % {rng.randint(1, 9)} = 0",
        f"UPDATE documents SET short_text = {short_blob(rng)} WHERE id % {rng.randint(1, 9)} = 0",
        f"INSERT OR REPLACE INTO simhash_meta (key, value) VALUES ('store_text', '{rng.choice(['0', '1', 'x'])}')",
        "DELETE FROM simhash_meta WHERE key = 'sketch'",
        "INSERT OR REPLACE INTO simhash_meta (key, value) VALUES ('fingerprint', '{\"ngram\": 5}')",
        "INSERT OR REPLACE INTO simhash_meta (key, value) "
        "VALUES ('fingerprint', '{\"ngram\": 3, \"weights\": \"log\"}')",
        "DROP TABLE IF EXISTS clusters",
        "BEGIN", "COMMIT", "ROLLBACK",
    ])


def coverage(work: Path) -> dict[str, str]:
    """gcov's "Lines executed" of COVERED functions and of the whole of sqlite_extension.c."""
    (data,) = work.glob("*sqlite_extension.gcda")
    run = subprocess.run(["gcov", "-f", "-n", data.name], cwd=work, capture_output=True, text=True, check=True)
    found, name = {}, None
    for line in run.stdout.splitlines():
        if line.startswith(("Function '", "File '")):
            name = line.split("'")[1]
        elif line.startswith("Lines executed:") and name is not None:
            if name in COVERED or name.endswith("sqlite_extension.c"):
                found[Path(name).name] = line.split(":", 1)[1]
            name = None
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120, help="how long to fuzz (default 120)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=100, help="statements per host run (default 100)")
    parser.add_argument("--batch-seconds", type=float, default=120, help="a batch running longer is skipped")
    parser.add_argument("--big", type=int, default=500_000, help="bytes of zeroblob behind the largest texts")
    parser.add_argument("--keep", type=Path, help="folder for the failing batch (default: the work folder)")
    parser.add_argument("--coverage", action="store_true",
                        help="no sanitizers: build for gcov and print the lines each function ran (needs gcov)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fuzz-extension-"))
    started = time.monotonic()
    extension, host = build(work, args.coverage)
    dbs = databases(work, args.seed)
    how = "for gcov" if args.coverage else "with sanitizers"
    print(f"built {extension.name} and the host {how}; {len(dbs)} databases; {time.monotonic() - started:.0f} s",
          flush=True)
    rng = random.Random(args.seed)
    values = Values(rng, args.big)
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:halt_on_error=1",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
    totals = {"batches": 0, "statements": 0, "errors": 0, "rows": 0, "slow_batches": 0}
    by_db: dict[str, int] = {}
    started = time.monotonic()
    while time.monotonic() - started < args.seconds:
        db = rng.choice(dbs)
        copy = work / "run.db"
        shutil.copy(db, copy)
        batch = [statement(rng, values) for _ in range(args.batch)]
        try:
            run = subprocess.run([str(host), str(copy), str(extension)], input="\0".join(batch).encode(),
                                 capture_output=True, env=env, timeout=args.batch_seconds)
        except subprocess.TimeoutExpired:  # slow (huge texts under the sanitizers), not wrong: counted, skipped
            totals["slow_batches"] += 1
            continue
        out = run.stdout.decode(errors="replace")
        if run.returncode != 0 or "runtime error" in run.stderr.decode(errors="replace"):
            keep = args.keep or work
            keep.mkdir(parents=True, exist_ok=True)
            (keep / "failing_batch.sql").write_text(";\n".join(batch) + ";\n")
            shutil.copy(db, keep / "failing.db")
            print(f"FOUND (exit {run.returncode}) on {db.name}; batch and database kept in {keep}")
            print(run.stderr.decode(errors="replace")[-6000:])
            return 1
        parts = out.split()
        totals["batches"] += 1
        totals["statements"] += int(parts[1])
        totals["errors"] += int(parts[3])
        totals["rows"] += int(parts[5])
        by_db[db.name] = by_db.get(db.name, 0) + int(parts[1])
    elapsed = time.monotonic() - started
    print(json.dumps({"seconds": round(elapsed), "seed": args.seed, **totals, "statements_by_database": by_db}))
    if args.coverage:
        print(json.dumps(coverage(work)))
    else:
        print("nothing found: no sanitizer report, crash or leak")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
