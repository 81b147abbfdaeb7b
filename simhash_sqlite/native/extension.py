"""The loadable SQLite extension (sqlite_extension.c): where it is, and loading it into a connection.

    import sqlite3
    from simhash_sqlite import native

    conn = sqlite3.connect("corpus.db")
    native.load(conn)                     # or: conn.load_extension(native.loadable_path())
    conn.execute("SELECT key, distance FROM simhash_near('some text', 7)").fetchall()

As sqlite-vec's `sqlite_vec.loadable_path()` / `load()`: the file is the same for every host (the stock
`sqlite3` shell's `.load`, Node's better-sqlite3, Go, Rust...), so other languages only need its path
(`simq extension` prints it). The install builds it when a C compiler is there (SQLite's headers are
vendored: native/vendor/sqlite/); without one the package still runs and ExtensionMissing says why.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SimhashError

NAME = "simhash"  # the file simhash.so: SQLite derives the entry point sqlite3_simhash_init from it
ENTRY_POINT = "sqlite3_simhash_init"
HERE = Path(__file__).resolve().parent


class ExtensionMissing(SimhashError):
    """The loadable extension was not built at install (the message says why), or this host cannot load it."""


def _suffix() -> str:
    import sys

    return {"darwin": ".dylib", "win32": ".dll"}.get(sys.platform, ".so")


def _build_record() -> dict | None:
    """The build's record of the extension (hatch_build.py's _build.json), None without one."""
    import json

    try:
        report = json.loads((HERE / "_build.json").read_text())
    except (OSError, ValueError):
        return None
    entry = report.get(NAME) if isinstance(report, dict) else None
    return entry if isinstance(entry, dict) else {}


def built_without() -> dict[str, str]:
    """The optional parts the install built the extension without, each with why and what it then does
    differently: {"zlib": "zlib.h not found (...): simhash_near estimates pairs of two short texts ..."}.
    Empty where it has them all (or was not built)."""
    without = (_build_record() or {}).get("without")
    return {str(k): str(v) for k, v in without.items()} if isinstance(without, dict) else {}


def _build_reason() -> str:
    """Why the install did not build the extension, from the build's record (hatch_build.py)."""
    import json

    try:
        report = json.loads((HERE / "_build.json").read_text())
    except (OSError, ValueError):
        return "this install has no record of a C build (reinstall with `pip install .` where a C compiler is)"
    entry = report.get(NAME) or {}
    if entry.get("built"):
        return f"the build made {entry.get('file')}, but it is not in {HERE}"
    reason = entry.get("reason") or "it was not among the parts this install built"
    return f"{reason} (a C compiler is needed at install; SQLite's headers come with the package)"


def loadable_path() -> str:
    """The path of the loadable extension (give it to `.load`, `load_extension`, `loadExtension`).
    ExtensionMissing, saying why, when the install could not build it."""
    path = HERE / (NAME + _suffix())
    if not path.is_file():
        raise ExtensionMissing(f"the SQLite extension is not built: {_build_reason()}")
    return str(path)


def load(conn) -> None:
    """Load the extension into a Python sqlite3 or apsw connection: its functions and simhash_near then
    work there as in any other host. Loading is switched on for the call only."""
    path = loadable_path()
    enable = getattr(conn, "enable_load_extension", None)
    if enable is None:
        raise ExtensionMissing(
            "this Python's sqlite3 cannot load extensions (built without SQLITE_ENABLE_LOAD_EXTENSION); "
            "use apsw, or a Python built with loadable extensions"
        )
    enable(True)
    try:
        if type(conn).__module__ == "apsw":
            conn.load_extension(path, ENTRY_POINT)
        else:
            conn.load_extension(path)
    finally:
        enable(False)
