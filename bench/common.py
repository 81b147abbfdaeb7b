"""What every bench script shares: the tree it measures, the `simq` to run, timing, the machine, data.

A script does `import common` first (its own folder is on sys.path when it runs as
`python bench/NAME.py`, from any folder): that puts this checkout's package first on sys.path and on
PYTHONPATH, so the script and every `simq` it starts measure the code beside it, installed or not.

    from common import SIMQ, Failures, machine, median_seconds, read_texts, write_corpus
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from io import BytesIO
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent  # the checkout whose code the scripts measure
BENCH = ROOT / "bench"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

T = TypeVar("T")

CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def simq_command() -> list[str]:
    """The `simq` of the Python running this script: the console script beside sys.executable (a
    virtual environment's bin/), else `python -m simhash_sqlite`. Both import this checkout first."""
    script = Path(sys.executable).with_name("simq")
    return [str(script)] if script.exists() else [sys.executable, "-m", "simhash_sqlite"]


SIMQ = simq_command()

# The `simq` console script as a file, for a tree put on PYTHONPATH: spawned pool workers import it too
# (as __mp_main__), as they do for users. Code run under a baseline tree imports what every tree has.
SIMQ_SCRIPT = """import sys
from simhash_sqlite.cli import main
if __name__ == "__main__":
    sys.exit(main())
"""


# -- correctness: a script exits non-zero when its own check fails ---------------------------------


class Failures:
    """The script's own correctness checks. `expect(ok, what)` records a failed one; `exit()` at the
    end of main() prints them to stderr and exits with status 1 if any failed (bench/smoke.py relies
    on that exit status)."""

    def __init__(self) -> None:
        self.failed: list[str] = []

    def expect(self, ok: bool, what: str) -> bool:
        if not ok:
            self.failed.append(what)
        return ok

    def exit(self) -> None:
        if self.failed:
            for what in self.failed:
                print(f"FAILED: {what}", file=sys.stderr)
            sys.exit(1)


def yes_no(ok: bool) -> str:
    """A table cell for a correctness column: the runner fails on the script's exit status, not on it."""
    return "yes" if ok else "NO"


# -- timing --------------------------------------------------------------------------------------


def median_seconds(action: Callable[[], T], repeats: int) -> tuple[float, T]:
    """(median wall seconds of `repeats` runs of action(), the last run's result)."""
    times, result = [], None
    for _ in range(max(1, repeats)):
        started = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result  # type: ignore[return-value]


def median_rate(megabytes: float, runs: int, action: Callable[[], Any]) -> float:
    """MB/s of the median run."""
    return megabytes / median_seconds(action, runs)[0]


def side_by_side(megabytes: float, runs: int, trees: dict[str, Path], seconds) -> dict[str, float]:
    """MB/s of each tree, runs alternating between them; seconds(tree) times one run."""
    times: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(runs):
        for name, tree in trees.items():
            times[name].append(seconds(tree))
    return {name: megabytes / statistics.median(t) for name, t in times.items()}


def percentiles_ms(seconds: Iterable[float], *qs: float) -> tuple[float, ...]:
    """Percentiles (0-100) of durations given in seconds, in milliseconds."""
    values = sorted(s * 1e3 for s in seconds)
    if not values:
        return tuple(float("nan") for _ in qs)
    out = []
    for q in qs:
        position = (len(values) - 1) * q / 100
        low, high = math.floor(position), math.ceil(position)
        out.append(values[low] + (values[high] - values[low]) * (position - low))
    return tuple(out)


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def parallel_headroom(processes: int) -> float:
    """Speed-up of a pure CPU loop on `processes` processes vs one: what the machine gives right now
    (other jobs share it), so a pool's figures can be read against it."""
    import multiprocessing

    n = 5_000_000
    t0 = time.perf_counter()
    for _ in range(processes):
        _spin(n)
    serial = time.perf_counter() - t0
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        pool.map(_spin, [1] * processes)  # start the workers first
        t0 = time.perf_counter()
        pool.map(_spin, [n] * processes)
        return serial / (time.perf_counter() - t0)


# -- the machine ---------------------------------------------------------------------------------

# The CPU flags that matter to numpy's popcount and hashing kernels and to any C code of ours.
CPU_FLAGS = ("popcnt", "sse4_2", "avx", "avx2", "bmi2", "avx512f", "avx512bw", "avx512_vpopcntdq", "neon", "asimd",
             "sve")


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _cpuinfo() -> tuple[str, list[str]]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), []
    model, flags = platform.machine(), []
    for line in text.splitlines():
        name, _, value = line.partition(":")
        name = name.strip()
        if name in ("model name", "Hardware", "CPU part") and model == platform.machine():
            model = value.strip()
        elif name in ("flags", "Features") and not flags:
            flags = value.split()
    return model, [f for f in CPU_FLAGS if f in flags]


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


def commit() -> str:
    """The checkout's short commit, with '+' when it has uncommitted changes ('?' outside git)."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode:
        return "?"
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return head.stdout.strip() + ("+" if dirty else "")


def machine() -> str:
    """One line for a figure's provenance: CPU, its relevant flags, cores, memory, load, software, date,
    commit. Every script prints it first."""
    import numpy

    model, flags = _cpuinfo()
    memory = _memory_gib()
    try:
        import apsw

        sqlite = f"apsw {apsw.apsw_version()} (SQLite {apsw.sqlite_lib_version()})"
    except ImportError:
        sqlite = "no apsw"
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"machine: {model}; flags {' '.join(flags) or 'none known'}; {CORES} cores"
            + (f", {memory:.0f} GiB" if memory else "") + f"; load {load()}; Python {platform.python_version()}, "
            f"numpy {numpy.__version__}, {sqlite}; {when}; commit {commit()}")


def print_machine(file=None) -> None:
    print(machine(), file=file or sys.stdout, flush=True)


# -- trees: this checkout against a baseline commit ------------------------------------------------


def baseline_tree(ref: str, tmp: Path, name: str = "baseline") -> Path:
    """The commit's files, extracted from git into tmp/name (no worktree left behind), with the C parts its
    own build makes: git holds no compiled library, and without them the tree would run its numpy path."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    target = tmp / name
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    if (target / "hatch_build.py").exists():
        _build_native(target, tmp / f"{name}-wheel")
    return target


def _build_native(tree: Path, out: Path) -> None:
    """Build tree's wheel as `pip install` would (its own hook, the machine's compiler) and put the wheel's
    native files beside the tree's sources, as an editable install does."""
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(tree)],
                   check=True, stdout=subprocess.DEVNULL)
    (wheel,) = out.glob("*.whl")
    native = "simhash_sqlite/native/"
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist() if m.startswith(native) and not m.endswith((".py", ".c", ".h"))]
        archive.extractall(tree, members)
    built = [m.removeprefix(native) for m in members if m.endswith(".so")]
    print(f"{tree.name}: built {', '.join(built) or 'nothing (its numpy path runs)'}", file=sys.stderr)


def console_script(tree: Path, path: Path) -> Path:
    """The `simq` script pip writes from tree's pyproject.toml ([project.scripts]), at path, for a tree put
    on PYTHONPATH: spawned pool workers import it (as __mp_main__), as they import an installed one."""
    import re  # (tomllib is Python 3.11+; the package supports 3.10)

    found = re.search(r'^simq\s*=\s*"([\w.]+):(\w+)"', (tree / "pyproject.toml").read_text(), re.MULTILINE)
    if found is None:
        raise SystemExit(f"error: {tree}/pyproject.toml names no simq entry point")
    module, function = found.groups()
    path.write_text(f"import sys\nfrom {module} import {function}\n"
                    f"if __name__ == '__main__':\n    sys.exit({function}())\n")
    return path


def compiled(tree: Path) -> None:
    """Write the bytecode of tree's package, as an install does: otherwise a child run under
    PYTHONDONTWRITEBYTECODE compiles every module it imports, each run (0.1-0.2 CPU-s of a `simq add`)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "simhash_sqlite")], check=True)


def run_env(tree: Path, **extra: str) -> dict[str, str]:
    """The environment of a child process that imports `tree`'s package."""
    return dict(os.environ, PYTHONPATH=str(tree), **extra)


def commit_of(ref: str) -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", ref], capture_output=True, text=True)
    return done.stdout.strip() or ref


# -- data ----------------------------------------------------------------------------------------


def read_jsonl(path: str | Path) -> Iterator[dict]:
    """The objects of a JSONL file, one a line (blank lines skipped)."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def read_field(path: str | Path, field: str = "text", limit_mb: float | None = None) -> list[str]:
    """The string `field` of each line of a JSONL file, in order, until their UTF-8 reaches limit_mb MB."""
    texts, size = [], 0
    for record in read_jsonl(path):
        text = record.get(field)
        if isinstance(text, str):
            texts.append(text)
            size += len(text.encode("utf-8", "surrogatepass"))
            if limit_mb is not None and size >= limit_mb * 1e6:
                break
    return texts


def read_texts(paths: Iterable[str | Path]) -> list[str]:
    """The "text" of every line of JSONL files of {"id", "text"} objects."""
    return [record.get("text") or "" for path in paths for record in read_jsonl(path)]


_ONSETS = ["", "b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "v", "w", "st", "tr", "pl", "ch"]
_VOWELS = ["a", "e", "i", "o", "u", "ea", "io", "ou"]
_CODAS = ["", "", "n", "r", "s", "t", "l", "nd", "ck"]


def _vocabulary(lang: str, size: int, rng: random.Random) -> list[str]:
    if lang == "zh":
        # Han characters from the common block, one or two to a word (jieba cuts them its own way).
        chars = [chr(c) for c in rng.sample(range(0x4E00, 0x9FA5), 1500)]
        return ["".join(rng.choice(chars) for _ in range(rng.choice((1, 2, 2, 3)))) for _ in range(size)]
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                          for _ in range(rng.choice((1, 2, 2, 3)))))
    return sorted(words)


def generated_text(lang: str, characters: int, rng: random.Random, vocabulary: list[str]) -> str:
    """Paragraphs of sentences of Zipf-distributed words (`vocabulary`), about `characters` long."""
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    paragraphs, size = [], 0
    while size < characters:
        sentences = []
        for _ in range(rng.randint(2, 6)):
            words = rng.choices(vocabulary, weights, k=rng.randint(5, 18))
            if lang == "zh":
                sentences.append("".join(words) + rng.choice("。。。！？"))
            else:
                sentences.append(" ".join(words).capitalize() + rng.choice("...!?"))
        paragraph = ("" if lang == "zh" else " ").join(sentences)
        paragraphs.append(paragraph)
        size += len(paragraph) + 2
    return "\n\n".join(paragraphs)


def write_corpus(path: str | Path, lang: str, documents: int, seed: int = 1, characters: tuple[int, int] = (300, 6000),
                 ) -> Path:
    """A JSONL corpus of generated documents ({"id", "text"}), English ("en") or Chinese ("zh") words
    from a fixed seed: the stand-in for a real corpus in smoke runs. Real figures need real text."""
    rng = random.Random(f"{lang}/{seed}")
    vocabulary = _vocabulary(lang, 3000, rng)
    path = Path(path)
    with open(path, "w", encoding="utf-8") as out:
        for i in range(documents):
            size = int(math.exp(rng.uniform(math.log(characters[0]), math.log(characters[1]))))
            text = generated_text(lang, size, rng, vocabulary)
            out.write(json.dumps({"id": f"{lang}-{i}", "text": text}, ensure_ascii=False) + "\n")
    return path
