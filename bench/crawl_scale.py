"""`simq add` + default `simq dupes` of a JSONL crawl at growing sizes, as whole processes: the growth in a table.

    .venv/bin/python bench/crawl_scale.py CRAWL.jsonl --sizes 1000000,10000000 [--folder F] [--keep]

CRAWL.jsonl: bench/crawl.py's output (its pages are a pure function of (seed, number), so the first N
lines of a 10M-page crawl are the N-page crawl). For each size N: the crawl's first N lines (the file
itself when N is all of it; else a prefix file copied into --folder), a fresh index, `simq add PREFIX --db X`
and `simq dupes --db X --format jsonl --out PAIRS` (the venv's `simq` by path, default settings), timed
as bench/end_to_end.py times them: wall, CPU seconds of the process tree (os.wait4: the pool's workers
count), MB of input per CPU-second, peak RSS (the largest process); the index's size (file + WAL) and the
pairs found. Growth: each size's add + dupes wall and CPU over the first size's, against the size ratio.

Checks (exit status 1): `simq add` adds all N pages; every page of kind "mirror" (an identical copy of
its family's original) is paired with its original. The prefix files are removed when done, and the
indexes too unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import SIMQ, Failures, load, print_machine
from end_to_end import added, read_pairs, run_step

_MIRROR, _ORIGINAL = b'"kind": "mirror"}', b'"kind": "original"}'


def scan(path: Path, sizes: list[int]) -> tuple[dict[int, int], dict[int, set[tuple[str, str]]]]:
    """({size: bytes of its first `size` lines}, {size: its (original, mirror) pairs}), in one pass over the
    lines the largest size needs (only the family lines that end as bench/crawl.py writes them are parsed)."""
    ends: dict[int, int] = {}
    mirrors: dict[int, set[tuple[str, str]]] = {}
    originals: dict[int, str] = {}
    found: list[tuple[int, int, str]] = []  # (line number, family, mirror id)
    wanted = set(sizes)
    offset = 0
    with open(path, "rb") as lines:
        for number, line in enumerate(lines, 1):
            offset += len(line)
            tail = line[-40:]
            if _MIRROR in tail or _ORIGINAL in tail:
                record = json.loads(line)
                if record["kind"] == "original":
                    originals[record["family"]] = str(record["id"])
                else:
                    found.append((number, record["family"], str(record["id"])))
            if number in wanted:
                ends[number] = offset
                if number == max(sizes):
                    break
    for size in ends:
        mirrors[size] = {tuple(sorted((originals[f], key))) for n, f, key in found  # type: ignore[misc]
                         if n <= size and f in originals}
    return ends, mirrors


def prefix(path: Path, end: int, target: Path) -> None:
    """Copy the first `end` bytes of path to target."""
    with open(path, "rb") as source, open(target, "wb") as out:
        left = end
        while left:
            copied = os.copy_file_range(source.fileno(), out.fileno(), left) if hasattr(os, "copy_file_range") else 0
            if copied <= 0:  # no copy_file_range here (or across these file systems): copy by hand
                chunk = source.read(min(left, 1 << 24))
                out.write(chunk)
                copied = len(chunk)
            left -= copied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("crawl", type=Path, help="JSONL crawl (bench/crawl.py)")
    parser.add_argument("--sizes", default="1000000,10000000", help="pages: the crawl's first N lines")
    parser.add_argument("--folder", type=Path, help="where prefixes, indexes and pairs go [default: temporary]")
    parser.add_argument("--keep", action="store_true", help="keep the indexes (and the pairs) in --folder")
    args = parser.parse_args()
    try:
        sizes = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()})
    except ValueError:
        sys.exit(f"error: --sizes takes page counts, comma-separated, not {args.sizes!r}")
    if not sizes or sizes[0] < 1:
        sys.exit("error: --sizes takes page counts of at least 1")
    if not args.crawl.is_file():
        sys.exit(f"error: no crawl file {args.crawl}")
    if args.keep and args.folder is None:
        sys.exit("error: --keep needs --folder")
    print_machine()
    ends, mirrors = scan(args.crawl, sizes)
    if len(ends) < len(sizes):
        sys.exit(f"error: {args.crawl} has fewer than {max(sizes):,} lines")
    whole = args.crawl.stat().st_size
    folder = args.folder or Path(tempfile.mkdtemp(prefix="crawl_scale_"))
    folder.mkdir(parents=True, exist_ok=True)
    failures = Failures()
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    started = f"{time.strftime('%H:%M', time.gmtime())} UTC, load average {load()}"
    rows = []
    try:
        for n in sizes:
            source = args.crawl if ends[n] == whole else folder / f"crawl{n}.jsonl"
            if source != args.crawl:
                prefix(args.crawl, ends[n], source)
            db, out = folder / f"index{n}.db", folder / f"pairs{n}.jsonl"
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
            load_before = os.getloadavg()[0]
            add = run_step([*SIMQ, "add", str(source), "--db", str(db)])
            failures.expect(added(add) == n, f"{n:,} pages: simq add added {added(add):,}")
            index_bytes = sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())
            log(f"[{n:,}] add {add.wall:.1f} s ({add.cpu:.1f} CPU-s, {add.rss_mib:.0f} MiB); load {load()}")
            dupes = run_step([*SIMQ, "dupes", "--db", str(db), "--format", "jsonl", "--out", str(out)])
            pairs = read_pairs(out)
            missed = len(mirrors[n] - pairs)
            failures.expect(missed == 0, f"{n:,} pages: simq dupes missed {missed} of {len(mirrors[n])} "
                                         f"(original, mirror) pairs")
            log(f"[{n:,}] dupes {dupes.wall:.1f} s ({dupes.cpu:.1f} CPU-s, {dupes.rss_mib:.0f} MiB), "
                f"{len(pairs):,} pairs; load {load()}")
            rows.append((n, ends[n] / 1e6, add, dupes, index_bytes, len(pairs), len(mirrors[n]) - missed,
                         len(mirrors[n]), f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}"))
            if source != args.crawl:
                source.unlink()
            if not args.keep:
                for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), out):
                    path.unlink(missing_ok=True)
    finally:
        if args.folder is None:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            for n in sizes:
                (folder / f"crawl{n}.jsonl").unlink(missing_ok=True)
    print(f"\n## `simq add` + `simq dupes` of {args.crawl.name} at growing sizes (default settings, one run a size)\n")
    print(f"Started {started}; finished {time.strftime('%H:%M', time.gmtime())} UTC, load average {load()}. "
          f"CPU: user + sys of the process tree (os.wait4); peak RSS: the largest process.\n")
    print("| pages | MB | add wall s | add CPU s | dupes wall s | dupes CPU s | add + dupes wall s | add + dupes CPU s "
          "| MB per CPU-s | peak RSS MiB add / dupes | index MB (bytes a page) | pairs | mirror pairs found "
          "| growth wall / CPU (size) | load (1 min) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    base = rows[0]
    for n, mb, add, dupes, index_bytes, pairs, hit, mirrors_n, loads in rows:
        wall, cpu = add.wall + dupes.wall, add.cpu + dupes.cpu
        growth = (f"{wall / (base[2].wall + base[3].wall):.1f}x / {cpu / (base[2].cpu + base[3].cpu):.1f}x "
                  f"({n / base[0]:.0f}x)")
        print(f"| {n:,} | {mb:,.0f} | {add.wall:.1f} | {add.cpu:.1f} | {dupes.wall:.1f} | {dupes.cpu:.1f} "
              f"| **{wall:.1f}** | {cpu:.1f} | {mb / cpu:.1f} | {add.rss_mib:.0f} / {dupes.rss_mib:.0f} "
              f"| {index_bytes / 1e6:,.1f} ({index_bytes / n:.0f}) | {pairs:,} | {hit:,} of {mirrors_n:,} | {growth} "
              f"| {loads} |")
    n, _, add, dupes = rows[-1][:4]
    print(f"\nAim: `simq add` + `simq dupes` of {n:,} pages in <= 6 minutes of wall time on the machine above: "
          f"{add.wall + dupes.wall:.0f} s ({'met' if add.wall + dupes.wall <= 360 else 'not met'}).")
    failures.exit()


if __name__ == "__main__":
    main()
