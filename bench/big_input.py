"""Memory against input size: `simq add -` and `simq dedup -` fed a JSONL stream of many GB through a pipe.

    .venv/bin/python bench/big_input.py $ZH $EN --gib 10
    .venv/bin/python bench/big_input.py $ZH --gib 1 --commands add

The stream repeats the given JSONL files' texts, each line with a new id, until --gib GiB of JSONL have
been written; nothing is stored on disk but the index (add) or the kept lines (dedup, to /dev/null). Every
copy after the first is an exact duplicate of an earlier text under another id, so `add` fingerprints
every line (a new key is never skipped) and `dedup` drops all but the first copy of each text.

While a command runs, the resident memory of its whole process tree (the command and its pool workers,
from /proc) is sampled every --every seconds against the bytes written so far: the table shows whether
memory grows with the input. Peak: the largest RSS of any one process (ru_maxrss of the children).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from common import ROOT, SIMQ, Failures, print_machine


def lines_of(paths: list[str]) -> list[bytes]:
    texts = [json.loads(line)["text"] for path in paths for line in open(path, encoding="utf-8") if line.strip()]
    return [json.dumps({"id": "", "text": t}, ensure_ascii=False).encode("utf-8")[len(b'{"id": ""') :] for t in texts]


def feed(stdin, tails: list[bytes], limit: int, written: list[int]) -> None:
    """Write {"id": "c-i", "text": ...} lines until `limit` bytes, then close the pipe."""
    copy = 0
    try:
        while written[0] < limit:
            chunk = []
            for i, tail in enumerate(tails):
                chunk.append(b'{"id": "%d-%d"' % (copy, i) + tail + b"\n")
            data = b"".join(chunk)
            stdin.write(data)
            written[0] += len(data)
            copy += 1
    except BrokenPipeError:
        pass
    finally:
        stdin.close()


def tree_rss(pid: int) -> int:
    """Resident bytes of pid and its descendants."""
    total, todo = 0, [pid]
    page = os.sysconf("SC_PAGE_SIZE")
    while todo:
        p = todo.pop()
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * page
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def run(command: str, paths: list[str], gib: float, every: float, folder: Path) -> dict:
    tails = lines_of(paths)
    if command == "add":
        args = [*SIMQ, "add", "--db", str(folder / "big.db"), "-", "--jsonl"]
    else:
        args = [*SIMQ, "dedup", "-", "--jsonl", "--out", os.devnull]
    limit = int(gib * 2**30)
    written = [0]
    started = time.perf_counter()
    log = open(folder / "log.txt", "wb")
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    writer = threading.Thread(target=feed, args=(proc.stdin, tails, limit, written), daemon=True)
    writer.start()
    samples = []
    while proc.poll() is None:
        time.sleep(every)
        rss = tree_rss(proc.pid)
        if rss:
            samples.append((written[0], time.perf_counter() - started, rss))
    seconds = time.perf_counter() - started
    writer.join()
    said = (folder / "log.txt").read_text(errors="replace").strip().splitlines()
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return dict(command=command, rc=proc.returncode, said=said[-1] if said else "", seconds=seconds,
                bytes=written[0], samples=samples, peak=peak,
                index=(folder / "big.db").stat().st_size if command == "add" else 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="+", help="JSONL files with a 'text' field, repeated to fill the stream")
    parser.add_argument("--gib", type=float, default=10.0, help="GiB of JSONL to stream [default: %(default)s]")
    parser.add_argument("--commands", default="add,dedup", help="add, dedup or both [default: %(default)s]")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between RSS samples [default: %(default)s]")
    parser.add_argument("--rows", type=int, default=10, help="sample rows shown per command [default: %(default)s]")
    args = parser.parse_args()
    print_machine()
    load = os.getloadavg()
    print(f"## Memory against input size ({', '.join(args.jsonl)} repeated to {args.gib:g} GiB; "
          f"started {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load {load[0]:.1f})\n")
    failures = Failures()
    for command in args.commands.split(","):
        with tempfile.TemporaryDirectory() as folder:
            r = run(command, args.jsonl, args.gib, args.every, Path(folder))
        print(f"### simq {command} -: exit {r['rc']}, {r['bytes'] / 1e9:.2f} GB in {r['seconds']:.0f} s "
              f"({r['bytes'] / 1e6 / r['seconds']:.1f} MB/s), largest process peak {r['peak'] / 2**20:.0f} MiB"
              + (f", index {r['index'] / 2**20:.0f} MiB" if r["index"] else "") + f", load {os.getloadavg()[0]:.1f}\n")
        print(f"It said: {r['said']}\n")
        failures.expect(r["rc"] == 0, f"simq {command} - exited with {r['rc']}: {r['said']}")
        print("| GB written | seconds | RSS of the process tree MiB |")
        print("|---:|---:|---:|")
        samples = r["samples"]
        step = max(1, len(samples) // args.rows)
        for b, s, rss in samples[::step] + ([samples[-1]] if samples and (len(samples) - 1) % step else []):
            print(f"| {b / 1e9:.2f} | {s:.0f} | {rss / 2**20:.0f} |")
        print()
    failures.exit()


if __name__ == "__main__":
    main()
