"""End to end on a JSONL crawl, in CPU seconds: `simq add` + `simq dupes`, and `simq dedup`, as whole processes.

    .venv/bin/python bench/end_to_end.py CRAWL.jsonl [--runs 3] [--cores native,python] [--rensa] [--one-process]
    .venv/bin/python bench/end_to_end.py CRAWL.jsonl --cores native --baseline ../main   # two trees side by side

CRAWL.jsonl: bench/crawl.py's output ({"id", "text", "family", "kind"}; any JSONL of {"id", "text"}
works, without the checks that need the families). Each run, for each core in turn
(SIMHASH_SQLITE_CORE=native: the C core; =python: the numpy reference; interleaved, so the C core's
gain end to end is a ratio from one run), the venv's `simq` by path, at its default settings:

  - `simq add CRAWL --db X` into a fresh index, then `simq dupes --db X --format jsonl --out PAIRS`;
  - `simq dedup CRAWL -o OUT`;
  - with --one-process, `simq dedup` again with SIMQ_WORKERS=1 (no pool worker: what the pool's worker
    costs in CPU, and saves in wall time, on the same output).

--baseline TREE runs another checkout's package too (a folder with simhash_sqlite/ and its C core built, e.g.
the main worktree; its code on PYTHONPATH under this venv's `simq`), interleaved with this tree's for each
core, and prints this tree's CPU against it: the gain of a change from one run. Both trees must give the
same pairs and keep the same pages, and their indexes the same rows (a digest of every row but added_at).

--rensa adds rensa (Rust MinHash; a baseline, not a dependency: `.venv/bin/pip install rensa`) as its
README's "Deduplicating a dataset" example does it, in memory, in a child process: one RMinHash(num_perm=128,
seed=42) a page, updated with the page's shingles made in Python (--rensa-shingles chars5: its distinct
5-character runs, the features `simq` hashes by default; words: `text.split()`, the README's own
tokens), RMinHashLSH(threshold=0.8, num_perm=128, num_bands=16), every page inserted, then the README's
loop: a page not yet removed queries the LSH, and a candidate not yet removed whose MinHash Jaccard is
>= 0.85 is removed (the later of the two).

Each tree runs as installed: its package compiled to bytecode first (a run under PYTHONDONTWRITEBYTECODE
would compile every module it imports, each time), through the `simq` script pip writes from its own
pyproject.toml (spawned pool workers import that script). Timed per step: wall seconds; CPU seconds of
the process tree (user + sys of the process and of every process it waited for, from os.wait4: the
pool's workers count); MB of input (the crawl file's bytes / 1e6) per CPU-second; peak RSS (the largest
single process of the tree). Medians of --runs.

Quality, against exact 5-shingle Jaccard (core/shingles.py), when the crawl has families: the pairs of
`simq dupes` (truth: every pair inside a family, and every reported pair, with J >= 0.8); and the pages
each dedup drops (`simq dedup`, rensa): a page should go when an earlier page of its family has J >= 0.8
with it; a dropped page with no such page is a false drop (a dropped page outside the families counts as
one: unrelated pages share few pieces).

Checks (exit status 1): `simq add` adds every page; each run finds the same pairs and keeps the same
pages as the first, and both cores the same (bit-identical fingerprints); every page of kind "mirror"
(an identical copy of its family's original) is paired with its original by `simq dupes` and dropped by
`simq dedup` (and by rensa).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from common import BENCH, ROOT, Failures, compiled, console_script, load, print_machine, run_env

CORES = ("native", "python")
RENSA_INSTALL = ".venv/bin/pip install rensa"


@dataclass
class Step:
    wall: float
    cpu: float
    rss_mib: float
    stdout: str = ""


def run_step(command: list[str], env: dict[str, str] | None = None, stdout: Path | None = None) -> Step:
    """Run a command as a whole process: wall, CPU of its tree (wait4), peak RSS. Exits on failure."""
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        printed = out.read().decode(errors="replace")
        if process.returncode != 0:
            err.seek(0)
            sys.exit(f"error: {' '.join(command)} exited {process.returncode}: "
                     f"{err.read().decode(errors='replace')[-2000:]}")
    if stdout is not None:
        stdout.write_text(printed)
    return Step(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, printed)


def added(step: Step) -> int:
    """The documents `simq add` says it added."""
    match = re.search(r"([\d,]+) added", step.stdout)
    return int(match.group(1).replace(",", "")) if match else -1


def rows_digest(db: Path) -> str:
    """A digest of every row of an index but its added_at, in id order: two trees must write the same."""
    import hashlib

    import apsw

    digest = hashlib.sha256()
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        for row in conn.execute("SELECT key, fingerprint, b0, b1, b2, b3, length, content_hash, text, sketch, "
                                "short_text FROM documents ORDER BY id"):
            digest.update(repr(row).encode())
    finally:
        conn.close()
    return digest.hexdigest()[:16]


def read_pairs(path: Path) -> set[tuple[str, str]]:
    with open(path, encoding="utf-8") as lines:
        return {tuple(sorted((r["first"], r["second"]))) for r in map(json.loads, lines)}  # type: ignore[misc]


def read_ids(path: Path) -> list[str]:
    """The ids of a JSONL file, in order (only the id is parsed, so a big output is cheap to read)."""
    ids = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            ids.append(str(json.loads(line)["id"]))
    return ids


@dataclass
class Crawl:
    """What the checks and the quality need of the crawl: ids in order, family members, mirror pages."""

    path: Path
    ids: list[str] = field(default_factory=list)
    families: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))  # in crawl order
    kinds: dict[str, str] = field(default_factory=dict)  # id -> kind, family pages only

    @classmethod
    def read(cls, path: Path, limit: int | None = None) -> Crawl:
        crawl = cls(path)
        with open(path, encoding="utf-8") as lines:
            for number, line in enumerate(lines):
                if limit is not None and number >= limit:
                    break
                record = json.loads(line)
                key = str(record["id"])
                crawl.ids.append(key)
                family = record.get("family", -1)
                if family is not None and family >= 0:
                    crawl.families[family].append(key)
                    crawl.kinds[key] = record.get("kind", "")
        return crawl

    def mirror_pairs(self) -> set[tuple[str, str]]:
        """(original, mirror) pairs, sorted: identical texts, which every method must pair."""
        pairs = set()
        for members in self.families.values():
            originals = [m for m in members if self.kinds[m] == "original"]
            for member in members:
                if originals and self.kinds[member] == "mirror":
                    pairs.add(tuple(sorted((originals[0], member))))
        return pairs  # type: ignore[return-value]

    def texts_of(self, keys: set[str]) -> dict[str, str]:
        texts = {}
        with open(self.path, encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                if str(record["id"]) in keys:
                    texts[str(record["id"])] = record["text"]
        return texts


# -- rensa: its README's dedup example, in a child process -------------------------------------------------


def rensa_child(crawl: str, shingles: str, out: str) -> None:
    """The README's "Deduplicating a dataset" with rensa, on the crawl; writes the removed ids and the
    CPU seconds of each phase (this process, getrusage) to `out` as JSON."""
    import resource

    from rensa import RMinHash, RMinHashLSH

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def tokens(text: str) -> list[str]:
        if shingles == "words":
            return text.split()
        return list({text[i:i + 5] for i in range(max(1, len(text) - 4))})

    phases = {"start-up": cpu()}
    keys = []
    minhashes = {}
    in_shingles = in_minhash = 0.0  # process_time() is cheap enough to call around each page
    with open(crawl, encoding="utf-8") as lines:
        for idx, line in enumerate(lines):
            record = json.loads(line)
            keys.append(str(record["id"]))
            t0 = time.process_time()
            shingled = tokens(record["text"])
            t1 = time.process_time()
            m = RMinHash(num_perm=128, seed=42)
            m.update(shingled)
            minhashes[idx] = m
            t2 = time.process_time()
            in_shingles += t1 - t0
            in_minhash += t2 - t1
    read = cpu()
    phases["read and parse"] = read - in_shingles - in_minhash
    phases["shingles (Python)"] = phases["read and parse"] + in_shingles
    phases["RMinHash (Rust)"] = read
    lsh = RMinHashLSH(threshold=0.8, num_perm=128, num_bands=16)
    for doc_id, mh in minhashes.items():
        lsh.insert(doc_id, mh)
    phases["LSH insert"] = cpu()
    to_remove = set()
    for doc_id, mh in minhashes.items():
        if doc_id in to_remove:
            continue
        for candidate in lsh.query(mh):
            if candidate != doc_id and candidate not in to_remove:
                if mh.jaccard(minhashes[candidate]) >= 0.85:
                    to_remove.add(max(doc_id, candidate))
    phases["query and remove"] = cpu()
    names = list(phases)
    split = {name: phases[name] - (phases[names[i - 1]] if i else 0.0) for i, name in enumerate(names)}
    Path(out).write_text(json.dumps({"removed": [keys[i] for i in sorted(to_remove)], "phases": split}))


def run_rensa(crawl: Path, shingles: str, folder: Path) -> tuple[Step, list[str], dict[str, float]]:
    out = folder / "rensa.json"
    code = (f"import sys; sys.path.insert(0, {str(BENCH)!r}); import end_to_end; "
            f"end_to_end.rensa_child({str(crawl)!r}, {shingles!r}, {str(out)!r})")
    step = run_step([sys.executable, "-c", code])
    done = json.loads(out.read_text())
    out.unlink()
    return step, done["removed"], done["phases"]


# -- quality ---------------------------------------------------------------------------------------------------


class Truth:
    """Exact 5-shingle Jaccard of pairs of the crawl's pages, computed once a pair."""

    def __init__(self, crawl: Crawl, extra_pairs: set[tuple[str, str]]) -> None:
        from simhash_sqlite.core.shingles import jaccard_of_sets, shingle_set

        self.crawl = crawl
        keys = {k for members in crawl.families.values() for k in members} | {k for p in extra_pairs for k in p}
        texts = crawl.texts_of(keys)
        self.sets = {key: shingle_set(text) for key, text in texts.items()}
        self._jaccard = jaccard_of_sets
        self.known: dict[tuple[str, str], float] = {}

    def jaccard(self, a: str, b: str) -> float:
        pair = (a, b) if a < b else (b, a)
        if pair not in self.known:
            self.known[pair] = self._jaccard(self.sets[a], self.sets[b])
        return self.known[pair]

    def pairs(self, found: set[tuple[str, str]]) -> tuple[float, float, int]:
        """(precision, recall, true pairs) of reported pairs."""
        candidates = set(found)
        for members in self.crawl.families.values():
            candidates |= {tuple(sorted((a, b))) for i, a in enumerate(members) for b in members[i + 1:]}
        truth = {p for p in candidates if self.jaccard(*p) >= 0.8}
        hits = len(found & truth)
        return hits / max(len(found), 1), hits / max(len(truth), 1), len(truth)

    def should_drop(self) -> set[str]:
        """Pages with an earlier page of their family at J >= 0.8."""
        drop = set()
        for members in self.crawl.families.values():
            for i, page in enumerate(members):
                if any(self.jaccard(earlier, page) >= 0.8 for earlier in members[:i]):
                    drop.add(page)
        return drop

    def drops(self, dropped: set[str]) -> tuple[float, int, int]:
        """(recall of the pages that should go, false drops, pages that should go)."""
        should = self.should_drop()
        return len(dropped & should) / max(len(should), 1), len(dropped - should), len(should)


# -- the run ----------------------------------------------------------------------------------------------------


def label(step: str) -> str:
    """`simq add` + `simq dupes` for "add + dupes"; "dedup1" is dedup in one process."""
    if step == "dedup1":
        return "`simq dedup`, one process (`SIMQ_WORKERS=1`)"
    return " + ".join(f"`simq {name}`" for name in step.split(" + "))


def median_step(steps: list[Step]) -> Step:
    return Step(statistics.median(s.wall for s in steps), statistics.median(s.cpu for s in steps),
                max(s.rss_mib for s in steps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("crawl", type=Path, help="JSONL crawl (bench/crawl.py)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cores", default=",".join(CORES), help="SIMHASH_SQLITE_CORE values to run, in turn")
    parser.add_argument("--rensa", action="store_true", help=f"also rensa, as its README dedups ({RENSA_INSTALL})")
    parser.add_argument("--rensa-shingles", choices=("chars5", "words"), default="chars5")
    parser.add_argument("--no-quality", action="store_true", help="skip precision and recall (exact Jaccard)")
    parser.add_argument("--folder", type=Path, help="where indexes and outputs go [default: a temporary folder]")
    parser.add_argument("--baseline", type=Path, help="another checkout (C core built) to run side by side")
    parser.add_argument("--one-process", action="store_true",
                        help="also simq dedup with SIMQ_WORKERS=1 (no pool worker), in the same turns")
    args = parser.parse_args()
    cores = [c for c in args.cores.split(",") if c]
    if not cores or any(c not in CORES for c in cores):
        sys.exit(f"error: --cores takes {' and '.join(CORES)}, comma-separated")
    if args.baseline is not None and not (args.baseline / "simhash_sqlite" / "__init__.py").is_file():
        sys.exit(f"error: --baseline {args.baseline} is not a checkout of the package")
    # What runs, in turn within each run: each core, with this tree's code, then (--baseline) the other's,
    # each tree through the `simq` script pip writes from its own pyproject.toml.
    scripts = Path(tempfile.mkdtemp(prefix="end_to_end_scripts_"))
    this = (run_env(ROOT), [sys.executable, str(console_script(ROOT, scripts / "simq"))])
    trees = [("", *this)]
    if args.baseline is not None:
        tree = args.baseline.resolve()
        baseline_simq = console_script(tree, scripts / "simq-baseline")
        trees.append((", baseline", run_env(tree), [sys.executable, str(baseline_simq)]))
    variants = [(core + suffix, dict(env, SIMHASH_SQLITE_CORE=core), command) for core in cores
                for suffix, env, command in trees]
    names = [name for name, _, _ in variants]
    if not args.crawl.is_file():
        sys.exit(f"error: no crawl file {args.crawl}")
    if args.rensa:
        try:
            import rensa  # noqa: F401
        except ImportError:
            sys.exit(f"error: rensa is not installed; it is a baseline, not a dependency: {RENSA_INSTALL}")
    print_machine()
    for tree in [ROOT] + ([args.baseline] if args.baseline is not None else []):
        compiled(tree)
    crawl = Crawl.read(args.crawl)
    megabytes = args.crawl.stat().st_size / 1e6
    mirrors = crawl.mirror_pairs()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="end_to_end_"))
    folder.mkdir(parents=True, exist_ok=True)
    failures = Failures()
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    started = f"{time.strftime('%H:%M', time.gmtime())} UTC, load average {load()}"
    steps: dict[tuple[str, str], list[Step]] = defaultdict(list)
    pairs: dict[str, set[tuple[str, str]]] = {}
    kept: dict[str, list[str]] = {}
    digests: dict[str, str] = {}
    rensa_removed: list[str] | None = None
    rensa_phases: list[dict[str, float]] = []
    try:
        for run in range(args.runs):
            for core, env, simq in variants:
                tag = core.replace(", ", "-")
                db, found, out = folder / f"{tag}.db", folder / f"pairs-{tag}.jsonl", folder / f"kept-{tag}.jsonl"
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{db}{suffix}").unlink(missing_ok=True)
                add = run_step([*simq, "add", str(args.crawl), "--db", str(db)], env)
                failures.expect(added(add) == len(crawl.ids),
                                f"{core}: simq add added {added(add)} of {len(crawl.ids)} pages")
                if args.baseline is not None:
                    this_digest = rows_digest(db)
                    failures.expect(digests.setdefault(core, this_digest) == this_digest,
                                    f"{core}, run {run + 1}: the index's rows differ from run 1's")
                dupes = run_step([*simq, "dupes", "--db", str(db), "--format", "jsonl", "--out", str(found)], env)
                dedup = run_step([*simq, "dedup", str(args.crawl), "-o", str(out)], env)
                for name, step in (("add", add), ("dupes", dupes), ("dedup", dedup)):
                    steps[(name, core)].append(step)
                this_pairs, this_kept = read_pairs(found), read_ids(out)
                if args.one_process:  # the same output from one process: the pool's share of the CPU
                    alone = run_step([*simq, "dedup", str(args.crawl), "-o", str(out)], dict(env, SIMQ_WORKERS="1"))
                    steps[("dedup1", core)].append(alone)
                    failures.expect(read_ids(out) == this_kept, f"{core}: simq dedup in one process kept other pages")
                failures.expect(pairs.setdefault(core, this_pairs) == this_pairs,
                                f"{core}, run {run + 1}: simq dupes found other pairs than run 1")
                failures.expect(kept.setdefault(core, this_kept) == this_kept,
                                f"{core}, run {run + 1}: simq dedup kept other pages than run 1")
                log(f"run {run + 1}, {core}: add {add.wall:.1f} s ({add.cpu:.1f} CPU-s), dupes {dupes.wall:.1f} s "
                    f"({dupes.cpu:.1f}), dedup {dedup.wall:.1f} s ({dedup.cpu:.1f}); {len(this_pairs):,} pairs, "
                    f"{len(this_kept):,} kept; load {load()}")
                for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), out):
                    path.unlink(missing_ok=True)
            if args.rensa:
                step, removed, phases = run_rensa(args.crawl, args.rensa_shingles, folder)
                steps[("rensa", "")].append(step)
                rensa_phases.append(phases)
                failures.expect(rensa_removed is None or rensa_removed == removed,
                                f"rensa, run {run + 1}: removed other pages than run 1")
                rensa_removed = removed
                log(f"run {run + 1}, rensa: {step.wall:.1f} s ({step.cpu:.1f} CPU-s), {len(removed):,} removed; "
                    f"load {load()}")
    finally:
        shutil.rmtree(scripts, ignore_errors=True)
        if args.folder is None:
            shutil.rmtree(folder, ignore_errors=True)
    finished = f"{time.strftime('%H:%M', time.gmtime())} UTC, load average {load()}"
    first = names[0]
    for core in names[1:]:
        failures.expect(pairs[core] == pairs[first], f"simq dupes: {core} and {first} found other pairs "
                                                     f"({len(pairs[core] ^ pairs[first]):,} differ)")
        failures.expect(kept[core] == kept[first], f"simq dedup: {core} and {first} kept other pages")
    for core in cores:
        if f"{core}, baseline" in digests:
            failures.expect(digests[core] == digests[f"{core}, baseline"],
                            f"simq add ({core}): this tree's index rows differ from the baseline's")
    dropped = {core: set(crawl.ids) - set(kept[core]) for core in names}
    missed = len(mirrors - pairs[first])
    failures.expect(missed == 0, f"simq dupes missed {missed} of {len(mirrors)} (original, mirror) pairs")
    mirror_pages = {b if crawl.kinds.get(b) == "mirror" else a for a, b in mirrors}
    failures.expect(mirror_pages <= dropped[first],
                    f"simq dedup kept {len(mirror_pages - dropped[first])} mirror pages")
    if rensa_removed is not None:
        failures.expect(mirror_pages <= set(rensa_removed),
                        f"rensa kept {len(mirror_pages - set(rensa_removed))} mirror pages")

    print(f"\n## End to end: {args.crawl.name}, {len(crawl.ids):,} pages, {megabytes:,.1f} MB of JSONL "
          f"({len(crawl.families):,} families); medians of {args.runs}\n")
    print(f"Started {started}; finished {finished}. CPU: user + sys of the process tree (os.wait4); peak RSS: the "
          f"largest process.\n")
    print("| step | core | wall s | CPU s | MB per CPU-s | peak RSS MiB |")
    print("|---|---|---|---|---|---|")
    medians: dict[tuple[str, str], Step] = {}
    for core in names:
        runs = [steps[(name, core)] for name in ("add", "dupes", "dedup")]
        medians[("add", core)], medians[("dupes", core)], medians[("dedup", core)] = map(median_step, runs)
        medians[("add + dupes", core)] = median_step([Step(a.wall + d.wall, a.cpu + d.cpu, max(a.rss_mib, d.rss_mib))
                                                      for a, d in zip(runs[0], runs[1])])
        if args.one_process:
            medians[("dedup1", core)] = median_step(steps[("dedup1", core)])
        for name in ("add", "dupes", "add + dupes", "dedup") + (("dedup1",) if args.one_process else ()):
            m = medians[(name, core)]
            print(f"| {label(name)} | {core} | {m.wall:.1f} | {m.cpu:.1f} | **{megabytes / m.cpu:.1f}** "
                  f"| {m.rss_mib:.0f} |")
    if args.rensa:
        m = medians[("rensa", "")] = median_step(steps[("rensa", "")])
        print(f"| rensa (README dedup, {args.rensa_shingles}) | Rust | {m.wall:.1f} | {m.cpu:.1f} "
              f"| **{megabytes / m.cpu:.1f}** | {m.rss_mib:.0f} |")
        split = {name: statistics.median(p[name] for p in rensa_phases) for name in rensa_phases[0]}
        print("\nrensa's CPU by phase (its own getrusage, medians): "
              + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in split.items()))
    if args.baseline is not None:
        print(f"\nThis tree against the baseline {args.baseline} (its CPU / this tree's, medians of runs interleaved): "
              + "; ".join(f"{core}: " + ", ".join(
                  f"{label(name)} {medians[(name, f'{core}, baseline')].cpu / medians[(name, core)].cpu:.2f}x"
                  for name in ("add", "dupes", "add + dupes", "dedup")) for core in cores)
              + (f"; the indexes' rows identical ({', '.join(f'{c} {digests[c]}' for c in cores)})"
                 if all(digests.get(c) == digests.get(f"{c}, baseline") for c in cores) else ""))
    if len(cores) > 1:
        print(f"\nThe C core's gain end to end (CPU of {cores[1]} / {first}, medians of runs interleaved): "
              + ", ".join(f"{label(name)} {medians[(name, cores[1])].cpu / medians[(name, first)].cpu:.2f}x"
                          for name in ("add", "dupes", "add + dupes", "dedup")))
    # issue 34's aims: add >= 100 MB per CPU-s, dedup in one process >= 80, rensa >= 5x add + dupes
    aims = [f"`simq add` {megabytes / medians[('add', first)].cpu:.1f} MB per CPU-s ({first}; aim >= 100), "
            f"`simq dedup` {megabytes / medians[('dedup', first)].cpu:.1f}"
            + (f", in one process {megabytes / medians[('dedup1', first)].cpu:.1f} (aim >= 80)" if args.one_process
               else "")]
    if args.rensa:
        ratio = medians[("rensa", "")].cpu / medians[("add + dupes", first)].cpu
        aims.append(f"rensa's CPU / `simq add` + `simq dupes` ({first}) = {ratio:.2f}x (aim >= 5)")
    print("\nAims: " + "; ".join(aims) + ".")

    if not args.no_quality and crawl.families:
        truth = Truth(crawl, set().union(*pairs.values()))
        precision, recall, true_pairs = truth.pairs(pairs[first])
        print(f"\n`simq dupes` ({first}): {len(pairs[first]):,} pairs; precision {precision:.4f}, recall {recall:.4f} "
              f"of {true_pairs:,} true pairs (exact 5-shingle Jaccard >= 0.8)\n")
        print("| dedup | dropped | recall of the pages that should go | false drops |")
        print("|---|---|---|---|")
        outcomes = {f"`simq dedup` ({first})": dropped[first]}
        if rensa_removed is not None:
            outcomes[f"rensa (README dedup, {args.rensa_shingles})"] = set(rensa_removed)
        for name, gone in outcomes.items():
            recall, false_drops, should = truth.drops(gone)
            print(f"| {name} | {len(gone):,} | {recall:.4f} of {should:,} | {false_drops:,} |")
    failures.exit()


if __name__ == "__main__":
    main()
