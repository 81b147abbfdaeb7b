"""Build hook: compile the C parts of simhash_sqlite/native with the system C compiler, when there is one.

Every C part is one entry of TARGETS: a shared library made from its sources, optionally needing a
system header (found by compiling a one-line test). A target that cannot be built (no compiler,
`CC=/bin/false`, a missing header, a compile error) is skipped with a warning and recorded with the
reason in simhash_sqlite/native/_build.json, which the package reads (`simq --version` says "not
built: ..."); the install still succeeds and the package runs on its numpy path. With nothing built the
wheel stays pure Python; with something built it is tagged for this platform.

A target may also have optional parts (Option): a system header and library it uses where they are there
(the extension reads short texts' exact data with zlib). Without one the target is still built, without
that part, and _build.json says which part is missing and why under "without".

Environment: CC (default cc), CFLAGS (added after ours), SIMHASH_SQLITE_NO_NATIVE=1 (build nothing),
SIMHASH_SQLITE_NO_ZLIB=1 (build the extension without zlib, as where zlib.h is missing).
See simhash_sqlite/native/BUILD.md.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import NamedTuple

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

NATIVE = Path("simhash_sqlite") / "native"


class Option(NamedTuple):
    """An optional part of a target: compiled with -D`define` and linked with -l`library` where `header`
    compiles; else left out, and _build.json's "without" says so: {name: why, and what that changes}."""

    name: str
    header: str
    define: str
    library: str
    lacking: str  # what the target does without it


class Target(NamedTuple):
    """A shared library `name` + the platform's suffix, from `sources` (relative to the project root).
    (A NamedTuple, not a dataclass: hatchling loads this file without registering it as a module.)"""

    name: str
    sources: tuple[str, ...]
    headers: tuple[str, ...] = ()  # system headers it needs (skipped, with the reason, without them)
    includes: tuple[str, ...] = ()  # folders searched for headers before the system's (vendored ones)
    libraries: tuple[str, ...] = ("m",)
    flags: tuple[str, ...] = ()
    options: tuple[Option, ...] = ()


ZLIB = Option(
    "zlib", "zlib.h", "SIMHASH_HAVE_ZLIB", "z",
    "simhash_near estimates pairs of two short texts from their sketches (checked_by 'estimated') where "
    "simq checks them exactly from the index's short_text data (core/short_texts.py)",
)

ZLIB_CORE = Option(
    "zlib", "zlib.h", "SIMHASH_HAVE_ZLIB", "z",
    "add computes short texts' exact data with Python's zlib module (the same bytes, more CPU)",
)

TARGETS = [
    # The core and the per-document path of add (documents.c: short texts deflated with zlib where its header is
    # there; without it the path leaves short texts to Python's zlib).
    Target("_simhash_core", (str(NATIVE / "simhash_core.c"), str(NATIVE / "documents.c")), options=(ZLIB_CORE,)),
    # The loadable SQLite extension, the core compiled in. Named simhash so that SQLite derives its entry
    # point (sqlite3_simhash_init) from the file name: `.load .../simhash` needs no entry point.
    # zlib, where its header is there (Debian's zlib1g-dev), reads short texts' exact data (deflated): libz.so.1
    # is on every Linux; the Python package needs nothing more. SQLite's headers are vendored
    # (native/vendor/sqlite/README.md): no libsqlite3-dev needed.
    Target("simhash", (str(NATIVE / "sqlite_extension.c"), str(NATIVE / "simhash_core.c")), headers=("sqlite3ext.h",),
           includes=(str(NATIVE / "vendor" / "sqlite"),), options=(ZLIB,)),
]

# Portable x86-64 (or whatever the compiler's default target is): no -march. No contraction of a*b+c
# into an FMA, so floating point rounds as numpy's does; hidden symbols but the API's.
CFLAGS = ["-O3", "-std=c99", "-fPIC", "-shared", "-ffp-contract=off", "-fvisibility=hidden", "-fno-math-errno"]


def library_suffix() -> str:
    if sys.platform == "darwin":
        return ".dylib"
    if sys.platform == "win32":
        return ".dll"
    return ".so"


def compiler() -> list[str]:
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc") or ["cc"]


def _run(command: list[str], cwd: Path) -> str | None:
    """None when the command succeeds, else why not (one line)."""
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{command[0]}: {exc}"
    if done.returncode:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return f"{' '.join(command[:1])} failed ({done.returncode}): {lines[-1] if lines else 'no message'}"
    return None


def generate_tables(root: Path, out_dir: Path) -> str | None:
    """The Unicode tables from this interpreter's unicodedata (the one the package will run on)."""
    script = root / NATIVE / "gen_unicode_tables.py"
    return _run([sys.executable, str(script), str(out_dir / "_unicode_tables.h")], root)


def generate_rule_constants(root: Path, out_dir: Path) -> str | None:
    """The rule's numbers and the default settings from simhash_sqlite/core/rule.py (never copied by hand)."""
    script = root / NATIVE / "gen_rule_constants.py"
    rule = root / "simhash_sqlite" / "core" / "rule.py"
    return _run([sys.executable, str(script), str(rule), str(out_dir / "_rule_constants.h")], root)


def no_compiler(work: Path) -> str | None:
    """Why the C compiler cannot compile an empty program (None: it can)."""
    test = work / "compiler_test.c"
    test.write_text("int main(void) { return 0; }\n")
    why = _run([*compiler(), "-fsyntax-only", str(test)], work)
    return None if why is None else f"no working C compiler ({why})"


def has_header(header: str, work: Path, includes: tuple[str, ...] = ()) -> str | None:
    test = work / "header_test.c"
    test.write_text(f"#include <{header}>\nint main(void) {{ return 0; }}\n")
    why = _run([*compiler(), "-fsyntax-only", *(f"-I{folder}" for folder in includes), str(test)], work)
    # A compiler that fails on any file says so, not that the header is missing.
    return None if why is None else no_compiler(work) or f"{header} not found ({why})"


def _compile(root: Path, work: Path, out: Path, target: Target, options: list[Option]) -> str | None:
    extra = shlex.split(os.environ.get("CFLAGS", ""))
    command = [
        *compiler(), *CFLAGS, *target.flags, *(f"-D{o.define}" for o in options), *extra, f"-I{work}",
        f"-I{root / NATIVE}", *(f"-I{root / folder}" for folder in target.includes), "-o", str(out),
        *(str(root / s) for s in target.sources),
        *(f"-l{lib}" for lib in target.libraries), *(f"-l{o.library}" for o in options),
    ]  # fmt: skip
    return _run(command, root)


def option_missing(option: Option, work: Path) -> str | None:
    """Why an optional part is left out (None: it is built in)."""
    if os.environ.get(f"SIMHASH_SQLITE_NO_{option.name.upper()}") == "1":
        return f"SIMHASH_SQLITE_NO_{option.name.upper()}=1 at install"
    return has_header(option.header, work)


def build(root: Path, out_dir: Path, targets: list[Target] = TARGETS) -> dict[str, dict]:
    """Compile the targets into out_dir: {name: {"built": bool, "file": name, "reason": str, "without":
    {option: why it is left out: what the target then does}}}."""
    report: dict[str, dict] = {}
    if os.environ.get("SIMHASH_SQLITE_NO_NATIVE") == "1":
        return {t.name: {"built": False, "reason": "SIMHASH_SQLITE_NO_NATIVE=1 at install"} for t in targets}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # Every target says the same first reason: no compiler (not "/bin/false failed" for one and a
        # missing header for another), else tables that could not be made.
        why_first = no_compiler(work) or generate_tables(root, work) or generate_rule_constants(root, work)
        for target in targets:
            file = target.name + library_suffix()
            why = why_first
            for header in target.headers:
                why = why or has_header(header, work, tuple(str(root / folder) for folder in target.includes))
            without: dict[str, str] = {}
            options: list[Option] = []
            if why is None:
                for option in target.options:
                    missing = option_missing(option, work)
                    if missing is None:
                        options.append(option)
                    else:
                        without[option.name] = f"{missing}: {option.lacking}"
                why = _compile(root, work, out_dir / file, target, options)
                if why is not None and options:  # (a header without its library, say): try without them
                    for option in options:
                        without[option.name] = f"building with it failed ({why}): {option.lacking}"
                    why = _compile(root, work, out_dir / file, target, [])
            report[target.name] = {"built": why is None, "file": file, "reason": why or "", "without": without}
    return report


class NativeBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        editable = version == "editable"
        # An editable install runs from the source tree: the libraries go there (ignored by git).
        out_dir = root / NATIVE if editable else Path(tempfile.mkdtemp(prefix="simhash-native-"))
        if editable:  # never a stale library from an earlier build
            for target in TARGETS:
                (root / NATIVE / (target.name + library_suffix())).unlink(missing_ok=True)
        report = build(root, out_dir)
        info = out_dir / "_build.json"
        info.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
        for name, result in report.items():
            if not result["built"]:
                self.app.display_warning(f"simhash-sqlite: {name} not built: {result['reason']}")
            for part, why in result.get("without", {}).items():
                self.app.display_warning(f"simhash-sqlite: {name} built without {part}: {why}")
        if not editable:
            build_data["force_include"][str(info)] = str(NATIVE / "_build.json")
            for result in report.values():
                if result["built"]:
                    build_data["force_include"][str(out_dir / result["file"])] = str(NATIVE / result["file"])
        if any(r["built"] for r in report.values()):
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
