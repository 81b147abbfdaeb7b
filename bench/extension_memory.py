"""Peak memory of one huge query in the loadable extension: `SELECT simhash(?)` and
`SELECT count(*) FROM simhash_near(?, 12)` of a text of N MB, in a fresh process each, measured by
/usr/bin/time -v ("Maximum resident set size"), beside the same process that only binds the text
(the host's own copy), so the table shows what the extension adds, in bytes a character.

    .venv/bin/python bench/extension_memory.py --mb 10,50          # issue 36 item 8's 50 MB query
    .venv/bin/python bench/extension_memory.py --mb 2              # smoke run, seconds

The text is random words (a-p, 2-9 letters), 1 byte a character; the index holds 200 short documents
(its size does not matter here). Exit status 1 where a run fails.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (first: the package of this checkout)

from simhash_sqlite import Document, SimhashIndex  # noqa: E402
from simhash_sqlite.native.extension import ENTRY_POINT, loadable_path  # noqa: E402

RUN = """
import random, sys, apsw
megabytes, what, db, extension, entry = float(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
rng = random.Random(1)
words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
n = int(megabytes * 1_000_000)
text = " ".join(rng.choices(words, k=n // 6 + 1))[:n]
conn = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
conn.enable_load_extension(True)
conn.load_extension(extension, entry)
sql = {"bind": "SELECT length(?)", "simhash": "SELECT simhash(?)",
       "simhash_near": "SELECT count(*) FROM simhash_near(?, 12)"}[what]
print(conn.execute(sql, (text,)).get)
"""


def peak_mib(megabytes: float, what: str, db: Path, time_program: str) -> float:
    command = [time_program, "-v", sys.executable, "-c", RUN, str(megabytes), what, str(db), str(loadable_path()),
               ENTRY_POINT]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise SystemExit(f"{what} of {megabytes} MB failed: {done.stderr.strip().splitlines()[-1:]}")
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    if not found:
        raise SystemExit("no 'Maximum resident set size' from /usr/bin/time -v")
    return int(found.group(1)) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", default="10,50", help="query sizes in MB (comma-separated)")
    args = parser.parse_args()
    time_program = shutil.which("time", path="/usr/bin") or ""
    if not time_program:
        raise SystemExit("needs /usr/bin/time (Debian: apt-get install time)")
    common.print_machine()
    folder = Path(tempfile.mkdtemp(prefix="extension-memory-"))
    try:
        db = folder / "small.db"
        with SimhashIndex(db, create=True) as index:
            index.add(Document(f"d{i}", f"document {i} of a small index, words {i * 7} and {i * 13}")
                      for i in range(200))
        print("| query MB | bind only MiB | simhash() MiB | bytes/char | simhash_near MiB | bytes/char |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for megabytes in (float(x) for x in args.mb.split(",")):
            base = peak_mib(megabytes, "bind", db, time_program)
            one = peak_mib(megabytes, "simhash", db, time_program)
            near = peak_mib(megabytes, "simhash_near", db, time_program)
            chars = megabytes * 1_000_000
            print(f"| {megabytes:g} | {base:.0f} | {one:.0f} | {(one - base) * 2**20 / chars:.1f} | {near:.0f} | "
                  f"{(near - base) * 2**20 / chars:.1f} |", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
