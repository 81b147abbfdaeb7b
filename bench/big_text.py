"""One big text with the default settings: peak RSS and time of every way simq takes it.

    .venv/bin/python bench/big_text.py 1024                # a 1024 MiB text
    .venv/bin/python bench/big_text.py 200 --corpus EN.jsonl   # lines of a JSONL corpus instead of built-in ones

The text is lines of the corpus (or built-in English and Chinese sentences) each followed by a random
number, so its distinct 5-grams keep growing with its size (the binary weights' worst case: they are
gathered on disk past streaming.SPILL_HASHES). Measured, each in a fresh process (peak RSS is the
child's own ru_maxrss, from wait4): simq add FILE, simq add - (stdin), simq add of one JSONL line
holding the text (only up to sources.MAX_RECORD_BYTES; longer lines are skipped by design), simq hash -f,
simq near --file and simq near --key on the index that took it. Inputs go to a temporary folder
(TMPDIR) and are deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import SIMQ, Failures, print_machine

from simhash_sqlite.pipeline.sources import path_key

LINES = [
    "SimHash maps a text to sixty-four bits so that similar texts get similar fingerprints.",
    "The index keeps every fingerprint in one SQLite file with four block columns.",
    "相似的文本得到相似的指纹，汉明距离衡量它们的差异。",
    "A crawl holds many mirrors of the same page with a different header or footer.",
]


CASES = ("file", "stdin", "jsonl", "hash", "near-file", "near-key")


def corpus_lines(path: str | None) -> list[str]:
    if path is None:
        return LINES
    lines = []
    with open(path, encoding="utf-8") as handle:
        for record in map(json.loads, handle):
            lines.extend(line for line in record["text"].splitlines() if line.strip())
    return lines


def write_text(path: Path, size: int, lines: list[str], seed: int = 1) -> None:
    """About `size` bytes of UTF-8: corpus lines with a random number after each; ends on ASCII."""
    rng = random.Random(seed)
    with path.open("wb") as handle:
        written = 0
        while written < size:
            block = "".join(f"{rng.choice(lines)} {rng.randrange(10**9)}\n" for _ in range(5_000)).encode("utf-8")
            block = block[: size - written]
            handle.write(block.decode("utf-8", "ignore").encode("utf-8"))
            written += len(block)


def write_jsonl_line(source: Path, path: Path) -> None:
    """{"id": "big", "text": SOURCE} on one line, escaped a piece at a time (this process stays small)."""
    with source.open(encoding="utf-8") as text, path.open("w", encoding="utf-8") as handle:
        handle.write('{"id": "big", "text": "')
        while piece := text.read(1 << 20):
            handle.write(json.dumps(piece, ensure_ascii=False)[1:-1])
        handle.write('"}\n')


# Peak RSS is read by a small wrapper process: Linux carries a process's peak RSS across fork and
# exec, so a child started by a process that ever held much memory would report at least that much.
WRAPPER = (
    "import json, resource, subprocess, sys\n"
    "stdin = open(sys.argv[1], 'rb') if sys.argv[1] else subprocess.DEVNULL\n"
    "p = subprocess.run(sys.argv[2:], stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
    "tail = p.stderr.decode('utf-8', 'replace').strip().splitlines()\n"
    "print(json.dumps({'code': p.returncode, 'maxrss_kib': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,"
    " 'tail': tail[-1] if tail else ''}))\n"
)


def measure(args: list[str], stdin_path: Path | None = None) -> tuple[float, float, int, str]:
    """(seconds, peak RSS MiB, exit code, last line of stderr) of one command in its own process."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", WRAPPER, str(stdin_path or ""), *args], capture_output=True, text=True,
                          check=True)
    seconds = time.monotonic() - start
    result = json.loads(done.stdout)
    return seconds, result["maxrss_kib"] / 1024, result["code"], result["tail"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mib", type=int, help="size of the text in MiB")
    parser.add_argument("--corpus", help="JSONL {id, text} whose lines make up the text (default: built-in lines)")
    parser.add_argument("--jsonl-mib", type=int, default=100, help="size of the one-line JSONL case (MiB, <= 128)")
    parser.add_argument("--only", help=f"comma-separated cases to run, of {','.join(CASES)} (default: all)")
    args = parser.parse_args()
    print_machine()
    chosen = CASES if args.only is None else args.only.split(",")
    unknown = set(chosen) - set(CASES)
    if unknown:
        parser.error(f"unknown cases: {', '.join(sorted(unknown))}")
    work = Path(tempfile.mkdtemp(prefix="big_text_"))
    failures = Failures()
    try:
        lines = corpus_lines(args.corpus)
        text = work / "big.txt"
        write_text(text, args.mib << 20, lines)
        line = work / "line.jsonl"
        if "jsonl" in chosen:
            jsonl_text = work / "line.txt"
            write_text(jsonl_text, min(args.jsonl_mib, args.mib) << 20, lines, seed=2)
            write_jsonl_line(jsonl_text, line)
            jsonl_text.unlink()
        else:
            line.write_text("")
        db = work / "i.db"
        size, line_size = text.stat().st_size, line.stat().st_size
        def simq(command: str, *args: str) -> list[str]:
            return [*SIMQ, command, "--db", str(db), *args]

        cases = [  # (case, name, command, stdin, bytes read)
            ("file", f"add FILE ({args.mib:,} MiB)", simq("add", str(text)), None, size),
            ("stdin", f"add - (stdin, {args.mib:,} MiB)", simq("add", "-", "--key", "stdin"), text, size),
            ("jsonl", f"add one JSONL line ({line_size >> 20:,} MiB)", simq("add", str(line)), None, line_size),
            ("hash", "hash -f FILE", simq("hash", "-f", str(text)), None, size),
            ("near-file", "near --file FILE", simq("near", "--file", str(text)), None, size),
            ("near-key", "near --key (the big text's)", simq("near", "--key", path_key(str(text))), None, 0),
        ]
        print(f"simhash-sqlite big text: {args.mib:,} MiB, default settings (chars 5-grams, binary weights), "
              f"corpus {args.corpus or 'built-in lines'}")
        print("| command | seconds | MB/s | peak RSS (MiB) | exit |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for case, name, command, stdin, read in cases:
            if case not in chosen:
                continue
            seconds, peak, code, tail = measure(command, stdin)
            rate = f"{read / seconds / 1e6:.1f}" if read else "-"
            print(f"| {name} | {seconds:.1f} | {rate} | {peak:,.0f} | {code} |", flush=True)
            if code != 0:
                print(f"  ({tail})", flush=True)
            failures.expect(code == 0, f"simq {name} exited with {code}: {tail}")
    finally:
        shutil.rmtree(work)
    failures.exit()


if __name__ == "__main__":
    main()
