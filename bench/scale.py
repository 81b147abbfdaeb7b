"""The scale bench: dedup of a stream, and dupes of an index, at N synthetic crawl pages, in bounded memory.

    python bench/scale.py generate N > pages.jsonl        # the pages alone (JSONL on stdout)
    python bench/scale.py run N [--memory SIZE] [--skip-index] [--out FOLDER] [--json FILE]
    python bench/scale.py dupes [DB | --pages N] [--budgets 64G,default,256M] [--clusters] [--json FILE]
    python bench/scale.py candidates [PAGES.jsonl] --sizes 250000,500000,1000000 [--memory SIZE] [--json FILE]

`run` streams N pages through `simq dedup - -o kept.jsonl` (the pages are made as they are read, never stored),
then (unless --skip-index) writes them once to a JSONL file, builds an index of them with `simq add` and
runs `simq dupes` on it, each command measured on its own: wall, CPU (user + system of the command and
its children), peak RSS (the largest of the command's processes, from wait4) and the spill (the largest
size the spill folder beside the output reached, sampled every 0.2 s). `--memory` is passed to dedup
(default: dedup's own default budget). Small mode for bench/smoke.py: `run 2000 --memory 1M`.

`dupes` runs `simq dupes` (and with --clusters `simq clusters`) of an existing index once at each budget, side
by side: a budget past what the index needs (64G) is the in-memory path, a smaller one the search from sorted
runs on disk (find/bounded_pairs.py); each run's wall, CPU, peak RSS and the largest size its scratch folder
(TMPDIR) reached, and whether its pairs (sorted lines) and its clusters table equal the first budget's.
Small mode: `dupes --pages 4000 --budgets 64G,1M --clusters`.

`candidates` dedups the first N pages of a JSONL file (default: N generated pages) in this process, at dedup's
default budget (or --memory), for each N of --sizes, and counts what the search of the kept sketches did
(pipeline/dedup.KeptSketches), per page: candidate pairs (sharing a window), those estimated (a spilled one whose
size ratio rules it out is not), and the sketch rows read from the runs spilled to disk for them. The kept
set's LSH keys are 24 bits wide at any size (find/sketch_pairs.py), so the random candidates a page meets grow
with the pages kept before it: per page linear in N, in all quadratic. Small mode: `candidates --sizes
10000,20000 --memory 1M`.

The pages have the shape of the synthetic crawl the scale aims are set on (pages of 150-6,000 characters,
log-normal lengths with median near 500, half English words, half Chinese characters, Zipf draws; 4% of
the originals have 1 to 4 near copies: mirrored, counter-changed, cut, 2% and 5% edited, 40% rewritten), but
from a made-up vocabulary, so the bench needs nothing outside the repository. Deterministic for a given N.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

import numpy as np
from common import SIMQ, Failures, print_machine

VOCABULARY = 30_000
KINDS = ["mirror", "counter", "cut", "edit2", "edit5", "rewrite40"]


class Pages:
    def __init__(self, n: int) -> None:
        self.n = n
        self.rng = np.random.default_rng(n)
        self.r = random.Random(n)
        letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
        weights = np.linspace(2.0, 0.2, len(letters))
        weights /= weights.sum()
        lengths = self.rng.integers(2, 10, VOCABULARY)
        self.en = np.array(["".join(self.rng.choice(letters, size, p=weights)) for size in lengths], dtype=object)
        self.zh = np.array([chr(0x4E00 + i) for i in self.rng.permutation(20_000)[:VOCABULARY // 4]], dtype=object)
        self.cdf = {}
        for lang, words in (("en", self.en), ("zh", self.zh)):
            ranks = np.arange(1, len(words) + 1)
            self.cdf[lang] = np.cumsum(1 / ranks) / (1 / ranks).sum()

    def draw(self, lang: str, size: int) -> np.ndarray:
        words = self.en if lang == "en" else self.zh
        return words[np.minimum(np.searchsorted(self.cdf[lang], self.rng.random(size)), len(words) - 1)]

    def text(self, lang: str, length: int) -> str:
        if lang == "en":
            tokens = self.draw(lang, max(5, length // 6))
            return "\n".join(" ".join(tokens[i : i + 12]) for i in range(0, len(tokens), 12))
        tokens = self.draw(lang, max(5, length))
        return "\n".join("".join(tokens[i : i + 40]) for i in range(0, len(tokens), 40))

    def copy(self, text: str, lang: str, kind: str) -> str:
        r = self.r
        if kind == "mirror":
            return f"Mirrored from site{r.randint(1, 999)}.example\n" + text + "\n-- archived copy --"
        if kind == "counter":
            return f"views: {r.randint(1, 99999)}  updated 2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}\n" + text
        lines = text.split("\n")
        if kind == "cut":
            k, i = max(1, len(lines) // 12), r.randrange(len(lines))
            return "\n".join(lines[:i] + lines[i + k :])
        share = {"edit2": 0.02, "edit5": 0.05, "rewrite40": 0.4}[kind]
        out = []
        for line in lines:
            tokens = line.split(" ") if lang == "en" else list(line)
            new = self.draw(lang, len(tokens))
            tokens = [new[i] if r.random() < share else x for i, x in enumerate(tokens)]
            out.append((" " if lang == "en" else "").join(tokens))
        return "\n".join(out)

    def __iter__(self) -> Iterator[bytes]:
        made, r = 0, self.r
        while made < self.n:
            lang = "en" if r.random() < 0.5 else "zh"
            base = self.text(lang, int(min(6000, max(150, r.lognormvariate(6.2, 0.8)))))
            family = [base]
            if r.random() < 0.04:
                family += [self.copy(base, lang, kind) for kind in r.sample(KINDS, r.randint(1, 4))]
            for i, text in enumerate(family[: self.n - made]):
                key = f"{made}" if i == 0 else f"{made}~{i}"
                yield (json.dumps({"id": key, "text": text}, ensure_ascii=False) + "\n").encode("utf-8")
            made += len(family)


def generate(n: int, sink) -> None:
    buffer = []
    for line in Pages(n):
        buffer.append(line)
        if len(buffer) >= 1000:
            sink.write(b"".join(buffer))
            buffer = []
    sink.write(b"".join(buffer))
    sink.flush()


def measured(command: list[str], *, stdin=None, watch: str | None = None, feed: int | None = None) -> dict:
    """Run a command; wall, CPU, peak RSS of its largest process, and the largest size of the folder `watch`
    (the spill); feed: pages generated into its stdin by a thread of this process (not counted)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.PIPE if feed else stdin, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    if feed:
        writer = threading.Thread(target=lambda: (generate(feed, process.stdin), process.stdin.close()))
        writer.start()
    spill, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            if watch and os.path.isdir(watch):
                total = 0
                for entry in os.scandir(watch):
                    if entry.name.endswith(".spill"):
                        for root, _, files in os.walk(entry.path):
                            total += sum(os.path.getsize(os.path.join(root, f)) for f in files
                                         if os.path.exists(os.path.join(root, f)))
                spill[0] = max(spill[0], total)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, status, usage = os.wait4(process.pid, 0)
    stop.set()
    sampler.join()
    stderr = process.stderr.read().decode("utf-8", "replace")
    if feed:
        writer.join()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed: {stderr[-2000:]}")
    return {"wall_s": round(time.perf_counter() - started, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mb": round(usage.ru_maxrss / 1024), "spill_mb": round(spill[0] / 2**20, 1),
            "summary": _summary(stderr)}


def _folder_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:  # removed while walked
                pass
    return total


def budgets(args: argparse.Namespace) -> dict:
    """simq dupes (and clusters) of one index at each budget, side by side."""
    result: dict = {"db": args.db, "load": os.getloadavg(), "runs": []}
    folder = tempfile.mkdtemp(prefix="simq-budgets-")
    scratch = os.path.join(folder, "tmp")
    first: dict = {}
    try:
        for budget in args.budgets.split(","):
            memory = [] if budget == "default" else ["--memory", budget]
            os.makedirs(scratch, exist_ok=True)
            out = os.path.join(folder, "pairs.jsonl")
            run = {"memory": budget, "dupes": _scratch_measured(
                SIMQ + ["dupes", "--db", args.db, "--format", "jsonl", "--out", out] + memory, scratch)}
            with open(out, "rb") as handle:
                run["dupes"]["pairs"] = sum(1 for _ in handle)
            run["dupes"]["pairs_sha256"] = _sorted_digest(out)
            os.unlink(out)
            if args.clusters:
                run["clusters"] = _scratch_measured(
                    SIMQ + ["clusters", "--db", args.db, "--format", "jsonl", "--out", out] + memory, scratch)
                run["clusters"]["table_sha256"] = _sorted_digest(out)
                os.unlink(out)
            run["scratch_left"] = len(os.listdir(scratch))
            for name in ("dupes", "clusters"):
                if name in run:
                    key = "pairs_sha256" if name == "dupes" else "table_sha256"
                    first.setdefault(name, run[name][key])
                    run[name]["same_as_first"] = run[name][key] == first[name]
            result["runs"].append(run)
            print(json.dumps(run), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return result


def _scratch_measured(command: list[str], scratch: str) -> dict:
    """measured() with TMPDIR=scratch, and the largest size the scratch folder reached."""
    peak, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            peak[0] = max(peak[0], _folder_bytes(scratch))

    sampler = threading.Thread(target=sample)
    sampler.start()
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = scratch
    try:
        result = measured(command)
    finally:
        stop.set()
        sampler.join()
        if before is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = before
    result["scratch_mb"] = round(peak[0] / 2**20, 1)
    return result


def _sorted_digest(path: str) -> str:
    with open(path, "rb") as handle:
        lines = sorted(handle)
    return hashlib.sha256(b"".join(lines)).hexdigest()[:16]


def _summary(stderr: str) -> str:
    """The command's own summary line (the last one that counts documents or pairs)."""
    lines = [line for line in stderr.strip().splitlines() if "document" in line or "pair" in line]
    return lines[-1] if lines else ""


def run(args: argparse.Namespace) -> dict:
    folder = args.out or tempfile.mkdtemp(prefix="simq-scale-")
    os.makedirs(folder, exist_ok=True)
    memory = ["--memory", args.memory] if args.memory else []
    result: dict = {"pages": args.n, "memory": args.memory or "default", "load": os.getloadavg()}
    kept = os.path.join(folder, "kept.jsonl")
    result["dedup_stream"] = measured(SIMQ + ["dedup", "-", "-o", kept] + memory, watch=folder, feed=args.n)
    digest = hashlib.sha256()
    lines = 0
    with open(kept, "rb") as handle:
        for line in handle:
            digest.update(line)
            lines += 1
    result["dedup_stream"]["kept"], result["dedup_stream"]["kept_sha256"] = lines, digest.hexdigest()[:16]
    if not args.skip_index:
        pages, db = os.path.join(folder, "pages.jsonl"), os.path.join(folder, "pages.db")
        with open(pages, "wb") as handle:
            generate(args.n, handle)
        result["add"] = measured(SIMQ + ["add", "--db", db, pages])
        result["dupes"] = measured(SIMQ + ["dupes", "--db", db, "--format", "jsonl"])
        os.unlink(pages)
    if not args.out:
        shutil.rmtree(folder, ignore_errors=True)
    result["bench_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return result


def candidates(args: argparse.Namespace) -> dict:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from simhash_sqlite.pipeline.dedup import Deduplicator
    from simhash_sqlite.pipeline.spill import default_memory, parse_memory
    from simhash_sqlite.store.documents import Document

    def pages(n: int) -> Iterator[tuple[Document, None]]:
        lines = Pages(n) if args.pages is None else open(args.pages, "rb")
        try:
            for made, line in enumerate(lines):
                if made == n:
                    return
                record = json.loads(line)
                yield Document(str(record["id"]), record["text"]), None
        finally:
            if args.pages is not None:
                lines.close()

    memory = default_memory() if args.memory is None else parse_memory(args.memory)
    result: dict = {"pages": args.pages or "generated", "memory": memory, "load": os.getloadavg(),
                    "runs": []}
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="simq-candidates-") as folder:
            deduplicator = Deduplicator(memory=memory, spill_near=os.path.join(folder, "kept.jsonl"))
            started = time.process_time()
            try:
                read = kept = 0
                for decision in deduplicator.run(pages(n)):
                    read += 1
                    kept += decision.kept
                seconds = time.process_time() - started
                sketches = deduplicator.sketches
                assert sketches is not None
                run = {"pages": read, "kept": kept, "candidates": sketches.candidates, "estimated": sketches.estimated,
                       "rows_read_from_disk": sketches.rows_read, "cpu_seconds": round(seconds, 1)}
            finally:
                deduplicator.close()
        run["candidates_a_page"] = round(run["candidates"] / max(read, 1), 3)
        run["estimated_a_page"] = round(run["estimated"] / max(read, 1), 3)
        run["rows_read_a_page"] = round(run["rows_read_from_disk"] / max(read, 1), 3)
        print(json.dumps(run), flush=True)
        result["runs"].append(run)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("generate")
    made.add_argument("n", type=int)
    measure = commands.add_parser("run")
    measure.add_argument("n", type=int)
    measure.add_argument("--memory")
    measure.add_argument("--skip-index", action="store_true")
    measure.add_argument("--out")
    measure.add_argument("--json")
    pairs = commands.add_parser("dupes")
    pairs.add_argument("db", nargs="?", help="an index [default: one of --pages generated pages, made first]")
    pairs.add_argument("--pages", type=int, default=1500)
    pairs.add_argument("--budgets", default="64G,default,256M,64M")
    pairs.add_argument("--clusters", action="store_true")
    pairs.add_argument("--json")
    counted = commands.add_parser("candidates")
    counted.add_argument("pages", nargs="?", help="a JSONL file of pages ({id, text}) [default: generated pages]")
    counted.add_argument("--sizes", type=lambda text: [int(n) for n in text.split(",")],
                         default=[250_000, 500_000, 1_000_000])
    counted.add_argument("--memory", help="the kept set's budget [default: dedup's]")
    counted.add_argument("--json")
    args = parser.parse_args()
    if args.command == "generate":
        generate(args.n, sys.stdout.buffer)
        return
    print_machine()
    failures = Failures()
    if args.command == "dupes":
        _dupes_main(args, failures)
        return
    if args.command == "candidates":
        _candidates_main(args, failures)
        return
    result = run(args)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as handle:
            handle.write(text + "\n")
    kept = result["dedup_stream"]["kept"]
    failures.expect(0.8 * args.n < kept < args.n, f"dedup kept {kept:,} of {args.n:,} pages (about 94% expected)")
    failures.exit()


def _candidates_main(args: argparse.Namespace, failures: Failures) -> None:
    if args.pages is not None and not os.path.isfile(args.pages):
        sys.exit(f"error: {args.pages}: no such file")
    result = candidates(args)
    if args.json:
        with open(args.json, "w") as handle:
            handle.write(json.dumps(result, indent=1) + "\n")
    for run in result["runs"]:
        failures.expect(0.8 * run["pages"] < run["kept"] <= run["pages"],
                        f"dedup of {run['pages']:,} pages kept {run['kept']:,} (about 94% expected)")
        failures.expect(run["rows_read_from_disk"] <= run["estimated"] <= run["candidates"],
                        f"{run['rows_read_from_disk']:,} rows read for {run['estimated']:,} estimates of "
                        f"{run['candidates']:,} candidates")
    failures.exit()


def _dupes_main(args: argparse.Namespace, failures: Failures) -> None:
    made = None
    if args.db is None:  # an index of --pages generated pages, made here
        made = tempfile.mkdtemp(prefix="simq-budgets-index-")
        pages, args.db = os.path.join(made, "pages.jsonl"), os.path.join(made, "pages.db")
        with open(pages, "wb") as handle:
            generate(args.pages, handle)
        subprocess.run(SIMQ + ["add", "--db", args.db, pages], check=True, capture_output=True)
        os.unlink(pages)
    try:
        result = budgets(args)
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as handle:
            handle.write(text + "\n")
    for run in result["runs"]:
        for name in ("dupes", "clusters"):
            if name in run:
                failures.expect(run[name]["same_as_first"], f"{name} at {run['memory']} differs from the first's")
        failures.expect(run["scratch_left"] == 0, f"{run['scratch_left']} scratch files left at {run['memory']}")
    failures.exit()


if __name__ == "__main__":
    main()
