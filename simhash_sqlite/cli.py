"""simq: the command line over simhash_sqlite. Each command parses, makes library calls, renders."""

from __future__ import annotations

import csv
import contextlib
import heapq
import importlib
import itertools
import functools
import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import apsw
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from .checks import CheckReport, check_index, report_json
from .confirm import DEFAULT_THRESHOLD, ConfirmReport, candidate_k, check_threshold, fallback_k, keeps
from .errors import InvalidInput, SimhashError
from .fingerprint import from_hex, simhash, to_hex, to_signed
from .clusters import REPRESENTATIVE_RULES, Cluster
from .index_arrays import DuplicatePair
from .dedup import DROP_MARGIN, Deduplicator
from .index import AddReport, SimhashIndex
from .batch_queries import QueryError, guess_format, parse_queries
from .search import Match, executed_sql, near_sql
from .user_sql import ResultSet, parse_params, run_query
from .calibrate import DEFAULT_MAX_K, Calibration, calibrate as calibrate_index
from .explain import Explanation, explain as explain_pair
from .settings import CONFIRM_K, RECOMMENDED_K, SHORT_TEXT, FingerprintSettings
from .sources import Reader, stale_keys

app = typer.Typer(
    name="simq",
    help="Find near-duplicate texts with 64-bit SimHash, in one SQLite index file.",
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

DEFAULT_DB = "simhash.db"
SHOWN_SKIPS = 20

DbOption = Annotated[
    Path,
    typer.Option("--db", envvar="SIMQ_DB", help="The index file.", show_default=True),
]
KOption = Annotated[int, typer.Option("--k", "-k", help="Largest Hamming distance to report (0-64).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
CandidateKOption = Annotated[
    Optional[int],
    typer.Option(
        "--k", "-k",
        help=f"Largest Hamming distance of a candidate (0-64) "
        f"\\[default: {CONFIRM_K} with --confirm, {RECOMMENDED_K} with --no-confirm].",
        show_default=False,
    ),
]
ConfirmOption = Annotated[
    bool,
    typer.Option(
        "--confirm/--no-confirm",
        help="Keep a candidate only if the exact 5-shingle Jaccard of the texts (stored with --store-text, or the "
        f"unchanged files) reaches --jaccard; one without a reachable text is kept if within min(k, {RECOMMENDED_K}).",
    ),
]
JaccardOption = Annotated[
    float, typer.Option("--jaccard", help="With --confirm: the least exact Jaccard kept (above 0, at most 1).")
]


def fail(message: str, code: int = 1) -> typer.Exit:
    # escape: a message may hold [brackets] (an extra's name, a path) that are not rich markup
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def _progress(*bar_columns) -> Progress:
    """A progress display on stderr, shown only on a terminal and gone when done; bar_columns go
    between the spinner and the description (a bar for inputs of known size)."""
    return Progress(
        SpinnerColumn(),
        *bar_columns,
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )


def friendly_errors(command):
    """Turn the errors a user can cause into one red line and exit code 1, never a traceback."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except SimhashError as exc:
            raise fail(str(exc)) from None
        except apsw.BusyError:
            raise fail("the index is locked by another process for too long; try again") from None
        except apsw.FullError:
            raise fail("the disk is full; the index keeps every batch committed before this") from None
        except (apsw.ReadOnlyError, apsw.CantOpenError):
            raise fail("the index file or its folder is read-only") from None
        except (apsw.CorruptError, apsw.NotADBError):
            raise fail("the index file is damaged (run: sqlite3 FILE 'PRAGMA integrity_check')") from None
        except OSError as exc:
            raise fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")) from None

    return wrapper


@app.command()
@friendly_errors
def add(
    inputs: Annotated[
        list[str], typer.Argument(help="Files, folders (recursive), globs, or - for stdin.", show_default=False)
    ],
    db: DbOption = Path(DEFAULT_DB),
    jsonl: Annotated[bool, typer.Option("--jsonl", help="Read inputs as JSONL (*.jsonl is read so anyway).")] = False,
    text_field: Annotated[str, typer.Option(help="JSONL field holding the text.")] = "text",
    id_field: Annotated[str, typer.Option(help="JSONL field holding the key.")] = "id",
    features: Annotated[
        Optional[str], typer.Option(help="New index: 'chars' or 'words' n-grams [default: chars].")
    ] = None,
    ngram: Annotated[Optional[int], typer.Option(help="New index: n of the n-grams [default: 5].")] = None,
    weights: Annotated[
        Optional[str], typer.Option(help="New index: 'binary', 'count' or 'log' [default: binary].")
    ] = None,
    hmm: Annotated[
        Optional[bool], typer.Option("--hmm/--no-hmm", help="New index: jieba HMM for words [default: off].")
    ] = None,
    store_text: Annotated[
        Optional[bool], typer.Option("--store-text/--no-store-text", help="New index: keep the texts in it.")
    ] = None,
    encoding: Annotated[str, typer.Option(help="Encoding of the input files.")] = "utf-8",
    errors: Annotated[
        str, typer.Option(help="On undecodable bytes: 'strict' (skip the file), 'replace', 'ignore' or 'backslashreplace'.")
    ] = "strict",
    batch_size: Annotated[int, typer.Option(help="Documents per transaction.")] = 1000,
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
    """Add files, folders or JSONL to the index (created on first use); changed files are updated."""
    reader = Reader(jsonl=jsonl, text_field=text_field, id_field=id_field, encoding=encoding, errors=errors)
    paths = reader.expand(inputs)  # missing paths fail here, before the index is touched
    with SimhashIndex(
        db, create=True, features=features, ngram=ngram, weights=weights, hmm=hmm, store_text=store_text
    ) as index:
        report = AddReport()
        with _progress() as progress:
            task = progress.add_task("adding", total=None)

            def on_batch(current: AddReport) -> None:
                progress.update(task, description=f"{current.documents:,} documents, {current.characters:,} characters")
                if progress_json:  # called after the COMMIT: every line names a batch that is on disk
                    print(_progress_line(current), file=sys.stderr, flush=True)

            try:
                documents = reader.documents(paths, index.settings, index.store_text)
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
        err.print(f"[yellow]pruned[/] {_shown(key)}: the file is gone", highlight=False, soft_wrap=True)
    if prune:
        out.print(f"{len(pruned):,} pruned", highlight=False, soft_wrap=True)
    if reader.failed:
        raise typer.Exit(1)


def _shown(text: str) -> str:
    """A key, path or reason as printed: control characters escaped (one message stays one line)
    and rich markup escaped (a key like "[/]" is text, not a style)."""
    return escape("".join(c if c.isprintable() else repr(c)[1:-1] for c in text))


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
    for skip in reader.skipped[:SHOWN_SKIPS]:
        err.print(f"[yellow]skipped[/] {_shown(skip.where)}: {_shown(skip.reason)}", highlight=False, soft_wrap=True)
    if reader.skip_count > SHOWN_SKIPS:
        err.print(f"[yellow]skipped[/] {reader.skip_count - SHOWN_SKIPS:,} more")
    for dup in reader.duplicates[:SHOWN_SKIPS]:
        err.print(
            f"[yellow]warning[/] {_shown(dup.where)}: id {_shown(repr(dup.key))} again (first at {_shown(dup.first)}); "
            "the later record wins",
            highlight=False,
            soft_wrap=True,
        )
    if reader.duplicate_count > SHOWN_SKIPS:
        err.print(f"[yellow]warning[/] {reader.duplicate_count - SHOWN_SKIPS:,} more repeated ids")
    for key in report.no_features[:SHOWN_SKIPS]:
        err.print(
            f"[yellow]warning[/] {_shown(key)}: no features (empty text); stored, never matches",
            highlight=False,
            soft_wrap=True,
        )
    if report.short and report.short * 2 >= report.added + report.updated:
        err.print(
            f"[yellow]warning[/] {report.short:,} of the texts are shorter than {SHORT_TEXT} characters: distances "
            "between short texts are noisier; simq near and dupes check candidates by their exact Jaccard when the texts "
            f"can be read (--store-text, or keep the files), and by distance alone use k <= {RECOMMENDED_K - 1}",
            highlight=False, soft_wrap=True,
        )
    out.print(
        f"{db}: {report.added:,} added, {report.updated:,} updated, {report.unchanged:,} unchanged, "
        f"{reader.skip_count:,} skipped, {report.without_features:,} without features"
        + (f", {reader.duplicate_count:,} repeated ids" if reader.duplicate_count else ""),
        highlight=False,
        soft_wrap=True,
    )


@app.command()
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
        Optional[str], typer.Option(help="'jsonl' or 'paths' [default: jsonl for *.jsonl and stdin, else paths].")
    ] = None,
    limit: Annotated[Optional[int], typer.Option(help="At most this many results (per query).")] = None,
    plan: Annotated[
        Optional[str], typer.Option(help="Force 'index' (block lookups) or 'scan'; the answer is the same.")
    ] = None,
    as_json: JsonOption = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show the plan, the candidates checked, and the SQL.")
    ] = False,
    confirm: ConfirmOption = True,
    jaccard: JaccardOption = DEFAULT_THRESHOLD,
) -> None:
    """Near-duplicates of a text, a file, a stored key or a fingerprint, closest first: candidates
    within k, checked by the exact Jaccard of the texts where they can be read, else estimated from
    the stored sketches."""
    threshold = check_threshold(jaccard) if confirm else None
    k = candidate_k(k, confirm)
    if batch is not None:
        if any(x is not None for x in (text, file, key, hash_)):
            raise InvalidInput("--batch reads its queries from the file; give no text, --file, --key or --hash")
        _near_batch(db, batch, batch_format, k, limit, plan, explain, threshold)
        return
    if file is not None:
        text = _read_text(file)
    fingerprint = from_hex(hash_) if hash_ is not None else None
    report = None
    with SimhashIndex(db) as index:
        _tell_sketch_upgrade(index)
        result = index.search(
            text, fingerprint=fingerprint, key=key, k=k, limit=limit, plan=plan,
            check=confirm, threshold=jaccard,
        )
        matches, report = result.matches, result.report
        if explain:
            err.print(f"plan: {result.plan.describe()}", highlight=False)
            err.print(f"candidates checked: {result.candidates:,}", highlight=False)
            err.print(executed_sql(result.plan), highlight=False, markup=False, soft_wrap=True)
            err.print("-- the same answer in one statement (near_sql()):", highlight=False, markup=False)
            err.print(near_sql(result.plan), highlight=False, markup=False, soft_wrap=True)
    if as_json:
        print(json.dumps([_match_json(m) for m in matches], ensure_ascii=False))
    elif not matches:
        none_checked = report is not None and report.candidates
        out.print("no match passed the check" if none_checked else f"no documents within distance {k}")
    else:
        # Checked: the Jaccard takes the fingerprint's place (--json has both), so keys keep their width.
        last = "jaccard" if report is not None else "fingerprint"
        table = Table("key", "distance", "similarity", last)
        table.columns[0].overflow = "fold"
        for match in matches:
            cell = _jaccard_cell(match.jaccard) if report is not None else to_hex(match.fingerprint)
            table.add_row(match.key, str(match.distance), f"{match.similarity:.3f}", cell)
        out.print(table)
    if report is not None:
        _print_check_summary(report, "matches", to_stderr=as_json)


def _tell_sketch_upgrade(index: SimhashIndex) -> None:
    """Say what opening an index made before sketches did: which documents could not be sketched."""
    if index.sketch_upgrade is None:
        return
    sketched, out_of_reach = index.sketch_upgrade
    err.print(
        f"{index.path}: made before sketches; {sketched:,} documents sketched from their texts"
        + (f", {out_of_reach:,} could not be (texts not stored and files changed or gone): their pairs are "
           "judged by distance alone" if out_of_reach else ""),
        highlight=False,
        soft_wrap=True,
    )


def _jaccard_cell(jaccard: float | None) -> str:
    return "-" if jaccard is None else f"{jaccard:.3f}"


def _print_check_summary(report: ConfirmReport, noun: str, *, to_stderr: bool) -> None:
    """How many results were checked exactly and how many by distance only, and a hint when texts were
    out of reach. Nothing when there was no candidate."""
    if not report.candidates:
        return
    dropped = report.rejected + report.estimate_rejected + report.too_far
    found_by = "found by the sketches" if report.candidates_from == "sketch" else f"within distance {report.k}"
    line = (
        f"{report.kept:,} {noun}: {report.checked:,} checked exactly (Jaccard >= {report.threshold:g}), "
        f"{report.estimated:,} by the sketches' estimate, "
        f"{report.unchecked:,} by distance only (<= {report.fallback_k}); "
        f"{dropped:,} of {report.candidates:,} candidates {found_by} dropped"
    )
    (err if to_stderr else out).print(line, highlight=False, soft_wrap=True)
    missing = report.unchecked + report.too_far
    if missing:
        err.print(
            f"[yellow]hint[/] {missing:,} candidate{'s were' if missing != 1 else ' was'} judged by distance alone, "
            "a text and a sketch being out of reach (documents indexed before sketches whose texts are gone, or "
            "bare fingerprints): add them again, with --store-text or from files kept unchanged at their paths"
            + ("; a --hash query has no text (search with the text, --file or --key)" if report.without_query_text else ""),
            highlight=False,
            soft_wrap=True,
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
) -> None:
    """JSONL answers on stdout, one per query line, in order; bad lines answer with "error".
    threshold: check the matches exactly (None: by distance alone)."""
    fmt = fmt or guess_format(source)
    stream = sys.stdin if source == "-" else open(source, encoding="utf-8")  # noqa: SIM115
    failed = answered = 0
    plans: dict[str, int] = {}
    candidates = 0
    total = ConfirmReport(k, threshold or DEFAULT_THRESHOLD)
    write = sys.stdout.write
    try:
        with SimhashIndex(db) as index:
            queries = parse_queries(stream, fmt)
            answers = index.near_many(
                queries, k=k, limit=limit, plan=plan,
                check=threshold is not None, threshold=threshold or DEFAULT_THRESHOLD,
            )
            for query, answer in answers:
                answered += 1
                line: dict = {"id": query.id}
                if isinstance(answer, QueryError):
                    failed += 1
                    line["error"] = answer.message
                    if failed <= SHOWN_SKIPS:
                        err.print(f"[yellow]skipped[/] {answer.message}", highlight=False, soft_wrap=True)
                else:
                    matches = answer.matches
                    if answer.report is not None:
                        _add_counts(total, answer.report)
                    line["fingerprint"] = to_hex(answer.fingerprint)
                    line["matches"] = [_match_json(m) for m in matches]
                    if explain:
                        line["plan"], line["candidates"] = answer.plan.kind, answer.candidates
                        plans[answer.plan.kind] = plans.get(answer.plan.kind, 0) + 1
                        candidates += answer.candidates
                write(json.dumps(line, ensure_ascii=False) + "\n")
    finally:
        if stream is not sys.stdin:
            stream.close()
    if explain:
        used = ", ".join(f"{kind} {count:,}" for kind, count in sorted(plans.items())) or "none"
        err.print(f"{answered:,} queries; plans: {used}; candidates checked: {candidates:,}", highlight=False)
    if threshold is not None:
        _print_check_summary(total, f"matches of {answered - failed:,} queries", to_stderr=True)
    if failed:
        raise fail(f"{failed:,} of {answered:,} queries could not be searched (see their \"error\" lines)")


def _add_counts(total: ConfirmReport, part: ConfirmReport) -> None:
    for name in ("candidates", "checked", "rejected", "unchecked", "too_far", "without_query_text", "check_seconds"):
        setattr(total, name, getattr(total, name) + getattr(part, name))


def _match_json(match: Match) -> dict:
    """A match as JSON; "jaccard" is the check's (null: not measured), "checked_by" how it was judged."""
    return {
        "key": match.key,
        "distance": match.distance,
        "similarity": round(match.similarity, 4),
        "jaccard": None if match.jaccard is None else round(match.jaccard, 4),
        "checked": match.jaccard is not None,
        "checked_by": match.checked_by,
        "fingerprint": to_hex(match.fingerprint),
    }


def _read_text(path: Path) -> str:
    reader = Reader()
    paths = reader.expand([str(path)])
    documents = list(reader.documents(paths))
    if reader.skipped:
        raise InvalidInput(f"{reader.skipped[0].where}: {reader.skipped[0].reason}")
    if len(documents) != 1:
        raise InvalidInput(f"{path} holds {len(documents)} documents; give one text file")
    return documents[0].text


@app.command("hash")
@friendly_errors
def hash_command(
    text: Annotated[Optional[str], typer.Argument(help="The text to fingerprint.", show_default=False)] = None,
    db: DbOption = Path(DEFAULT_DB),
    file: Annotated[Optional[Path], typer.Option("--file", "-f", help="Fingerprint this file's text.")] = None,
    signed: Annotated[bool, typer.Option("--signed", help="Print the signed int64 that SQLite stores.")] = False,
) -> None:
    """Print a text's fingerprint (16 hex digits), with the index's settings if the index exists."""
    if (text is None) == (file is None):
        raise InvalidInput("give a text or --file (one of them)")
    if file is not None:
        text = _read_text(file)
    settings = FingerprintSettings()
    if db.exists():
        with SimhashIndex(db) as index:
            settings = index.settings
    fingerprint = simhash(text, settings)
    if fingerprint is None:
        raise InvalidInput("the text has no features (no letters or digits)")
    print(to_signed(fingerprint) if signed else to_hex(fingerprint))


@app.command()
@friendly_errors
def stats(db: DbOption = Path(DEFAULT_DB), as_json: JsonOption = False) -> None:
    """How many documents the index holds, how its fingerprints are made, and its size."""
    with SimhashIndex(db) as index:
        s = index.stats()
    rows = {
        "file": s.path,
        "documents": s.documents,
        "without features": s.without_features,
        "fingerprints": s.settings.describe(),
        "recommended k": _recommended_k(s.settings),
        "feature hash": s.settings.hash,
        "stores texts": s.store_text,
        "schema version": s.schema_version,
        "created with": s.created_with,
        "size (bytes)": s.file_bytes,
    }
    if as_json:
        print(json.dumps({**rows, "clusters": s.clusters}, ensure_ascii=False))
        return
    if s.clusters is not None:
        c = s.clusters
        rows["clusters"] = f"k={c['k']}, representative {c['representative']}, {c['documents']:,} documents, {c['at']}"
        if c.get("stale"):
            rows["clusters"] += " - STALE: documents changed since; run simq clusters again"
    table = Table(show_header=False)
    for name, value in rows.items():
        table.add_row(name, f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value))
    out.print(table)


@app.command()
@friendly_errors
def shell(
    file: Annotated[Optional[Path], typer.Argument(help="The index file (or --db).", show_default=False)] = None,
    db: DbOption = Path(DEFAULT_DB),
) -> None:
    """An interactive SQL shell on the index: our functions, simhash_near, .near TEXT K (see .help).

    Reads a script from stdin when it is not a terminal (simq shell idx.db < script.sql) and then
    exits 1 if any statement or command failed.
    """
    from .shell import run_shell  # apsw.shell is only needed here

    with SimhashIndex(file or db) as index:
        errors = run_shell(index)
    if errors:
        raise typer.Exit(1)


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    tsv = "tsv"


@app.command("sql")
@friendly_errors
def sql_command(
    query: Annotated[str, typer.Argument(help="SQL: one statement or several separated by ;", show_default=False)],
    db: DbOption = Path(DEFAULT_DB),
    output: Annotated[OutputFormat, typer.Option("--format", help="Output: table, json, csv or tsv.")] = OutputFormat.table,
    param: Annotated[
        Optional[list[str]], typer.Option("--param", "-p", help="NAME=VALUE for :NAME (whole numbers become integers).")
    ] = None,
    write: Annotated[bool, typer.Option("--write", help="Allow changes (default: read-only).")] = False,
) -> None:
    """Run SQL on the index, with our functions and simhash_near; print each statement's rows.

    simq sql "SELECT key, distance FROM simhash_near(:q, 6)" -p q="some text" --format csv
    """
    params = parse_params(param or [])
    with SimhashIndex(db) as index:
        results = run_query(index, query, params, write=write)
    render = {"table": _render_table, "json": _render_json, "csv": _render_csv, "tsv": _render_csv}[output.value]
    for number, result in enumerate(results):
        render(result, output.value, first=number == 0)


def _cell(value) -> object:
    """Blobs (content hashes) print as hex in every format; everything else as SQLite gave it."""
    return value.hex() if isinstance(value, bytes) else value


def _render_table(result: ResultSet, _format: str, first: bool) -> None:
    table = Table(*result.columns)
    for column in table.columns:
        column.overflow = "fold"
    for row in result.rows:
        table.add_row(*("[dim]NULL[/]" if v is None else escape(str(_cell(v))) for v in row))
    out.print(table)


def _render_json(result: ResultSet, _format: str, first: bool) -> None:
    # One statement: a JSON array of objects. Several: one such array per line.
    rows = [dict(zip(result.columns, map(_cell, row))) for row in result.rows]
    print(json.dumps(rows, ensure_ascii=False))


def _render_csv(result: ResultSet, format_: str, first: bool) -> None:
    if not first:
        print()
    writer = csv.writer(sys.stdout, delimiter="\t" if format_ == "tsv" else ",", lineterminator="\n")
    writer.writerow(result.columns)
    writer.writerows([["" if v is None else _cell(v) for v in row] for row in result.rows])


@app.command()
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
) -> None:
    """Remove documents by key, by GLOB pattern, or from a list of keys."""
    listed = list(keys or [])
    if from_file is not None:
        listed += _key_lines(from_file)
    if not listed and glob_pattern is None:
        raise InvalidInput("give keys, --glob PATTERN or --from FILE")
    with SimhashIndex(db) as index:
        removed = index.remove(dict.fromkeys(listed))
        matched = index.remove_glob(glob_pattern) if glob_pattern is not None else []
    missing = len(dict.fromkeys(listed)) - removed
    out.print(
        f"{db}: {removed + len(matched):,} removed" + (f", {missing:,} keys not in the index" if missing else ""),
        highlight=False,
        soft_wrap=True,
    )


def _key_lines(path: Path) -> list[str]:
    raw = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 (byte offset {exc.start})") from None
    return [line for line in text.splitlines() if line]


@app.command()
@friendly_errors
def check(
    db: DbOption = Path(DEFAULT_DB),
    as_json: JsonOption = False,
    rehash: Annotated[
        bool, typer.Option("--rehash", help="Also re-fingerprint every stored text (--store-text indexes; slow).")
    ] = False,
) -> None:
    """Check the index file: SQLite's integrity check, its schema, settings, unique keys and blocks.

    Exits 1 when anything is wrong. Reads only; safe on files from elsewhere.
    """
    report = check_index(db, rehash=rehash)
    if as_json:
        print(report_json(report))
    else:
        _print_check(report)
    if not report.ok:
        names = ", ".join(result.name for result in report.failed)
        raise fail(f"{db}: {len(report.failed)} check(s) failed: {names}")


def _print_check(report: CheckReport) -> None:
    table = Table("check", "result", "detail")
    table.columns[2].overflow = "fold"
    for result in report.results:
        table.add_row(result.name, "[green]ok[/]" if result.ok else "[bold red]FAILED[/]", escape(result.detail))
    out.print(table)
def _recommended_k(settings: FingerprintSettings) -> str:
    if settings == FingerprintSettings():
        return (f"{RECOMMENDED_K} (Jaccard >= 0.8 of 5-shingles; {CONFIRM_K} for candidates checked exactly; "
                "measure yours: simq calibrate)")
    return f"not measured for these settings (the default's is {RECOMMENDED_K}); measure: simq calibrate"


@app.command("calibrate")
@friendly_errors
def calibrate_command(
    db: DbOption = Path(DEFAULT_DB),
    max_k: Annotated[int, typer.Option("--max-k", help="Largest distance to sample.")] = DEFAULT_MAX_K,
    pairs: Annotated[int, typer.Option("--pairs", help="Pairs to sample at each distance.")] = 30,
    threshold: Annotated[float, typer.Option(help="Jaccard similarity that counts as a near-duplicate.")] = 0.8,
    seed: Annotated[int, typer.Option(help="Seed for choosing the documents.")] = 0,
    as_json: JsonOption = False,
) -> None:
    """What each k means on this index: exact 5-shingle Jaccard of sampled pairs at each distance."""
    with SimhashIndex(db) as index:
        result = calibrate_index(index, max_k=max_k, per_distance=pairs, threshold=threshold, seed=seed)
    if as_json:
        print(json.dumps({
            "threshold": result.threshold, "queried": result.queried, "suggested_k": result.suggested_k,
            "rows": [row.__dict__ for row in result.rows],
        }))
        return
    _print_calibration(result)


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
    out.print(f"{result.pairs:,} pairs from the neighbours of {result.queried:,} documents"
              + (f" ({result.without_text:,} sampled documents had no text to compare)" if result.without_text else ""))
    if result.suggested_k is None:
        out.print(f"no sampled distance has most pairs at Jaccard >= {result.threshold:g}; too few near-duplicates to say")
    else:
        out.print(f"suggested k: [bold]{result.suggested_k}[/] (most sampled pairs up to this distance have "
                  f"Jaccard >= {result.threshold:g})")


@app.command("explain")
@friendly_errors
def explain_command(
    a: Annotated[str, typer.Argument(help="A key in the index, or a file.", show_default=False)],
    b: Annotated[str, typer.Argument(help="Another key, or a file.", show_default=False)],
    db: DbOption = Path(DEFAULT_DB),
    top: Annotated[int, typer.Option(help="Features to show in each list.")] = 8,
    as_json: JsonOption = False,
) -> None:
    """Why two documents are (or are not) near-duplicates: distance, Jaccard, features, a diff."""
    with SimhashIndex(db) as index:
        result = explain_pair(index, a, b, top=top)
    if as_json:
        print(json.dumps(_explanation_json(result), ensure_ascii=False))
        return
    _print_explanation(result)


def _explanation_json(e: Explanation) -> dict:
    def feats(items):
        return [{"feature": f.text, "weight": f.weight, "count": f.count} for f in items]

    return {
        "a": e.a.name, "b": e.b.name,
        "fingerprints": [None if s.fingerprint is None else to_hex(s.fingerprint) for s in (e.a, e.b)],
        "distance": e.distance, "similarity": e.similarity, "estimated_jaccard": e.estimated_jaccard,
        "exact_jaccard": e.exact_jaccard, "shared": feats(e.shared), "only_a": feats(e.only_a),
        "only_b": feats(e.only_b), "diff": e.diff, "notes": e.notes,
    }


def _print_explanation(e: Explanation) -> None:
    def num(x):
        return "-" if x is None else f"{x:.3f}"

    summary = Table(show_header=False, title=f"{e.a.name}  vs  {e.b.name}")
    summary.add_row("fingerprints", " / ".join("-" if s.fingerprint is None else to_hex(s.fingerprint) for s in (e.a, e.b)))
    summary.add_row("distance", "-" if e.distance is None else f"{e.distance} of 64 bits")
    summary.add_row("similarity (1 - d/64)", num(e.similarity))
    summary.add_row("estimated 5-shingle Jaccard", num(e.estimated_jaccard))
    summary.add_row("exact 5-shingle Jaccard", num(e.exact_jaccard))
    summary.add_row("features", e.settings.describe())
    if e.distance is not None:
        verdict = "near-duplicates" if e.distance <= RECOMMENDED_K else "not near-duplicates"
        summary.add_row(f"by distance alone (k={RECOMMENDED_K})", verdict)
        checked = keeps(e.distance, e.exact_jaccard)
        how = "by exact Jaccard" if e.exact_jaccard is not None else f"no texts: by distance <= {RECOMMENDED_K}"
        summary.add_row(
            f"by simq dupes (k={CONFIRM_K}, J >= {DEFAULT_THRESHOLD:g})",
            f"{'near-duplicates' if checked else 'not near-duplicates'} ({how})",
        )
    out.print(summary)
    if e.shared or e.only_a or e.only_b:
        features = Table("shared", f"only in {e.a.name}", f"only in {e.b.name}", title="Heaviest features (weight x count)")
        rows = max(len(e.shared), len(e.only_a), len(e.only_b))
        cells = [[f"{f.text!r} {f.weight}x{f.count}" for f in items] + [""] * (rows - len(items))
                 for items in (e.shared, e.only_a, e.only_b)]
        for row in zip(*cells):
            features.add_row(*row)
        out.print(features)
    for line in e.diff:
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim" if line.startswith("@") else None
        out.print(line, style=style, markup=False, highlight=False, soft_wrap=True)
    for note in e.notes:
        err.print(f"[yellow]note[/] {note}", highlight=False, soft_wrap=True)


@app.command()
@friendly_errors
def vacuum(db: DbOption = Path(DEFAULT_DB)) -> None:
    """Give the space of removed and updated documents back to the disk (rewrites the file)."""
    with SimhashIndex(db) as index:
        before, after = index.vacuum()
    out.print(f"{db}: {before:,} -> {after:,} bytes", highlight=False, soft_wrap=True)


FormatOption = Annotated[str, typer.Option("--format", help="table, jsonl or csv.")]
OutOption = Annotated[Optional[Path], typer.Option("--out", "-o", help="Write jsonl/csv here instead of stdout.")]
SHOWN_ROWS = 50


def _check_format(format_: str) -> None:
    if format_ not in ("table", "jsonl", "csv"):
        raise InvalidInput(f"--format must be table, jsonl or csv, not {format_!r}")


def _open_output(path: Optional[Path]):
    """A text handle for jsonl/csv output: the named file, or stdout."""
    if path is None:
        return contextlib.nullcontext(sys.stdout)
    return open(path, "w", encoding="utf-8", newline="")


@app.command()
@friendly_errors
def dupes(
    db: DbOption = Path(DEFAULT_DB),
    k: CandidateKOption = None,
    format_: FormatOption = "table",
    output: OutOption = None,
    confirm: ConfirmOption = True,
    jaccard: JaccardOption = DEFAULT_THRESHOLD,
) -> None:
    """Every pair of near-duplicate documents, each once, checked by the Jaccard of their texts: exact
    where they can be read, else estimated from the stored sketches. Without --k the candidates come
    from the sketches (any distance); with --k, or an index whose documents lack sketches, they are the
    pairs within distance k."""
    _check_format(format_)
    with SimhashIndex(db) as index:
        _tell_sketch_upgrade(index)
        found = index.dupes(k, check=confirm, threshold=jaccard)
        pairs, report = iter(found), found.report
        if format_ == "table":
            shown = list(itertools.islice(pairs, SHOWN_ROWS))
            more = sum(1 for _ in pairs)
            _dupes_table(shown, more, found.k, report)
            return
        with _open_output(output) as handle:
            if format_ == "csv":
                writer = csv.writer(handle)
                writer.writerow(["first", "second", "distance", "similarity", "jaccard", "checked", "checked_by"])
                for p in pairs:
                    j = _pair_json(p)
                    jaccard = "" if j["jaccard"] is None else f"{j['jaccard']:.4f}"
                    checked = str(j["checked"]).lower()
                    writer.writerow((p.first, p.second, p.distance, f"{p.similarity:.4f}", jaccard, checked, p.checked_by or ""))
            else:
                for p in pairs:
                    handle.write(json.dumps(_pair_json(p), ensure_ascii=False) + "\n")
    if report is not None:
        _print_check_summary(report, "pairs", to_stderr=True)


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
    }


def _dupes_table(shown: list[DuplicatePair], more: int, k: int, report: Optional[ConfirmReport]) -> None:
    if not shown:
        out.print(f"no pairs within distance {k}" if report is None or not report.candidates else "no pair passed the check")
    else:
        columns = ["first", "second", "distance", "similarity"] + (["jaccard"] if report is not None else [])
        table = Table(*columns)
        table.columns[0].overflow = table.columns[1].overflow = "fold"
        for p in sorted(shown, key=lambda p: (p.distance, p.first, p.second)):
            cells = [p.first, p.second, str(p.distance), f"{p.similarity:.3f}"]
            table.add_row(*cells, *([_jaccard_cell(p.jaccard)] if report is not None else []))
        out.print(table)
        if more:
            out.print(f"{more:,} more pairs not shown: use --format jsonl or csv", highlight=False)
    if report is not None:
        _print_check_summary(report, "pairs", to_stderr=False)
    elif shown:
        out.print(f"{len(shown) + more:,} pairs within distance {k}", highlight=False)


@app.command()
@friendly_errors
def clusters(
    db: DbOption = Path(DEFAULT_DB),
    k: CandidateKOption = None,
    representative: Annotated[
        str, typer.Option(help=f"Which member represents a cluster: {', '.join(REPRESENTATIVE_RULES)}.")
    ] = "first",
    format_: FormatOption = "table",
    output: OutOption = None,
    min_size: Annotated[int, typer.Option(help="Show/export clusters of at least this many documents.")] = 2,
    confirm: ConfirmOption = True,
    jaccard: JaccardOption = DEFAULT_THRESHOLD,
) -> None:
    """Cluster documents (chains of the pairs simq dupes finds), write the clusters table, show or export them."""
    _check_format(format_)
    with SimhashIndex(db) as index:
        _tell_sketch_upgrade(index)
        report = index.clusters(k, check=confirm, threshold=jaccard, representative=representative)
        by_sketch = report.check is not None and report.check.candidates_from == "sketch"
        found_by = "with candidates from the sketches" if by_sketch else f"at k={report.k}"
        found = index.cluster_list(min_size=min_size)
        if format_ == "table":
            biggest = heapq.nlargest(SHOWN_ROWS, found, key=lambda c: (c.size, -c.cluster))
            _clusters_table(biggest)
        else:
            with _open_output(output) as handle:
                _export_clusters(found, format_, handle)
    err.print(
        f"{db}: {report.documents:,} documents in {report.clusters:,} clusters {found_by} "
        f"({report.clustered:,} in clusters of two or more, largest {report.largest:,}); "
        f"keeping one of each would drop {report.duplicates:,}. Written to the clusters table.",
        highlight=False,
        soft_wrap=True,
    )
    if report.check is not None:
        _print_check_summary(report.check, "pairs joined clusters", to_stderr=True)


def _clusters_table(biggest: list[Cluster]) -> None:
    if not biggest:
        out.print("no clusters of that size")
        return
    table = Table("cluster", "size", "representative", "other members")
    table.columns[2].overflow = table.columns[3].overflow = "fold"
    for c in biggest:
        others = [m for m in c.members if m != c.representative]
        shown = ", ".join(others[:3]) + (f", ... ({len(others) - 3} more)" if len(others) > 3 else "")
        table.add_row(str(c.cluster), f"{c.size:,}", c.representative, shown)
    out.print(table)


def _export_clusters(found, format_: str, handle) -> None:
    """JSONL: one cluster per line with its members; CSV: one member per row."""
    if format_ == "csv":
        writer = csv.writer(handle)
        writer.writerow(["cluster", "size", "representative", "key"])
        for c in found:
            writer.writerows((c.cluster, c.size, c.representative, key) for key in c.members)
        return
    for c in found:
        record = {"cluster": c.cluster, "size": c.size, "representative": c.representative, "members": list(c.members)}
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")


@app.command()
@friendly_errors
def dedup(
    inputs: Annotated[
        list[str], typer.Argument(help="JSONL files, text files, folders, globs, or - for stdin.", show_default=False)
    ],
    output: Annotated[Path, typer.Option("--out", "-o", help="Where the kept documents go (JSONL; - for stdout).")],
    k: Annotated[
        Optional[int],
        typer.Option(
            "--k", "-k",
            help="With --confirm: candidates within this distance instead of the sketches' LSH tables (any distance); "
            f"with --no-confirm: the largest distance of a duplicate \\[default: {RECOMMENDED_K}].",
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
    jsonl: Annotated[bool, typer.Option("--jsonl", help="Read inputs as JSONL (*.jsonl is read so anyway).")] = False,
    text_field: Annotated[str, typer.Option(help="JSONL field holding the text.")] = "text",
    id_field: Annotated[str, typer.Option(help="JSONL field holding the key.")] = "id",
    features: Annotated[Optional[str], typer.Option(help="'chars' or 'words' n-grams [default: chars, or --against's].")] = None,
    ngram: Annotated[Optional[int], typer.Option(help="n of the n-grams [default: 5, or --against's].")] = None,
    weights: Annotated[Optional[str], typer.Option(help="'count', 'log' or 'binary' [default: count, or --against's].")] = None,
    encoding: Annotated[str, typer.Option(help="Encoding of the input files.")] = "utf-8",
    errors: Annotated[str, typer.Option(help="On undecodable bytes: 'strict' (skip the file) or 'replace'.")] = "strict",
    confirm: Annotated[
        bool,
        typer.Option(
            "--confirm/--no-confirm",
            help="Drop a document only if the 5-shingle Jaccard estimated from its sketch and a kept one's reaches "
            f"--jaccard + {DROP_MARGIN} (an indexed document without a sketch: within min(k, {RECOMMENDED_K})); "
            "--no-confirm: by distance alone.",
        ),
    ] = True,
    jaccard: JaccardOption = DEFAULT_THRESHOLD,
) -> None:
    """Keep-first filter: write each document unless a document kept before it (or in --against) is a near-duplicate."""
    reader = Reader(jsonl=jsonl, text_field=text_field, id_field=id_field, encoding=encoding, errors=errors)
    paths = reader.expand(inputs)
    for given in (output, dupes_file):
        if given is not None and given.exists() and any(p != "-" and os.path.samefile(p, given) for p, _ in paths):
            raise InvalidInput(f"{given} is also an input; write to another file")
    if dupes_file is not None and os.path.abspath(dupes_file) == os.path.abspath(output):
        raise InvalidInput("--dupes and --out name the same file")
    requested = {"features": features, "ngram": ngram, "weights": weights}
    with contextlib.ExitStack() as stack:
        index = stack.enter_context(SimhashIndex(against, **requested)) if against is not None else None
        settings = index.settings if index is not None else FingerprintSettings(**{n: v for n, v in requested.items() if v is not None})
        deduplicator = Deduplicator(k, settings, against=index, check=confirm, threshold=jaccard)
        if index is not None and deduplicator.report.against_unsketched:
            err.print(
                f"{against}: {deduplicator.report.against_unsketched:,} of {deduplicator.report.against:,} documents "
                f"have no sketch (indexed before sketches, texts out of reach): a match with one is judged by distance "
                f"(within {fallback_k(deduplicator.k)})",
                highlight=False,
                soft_wrap=True,
            )
        sink = sys.stdout.buffer if str(output) == "-" else stack.enter_context(open(output, "wb"))
        side = stack.enter_context(open(dupes_file, "wb")) if dupes_file is not None else None
        total = sum(os.path.getsize(p) for p, _ in paths if p != "-") or None
        report = deduplicator.report
        with _progress(BarColumn(), TaskProgressColumn()) as progress:
            task = progress.add_task("", total=total)
            try:
                for count, decision in enumerate(deduplicator.run(reader.entries(paths)), 1):
                    if decision.kept:
                        sink.write(decision.output_line(text_field, id_field))
                    elif side is not None:
                        side.write(decision.dupe_line())
                    if count % 500 == 0:
                        rate = count / max(report.seconds, 1e-9)
                        progress.update(
                            task,
                            description=f"{count:,} docs, {rate:,.0f}/s, {report.kept:,} kept, {report.dropped:,} dropped",
                        )
                    progress.advance(task, len(decision.raw) if decision.raw is not None else len(decision.document.text.encode("utf-8", "surrogatepass")))
            except KeyboardInterrupt:
                raise fail(f"interrupted after {report.read:,} documents; {output} holds the documents kept so far", 130) from None
    for skip in reader.skipped[:SHOWN_SKIPS]:
        err.print(f"[yellow]skipped[/] {skip.where}: {skip.reason}", highlight=False, soft_wrap=True)
    share = report.dropped / report.read if report.read else 0.0
    err.print(
        f"{report.read:,} documents: {report.kept:,} kept, {report.dropped:,} dropped ({share:.1%}) "
        + _dedup_rule(deduplicator)
        + (f" against {report.against:,} indexed" if against is not None else "")
        + f", {len(reader.skipped):,} skipped; {report.seconds:.1f} s "
        f"(fingerprints {report.fingerprint_seconds:.1f} s, search {report.search_seconds:.1f} s, "
        f"{report.read / max(report.seconds, 1e-9):,.0f} documents/s)",
        highlight=False,
        soft_wrap=True,
    )
    if any(skip.named for skip in reader.skipped):
        raise typer.Exit(1)


def _dedup_rule(deduplicator: Deduplicator) -> str:
    report = deduplicator.report
    if not deduplicator.check:
        return f"within k={deduplicator.k} (distance alone)"
    found = "sketch LSH candidates" if deduplicator.by_sketch else f"candidates within k={deduplicator.k}"
    rule = f"by {found} with estimated Jaccard >= {deduplicator.threshold:g}"
    return rule + (f" ({report.by_distance:,} by distance alone)" if report.by_distance else "")


@app.command("spark-dedup")
@friendly_errors
def spark_dedup(
    input_path: Annotated[str, typer.Argument(metavar="INPUT", help="Parquet (file or folder) or JSONL with id and text columns.", show_default=False)],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Output folder: Parquet tables, manifest.json, shards.", show_default=False)],
    k: Annotated[
        Optional[int],
        typer.Option(
            "--k", "-k",
            help="With --confirm: pairs within this distance (0-10) instead of the sketches' LSH tables; with "
            f"--no-confirm: the largest distance of a pair \\[default: {RECOMMENDED_K}].",
            show_default=False,
        ),
    ] = None,
    id_col: Annotated[str, typer.Option("--id-col", help="Column holding the document id.")] = "id",
    text_col: Annotated[str, typer.Option("--text-col", help="Column holding the text.")] = "text",
    input_format: Annotated[Optional[str], typer.Option("--format", help="'parquet' or 'jsonl' \\[default: by suffix].")] = None,
    master: Annotated[Optional[str], typer.Option(help="Spark master: local[*], spark://host:7077, yarn... \\[default: local[*], or spark-submit's].")] = None,
    keep_by: Annotated[Optional[str], typer.Option("--keep-by", help="Keep the first document of a cluster by this column \\[default: lowest id].")] = None,
    descending: Annotated[bool, typer.Option("--descending", help="With --keep-by: keep the largest value instead.")] = False,
    against: Annotated[Optional[Path], typer.Option("--against", help="An earlier run's --out: drop documents within k of it first.")] = None,
    sqlite_shards: Annotated[int, typer.Option("--sqlite-shards", help="Also write this many SQLite index files (simq opens each).")] = 0,
    blocks: Annotated[Optional[int], typer.Option(help="Blocks of the pair join \\[default: 6 for k <= 3, k + 3 above].")] = None,
    features: Annotated[Optional[str], typer.Option(help="'chars' or 'words' n-grams \\[default: chars].")] = None,
    ngram: Annotated[Optional[int], typer.Option(help="n of the n-grams \\[default: 5].")] = None,
    weights: Annotated[Optional[str], typer.Option(help="'count', 'log' or 'binary' \\[default: binary].")] = None,
    hmm: Annotated[Optional[bool], typer.Option("--hmm/--no-hmm", help="jieba HMM for words \\[default: off].")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an earlier output in --out.")] = False,
    confirm: Annotated[
        bool,
        typer.Option(
            "--confirm/--no-confirm",
            help="Pair two documents only if the Jaccard estimated from their sketches reaches --jaccard (as simq "
            "dedup); --no-confirm: by distance alone.",
        ),
    ] = True,
    jaccard: JaccardOption = DEFAULT_THRESHOLD,
    conf: Annotated[
        Optional[list[str]],
        typer.Option("--conf", help="A Spark setting KEY=VALUE (repeatable), e.g. spark.sql.shuffle.partitions=64."),
    ] = None,
) -> None:
    """Fingerprints, checked near-duplicate pairs, clusters and the kept documents of a corpus, on Apache Spark:
    the same kept set as simq dedup on the same input (keep-first in input order, or by --keep-by)."""
    try:
        spark_job = importlib.import_module("simhash_sqlite.spark")  # pyspark only now: the base install has none
    except ImportError as exc:
        raise InvalidInput(str(exc)) from None
    requested = {"features": features, "ngram": ngram, "weights": weights, "hmm": hmm}
    settings = FingerprintSettings(**{name: v for name, v in requested.items() if v is not None})
    settings_given = {}
    for item in conf or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidInput(f"--conf takes KEY=VALUE, not {item!r}")
        settings_given[name.strip()] = value
    spark = spark_job.session(master or _default_master(), **settings_given)
    try:
        report = spark_job.run_dedup(
            spark, input_path, str(out_dir), settings=settings, k=k, check=confirm, threshold=jaccard, blocks=blocks,
            id_col=id_col, text_col=text_col,
            fmt=input_format, keep_by=keep_by, descending=descending,
            against=None if against is None else str(against), sqlite_shards=sqlite_shards, overwrite=overwrite,
        )
    except spark_job.JOB_ERRORS as exc:
        raise InvalidInput(f"the Spark job failed: {spark_job.first_line(exc)}") from None
    table = Table(show_header=False)
    rows = {
        "documents": report.documents,
        "without features": report.without_features,
        "pairs (checked)" if confirm else f"pairs within {candidate_k(k, False)}": report.pairs,
        "clusters": report.clusters,
        "kept": report.kept,
    }
    if report.matched_existing is not None:
        rows[f"paired with {against}"] = report.matched_existing
    if report.shards:
        rows["sqlite shards"] = len(report.shards)
    for name, value in rows.items():
        table.add_row(name, f"{value:,}")
    table.add_row("seconds", f"{report.seconds:.1f}")
    out.print(table)
    out.print(f"{out_dir}: fingerprints, pairs, clusters, kept (Parquet) and manifest.json", highlight=False)


def _default_master() -> str | None:
    """local[*] when run directly; spark-submit's own --master when launched through it."""
    return None if "PYSPARK_GATEWAY_PORT" in os.environ else "local[*]"


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
