"""The quick lane: `simq hash TEXT` and `simq near --key KEY` (or `simq near TEXT`, or `--file FILE`) run here,
before typer, rich and numpy are imported, where this lane prints what the full command would print, byte for
byte; run() returns None for every other command line, and for any case it does not answer itself, before it has
printed a thing.

Why: the answer of such a command takes milliseconds; Python starting and importing typer, rich, numpy and
the whole package took 150-180 ms of it (bench/startup.py). What it takes:
- a command line of only the options below, each once, with values click would take as they are;
- for near's records and lines: stdout and stderr that are not terminals, and no FORCE_COLOR, TTY_COMPATIBLE or
  TTY_INTERACTIVE (rich then draws plain text, which words.py writes the same); else they are printed by the
  full command's own function (cli/reports.print_matches, handed in by __main__ as on_terminal: rich, without
  typer and the command modules; this layer imports nothing of cli/);
  hash prints plain text either way (print and render_one's json, as hash_command);
- hash: a text the C core fingerprints (native.fingerprint_one with the default settings where no file is at
  --db, else the extension with the index's: quick_near.QuickIndex.fingerprint); a text it declines is the
  numpy reference's;
- near: the check at its default threshold, k <= quick_near.MOST_K, and an answer from find/quick_near.py
  (the loadable extension's simhash_near_verdicts: the same verdicts as the reference, or none); --file: a
  text file read whole as UTF-8 (_file_text: what pipeline.sources.read_one reads of it).
tests/test_quick_lane.py runs both lanes on the same command lines and compares every byte and exit status.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from .. import native
from ..core.rule import CONFIRM_K, READ_WHOLE_BYTES
from ..core.settings import FingerprintSettings
from ..errors import printable
from ..find.quick_near import QuickIndex
from ..store.texts import JSONL_SUFFIXES, file_keys_out_of_reach
from .words import (
    check_hints,
    check_summary,
    hex_of,
    json_text,
    keys_out_of_reach_note,
    match_json,
    plain_table,
    table_cell,
)

DEFAULT_DB = "simhash.db"  # cli/options.py DEFAULT_DB, and its environment variable
DB_VARIABLE = "SIMQ_DB"
# The options each command takes here: True where the option takes a value.
HASH_OPTIONS = {"--db": True, "--signed": False, "--format": True, "--json": False}
NEAR_OPTIONS = {"--db": True, "--key": True, "--file": True, "-f": True, "--k": True, "-k": True, "--limit": True,
                "--format": True, "--json": False, "--check": False}
FORMATS = ("table", "json", "jsonl")  # (csv and tsv: the full command)
RICH_VARIABLES = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
LONG_TEXT = 1 << 22  # core.fingerprint.LONG_TEXT: a longer text is fingerprinted in pieces


# How near's answer is printed on a terminal: (notes for stderr, match_json records, check summary, k, format).
TerminalPrinter = Callable[[list[str], list[dict], object, int, str], None]


def run(argv: list[str], on_terminal: TerminalPrinter | None = None) -> int | None:
    """The exit status of a command line this lane answered (0), or None: the full command runs it.
    on_terminal: what prints near's answer on a terminal (None: the full command does)."""
    if not argv or argv[0] not in ("hash", "near"):
        return None
    options = _parsed(argv[1:], HASH_OPTIONS if argv[0] == "hash" else NEAR_OPTIONS)
    if options is None:
        return None
    printed = _hash(options) if argv[0] == "hash" else _near(options, None if _plain_streams() else on_terminal)
    if printed is None:
        return None
    if callable(printed):  # rich's consoles print it, and end on a closed pipe as the full command's do
        printed()
        return 0
    for stream, text in printed:  # in the full command's order, each flushed as rich flushes each print
        try:
            stream.write(text)
            stream.flush()
        except BrokenPipeError:  # the reader has gone (simq ... | head): quiet, as every simq command
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
            return 0
        except OSError as exc:  # (a full disk under > FILE): cli/errors.friendly_errors' line and status
            said = f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")
            sys.stderr.write(f"error: {printable(said)}\n")
            return 1
    return 0


def _plain_streams() -> bool:
    if any(name in os.environ for name in RICH_VARIABLES):
        return False
    try:
        return not sys.stdout.isatty() and not sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _parsed(args: list[str], known: dict[str, bool]) -> dict[str, str | bool | list[str]] | None:
    """{option: value or True, "": [positional arguments]}, or None for what only click reads as it does
    (an unknown option, one given twice, a value that looks like an option, "--", "-" for stdin)."""
    found: dict[str, str | bool | list[str]] = {}
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-"):
            positional.append(arg)
            i += 1
            continue
        name, equals, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name not in known or name in found or ("-k" if name == "--k" else "--k" if name == "-k" else "") in found:
            return None
        if known[name]:
            if not equals:
                if i + 1 >= len(args):
                    return None
                value = args[i + 1]
                i += 1
            if value.startswith("-") or not value:
                return None
            found[name] = value
        elif equals:
            return None
        else:
            found[name] = True
        i += 1
    found[""] = positional
    return found


def _db(options: dict) -> str | None:
    if "--db" in options:
        return options["--db"]
    value = os.environ.get(DB_VARIABLE)
    if value is None:
        return DEFAULT_DB
    return value or None  # (set but empty: as click reads it)


def _format(options: dict) -> str | None:
    if options.get("--json"):
        return "json" if options.get("--format", "json") == "json" else None
    chosen = options.get("--format", "table")
    return chosen if chosen in FORMATS else None


Printed = list[tuple[TextIO, str]]  # (stdout or stderr, text), in order


def _hash(options: dict) -> Printed | None:
    """search_commands.hash_command for a text, with the settings of the index at --db if there is one."""
    db, format_, texts = _db(options), _format(options), options[""]
    if db is None or format_ is None or len(texts) != 1 or len(texts[0]) > LONG_TEXT:
        return None
    fingerprint = _of_index(db, texts[0]) if os.path.lexists(db) else _of_defaults(texts[0])
    if fingerprint is None:
        return None  # declined: the numpy reference; no features: the full command's error
    signed = fingerprint - (1 << 64) if fingerprint >> 63 else fingerprint
    if format_ == "table":
        return [(sys.stdout, f"{signed if options.get('--signed') else hex_of(fingerprint)}\n")]
    return [(sys.stdout, json_text({"fingerprint": hex_of(fingerprint), "signed": signed}) + "\n")]


def _of_defaults(text: str) -> int | None:
    """The fingerprint of a text with the default settings by the C core, or None (see _hash)."""
    settings = FingerprintSettings()
    try:
        lib = native.core()
    except native.NativeUnavailable:
        return None
    if lib is None or not native.supports(settings):
        return None
    fingerprint, _, status = native.fingerprint_one(lib, text, ngram=settings.ngram, weights=settings.weights)
    return None if status & native.DECLINED or not status & native.HAS_FINGERPRINT else fingerprint


def _of_index(db: str, text: str) -> int | None:
    """The fingerprint of a text with an index's settings, by the extension the index is searched with."""
    index = QuickIndex.open(db)
    if index is None:
        return None
    with index:
        return index.fingerprint(text)


def _near(options: dict, on_terminal: TerminalPrinter | None = None) -> Printed | Callable[[], None] | None:
    """search_commands.near for --key KEY, one text or --file FILE, checked at the default threshold (on_terminal:
    streams that are terminals, and what prints there)."""
    db, format_, texts, key = _db(options), _format(options), options[""], options.get("--key")
    file = options.get("--file", options.get("-f"))
    if db is None or format_ is None or "--file" in options and "-f" in options:
        return None
    if len(texts) + (key is not None) + (file is not None) != 1:
        return None
    if on_terminal is None and not _plain_streams():
        return None
    text = texts[0] if texts else _file_text(file) if file is not None else None
    if file is not None and text is None:
        return None
    if texts and (len(texts[0]) > READ_WHOLE_BYTES or ("\n" not in texts[0] and os.path.isfile(texts[0]))):
        return None  # (a file's name: the full command says which is searched)
    k, limit = _whole(options.get("-k", options.get("--k")), CONFIRM_K), _whole(options.get("--limit"), None)
    if k is False or limit is False:
        return None
    shown = os.fspath(Path(db))  # as SimhashIndex.path
    index = QuickIndex.open(db)
    if index is None:
        return None
    with index:
        answer = index.search(key=key, text=text, k=k, limit=limit)
        if answer is None:
            return None
        notes = [keys_out_of_reach_note(shown)] if index.key_root is None and file_keys_out_of_reach(index.conn) else []
    matches, report = answer.matches, answer.report
    records = [match_json(m) for m in matches]
    if on_terminal is not None:
        return functools.partial(on_terminal, notes, records, report, k, format_)
    printed: Printed = [(sys.stderr, printable(note) + "\n") for note in notes]
    out, err = sys.stdout, sys.stderr
    if format_ == "json":
        printed.append((out, "[" + ", ".join(json_text(record) for record in records) + "]\n"))
    elif format_ == "jsonl":
        printed.extend((out, json_text(record) + "\n") for record in records)
    elif not matches:
        said = "no match passed the check" if report.candidates else f"no documents within distance {k}"
        printed.append((out, said + "\n"))
    else:
        columns = ["key", "distance", "similarity", "jaccard", "checked_by", "certainty"]
        table = plain_table(columns, [[table_cell(record[name]) for name in columns] for record in records])
        if table is None:
            return None
        printed.append((out, table))
    if report.candidates:
        printed.append((out if format_ == "table" else err, printable(check_summary(report, "match")) + "\n"))
        printed.extend((err, f"hint {printable(told)}\n") for told in check_hints(report))
    return printed


def _file_text(path: str) -> str | None:
    """The text `simq near --file PATH` searches for, where the lane reads it as the full command would
    (pipeline.sources.read_one: a regular file, not JSONL by its name, read whole as UTF-8, at most
    READ_WHOLE_BYTES, no NUL byte where Reader's binary rule looks at the first 8 KiB); None for anything else
    (stdin, a folder, a JSONL file, another encoding), which the full command answers, with its errors."""
    if path.endswith(JSONL_SUFFIXES):
        return None
    try:  # (without blocking: a FIFO's open waits for a writer; it is looked at, then left to the full command)
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        with open(os.open(path, flags), "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > READ_WHOLE_BYTES:
                return None
            raw = handle.read(READ_WHOLE_BYTES + 1)
    except (OSError, ValueError):
        return None
    if len(raw) > READ_WHOLE_BYTES or b"\x00" in raw:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _whole(value, default):
    """A whole number option (0-64 for k, >= 0 for limit) as click's IntRange takes it plainly; False for
    anything else (click says what is wrong)."""
    if value is None:
        return default
    if not value.isascii() or not value.isdigit() or len(value) > 6:
        return False
    return int(value)
