"""simq: the command line over simhash_sqlite. Each command parses, makes library calls, renders.

Exit status, the same for every command: 0 success; 1 an error (one "error:" line on stderr: bad
input, a refused or damaged index, every input skipped, a failed check); 2 a command line that does
not parse (unknown option, missing argument, a value of the wrong type or out of range: errors.InvalidArgument),
one "error:" line too; 130 interrupted (Ctrl-C).
A closed pipe (simq dupes | head) ends quietly with 0, as ripgrep does: the reader had what it wanted.
Output conventions (formats, markup, colour, pipes, progress) are in output.py.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import functools
import heapq
import importlib
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import apsw
import typer
from rich.table import Table
from rich.text import Text

from .. import native
from ..analysis.calibrate import DEFAULT_MAX_K, MAX_CALIBRATED_K, Calibration
from ..analysis.calibrate import calibrate as calibrate_index
from ..analysis.explain import Explanation, verdicts
from ..analysis.explain import explain as explain_pair
from ..core.fingerprint import from_hex, simhash, to_hex, to_signed
from ..core.pool import calm_collector
from ..core.settings import CONFIRM_K, DEFAULT_THRESHOLD, RECOMMENDED_K, SHORT_TEXT, FingerprintSettings, candidate_k
from ..errors import InvalidArgument, InvalidInput, SettingsMismatch, SimhashError
from ..find.arrays import DuplicatePair
from ..find.chains import cluster_members
from ..find.clusters import REPRESENTATIVE_RULES, Cluster, candidates_text
from ..find.queries import FailedQuery, guess_format, parse_queries
from ..find.review import (
    FEW_LABELS,
    calibrate_labels,
    check_decisions,
    deletions,
    population,
    read_decisions,
    write_decisions,
)
from ..find.search import Match, executed_sql, near_sql
from ..find.verdict import CERTAIN, CheckSummary, fallback_k, validate_threshold
from ..index import SimhashIndex
from ..pipeline.dedup import Deduplicator
from ..pipeline.resume import ResumableOutput, input_identity
from ..pipeline.sources import STDIN, Reader, read_one, size_text, stale_keys
from ..pipeline.spill import default_memory, parse_memory
from ..sql.user_sql import parse_params, run_query
from ..store import texts
from ..store.database import damaged_message, disk_message
from ..store.documents import AddReport, FingerprintedDocument
from ..store.integrity import integrity_check
from ..store.writer import MAX_BATCH_SIZE
from ..version import __version__
from ..web.plots import (
    cluster_sizes,
    distance_chart,
    distance_distribution,
    distance_png,
    labels_png,
    require_matplotlib,
    size_bands,
    size_chart,
    write_png,
)
from . import output, params
from .output import err, line, out, plain, printable

# typer 0.2x parses with its own copy of click (typer._click); earlier versions with click itself.
try:
    _click = typer.core._click
except AttributeError:  # pragma: no cover (older typer)
    import click as _click  # type: ignore[no-redef]


# Spellings of earlier versions (CHANGELOG.md): still accepted so that no script breaks, never shown.
OLD_OPTIONS = {"--confirm": "--check", "--no-confirm": "--no-check", "--jaccard": "--threshold"}
OLD_COMMANDS = {"check": "integrity"}


class _Commands(typer.core.TyperGroup):
    """simq's group: old spellings become the current ones before click parses, and --help lists
    the commands in the order they are defined, grouped by task (rich_help_panel). A command line that
    does not parse (click's usage errors) is one "error:" line and exit status 2, as docs/cli.md
    promises, where typer would draw a box around it."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _click.exceptions.NoArgsIsHelpError:  # bare `simq`: typer prints the help and exits 2
            return super().main(args, prog_name, complete_var, standalone_mode=True, **extra)
        except _click.exceptions.UsageError as exc:
            context = f" (see {exc.ctx.command_path} -h)" if exc.ctx is not None else ""
            message = " ".join(exc.format_message().split())
            raise SystemExit(fail_line(message + context, exc.exit_code)) from None
        except _click.exceptions.ClickException as exc:
            raise SystemExit(fail_line(" ".join(exc.format_message().split()), exc.exit_code)) from None
        except typer.Abort:
            raise SystemExit(fail_line("interrupted", 130)) from None
        raise SystemExit(code if isinstance(code, int) else 0)

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, current_spelling(args))

    # Ctrl-C while a command line is parsed (a command's own run catches it in friendly_errors): typer
    # would exit 130 without a word; Abort is the "interrupted" line of main() above.
    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            raise typer.Abort() from None

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise typer.Abort() from None

    def resolve_command(self, ctx, args):
        if args and args[0] in OLD_COMMANDS:
            args = [OLD_COMMANDS[args[0]], *args[1:]]
        return super().resolve_command(ctx, args)


def current_spelling(args: list[str]) -> list[str]:
    """args with OLD_OPTIONS renamed (also as --old=value), up to a "--" that ends the options."""
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--":
            break
        name, equals, value = arg.partition("=")
        if name in OLD_OPTIONS:
            out[i] = OLD_OPTIONS[name] + equals + value
    return out


INDEX_PANEL = "Build and keep the index"
SEARCH_PANEL = "Search"
DUPLICATES_PANEL = "Near-duplicates of a whole corpus"
SQL_PANEL = "SQL and the browser"


app = typer.Typer(
    name="simq",
    cls=_Commands,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

DEFAULT_DB = "simhash.db"
SHOWN_SKIPS = 20
SHOWN_ROWS = 50  # a table shows at most this many rows; the other formats print every record


def _no_metavar_on_flags() -> None:
    """typer 0.2x prints <bool> after on/off flags in --help, as if they took a value: show none."""
    option = getattr(typer.core, "TyperOption", None)
    shown = getattr(option, "display_type_rich", None)
    if option is None or shown is None or getattr(shown, "simq", False):
        return

    def display_type_rich(self, ctx):
        return None if self.is_flag else shown(self, ctx)

    setattr(display_type_rich, "simq", True)  # marks it ours: patched once
    option.display_type_rich = display_type_rich


_no_metavar_on_flags()
params.use_plain_conversion()  # no pydantic (cli/params.py)


def _complete_formats(incomplete: str) -> list[str]:
    return [name for name in output.FORMATS if name.startswith(incomplete)]


DbOption = Annotated[
    Path,
    typer.Option("--db", envvar="SIMQ_DB", help="The index file.", show_default=True),
]
KOption = Annotated[int, typer.Option("--k", "-k", help="Largest Hamming distance to report (0-64).")]
FormatOption = Annotated[
    Optional[str],
    typer.Option(
        "--format",
        help="table, json, jsonl, csv or tsv. \\[default: table]",
        show_default=False,
        autocompletion=_complete_formats,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Short for --format json.")]
OutOption = Annotated[
    Optional[Path],
    typer.Option(
        "--out", "-o", help="Write the records to this file instead of stdout. \\[default: stdout]", show_default=False
    ),
]
CandidateKOption = Annotated[
    Optional[int],
    typer.Option(
        "--k", "-k",
        help=f"Largest Hamming distance of a candidate (0-64). "
        f"\\[default: {CONFIRM_K} with --check, {RECOMMENDED_K} with --no-check]",
        show_default=False,
    ),
]
CheckOption = Annotated[
    bool,
    typer.Option(
        "--check/--no-check",
        help="Keep a candidate only if its 5-shingle Jaccard (of the normalised texts) reaches --threshold: exact "
        "where both texts can be read (stored with --store-text, short texts' exact data, the unchanged files), "
        "else estimated from the stored sketches; one without either is kept if within min(k, "
        f"{RECOMMENDED_K}). Candidates the sketches are sure fall below it are dropped unread.",
    ),
]
ThresholdOption = Annotated[
    float, typer.Option("--threshold", help="With --check: the least Jaccard kept (above 0, at most 1).")
]
# dedup and spark-dedup: when unsure, keep, unless asked.
DropUncertainOption = Annotated[
    bool,
    typer.Option(
        "--drop-uncertain",
        help="Drop on an uncertain verdict too (an estimate short of certainty 0.999, or distance alone: "
        f"a document without a sketch or short text, within min(k, {RECOMMENDED_K})); by default, when unsure, keep.",
    ),
]
# The options of commands that read inputs (add, dedup): the same names, help and defaults.
JsonlOption = Annotated[
    Optional[bool],
    typer.Option(
        "--jsonl/--no-jsonl",
        help="Read every input as JSONL, or stdin as one text. \\[default: *.jsonl and *.ndjson files are JSONL, "
        "and stdin is when its first lines are JSON objects]",
        show_default=False,
    ),
]
RequireIdOption = Annotated[
    bool, typer.Option("--require-id", help="Skip JSONL records without the id field (else keyed FILE:LINE).")
]
TextFieldOption = Annotated[str, typer.Option(help="JSONL field holding the text.")]
IdFieldOption = Annotated[str, typer.Option(help="JSONL field holding the key.")]
EncodingOption = Annotated[str, typer.Option(help="Encoding of the input files.")]
ErrorsOption = Annotated[
    str, typer.Option(help="On undecodable bytes: 'strict' (skip the file), 'replace', 'ignore' or 'backslashreplace'.")
]
# The same for the one file of near -f and hash -f.
FileEncodingOption = Annotated[str, typer.Option(help="Encoding of --file.")]
FileErrorsOption = Annotated[
    str, typer.Option(help="On undecodable bytes in --file: 'strict' (an error), 'replace', 'ignore' or "
                      "'backslashreplace'.")
]
# The fingerprint options, with the same names, help and defaults wherever a command makes fingerprints.
# None means "the index's" for an existing index; the shown default is what a new one gets.
FeaturesOption = Annotated[
    Optional[str], typer.Option(help="'chars' or 'words' n-grams. \\[default: chars]", show_default=False)
]
NgramOption = Annotated[Optional[int], typer.Option(help="n of the n-grams. \\[default: 5]", show_default=False)]
WeightsOption = Annotated[
    Optional[str], typer.Option(help="'binary', 'count' or 'log'. \\[default: binary]", show_default=False)
]
HmmOption = Annotated[
    Optional[bool],
    typer.Option("--hmm/--no-hmm", help="jieba's HMM for words. \\[default: no-hmm]", show_default=False),
]


def fail(message: str, code: int = 1) -> typer.Exit:
    """One "error:" line on stderr (the message printed literally) and the exit status to raise."""
    return typer.Exit(fail_line(message, code))


def fail_line(message: str, code: int) -> int:
    """Print one "error:" line on stderr (the message printed literally); returns code."""
    err.print(line(("error:", "bold red"), " ", message), soft_wrap=True)
    return code


def warn(label: str, *parts: str) -> None:
    """A yellow label and a message of user data on stderr, one line."""
    err.print(line((label, "yellow"), " ", *parts), soft_wrap=True)


def say(message: str, *, to_stderr: bool = False) -> None:
    """A summary line (of user data: paths, keys) on stdout, or stderr."""
    (err if to_stderr else out).print(plain(message), soft_wrap=True)


def friendly_errors(command):
    """Turn the errors a user can cause into one red line and exit code 1, never a traceback;
    Ctrl-C into "interrupted" and 130; a closed stdout pipe into a quiet 0."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            result = command(*args, **kwargs)
            sys.stdout.flush()  # a closed pipe shows here, not at exit (where Python would say 120)
            return result
        except InvalidArgument as exc:  # a value out of its range: a usage error, as click's own
            raise fail(str(exc), 2) from None
        except SettingsMismatch as exc:
            raise fail(_mismatch_message(exc, kwargs)) from None
        except SimhashError as exc:
            raise fail(str(exc)) from None
        except apsw.BusyError:
            raise fail("the index is locked by another process for too long; try again") from None
        except (apsw.FullError, apsw.IOError) as exc:  # after the open (which says so itself): while writing
            named = next((os.fspath(kwargs[name]) for name in ("db", "file") if kwargs.get(name) is not None), None)
            raise fail(disk_message(named or "the index", exc) + (
                "; the index keeps every batch committed before this" if isinstance(exc, apsw.FullError) else ""
            )) from None
        except (apsw.ReadOnlyError, apsw.CantOpenError):
            raise fail("the index file or its folder is read-only") from None
        except (apsw.CorruptError, apsw.NotADBError) as exc:
            named = [kwargs[name] for name in _index_arguments(command) if kwargs.get(name) is not None]
            if not named:
                raise fail(f"an index file is damaged ({exc}); see what is wrong: simq integrity --db FILE") from None
            raise fail(damaged_message(os.fspath(named[0]), str(exc))) from None
        except BrokenPipeError:
            _quiet_stdout()
            raise typer.Exit(0) from None
        except OSError as exc:
            if exc.errno == errno.ENOSPC and exc.filename:
                raise fail(f"the disk holding {exc.filename} is full: {exc.filename} was not written (an earlier "
                           "one is as it was); free some space and run the command again") from None
            raise fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")) from None
        except KeyboardInterrupt:
            raise fail("interrupted", 130) from None

    return wrapper


def _index_arguments(command) -> tuple[str, ...]:
    """The arguments of a command that name index files, the one SQLite reads first first: a damaged
    file is named by them (near --file and hash --file are query texts, never SQLite files)."""
    return ("file", "db") if command.__name__ == "shell" else ("against", "db")


def _option(name: str, value: object) -> str:
    """A setting of SimhashIndex as the option that asks for it: --ngram 3, --no-store-text."""
    flag = name.replace("_", "-")
    if isinstance(value, bool):
        return f"--{flag}" if value else f"--no-{flag}"
    return f"--{flag} {value}"


def _mismatch_message(exc: SettingsMismatch, kwargs: dict) -> str:
    """A setting asked for that the index does not have, in the command's own options."""
    if exc.name is None:
        return str(exc)
    against = kwargs.get("against")
    index = against if against is not None else kwargs.get("db")
    other = "--against" if against is not None else "--db"
    return (
        f"{index} was made with {_option(exc.name, exc.recorded)}; you asked for {_option(exc.name, exc.requested)} "
        f"(fingerprints made otherwise would never match theirs): leave --{exc.name.replace('_', '-')} out, or give "
        f"another {other}"
    )


def _quiet_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null, so that Python's last flush has nowhere to fail."""
    if sys.stdout is sys.__stdout__ and sys.stdout is not None:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())


def _version(value: bool) -> None:
    if value:
        print(f"simq (simhash-sqlite) {__version__}")
        print(f"core: {native.describe()}")
        raise typer.Exit(0)


@app.callback()
def main_options(
    version: Annotated[
        Optional[bool], typer.Option("--version", help="Print the version and exit.", callback=_version, is_eager=True)
    ] = None,
) -> None:
    """Find near-duplicate texts with 64-bit SimHash, in one SQLite index file.

    Records: --format table|json|jsonl|csv|tsv (--json for short), -o/--out FILE.
    Exit status: 0 success, 1 error, 2 usage, 130 interrupted; a closed pipe (| head) ends quietly with 0.
    Colour only on a terminal, never under NO_COLOR. Shell completion: simq --install-completion.
    """


@app.command(rich_help_panel=INDEX_PANEL)
@friendly_errors
def add(
    inputs: Annotated[
        list[str], typer.Argument(help="Files, folders (recursive), globs, or - for stdin.", show_default=False)
    ],
    db: DbOption = Path(DEFAULT_DB),
    jsonl: JsonlOption = None,
    text_field: TextFieldOption = "text",
    id_field: IdFieldOption = "id",
    require_id: RequireIdOption = False,
    key: Annotated[
        Optional[str],
        typer.Option(
            "--key", help="The key of the text read from stdin (-). \\[default: <stdin:HASH>, made from the text]",
            show_default=False,
        ),
    ] = None,
    features: FeaturesOption = None,
    ngram: NgramOption = None,
    weights: WeightsOption = None,
    hmm: HmmOption = None,
    store_text: Annotated[
        Optional[bool],
        typer.Option(
            "--store-text/--no-store-text",
            help="New index: keep the texts in it. \\[default: no-store-text]",
            show_default=False,
        ),
    ] = None,
    encoding: EncodingOption = "utf-8",
    errors: ErrorsOption = "strict",
    batch_size: Annotated[
        Optional[int],
        typer.Option(
            help="Documents per transaction. \\[default: 1000; into a large index one per 100 stored documents, "
            "up to 100,000]",
            show_default=False,
            min=1,
            max=MAX_BATCH_SIZE,
        ),
    ] = None,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune",
            help="Then remove the documents whose files are gone: keys under the folders or matching the globs given.",
        ),
    ] = False,
    progress_json: Annotated[
        bool,
        typer.Option(
            "--progress-json",
            help="After each committed batch, print a JSON line on stderr (batches, documents, last_key).",
        ),
    ] = False,
) -> None:
    """Add files, folders or JSONL to the index (created on first use); changed files are updated.

    The fingerprint options (--features, --ngram, --weights, --hmm, --store-text) apply to a new index;
    an existing one keeps its own, and asking for others is an error.

    Keys: a file inside the folder the index was made in is keyed by its path relative to that folder
    (recorded in the index; from wherever simq runs), any other by its absolute path; a JSONL record by
    its id; text on stdin by --key, else by its content.
    """
    if key is not None and STDIN not in inputs:
        raise InvalidInput("--key names the text read from stdin; give - as an input")
    reader = _reader(jsonl, text_field, id_field, encoding, errors, require_id=require_id, stdin_key=key)
    paths = reader.expand(inputs)  # missing paths fail here, before the index is touched
    new_file = not db.exists()
    with SimhashIndex(
        db, create=True, features=features, ngram=ngram, weights=weights, hmm=hmm, store_text=store_text
    ) as index:
        if new_file and index.key_root is None:
            with contextlib.suppress(OSError):  # (a working folder that is gone: keys from it, as before)
                index.record_key_root(os.getcwd())  # files keyed relative to it, found from anywhere
        report = AddReport()
        total = sum(_size_of(path) for path, _ in paths) or None  # stdin and pipes: no size known
        with output.progress("bytes") as progress:
            task = progress.add_task("adding", total=total)

            def on_batch(current: AddReport) -> None:
                progress.update(task, completed=reader.bytes_read, description=f"{current.documents:,} documents")
                if progress_json:  # called after the COMMIT: every line names a batch that is on disk
                    print(_progress_line(current), file=sys.stderr, flush=True)

            try:
                reader.key_root = index.key_root  # files keyed as the index keys them, from any folder
                documents = reader.packed_documents(paths, index.settings, index.store_text, index.sketch_scheme)
                report = index.add(documents, batch_size=batch_size, on_batch=on_batch)
            except KeyboardInterrupt:
                raise fail(
                    "interrupted: every batch committed before it is in the index; run the same command to finish",
                    130,
                ) from None
        pruned = stale_keys(index, inputs) if prune else []
        index.remove(pruned)
    _print_add_summary(report, reader, db)
    for key in pruned[:SHOWN_SKIPS]:
        warn("pruned", key, ": the file is gone")
    if prune:
        say(f"{len(pruned):,} pruned")
    if reader.skip_count and not report.documents:
        if new_file:  # the index this add made holds nothing: it goes, as if the add had not run
            _remove_index_file(db)
        raise fail(f"nothing added: {_count(reader.skip_count, 'input was', 'inputs were')} skipped (see above)")
    if reader.failed:
        raise fail(f"{_count(reader.skip_count, 'input was', 'inputs were')} skipped (see above); the rest was added")


def _remove_index_file(db: Path) -> None:
    """Remove an index file that holds no document (and its -wal, -shm), unless it has some by now or
    another process has it open (a second add creating the same file at the same moment). The check and
    the removal hold the file's exclusive lock, which SQLite grants in WAL mode only while no other
    connection has the file open."""
    try:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READWRITE)
    except apsw.Error:
        return
    try:
        conn.pragma("locking_mode", "exclusive")
        conn.execute("BEGIN EXCLUSIVE")  # no busy timeout: another connection means the file stays
        if conn.execute("SELECT count(*) FROM documents").get:
            return
        for end in ("-wal", "-shm", ""):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{db}{end}")
    except (apsw.Error, OSError):
        return
    finally:
        conn.close()


def _reader(jsonl: Optional[bool], text_field: str, id_field: str, encoding: str, errors: str, **more) -> Reader:
    """A Reader for --jsonl (every input), --no-jsonl (stdin is one text) or neither (by suffix, and
    stdin by its first line)."""
    return Reader(
        jsonl=bool(jsonl), sniff_stdin=jsonl is None, text_field=text_field, id_field=id_field,
        encoding=encoding, errors=errors, **more,
    )


def _print_reader_notes(reader: Reader) -> None:
    """What the reader decided for the user: stdin's format and key, records keyed by line number."""
    for note in reader.notes:
        warn("note", note)
    if reader.keyed_by_line:
        warn(
            "warning",
            f"{_count(reader.keyed_by_line, 'JSONL record')} had no {reader.id_field!r} field: keyed by file and "
            f"line (first: {reader.first_keyed_by_line}); name the id with --id-field, or skip such records with "
            "--require-id",
        )


def _size_of(path: str) -> int:
    """A regular file's size, for the progress bar; 0 for stdin, pipes and what cannot be read."""
    try:
        return os.path.getsize(path) if path != "-" and os.path.isfile(path) else 0
    except OSError:
        return 0


def _count(n: int, one: str, many: str | None = None) -> str:
    """'1 pair', '2 pairs', '1 match', '2 matches': a count and its noun, singular for exactly one."""
    if n == 1:
        return f"1 {one}"
    return f"{n:,} {many or one + ('es' if one.endswith(('s', 'x', 'ch', 'sh')) else 's')}"


def _progress_line(report: AddReport) -> str:
    return json.dumps(
        {
            "committed_batches": report.batches,
            "documents": report.documents,
            "added": report.added,
            "updated": report.updated,
            "unchanged": report.unchanged,
            "last_key": report.last_key,
        },
        ensure_ascii=False,
    )


def _print_add_summary(report: AddReport, reader: Reader, db: Path) -> None:
    _print_reader_notes(reader)
    for skip in reader.skipped[:SHOWN_SKIPS]:
        warn("skipped", skip.where, ": ", skip.reason)
    if reader.skip_count > SHOWN_SKIPS:
        warn("skipped", f"{reader.skip_count - SHOWN_SKIPS:,} more")
    for dup in reader.duplicates[:SHOWN_SKIPS]:
        warn("warning", dup.where, ": id ", repr(dup.key), " again (first at ", dup.first,
             "); skipped, the first record is kept")
    if reader.duplicate_count > SHOWN_SKIPS:
        warn("warning", f"{reader.duplicate_count - SHOWN_SKIPS:,} more repeated ids")
    for key in report.no_features[:SHOWN_SKIPS]:
        warn("warning", key, ": no features (empty text); stored, never matches")
    if report.short and report.short * 2 >= report.added + report.updated:
        warn(
            "warning",
            f"{report.short:,} of the texts are shorter than {SHORT_TEXT} characters: distances "
            "between short texts are noisier; simq near and dupes check candidates by their exact Jaccard when the "
            f"texts can be read (--store-text, or keep the files), and by distance alone use k <= {RECOMMENDED_K - 1}",
        )
    say(
        f"{db}: {report.added:,} added, {report.updated:,} updated, {report.unchanged:,} unchanged, "
        f"{reader.skip_count:,} skipped, {report.without_features:,} without features"
        + (f", {_count(reader.duplicate_count, 'repeated id')}" if reader.duplicate_count else ""),
    )


@app.command(rich_help_panel=SEARCH_PANEL)
@friendly_errors
def near(
    text: Annotated[Optional[str], typer.Argument(help="The text to search for.", show_default=False)] = None,
    db: DbOption = Path(DEFAULT_DB),
    k: CandidateKOption = None,
    file: Annotated[Optional[Path], typer.Option("--file", "-f", help="Search for this file's text.")] = None,
    key: Annotated[Optional[str], typer.Option(help="Search for a stored document's neighbours.")] = None,
    hash_: Annotated[Optional[str], typer.Option("--hash", help="Search for a 16-hex-digit fingerprint.")] = None,
    batch: Annotated[
        Optional[str],
        typer.Option(
            help="Many queries: a JSONL file (text, hash or key per line, optional id) or a file of paths, "
            "- for stdin; answers one JSON line per query.",
        ),
    ] = None,
    batch_format: Annotated[
        Optional[str],
        typer.Option(
            help="'jsonl' or 'paths'. \\[default: jsonl for *.jsonl and stdin, else paths]", show_default=False
        ),
    ] = None,
    limit: Annotated[
        Optional[int],
        typer.Option(help="At most this many results (per query). \\[default: no limit]", show_default=False, min=0),
    ] = None,
    plan: Annotated[
        Optional[str],
        typer.Option(
            help="Force 'index' (block lookups) or 'scan'; the answer is the same. \\[default: the cheaper]",
            show_default=False,
        ),
    ] = None,
    format_: FormatOption = None,
    as_json: JsonOption = False,
    output_path: OutOption = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show the plan, the candidates checked, and the SQL.")
    ] = False,
    check: CheckOption = True,
    threshold: ThresholdOption = DEFAULT_THRESHOLD,
    encoding: FileEncodingOption = "utf-8",
    errors: FileErrorsOption = "strict",
) -> None:
    """Near-duplicates of a text, a file, a stored key or a fingerprint, closest first.

    Candidates within k, checked by the exact Jaccard of the texts where they can be read, else
    estimated from the stored sketches."""
    format_ = output.choose_format(format_, as_json)
    checked_at = validate_threshold(threshold) if check else None  # the batch's threshold; None: unchecked
    k = candidate_k(k, check)
    if batch is not None:
        if any(x is not None for x in (text, file, key, hash_)):
            raise InvalidArgument("--batch reads its queries from the file; give no text, --file, --key or --hash")
        if format_ not in ("table", "jsonl", "json"):
            raise InvalidArgument("--batch answers in JSON: one line per query (jsonl, the default) or an array (json)")
        with output.destination(output_path) as handle:
            _near_batch(db, batch, batch_format, k, limit, plan, explain, checked_at, format_, handle)
        return
    if sum(x is not None for x in (text, file, key, hash_)) != 1:  # before the index is opened: a usage error
        raise InvalidArgument("give one of a text, --file, --key, --hash or --batch to search for")
    if text == STDIN and file is None:
        text, file = None, Path(STDIN)  # as -f -
    elif text is not None and file is None and "\n" not in text and os.path.isfile(text):
        warn("note", text, " is a file, but the text ", repr(text), " itself is searched for; to search for what "
             "the file holds: --file ", text)
    try:
        fingerprint = from_hex(hash_, whole=True) if hash_ is not None else None
    except InvalidInput as exc:
        raise InvalidArgument(f"--hash: {exc}") from None
    report = None
    with SimhashIndex(db, readonly=True) as index:  # a search never writes (nor upgrades: see vacuum)
        _tell_sketch_upgrade(index)
        if file is not None:
            text, fingerprint = _query_of_file(file, index.settings, text, fingerprint, encoding, errors)
        result = index.search(
            text, fingerprint=fingerprint, key=key, k=k, limit=limit, plan=plan,
            check=check, threshold=threshold,
        )
        matches, report = result.matches, result.report
        if explain:
            err.print(f"plan: {result.plan.describe()}", markup=False)
            err.print(f"candidates checked: {result.candidates:,}", markup=False)
            err.print(executed_sql(result.plan), markup=False, soft_wrap=True)
            err.print("-- the same answer in one statement (near_sql()):", markup=False)
            err.print(near_sql(result.plan), markup=False, soft_wrap=True)
    records = [_match_json(m) for m in matches]
    if format_ != "table":
        with output.destination(output_path) as handle:
            output.render(records, format_, handle)
    elif not matches:
        none_checked = report is not None and report.candidates
        say("no match passed the check" if none_checked else f"no documents within distance {k}")
    else:
        # Checked: the verdict takes the fingerprint's place (json has both), so keys keep their width.
        last = ["jaccard", "checked_by", "certainty"] if report is not None else ["fingerprint"]
        with output.destination(output_path) as handle:
            output.render(records, "table", handle, columns=["key", "distance", "similarity", *last], fold=["key"])
    if report is not None:
        # A query too large to read whole has said why its candidates go by distance (_query_of_file).
        _print_check_summary(report, "match", to_stderr=format_ != "table" or output_path is not None,
                             hint=not (file is not None and text is None))


def _tell_sketch_upgrade(index: SimhashIndex) -> None:
    """Say what opening an index made before sketches did (for writing: which documents could not be
    sketched), or lacks (for a search, which never writes: how to sketch them); and, for an index made
    before the root of its keys was recorded, that its files are out of reach from this folder."""
    if index.key_root is None and _keys_out_of_reach(index):
        say(f"{index.path}: made before simq recorded where its file keys are rooted, so they are read from the "
            f"current folder ({os.getcwd()}), where they are not: run simq from the folder it was built in for "
            "exact checks of their texts", to_stderr=True)
    if index.made_before_sketches:
        say(f"{index.path}: made before sketches, and a search does not write them: pairs are found within "
            "k and judged exactly where texts can be read, else by distance alone; sketch them once with "
            f"simq vacuum --db {index.path}", to_stderr=True)
    if index.sketch_upgrade is None:
        return
    sketched, out_of_reach = index.sketch_upgrade
    say(
        f"{index.path}: made before sketches; {_count(sketched, 'document')} sketched from their texts"
        + (f", {out_of_reach:,} could not be (texts not stored and files changed or gone): their pairs are "
           "judged by distance alone" if out_of_reach else ""),
        to_stderr=True,
    )


def _keys_out_of_reach(index: SimhashIndex) -> bool:
    """Some of the first relative keys whose texts live in files, and none of them a file from here."""
    keys = [key for (key,) in index.conn.execute(
        "SELECT key FROM documents WHERE text IS NULL AND content_hash IS NOT NULL LIMIT 100"
    ) if not os.path.isabs(key)]
    return bool(keys) and not any(os.path.isfile(key) for key in keys)


def _print_check_summary(
    report: CheckSummary, noun: str, *, to_stderr: bool, suffix: str = "", hint: bool = True
) -> None:
    """How many results were checked exactly, by the sketches' estimate and by distance only, how many
    verdicts were uncertain, and a hint when texts were out of reach. Nothing when there was no candidate."""
    if not report.candidates:
        return
    dropped = report.rejected + report.estimate_rejected + report.too_far
    say(
        f"{_count(report.kept, noun)}{suffix}: {report.checked:,} checked exactly (Jaccard >= {report.threshold:g}), "
        f"{report.estimated:,} by the sketches' estimate, "
        f"{report.unchecked:,} by distance only (<= {report.fallback_k}); "
        f"{dropped:,} of {_count(report.candidates, 'candidate')} {report.found_by} dropped; "
        f"{_count(report.sure, 'verdict')} sure from the sketches alone, {report.uncertain:,} uncertain",
        to_stderr=to_stderr,
    )
    missing = report.unchecked + report.too_far
    if report.uncertain and hint:
        warn(
            "hint",
            f"{report.uncertain:,} verdict{'s rest' if report.uncertain != 1 else ' rests'} on an uncertain "
            "estimate, the texts being out of reach: list them with simq dupes --uncertain to review them, or add "
            "the documents with --store-text for exact checks",
        )
    if missing and hint:
        warn(
            "hint",
            f"{missing:,} candidate{'s were' if missing != 1 else ' was'} judged by distance alone, "
            "a text and a sketch being out of reach (documents indexed before sketches whose texts are gone, or "
            "bare fingerprints): add them again, with --store-text or from files kept unchanged at their paths"
            + ("; a --hash query has no text (search with the text, --file or --key)"
               if report.without_query_text else ""),
        )


def _near_batch(
    db: Path,
    source: str,
    fmt: Optional[str],
    k: int,
    limit: Optional[int],
    plan: Optional[str],
    explain: bool,
    threshold: Optional[float],
    format_: str,
    handle,
) -> None:
    """One JSON answer per query line, in order (jsonl, or a json array); bad lines answer with
    "error". threshold: check the matches exactly (None: by distance alone)."""
    fmt = fmt or guess_format(source)
    # Binary: each line is decoded on its own (queries.parse_queries), so a line that is not UTF-8 is answered
    # with its error and the next ones are still read.
    stream = sys.stdin.buffer if source == "-" else open(source, "rb")  # noqa: SIM115
    failed = answered = 0
    plans: dict[str, int] = {}
    candidates = 0
    total = CheckSummary(k, threshold or DEFAULT_THRESHOLD)

    def answers_of(index: SimhashIndex):
        nonlocal failed, answered, candidates
        queries = parse_queries(stream, fmt)
        answers = index.near_many(
            queries, k=k, limit=limit, plan=plan,
            check=threshold is not None, threshold=threshold or DEFAULT_THRESHOLD,
        )
        for query, answer in answers:
            answered += 1
            record: dict = {"id": query.id}
            if isinstance(answer, FailedQuery):
                failed += 1
                record["error"] = answer.message
                if failed <= SHOWN_SKIPS:
                    warn("skipped", answer.message)
            else:
                matches = answer.matches
                if answer.report is not None:
                    total.add(answer.report)
                record["fingerprint"] = to_hex(answer.fingerprint)
                record["matches"] = [_match_json(m) for m in matches]
                if explain:
                    record["plan"], record["candidates"] = answer.plan.kind, answer.candidates
                    plans[answer.plan.kind] = plans.get(answer.plan.kind, 0) + 1
                    candidates += answer.candidates
            yield record

    try:
        with SimhashIndex(db, readonly=True) as index:
            _tell_sketch_upgrade(index)
            output.render(answers_of(index), "json" if format_ == "json" else "jsonl", handle)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    if explain:
        used = ", ".join(f"{kind} {count:,}" for kind, count in sorted(plans.items())) or "none"
        say(
            f"{_count(answered, 'query', 'queries')}; plans: {used}; candidates checked: {candidates:,}",
            to_stderr=True,
        )
    if threshold is not None:
        _print_check_summary(
            total, "match", suffix=f" of {_count(answered - failed, 'query', 'queries')}", to_stderr=True
        )
    if failed:
        queries = _count(answered, "query", "queries")
        raise fail(f"{failed:,} of {queries} could not be searched (see their \"error\" lines)")


def _match_json(match: Match) -> dict:
    """A match as JSON; "jaccard" is the check's (null: not measured), "checked_by" how it was judged."""
    return {
        "key": match.key,
        "distance": match.distance,
        "similarity": round(match.similarity, 4),
        "jaccard": None if match.jaccard is None else round(match.jaccard, 4),
        "checked": match.jaccard is not None,
        "checked_by": match.checked_by,
        "certainty": None if match.certainty is None else round(match.certainty, 4),
        "fingerprint": to_hex(match.fingerprint),
    }


def _query_of_file(
    path: Path, settings: FingerprintSettings, text: Optional[str], fingerprint: Optional[int],
    encoding: str = "utf-8", errors: str = "strict",
) -> tuple[Optional[str], Optional[int]]:
    """(text, fingerprint) to search for a file's contents (- for stdin): the text, or for a text too
    large to read whole, its fingerprint (made in pieces), said on stderr."""
    if text is not None or fingerprint is not None:
        raise InvalidInput("give one of a text, --file, --key or --hash")
    document = read_one(str(path), settings, encoding=encoding, errors=errors)
    if not isinstance(document, FingerprintedDocument):
        return document.text, None
    if document.fingerprint is None:
        raise InvalidInput(f"{path} has no features (no letters or digits) to search with")
    warn("note", str(path), f" is over {size_text(texts.READ_WHOLE_BYTES)}: searched by its fingerprint, "
         "made piece by piece; its text is not read whole, so candidates are judged by distance alone")
    return None, document.fingerprint


@app.command("hash", rich_help_panel=SEARCH_PANEL)
@friendly_errors
def hash_command(
    text: Annotated[
        Optional[str], typer.Argument(help="The text to fingerprint (- reads stdin).", show_default=False)
    ] = None,
    db: DbOption = Path(DEFAULT_DB),
    file: Annotated[Optional[Path], typer.Option("--file", "-f", help="Fingerprint this file's text.")] = None,
    signed: Annotated[bool, typer.Option("--signed", help="Print the signed int64 that SQLite stores.")] = False,
    format_: FormatOption = None,
    as_json: JsonOption = False,
    encoding: FileEncodingOption = "utf-8",
    errors: FileErrorsOption = "strict",
) -> None:
    """Print a text's fingerprint (16 hex digits), with the index's settings if the index exists.

    The table format prints the bare value; the others a record with the hex and the signed forms.
    A text of - reads stdin, as --file - does.
    """
    format_ = output.choose_format(format_, as_json)
    if text == STDIN and file is None:
        text, file = None, Path(STDIN)  # as -f -, and as near -
    if (text is None) == (file is None):
        raise InvalidArgument("give a text or --file (one of them)")
    settings = FingerprintSettings()
    if db.exists():
        with SimhashIndex(db, readonly=True) as index:
            settings = index.settings
    if file is not None:
        document = read_one(str(file), settings, encoding=encoding, errors=errors)
        if isinstance(document, FingerprintedDocument):  # streamed
            fingerprint = document.fingerprint
        else:
            fingerprint = simhash(document.text, settings)
    else:
        assert text is not None  # one of them, checked above
        fingerprint = simhash(text, settings)
    if fingerprint is None:
        raise InvalidInput("the text has no features (no letters or digits)")
    if format_ == "table":
        print(to_signed(fingerprint) if signed else to_hex(fingerprint))
    else:
        output.render_one({"fingerprint": to_hex(fingerprint), "signed": to_signed(fingerprint)}, format_)


@app.command(rich_help_panel=INDEX_PANEL)
@friendly_errors
def stats(db: DbOption = Path(DEFAULT_DB), format_: FormatOption = None, as_json: JsonOption = False) -> None:
    """How many documents the index holds, how its fingerprints are made, and its size."""
    format_ = output.choose_format(format_, as_json)
    with SimhashIndex(db, readonly=True) as index:
        _tell_sketch_upgrade(index)
        s = index.stats()
        sizes = cluster_sizes(index.conn) if s.clusters is not None else []
    rows = {
        "file": s.path,
        "documents": s.documents,
        "without features": s.without_features,
        "fingerprints": s.settings.describe(),
        "recommended k": _recommended_k(s.settings),
        "file keys from": s.key_root or "the current folder (the index records no root: made by an earlier "
        "version)",
        "feature hash": s.settings.hash,
        "stores texts": s.store_text,
        "schema version": s.schema_version,
        "created with": s.created_with,
        "size (bytes)": s.file_bytes,
        "short texts": "checked from the stored texts" if s.store_text or s.short_texts is None
        else s.short_texts.describe(),
    }
    if format_ != "table":
        sizes_json = [{"size": size, "clusters": count} for size, count in sizes]
        output.render_one({**rows, "clusters": s.clusters, "cluster_sizes": sizes_json}, format_)
        return
    if s.clusters is not None:
        c = s.clusters
        clusters = f"{candidates_text(c)}, representative {c['representative']}, {c['documents']:,} documents, "
        clusters += c["at"]
        if c.get("below"):
            clusters += (f"; {c['below']:,} members below the Jaccard line to their representative (joined "
                         "through others: simq clusters shows the chains)")
        if c.get("stale"):
            clusters += " - STALE: documents changed since; run simq clusters again"
        rows["clusters"] = clusters
    output.render_one(rows, "table")
    if sizes:
        out.print(size_chart(size_bands(sizes)))


@app.command(rich_help_panel=SQL_PANEL)
@friendly_errors
def serve(
    db: DbOption = Path(DEFAULT_DB),
    port: Annotated[int, typer.Option(help="Port to listen on (0-65535).", min=0, max=65535)] = 8001,
    host: Annotated[str, typer.Option(help="Address to listen on; 127.0.0.1 is this machine only.")] = "127.0.0.1",
    open_browser: Annotated[bool, typer.Option("--open", help="Open the clusters page in a web browser.")] = False,
    review: Annotated[
        bool,
        typer.Option("--review", help="Let the pages label pairs and choose what to keep, written into the index "
                     "(nothing else is written; 127.0.0.1 only)."),
    ] = False,
    reviewer: Annotated[
        Optional[str], typer.Option(help="With --review: the name recorded with each label. \\[default: your login]",
                                    show_default=False)
    ] = None,
) -> None:
    """Review near-duplicates in a browser: Datasette on the index, read-only unless --review.

    Search, cluster and pair pages (needs the web extra: pip install 'simhash-sqlite\\[web]'). With --review:
    label pairs (a stratified sample to label with keys d, n, u, j), keep one member of each cluster,
    calibrate from the labels and download the decisions."""
    from ..web.serve import clusters_url
    from ..web.serve import serve as serve_index

    if reviewer is not None and not review:
        raise InvalidArgument("--reviewer goes with --review")
    name = (reviewer or _login()) if review else None

    def ready() -> None:
        url = clusters_url(db, host, port)
        how = f"for review by {name} (labels and keepers are written into it)" if review else "read-only"
        say(f"serving {db} {how}; clusters page: {url} (Ctrl-C to stop)", to_stderr=True)

    serve_index(db, host=host, port=port, open_browser=open_browser, on_ready=ready, review=name)


def _login() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "reviewer"


@app.command(rich_help_panel=SQL_PANEL)
@friendly_errors
def shell(
    file: Annotated[Optional[Path], typer.Argument(help="The index file (or --db).", show_default=False)] = None,
    db: DbOption = Path(DEFAULT_DB),
    write: Annotated[bool, typer.Option("--write", help="Allow changes (default: read-only, as simq sql).")] = False,
) -> None:
    """An interactive SQL shell on the index: our functions, simhash_near, .near TEXT K (see .help).

    Reads a script from stdin when it is not a terminal (simq shell idx.db < script.sql) and then
    exits 1 if any statement or command failed.
    """
    from ..sql.shell import run_shell  # apsw.shell is only needed here

    with SimhashIndex(file or db, readonly=not write) as index:
        errors = run_shell(index, write=write)
    if errors:
        raise typer.Exit(1)


@app.command(rich_help_panel=SQL_PANEL)
@friendly_errors
def publish(
    index: Annotated[Path, typer.Argument(help="The index to publish.", show_default=False)],
    folder: Annotated[
        Path, typer.Argument(help="The folder to write: new, empty, or an earlier publish.", show_default=False)
    ],
) -> None:
    """Write a static page that searches INDEX in a browser, with no server: FOLDER/index.html, SQLite in
    WebAssembly with the extension built in, and a copy of the index. Put FOLDER on any static web host (or
    open index.html and choose an index file). See docs/sql.md."""
    from ..web.publish import publish as publish_index

    page = publish_index(index, folder)
    say(f"wrote {page} (search {index.name} by text or key; serve {folder} over HTTP to open it at once)")


@app.command("sql", rich_help_panel=SQL_PANEL)
@friendly_errors
def sql_command(
    query: Annotated[str, typer.Argument(help="SQL: one statement or several separated by ;", show_default=False)],
    db: DbOption = Path(DEFAULT_DB),
    format_: FormatOption = None,
    as_json: JsonOption = False,
    output_path: OutOption = None,
    param: Annotated[
        Optional[list[str]], typer.Option(
            "--param", "-p",
            help="NAME=VALUE for :NAME (whole numbers become integers); NAME:text=VALUE, NAME:int=, NAME:real= bind "
            "that type.",
        )
    ] = None,
    write: Annotated[bool, typer.Option("--write", help="Allow changes (default: read-only).")] = False,
) -> None:
    """Run SQL on the index, with our functions and simhash_near; print each statement's rows.

    simq sql "SELECT key, distance FROM simhash_near(:q, 6)" -p q="some text" --format csv

    Several statements: json prints one array a line, csv and tsv a blank line between tables.
    """
    format_ = output.choose_format(format_, as_json)
    params = parse_params(param or [])
    with SimhashIndex(db, readonly=not write) as index:
        results = run_query(index, query, params, write=write)
    with output.destination(output_path) as handle:
        for number, result in enumerate(results):
            if number and format_ in ("csv", "tsv"):
                handle.write("\n")
            records = (dict(zip(result.columns, row)) for row in result.rows)
            if format_ == "json":  # one statement: a JSON array of objects; several: one such array a line
                output.render(records, "json", handle, columns=result.columns)
            elif format_ == "table":
                output.render(records, "table", handle, columns=result.columns, fold=result.columns, cell=_sql_cell)
            else:
                output.render(records, format_, handle, columns=result.columns)


@app.command("extension", rich_help_panel=SQL_PANEL)
@friendly_errors
def extension_command() -> None:
    """Print the path of the loadable SQLite extension: our functions and simhash_near in any SQLite host.

    sqlite3 corpus.db ".load $(simq extension)" "SELECT key, distance FROM simhash_near('some text', 7)"

    Exit code 1, saying what was missing, where the install could not build it (a C compiler is
    needed; SQLite's headers come with the package). A part it was built without
    (zlib: short texts' exact data) is noted on stderr. See docs/sql.md.
    """
    from ..native.extension import built_without, loadable_path

    print(loadable_path())
    for part, why in built_without().items():
        print(f"note: the extension was built without {part} ({why})", file=sys.stderr)


def _sql_cell(value) -> Text:
    """A value as SQLite gave it (no thousands separators: ids and hashes are not amounts)."""
    if value is None:
        return Text("NULL", style="dim")
    return plain(output.json_value(value))


@app.command(rich_help_panel=INDEX_PANEL)
@friendly_errors
def rm(
    keys: Annotated[Optional[list[str]], typer.Argument(help="Keys to remove.", show_default=False)] = None,
    db: DbOption = Path(DEFAULT_DB),
    glob_pattern: Annotated[
        Optional[str],
        typer.Option("--glob", help="Remove the keys matching a SQLite GLOB pattern (* also matches /)."),
    ] = None,
    from_file: Annotated[
        Optional[Path], typer.Option("--from", help="Remove the keys listed in a file, one a line (- for stdin).")
    ] = None,
    decisions_file: Annotated[
        Optional[Path],
        typer.Option("--decisions", help="Remove the keys of a decisions list (simq decisions: JSONL or CSV; - for "
                     "stdin); refused whole if a kept copy is missing or a chosen keeper is listed."),
    ] = None,
) -> None:
    """Remove documents by key, by GLOB pattern, from a list of keys, or from a decisions list."""
    listed = list(keys or [])
    if from_file is not None:
        listed += _key_lines(from_file)
    decided = None
    if decisions_file is not None:
        decided = read_decisions("\n".join(_key_lines(decisions_file)), str(decisions_file))
        listed += [key for key, _ in decided]
    if not listed and glob_pattern is None and decided is None:
        raise InvalidArgument("give keys, --glob PATTERN, --from FILE or --decisions FILE")
    with SimhashIndex(db) as index:
        if decided:
            check_decisions(index.conn, decided)
        removed = index.remove(dict.fromkeys(listed))
        matched = index.remove_glob(glob_pattern) if glob_pattern is not None else []
    missing = len(dict.fromkeys(listed)) - removed
    not_there = f", {_count(missing, 'key')} not in the index" if missing else ""
    say(f"{db}: {removed + len(matched):,} removed{not_there}")


def _key_lines(path: Path) -> list[str]:
    raw = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 (byte offset {exc.start})") from None
    return [line for line in text.splitlines() if line]


@app.command(rich_help_panel=INDEX_PANEL)
@friendly_errors
def integrity(
    db: DbOption = Path(DEFAULT_DB),
    format_: FormatOption = None,
    as_json: JsonOption = False,
    rehash: Annotated[
        bool, typer.Option("--rehash", help="Also re-fingerprint every stored text (--store-text indexes; slow).")
    ] = False,
) -> None:
    """The index file's integrity: SQLite's integrity check, its schema, settings, unique keys and blocks.

    Exits 1 when anything is wrong. Reads only; safe on files from elsewhere. json prints the whole
    report ({"ok", "checks"}); jsonl, csv and tsv one check a record.
    """
    format_ = output.choose_format(format_, as_json)
    with output.progress("texts", hidden=not rehash) as progress:  # only re-hashing takes long
        task = progress.add_task("re-hashing", total=None)
        report = integrity_check(db, rehash=rehash, on_progress=_progress_to(progress, task))
    records = [{"name": r.name, "ok": r.ok, "detail": r.detail} for r in report.results]
    if format_ == "json":
        output.render_one({"file": report.path, "ok": report.ok, "checks": records}, "json")
    elif format_ == "table":
        ok = {True: Text("ok", style="green"), False: Text("FAILED", style="bold red")}
        output.render(records, "table", columns=["name", "ok", "detail"], cells={"ok": ok.__getitem__}, fold=["detail"])
    else:
        output.render(records, format_)
    if not report.ok:
        names = ", ".join(result.name for result in report.failed)
        raise fail(f"{db}: {_count(len(report.failed), 'check')} failed: {names}")


def _recommended_k(settings: FingerprintSettings) -> str:
    if settings == FingerprintSettings():
        return f"{_k_uses()}; this index's: simq calibrate"
    return f"not measured for these settings (the defaults': {_k_uses()}); measure: simq calibrate"


def _k_uses() -> str:
    """What each default k is for, said the same way by stats and calibrate (the one story of k)."""
    return (f"{RECOMMENDED_K} for distance alone (--no-check: where F1 peaks on the quality benchmark), "
            f"{CONFIRM_K} for candidates checked by Jaccard (the default of near, dupes -k)")


@app.command("calibrate", rich_help_panel=DUPLICATES_PANEL)
@friendly_errors
def calibrate_command(
    db: DbOption = Path(DEFAULT_DB),
    max_k: Annotated[
        int, typer.Option("--max-k", help="Largest distance to sample.", min=0, max=MAX_CALIBRATED_K)
    ] = DEFAULT_MAX_K,
    pairs: Annotated[int, typer.Option("--pairs", help="Pairs to sample at each distance.", min=1)] = 30,
    threshold: Annotated[
        float, typer.Option("--threshold", help="The exact Jaccard that counts as a near-duplicate.")
    ] = DEFAULT_THRESHOLD,
    seed: Annotated[int, typer.Option(help="Seed for choosing the documents.")] = 0,
    format_: FormatOption = None,
    as_json: JsonOption = False,
    plot: Annotated[
        Optional[Path], typer.Option(help="Also draw the distance distribution as a PNG image here (needs matplotlib).")
    ] = None,
    labels: Annotated[
        bool,
        typer.Option("--labels", help="Instead: precision, recall and F1 per Jaccard threshold estimated from the "
                     "labels of simq serve --review, with the recommended threshold and its 90% interval."),
    ] = False,
) -> None:
    """What each k means on this index: the Jaccard of sampled pairs at each distance, as a chart.

    The exact 5-shingle Jaccard of sampled pairs at each distance, and a chart of where near-duplicate
    and unrelated pairs fall.

    json prints the whole result (threshold, queried, suggested_k, rows); jsonl, csv and tsv one
    distance a record.
    """
    format_ = output.choose_format(format_, as_json)
    if labels:
        _calibrate_from_labels(db, format_, plot, seed)
        return
    if plot is not None:
        require_matplotlib()  # before the sampling, which takes a while
    with SimhashIndex(db, readonly=True) as index, output.progress("docs") as progress:
        task = progress.add_task("sampling", total=None)
        result = calibrate_index(
            index, max_k=max_k, per_distance=pairs, threshold=threshold,
            seed=seed,
            on_progress=_progress_to(progress, task),
        )
        distribution = distance_distribution(index, result, per_distance=pairs, seed=seed)
    if plot is not None:
        write_png(distance_png(distribution), plot)
        say(f"chart written to {plot}", to_stderr=True)
    rows = [row.__dict__ for row in result.rows]
    if format_ == "json":
        output.render_one(
            {"threshold": result.threshold, "queried": result.queried, "suggested_k": result.suggested_k, "rows": rows},
            "json",
        )
    elif format_ == "table":
        _print_calibration(result)
        out.print(distance_chart(distribution))
    else:
        output.render(rows, format_)


def _calibrate_from_labels(db: Path, format_: str, plot: Path | None, seed: int) -> None:
    if plot is not None:
        require_matplotlib()
    with SimhashIndex(db, readonly=True) as index, output.progress("share") as progress:
        task = progress.add_task("pairs", total=None)
        pop = population(index, on_progress=_progress_to(progress, task))
        result = calibrate_labels(index, pop, seed=seed)
    if plot is not None:
        write_png(labels_png(result, DEFAULT_THRESHOLD), plot)
        say(f"chart written to {plot}", to_stderr=True)
    rows = [row.__dict__ for row in result.rows]
    summary = {name: getattr(result, name) for name in (
        "recommended", "interval", "precision", "recall", "f1", "precision_interval", "recall_interval", "labels",
        "unsure", "outside", "population", "unscored", "borrowed", "duplicates", "missing")}
    if format_ == "json":
        output.render_one({**summary, "rows": rows}, "json")
        return
    if format_ != "table":
        output.render(rows, format_)
        return
    if not result.labels:
        say(f"no labels to calibrate from: label pairs with simq serve --review --db {db}")
        return
    table = Table("threshold", "precision", "recall", "F1", "pairs above",
                  title=f"Estimated from {_count(result.labels, 'label')} over {result.population:,} candidate pairs")
    for row in result.rows:
        if round(row.threshold * 100) % 5 and row.threshold != result.recommended:
            continue
        style = "bold green" if row.threshold == result.recommended else None
        table.add_row(f"{row.threshold:.2f}", *("-" if x is None else f"{x:.3f}" for x in (row.precision, row.recall,
                      row.f1)), f"{row.above:,.0f}", style=style)
    out.print(table)
    if result.recommended is None:
        say(f"no threshold recommended yet: {result.missing}" if result.missing else
            "no label says duplicate: no threshold to recommend")
        return

    def span(pair):
        return "" if pair is None else f" ({pair[0]:.3f}-{pair[1]:.3f})"

    interval = "" if result.interval is None else f" (90% interval {result.interval[0]:.2f}-{result.interval[1]:.2f})"
    out.print(line("recommended Jaccard threshold: ", (f"{result.recommended:.2f}", "bold"), interval))
    say(f"precision {result.precision:.3f}{span(result.precision_interval)}, recall {result.recall:.3f}"
        f"{span(result.recall_interval)}, F1 {result.f1:.3f}; use it: simq dupes --threshold {result.recommended:.2f}")
    if result.labels < FEW_LABELS:
        say(f"only {_count(result.labels, 'label')}: read the intervals, not the numbers; a few hundred labels "
            "of the review sample narrow them")
    notes = [f"{result.unsure:,} unsure"] if result.unsure else []
    if result.outside:
        notes.append(f"{result.outside:,} below Jaccard 0.5 left out")
    if result.unscored:
        notes.append(f"{result.unscored:,} candidate pairs judged by distance only left out")
    if notes:
        say("; ".join(notes))


def _print_calibration(result: Calibration) -> None:
    def cell(x):
        return "-" if x is None else f"{x:.3f}"

    table = Table("dist", "pairs", "mean J", "low", "high", f"J>={result.threshold:g}", "expected", "mean J",
                  title="Sampled pairs by distance: exact 5-shingle Jaccard (J)")
    table.columns[-1].no_wrap = True
    for row in result.rows:
        bar = "" if row.mean is None else "█" * round(row.mean * 10)
        style = "green" if row.share_similar is not None and row.share_similar >= 0.5 else None
        table.add_row(str(row.distance), str(row.pairs), cell(row.mean), cell(row.low), cell(row.high),
                      cell(row.share_similar), f"{row.estimated:.2f}", bar, style=style)
    out.print(table)
    say(f"{_count(result.pairs, 'pair')} from the neighbours of {_count(result.queried, 'document')}"
        + (f" ({result.without_text:,} sampled documents had no text to compare)" if result.without_text else ""))
    if result.suggested_k is None:
        say(f"no sampled distance has most pairs at Jaccard >= {result.threshold:g}; too few near-duplicates to say")
    else:
        out.print(line("suggested k: ", (str(result.suggested_k), "bold"), " for distance alone (--no-check) on "
                       f"this index: most sampled pairs up to this distance have Jaccard >= {result.threshold:g}"))
    say(f"the defaults: {_k_uses()}")


@app.command("explain", rich_help_panel=SEARCH_PANEL)
@friendly_errors
def explain_command(
    a: Annotated[str, typer.Argument(help="A key in the index, or a file.", show_default=False)],
    b: Annotated[str, typer.Argument(help="Another key, or a file.", show_default=False)],
    db: DbOption = Path(DEFAULT_DB),
    top: Annotated[int, typer.Option(help="Features to show in each list.", min=1)] = 8,
    format_: FormatOption = None,
    as_json: JsonOption = False,
) -> None:
    """Why two documents are (or are not) near-duplicates: distance, Jaccard, features, a diff.

    json, jsonl, csv and tsv print one record (lists as JSON in csv and tsv cells).
    """
    format_ = output.choose_format(format_, as_json)
    with SimhashIndex(db, readonly=True) as index:
        result = explain_pair(index, a, b, top=top)
    if format_ == "table":
        _print_explanation(result)
    else:
        output.render_one(_explanation_json(result), format_)


def _explanation_json(e: Explanation) -> dict:
    def feats(items):
        return [{"feature": f.text, "weight": f.weight, "count": f.count} for f in items]

    return {
        "a": e.a.name, "b": e.b.name,
        "fingerprints": [None if s.fingerprint is None else to_hex(s.fingerprint) for s in (e.a, e.b)],
        "distance": e.distance, "similarity": e.similarity, "estimated_jaccard": e.estimated_jaccard,
        "exact_jaccard": e.exact_jaccard, **_verdict_json(e.verdict), "shared": feats(e.shared),
        "only_a": feats(e.only_a),
        "only_b": feats(e.only_b), "diff": e.diff, "notes": e.notes,
    }


def _verdict_json(verdict) -> dict:
    """The check's verdict as the fields every JSON row has: jaccard, checked, checked_by, certainty, and
    duplicate (the verdict itself)."""
    if verdict is None:
        return {"jaccard": None, "checked": False, "checked_by": None, "certainty": None, "duplicate": False}
    return {
        "jaccard": None if verdict.jaccard is None else round(verdict.jaccard, 4),
        "checked": verdict.jaccard is not None,
        "checked_by": verdict.checked_by,
        "certainty": None if verdict.certainty is None else round(verdict.certainty, 4),
        "duplicate": verdict.keeps,
    }


def _print_explanation(e: Explanation) -> None:
    def num(x):
        return "-" if x is None else f"{x:.3f}"

    summary = {
        "fingerprints": " / ".join("-" if s.fingerprint is None else to_hex(s.fingerprint) for s in (e.a, e.b)),
        "distance": "-" if e.distance is None else f"{e.distance} of 64 bits",
        "similarity (1 - d/64)": num(e.similarity),
        "5-shingle Jaccard estimated from the sketches": num(e.estimated_jaccard),
        "exact 5-shingle Jaccard": num(e.exact_jaccard),
        "features": e.settings.describe(),
        **dict(verdicts(e)),
    }
    output.render_one(summary, "table", title=f"{e.a.name}  vs  {e.b.name}")
    if e.shared or e.only_a or e.only_b:
        rows = max(len(e.shared), len(e.only_a), len(e.only_b))
        cells = [[f"{f.text!r} {f.weight}x{f.count}" for f in items] + [""] * (rows - len(items))
                 for items in (e.shared, e.only_a, e.only_b)]
        output.render(
            zip(*cells), "table", columns=["shared", f"only in {e.a.name}", f"only in {e.b.name}"],
            title="Heaviest features (weight x count)",
        )
    for diff_line in e.diff:
        style = (
            "green" if diff_line.startswith("+") else "red" if diff_line.startswith("-")
            else "dim" if diff_line.startswith("@") else None
        )
        out.print(plain(diff_line, style), soft_wrap=True)
    for note in e.notes:
        warn("note", note)


@app.command(rich_help_panel=DUPLICATES_PANEL)
@friendly_errors
def decisions(
    db: DbOption = Path(DEFAULT_DB),
    output_path: OutOption = None,
    format_: Annotated[
        str, typer.Option("--format", help="jsonl (one object a line) or csv (with a header line).")
    ] = "jsonl",
) -> None:
    """What to delete: each duplicate with the key kept in its place, for a deletion script or simq rm --decisions.

    From the clusters of the last simq clusters, honouring the labels of simq serve --review: the kept member is
    the one chosen, else the representative; a member labelled "not a duplicate" of it, and every chosen keeper,
    stay. Each row: key, kept, jaccard, checked_by (exact, estimated, distance), distance, label.
    """
    if format_ not in ("jsonl", "csv"):
        raise InvalidArgument(f"--format is jsonl or csv, not {format_!r}")
    with SimhashIndex(db, readonly=True) as index:
        rows, note = deletions(index)
    with output.destination(output_path) as handle:
        written = write_decisions(rows, handle, format_)
    extra = []
    if note.kept_apart:
        extra.append(f"{_count(note.kept_apart, 'member')} kept as labelled not a duplicate")
    if note.keepers:
        extra.append(f"{_count(note.keepers, 'more keeper')} kept")
    say(f"{_count(written, 'document')} to delete from {_count(note.clusters, 'cluster')}"
        + (f" ({', '.join(extra)})" if extra else ""), to_stderr=True)
    if note.stale:
        warn("note", f"labels or documents changed since the clusters were made: simq clusters --db {db} regroups "
             "them (the list above already honours every label)")


@app.command(rich_help_panel=INDEX_PANEL)
@friendly_errors
def vacuum(db: DbOption = Path(DEFAULT_DB)) -> None:
    """Give the space of removed and updated documents back to the disk (rewrites the file).

    An index made by an earlier version is brought up to date first (its schema, and sketches of the
    documents whose texts can be read), as by any command that writes; searches never write."""
    with SimhashIndex(db) as index:
        _tell_sketch_upgrade(index)
        before, after = index.vacuum()
    say(f"{db}: {before:,} -> {after:,} bytes")


@app.command(rich_help_panel=DUPLICATES_PANEL)
@friendly_errors
def dupes(
    db: DbOption = Path(DEFAULT_DB),
    k: CandidateKOption = None,
    format_: FormatOption = None,
    as_json: JsonOption = False,
    output_path: OutOption = None,
    check: CheckOption = True,
    threshold: ThresholdOption = DEFAULT_THRESHOLD,
    uncertain: Annotated[
        bool,
        typer.Option(
            "--uncertain",
            help="List the pairs whose verdict is uncertain instead (an estimate short of certainty "
            f"{CERTAIN}, the texts out of reach, or by distance alone), near-duplicates or not, to review them.",
        ),
    ] = False,
) -> None:
    """Every pair of near-duplicate documents, each once, checked by the Jaccard of their texts.

    Estimated from the stored sketches where that is sure, else exact where the texts can be read, else the
    unsure estimate; every row says which and how sure. Without --k the candidates come
    from the sketches (any distance); with --k, or an index whose documents lack sketches, they are the
    pairs within distance k.

    The table shows the first 50 pairs, closest first; the other formats stream every pair.
    """
    format_ = output.choose_format(format_, as_json)
    if uncertain and not check:
        raise InvalidArgument("--uncertain lists checked pairs: it cannot go with --no-check")
    streaming_here = format_ != "table" and output_path is None and out.is_terminal
    with SimhashIndex(db, readonly=True) as index, output.progress("share", hidden=streaming_here) as progress:
        _tell_sketch_upgrade(index)
        task = progress.add_task("pairs", total=None)
        found = index.dupes(
            k, check=check, threshold=threshold, uncertain=uncertain, on_progress=_progress_to(progress, task)
        )
        pairs, report = iter(found), found.report
        records = map(_pair_json, pairs)
        columns = ["first", "second", "distance", "similarity", "jaccard", "checked", "checked_by", "certainty",
                   "duplicate"]
        if format_ == "table":
            shown = list(itertools.islice(records, SHOWN_ROWS))
            more = sum(1 for _ in records)
            progress.stop()
            _dupes_table(shown, more, found.k, report, output_path, uncertain)
            return
        with output.destination(output_path) as handle:
            output.render(records, format_, handle, columns=columns)
    if report is not None:
        _print_check_summary(report, "pair", to_stderr=True, hint=not uncertain)
    if found.apart:
        say(f"{_count(found.apart, 'pair')} labelled not a duplicate left out", to_stderr=True)


def _progress_to(progress, task):
    """An on_progress(done, total) callback that moves a task of an output.progress() display."""
    return lambda done, total: progress.update(task, completed=done, total=total)


def _pair_json(pair: DuplicatePair) -> dict:
    """A pair as JSON; "jaccard" is the check's (null: not measured), "checked_by" how it was judged."""
    return {
        "first": pair.first,
        "second": pair.second,
        "distance": pair.distance,
        "similarity": round(pair.similarity, 4),
        "jaccard": None if pair.jaccard is None else round(pair.jaccard, 4),
        "checked": pair.jaccard is not None,
        "checked_by": pair.checked_by,
        "certainty": None if pair.certainty is None else round(pair.certainty, 4),
        "duplicate": pair.keeps,
    }


def _dupes_table(
    shown: list[dict], more: int, k: int, report: Optional[CheckSummary], output_path: Optional[Path],
    uncertain: bool = False,
) -> None:
    to_stderr = output_path is not None
    if not shown:
        if uncertain:
            say("no uncertain verdict: every candidate was settled")
        elif report is not None and report.candidates:
            say("no pair passed the check")
        elif report is not None and report.candidates_from == "sketch":
            say("no pairs: no two documents share a window of their sketches")
        else:
            say(f"no pairs within distance {k}")
    else:
        checked = ["jaccard", "checked_by", "certainty"] + (["duplicate"] if uncertain else [])
        columns = ["first", "second", "distance", "similarity"] + (checked if report is not None else [])
        shown.sort(key=lambda p: (p["distance"], p["first"], p["second"]))
        with output.destination(output_path) as handle:
            output.render(shown, "table", handle, columns=columns, fold=["first", "second"])
        if more:
            say(f"{_count(more, 'more pair')} not shown: use --format jsonl, csv or tsv", to_stderr=to_stderr)
    if report is not None:
        _print_check_summary(report, "pair", to_stderr=to_stderr, hint=not uncertain)
    elif shown:
        say(f"{_count(len(shown) + more, 'pair')} within distance {k}", to_stderr=to_stderr)


@app.command(rich_help_panel=DUPLICATES_PANEL)
@friendly_errors
def clusters(
    db: DbOption = Path(DEFAULT_DB),
    k: CandidateKOption = None,
    representative: Annotated[
        str, typer.Option(help=f"Which member represents a cluster: {', '.join(REPRESENTATIVE_RULES)}.")
    ] = "first",
    format_: FormatOption = None,
    as_json: JsonOption = False,
    output_path: OutOption = None,
    min_size: Annotated[int, typer.Option(help="Show/export clusters of at least this many documents.", min=1)] = 2,
    check: CheckOption = True,
    threshold: ThresholdOption = DEFAULT_THRESHOLD,
) -> None:
    """Cluster documents (chains of the pairs simq dupes finds), write the clusters table, show or export them.

    The table shows the 50 largest; json and jsonl print one cluster a record with its members,
    csv and tsv one member a row.
    """
    format_ = output.choose_format(format_, as_json)
    with SimhashIndex(db) as index:
        _tell_sketch_upgrade(index)
        with output.progress("share") as progress:
            task = progress.add_task("clustering", total=None)
            report = index.clusters(
                k, check=check, threshold=threshold, representative=representative,
                on_progress=_progress_to(progress, task),
            )
        found_by = "with " + candidates_text({"candidates": report.candidates, "k": report.k})
        found = index.cluster_list(min_size=min_size)
        chained = report.chained or {}
        with output.destination(output_path) as handle:
            if format_ == "table":
                biggest = heapq.nlargest(SHOWN_ROWS, found, key=lambda c: (c.size, -c.cluster))
                _clusters_table(biggest, handle, chained)
                _print_chains(index, biggest, chained, report.check)
            elif format_ in ("csv", "tsv"):
                members = (
                    {"cluster": c.cluster, "size": c.size, "representative": c.representative, "key": key,
                     "below": key in below}
                    for c in found for below in [{k for k, _ in chained.get(c.cluster, ())}] for key in c.members
                )
                output.render(members, format_, handle, columns=["cluster", "size", "representative", "key", "below"])
            else:
                line = report.check.threshold if report.check is not None else None
                output.render((_cluster_json(index, c, chained, line) for c in found), format_, handle)
    say(
        f"{db}: {_count(report.documents, 'document')} in {_count(report.clusters, 'cluster')} {found_by} "
        f"({report.clustered:,} in clusters of two or more, largest {report.largest:,}); "
        f"keeping one of each would drop {report.duplicates:,}"
        + (f"; {report.below:,} members are below the Jaccard line to their representative (joined through others)"
           if report.below else "") + ". "
        + ("Written to the clusters table." if report.saved else "Not saved: the index is read-only here."),
        to_stderr=True,
    )
    if report.check is not None:
        _print_check_summary(report.check, "pair", suffix=" joined clusters", to_stderr=True)


def _cluster_json(index: SimhashIndex, c: Cluster, chained: dict, threshold: Optional[float]) -> dict:
    record = {"cluster": c.cluster, "size": c.size, "representative": c.representative, "members": list(c.members)}
    if c.cluster in chained:
        _, _, members = cluster_members(index, c.cluster, threshold=threshold)
        record["below"] = [
            {"key": m.key, **_verdict_json(m.verdict), "path": None if m.path is None else list(m.path)}
            for m in members if m.below
        ]
    else:
        record["below"] = []
    return record


def _clusters_table(biggest: list[Cluster], handle, chained: dict) -> None:
    if not biggest:
        say("no clusters of that size")
        return
    rows = []
    for c in biggest:
        others = [m for m in c.members if m != c.representative]
        shown = ", ".join(map(printable, others[:3])) + (f", ... ({len(others) - 3} more)" if len(others) > 3 else "")
        rows.append({"cluster": c.cluster, "size": c.size, "below": len(chained.get(c.cluster, ())),
                     "representative": c.representative, "other members": shown})
    output.render(rows, "table", handle, fold=["representative", "other members"])


CHAINS_SHOWN = 10


def _print_chains(index: SimhashIndex, biggest: list[Cluster], chained: dict, check: Optional[CheckSummary]) -> None:
    """The members of the shown clusters that are below the Jaccard line to their representative, with the
    chain of near-duplicate pairs that joined them (the first CHAINS_SHOWN)."""
    told = 0
    threshold = check.threshold if check is not None else None
    for c in biggest:
        if c.cluster not in chained or told >= CHAINS_SHOWN:
            continue
        _, rep, members = cluster_members(index, c.cluster, threshold=threshold)
        for m in members:
            if not m.below or told >= CHAINS_SHOWN:
                continue
            told += 1
            v = m.verdict
            assert v is not None  # below: judged against the representative
            how = "distance only" if v.jaccard is None else f"{v.checked_by} Jaccard {v.jaccard:.3f}"
            via = " -> ".join(map(printable, m.path)) if m.path else "(cluster too large to search for the path)"
            say(f"cluster {c.cluster}: {printable(m.key)} is below the line to {printable(rep)} ({how}); joined "
                f"through {via}")
    total = sum(len(chained.get(c.cluster, ())) for c in biggest)
    if total > told:
        say(f"{_count(total - told, 'more member')} below the line in these clusters: --format json lists them "
            "with their paths")


@app.command(rich_help_panel=DUPLICATES_PANEL)
@friendly_errors
def dedup(
    inputs: Annotated[
        list[str], typer.Argument(help="JSONL files, text files, folders, globs, or - for stdin.", show_default=False)
    ],
    out_path: Annotated[
        Path, typer.Option("--out", "-o", help="Where the kept documents go (JSONL; - for stdout).", show_default=False)
    ],
    k: Annotated[
        Optional[int],
        typer.Option(
            "--k", "-k",
            help="With --check: candidates within this distance instead of the sketches' LSH tables (any distance); "
            f"with --no-check: the largest distance of a duplicate. \\[default: {RECOMMENDED_K} with --no-check]",
            show_default=False,
        ),
    ] = None,
    dupes_file: Annotated[
        Optional[Path],
        typer.Option(
            "--dupes",
            help="Also write each dropped document's key, what it duplicates, the distance, the Jaccard and how it "
            "was checked (JSONL).",
        ),
    ] = None,
    against: Annotated[
        Optional[Path], typer.Option("--against", help="An index whose documents count as already kept (never output).")
    ] = None,
    jsonl: JsonlOption = None,
    text_field: TextFieldOption = "text",
    id_field: IdFieldOption = "id",
    features: FeaturesOption = None,
    ngram: NgramOption = None,
    weights: WeightsOption = None,
    hmm: HmmOption = None,
    encoding: EncodingOption = "utf-8",
    errors: ErrorsOption = "strict",
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="Drop a document only if its pair with a kept one is a near-duplicate by the rule of simq dupes "
            "(the exact 5-shingle Jaccard of two short texts, else the sketches' estimate) and the verdict is sure "
            "(exact, or an estimate of certainty >= 0.999); --no-check: by distance alone.",
        ),
    ] = True,
    threshold: ThresholdOption = DEFAULT_THRESHOLD,
    drop_uncertain: DropUncertainOption = False,
    memory: Annotated[
        Optional[str],
        typer.Option(
            "--memory", metavar="SIZE",
            help="RAM for the kept set (512M, 2G); past it the kept set spills to a folder beside --out, with the "
            "same result. \\[default: a quarter of the machine's memory, at most 1G]",
            show_default=False,
        ),
    ] = None,
    resume: Annotated[
        Optional[bool],
        typer.Option(
            "--resume/--restart",
            help="Continue the interrupted run writing --out (it must exist), or start again. \\[default: continue "
            "one made with the same arguments and inputs]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Keep-first filter: write each document unless one kept before it (or in --against) is a near-duplicate.

    The fingerprint options default as for simq add; with --against, the index's settings apply.

    A killed run continues when run again: OUT.partial and OUT.resume hold what it committed.
    """
    reader = _reader(jsonl, text_field, id_field, encoding, errors, keep_repeats=True)
    paths = reader.expand(inputs)
    for given in (out_path, dupes_file):
        if given is not None and given.exists() and any(p != "-" and os.path.samefile(p, given) for p, _ in paths):
            raise InvalidInput(f"{given} is also an input; write to another file")
    if dupes_file is not None and os.path.abspath(dupes_file) == os.path.abspath(out_path):
        raise InvalidInput("--dupes and --out name the same file")
    requested: dict[str, Any] = {"features": features, "ngram": ngram, "weights": weights, "hmm": hmm}
    budget = parse_memory(memory) if memory is not None else default_memory()
    to_stdout = str(out_path) == "-"
    with contextlib.ExitStack() as stack:
        index = stack.enter_context(SimhashIndex(against, readonly=True, **requested)) if against is not None else None
        chosen = {name: value for name, value in requested.items() if value is not None}
        settings = index.settings if index is not None else FingerprintSettings(**chosen)
        deduplicator = Deduplicator(k, settings, against=index, check=check, threshold=threshold,
                                    drop_uncertain=drop_uncertain, memory=budget,
                                    spill_near=None if to_stdout else str(out_path))
        stack.callback(deduplicator.close)
        if index is not None and deduplicator.report.against_unsketched:
            say(
                f"{against}: {deduplicator.report.against_unsketched:,} of {deduplicator.report.against:,} documents "
                f"have no sketch (indexed before sketches, texts out of reach): a match with one is judged by distance "
                f"(within {fallback_k(deduplicator.k)})",
                to_stderr=True,
            )
        report = deduplicator.report
        # JSONL comes fingerprinted (and sketched when checking) from the reader, on every core.
        entries = iter(reader.entries(paths, deduplicator.settings, sketches=deduplicator.check))
        # Regular files (or none yet) are written resumably (pipeline/resume.py): OUT.partial, moved to OUT
        # at the end, so a run that fails leaves an earlier output as it was. stdout, devices and pipes are
        # written in place, and not resumed.
        resumable = not to_stdout and all(p is None or _regular_or_absent(p) for p in (out_path, dupes_file))
        committed: ResumableOutput | None = None
        outputs: list[output.ReplacedOnSuccess] = []
        if resumable:
            arguments = {"k": k, "check": check, "threshold": threshold, "drop_uncertain": drop_uncertain,
                         "settings": settings.describe(),
                         "against": None if against is None else os.path.abspath(against), "jsonl": jsonl,
                         "text_field": text_field, "id_field": id_field, "encoding": encoding, "errors": errors}
            committed = ResumableOutput(str(out_path), None if dupes_file is None else str(dupes_file), arguments,
                                        input_identity([p for p, _ in paths]))
            continuing = committed.open(resume)  # (a refusal leaves an interrupted run's files as they are)
            stack.callback(committed.abandon)
            if continuing and committed.decided:
                say(f"continuing the interrupted run writing {out_path}: {committed.decided:,} documents were "
                    "decided (--restart starts again)", to_stderr=True)
                deduplicator.prime(committed.kept_before(entries))
                committed.restore(report)
        elif resume:
            raise InvalidInput("--resume needs --out (and --dupes) to be files")
        else:
            outputs = [stack.enter_context(output.ReplacedOnSuccess(p)) for p in (out_path, dupes_file)
                       if p is not None and str(p) != "-"]
        sink = sys.stdout.buffer if to_stdout else (None if committed else outputs[0].handle)
        side = outputs[-1].handle if dupes_file is not None and outputs else None
        total = sum(_size_of(p) for p, _ in paths) or None
        with output.progress("bytes", hidden=to_stdout and out.is_terminal) as progress:
            task = progress.add_task("", total=total)
            try:
                for count, decision in enumerate(deduplicator.run(entries), report.read + 1):
                    if committed is not None:
                        committed.write(decision, decision.output_line(text_field, id_field) if decision.kept
                                        else decision.dupe_line() if dupes_file is not None else b"")
                        committed.maybe_commit()
                    elif decision.kept:
                        sink.write(decision.output_line(text_field, id_field))  # type: ignore[union-attr]
                    elif side is not None:
                        side.write(decision.dupe_line())
                    if count % 500 == 0:
                        progress.update(
                            task, completed=reader.bytes_read,
                            description=f"{count:,} docs, {report.kept:,} kept, {report.dropped:,} dropped",
                        )
            except KeyboardInterrupt:
                if committed is not None:
                    committed.commit()
                    raise fail(f"interrupted after {committed.decided:,} documents; run the same command again to "
                               f"continue ({out_path}.partial holds the {committed.counts['kept']:,} kept so far)",
                               130) from None
                for written in outputs:
                    written.commit()
                raise fail(
                    f"interrupted after {report.read:,} documents; {out_path} holds the documents kept so far", 130
                ) from None
        if sink is not None:
            sink.flush()
        if not (reader.skip_count and not report.read):  # else the files stay as they were (the error below)
            if committed is not None:
                committed.finish()
            for written in outputs:
                written.commit()
        elif committed is not None:
            committed.discard()
    spilled = deduplicator.spill.bytes
    _print_reader_notes(reader)
    for skip in reader.skipped[:SHOWN_SKIPS]:
        warn("skipped", skip.where, ": ", skip.reason)
    share = report.dropped / report.read if report.read else 0.0
    say(
        f"{_count(report.read, 'document')}: {report.kept:,} kept, {report.dropped:,} dropped ({share:.1%}) "
        + _dedup_rule(deduplicator)
        + (f" against {report.against:,} indexed" if against is not None else "")
        + f", {reader.skip_count:,} skipped"
        + (f", {spilled / 2**20:,.0f} MiB of the kept set spilled to disk" if spilled else "")
        + f"; {report.seconds:.1f} s "
        f"(fingerprints {report.fingerprint_seconds:.1f} s, search {report.search_seconds:.1f} s, "
        f"{report.read / max(report.seconds, 1e-9):,.0f} documents/s)",
        to_stderr=True,
    )
    if reader.skip_count and not report.read:
        unchanged = [str(p) for p in (out_path, dupes_file) if p is not None and str(p) != "-"]
        raise fail(f"nothing read: {_count(reader.skip_count, 'input was', 'inputs were')} skipped (see above)"
                   + (f"; {' and '.join(unchanged)} left as {'they were' if len(unchanged) > 1 else 'it was'}"
                      if unchanged else ""))
    if any(skip.named for skip in reader.skipped):
        raise fail(f"{_count(reader.skip_count, 'input was', 'inputs were')} skipped (see above); the rest was "
                   "filtered")


def _regular_or_absent(path: Path) -> bool:
    return not path.exists() or path.is_file()


def _dedup_rule(deduplicator: Deduplicator) -> str:
    report = deduplicator.report
    if not deduplicator.check:
        return f"within k={deduplicator.k} (distance alone)"
    found = "sketch LSH candidates" if deduplicator.by_sketch else f"candidates within k={deduplicator.k}"
    rule = f"by {found} with estimated Jaccard >= {deduplicator.threshold:g}"
    how = [f"{report.exact:,} of two short texts by their exact Jaccard"] if report.exact else []
    how += [f"{report.by_distance:,} by distance alone"] if report.by_distance else []
    return rule + (f" ({'; '.join(how)})" if how else "")


@app.command("spark-dedup", rich_help_panel=DUPLICATES_PANEL)
@friendly_errors
def spark_dedup(
    input_path: Annotated[
        str,
        typer.Argument(
            metavar="INPUT", help="Parquet (file or folder) or JSONL with id and text columns.", show_default=False
        ),
    ],
    out_dir: Annotated[
        Path,
        typer.Option("--out", "-o", help="Output folder: Parquet tables, manifest.json, shards.", show_default=False),
    ],
    k: Annotated[
        Optional[int],
        typer.Option(
            "--k", "-k",
            help="With --check: pairs within this distance (0-10) instead of the sketches' LSH tables; with "
            f"--no-check: the largest distance of a pair. \\[default: {RECOMMENDED_K} with --no-check]",
            show_default=False,
        ),
    ] = None,
    id_field: Annotated[str, typer.Option("--id-field", help="Column holding the document id.")] = "id",
    text_field: Annotated[str, typer.Option("--text-field", help="Column holding the text.")] = "text",
    id_col: Annotated[Optional[str], typer.Option("--id-col", hidden=True, help="Old name of --id-field.")] = None,
    text_col: Annotated[
        Optional[str], typer.Option("--text-col", hidden=True, help="Old name of --text-field.")
    ] = None,
    input_format: Annotated[
        Optional[str],
        typer.Option("--input-format", help="'parquet' or 'jsonl'. \\[default: by suffix]", show_default=False),
    ] = None,
    old_input_format: Annotated[
        Optional[str], typer.Option("--format", hidden=True, help="Old name of --input-format.")
    ] = None,
    master: Annotated[
        Optional[str],
        typer.Option(
            help="Spark master: local[*], spark://host:7077, yarn... \\[default: local[*], or spark-submit's]",
            show_default=False,
        ),
    ] = None,
    keep_by: Annotated[
        Optional[str],
        typer.Option(
            "--keep-by",
            help="Keep the first document of a cluster by this column. \\[default: lowest id]",
            show_default=False,
        ),
    ] = None,
    descending: Annotated[
        bool, typer.Option("--descending", help="With --keep-by: keep the largest value instead.")
    ] = False,
    against: Annotated[
        Optional[Path],
        typer.Option("--against", help="An earlier run's --out: drop near-duplicates of its kept documents first."),
    ] = None,
    sqlite_shards: Annotated[
        int, typer.Option("--sqlite-shards", help="Also write this many SQLite index files (simq opens each).")
    ] = 0,
    blocks: Annotated[
        Optional[int],
        typer.Option(help="Blocks of the pair join. \\[default: 6 for k <= 3, k + 3 above]", show_default=False),
    ] = None,
    features: FeaturesOption = None,
    ngram: NgramOption = None,
    weights: WeightsOption = None,
    hmm: HmmOption = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an earlier output in --out.")] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="Pair two documents by the rule of simq dedup (the exact Jaccard of two short texts, else the "
            "sketches' estimate, the verdict sure); --no-check: by distance alone.",
        ),
    ] = True,
    threshold: ThresholdOption = DEFAULT_THRESHOLD,
    drop_uncertain: DropUncertainOption = False,
    conf: Annotated[
        Optional[list[str]],
        typer.Option("--conf", help="A Spark setting KEY=VALUE (repeatable), e.g. spark.sql.shuffle.partitions=64."),
    ] = None,
) -> None:
    """The kept documents of a corpus on Apache Spark, with its fingerprints, checked pairs and clusters.

    The same kept set as simq dedup on the same input (keep-first in input order, or by --keep-by)."""
    id_col, text_col = id_col or id_field, text_col or text_field
    input_format = input_format or old_input_format
    try:
        spark_job = importlib.import_module("simhash_sqlite.spark")  # pyspark only now: the base install has none
    except ImportError as exc:
        raise InvalidInput(str(exc)) from None
    requested: dict[str, Any] = {"features": features, "ngram": ngram, "weights": weights, "hmm": hmm}
    settings = FingerprintSettings(**{name: v for name, v in requested.items() if v is not None})
    settings_given = {}
    for item in conf or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidArgument(f"--conf takes KEY=VALUE, not {item!r}")
        settings_given[name.strip()] = value
    spark = spark_job.session(master or _default_master(), **settings_given)
    try:
        report = spark_job.run_dedup(
            spark, input_path, str(out_dir), settings=settings, k=k, check=check, threshold=threshold,
            drop_uncertain=drop_uncertain, blocks=blocks,
            id_col=id_col, text_col=text_col,
            fmt=input_format, keep_by=keep_by, descending=descending,
            against=None if against is None else str(against), sqlite_shards=sqlite_shards, overwrite=overwrite,
        )
    except spark_job.JOB_ERRORS as exc:
        raise InvalidInput(f"the Spark job failed: {spark_job.failure(exc)}") from None
    rows = {
        "documents": report.documents,
        "without features": report.without_features,
        "pairs (checked)" if check else f"pairs within {candidate_k(k, False)}": report.pairs,
        "clusters": report.clusters,
        "kept": report.kept,
    }
    if report.matched_existing is not None:
        rows[f"paired with {against}"] = report.matched_existing
    if report.shards:
        rows["sqlite shards"] = len(report.shards)
    rows["seconds"] = round(report.seconds, 1)
    output.render_one(rows, "table", cells={"seconds": lambda v: f"{v:.1f}"})
    say(f"{out_dir}: fingerprints, pairs, clusters, kept (Parquet) and manifest.json")


def _default_master() -> str | None:
    """local[*] when run directly; spark-submit's own --master when launched through it."""
    return None if "PYSPARK_GATEWAY_PORT" in os.environ else "local[*]"


def main() -> None:
    calm_collector()  # a command runs once and exits
    _only_the_command(sys.argv[1:])()


def _only_the_command(args: list[str]) -> typer.Typer:
    """app, or when args name a command, app with that command alone: typer builds every command's
    parameters (their annotations read, one click object each) on each start, a tenth of a search's
    start-up. The full app for anything else (options, --help, completion, an unknown name)."""
    if not args or any(name.startswith(("_SIMQ_COMPLETE", "_TYPER_COMPLETE")) for name in os.environ):
        return app
    wanted = OLD_COMMANDS.get(args[0], args[0])
    found = [info for info in app.registered_commands
             if (info.name or typer.main.get_command_name(getattr(info.callback, "__name__", ""))) == wanted]
    if len(found) != 1:
        return app
    one = copy.copy(app)
    one.registered_commands = found
    return one


if __name__ == "__main__":
    main()
