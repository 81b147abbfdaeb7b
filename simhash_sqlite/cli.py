"""simq: the command line over simhash_sqlite. Each command parses, makes library calls, renders."""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import apsw
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from .errors import InvalidInput, SimhashError
from .fingerprint import from_hex, simhash, to_hex, to_signed
from .index import AddReport, Match, SimhashIndex
from .settings import FingerprintSettings
from .sources import Reader

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


def fail(message: str, code: int = 1) -> typer.Exit:
    # escape: a message may hold [brackets] (an extra's name, a path) that are not rich markup
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


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
        Optional[str], typer.Option(help="New index: 'count', 'log' or 'binary' [default: count].")
    ] = None,
    hmm: Annotated[
        Optional[bool], typer.Option("--hmm/--no-hmm", help="New index: jieba HMM for words [default: off].")
    ] = None,
    store_text: Annotated[
        Optional[bool], typer.Option("--store-text/--no-store-text", help="New index: keep the texts in it.")
    ] = None,
    encoding: Annotated[str, typer.Option(help="Encoding of the input files.")] = "utf-8",
    errors: Annotated[str, typer.Option(help="On undecodable bytes: 'strict' (skip the file) or 'replace'.")] = "strict",
    batch_size: Annotated[int, typer.Option(help="Documents per transaction.")] = 1000,
) -> None:
    """Add files, folders or JSONL to the index (created on first use); changed files are updated."""
    reader = Reader(jsonl=jsonl, text_field=text_field, id_field=id_field, encoding=encoding, errors=errors)
    paths = reader.expand(inputs)  # missing paths fail here, before the index is touched
    with SimhashIndex(
        db, create=True, features=features, ngram=ngram, weights=weights, hmm=hmm, store_text=store_text
    ) as index:
        report = AddReport()
        with Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        ) as progress:
            task = progress.add_task("adding", total=None)

            def on_batch(current: AddReport) -> None:
                progress.update(task, description=f"{current.documents:,} documents, {current.characters:,} characters")

            try:
                report = index.add(reader.documents(paths), batch_size=batch_size, on_batch=on_batch)
            except KeyboardInterrupt:
                raise fail(
                    "interrupted: every batch committed before it is in the index; run the same command to finish",
                    130,
                ) from None
    _print_add_summary(report, reader, db)
    if any(skip.named for skip in reader.skipped):
        raise typer.Exit(1)


def _print_add_summary(report: AddReport, reader: Reader, db: Path) -> None:
    for skip in reader.skipped[:SHOWN_SKIPS]:
        err.print(f"[yellow]skipped[/] {skip.where}: {skip.reason}", highlight=False, soft_wrap=True)
    if len(reader.skipped) > SHOWN_SKIPS:
        err.print(f"[yellow]skipped[/] {len(reader.skipped) - SHOWN_SKIPS} more")
    for key in report.no_features[:SHOWN_SKIPS]:
        err.print(f"[yellow]warning[/] {key}: no features (empty text); stored, never matches", highlight=False, soft_wrap=True)
    out.print(
        f"{db}: {report.added:,} added, {report.updated:,} updated, {report.unchanged:,} unchanged, "
        f"{len(reader.skipped):,} skipped, {len(report.no_features):,} without features",
        highlight=False,
        soft_wrap=True,
    )


@app.command()
@friendly_errors
def near(
    text: Annotated[Optional[str], typer.Argument(help="The text to search for.", show_default=False)] = None,
    db: DbOption = Path(DEFAULT_DB),
    k: KOption = 3,
    file: Annotated[Optional[Path], typer.Option("--file", "-f", help="Search for this file's text.")] = None,
    key: Annotated[Optional[str], typer.Option(help="Search for a stored document's neighbours.")] = None,
    hash_: Annotated[Optional[str], typer.Option("--hash", help="Search for a 16-hex-digit fingerprint.")] = None,
    limit: Annotated[Optional[int], typer.Option(help="At most this many results.")] = None,
    as_json: JsonOption = False,
    explain: Annotated[bool, typer.Option("--explain", help="Show the query plan and its SQL.")] = False,
) -> None:
    """Documents within distance k of a text, a file, a stored key or a fingerprint, closest first."""
    if file is not None:
        text = _read_text(file)
    fingerprint = from_hex(hash_) if hash_ is not None else None
    with SimhashIndex(db) as index:
        matches = index.near(text, fingerprint=fingerprint, key=key, k=k, limit=limit)
        if explain:
            err.print(f"plan: {index.plan(k).describe()}", highlight=False)
            err.print(index.near_sql(k), highlight=False, markup=False)
    if as_json:
        print(json.dumps([_match_json(m) for m in matches], ensure_ascii=False))
        return
    if not matches:
        out.print(f"no documents within distance {k}")
        return
    table = Table("key", "distance", "similarity", "fingerprint")
    table.columns[0].overflow = "fold"
    for match in matches:
        table.add_row(match.key, str(match.distance), f"{match.similarity:.3f}", to_hex(match.fingerprint))
    out.print(table)


def _match_json(match: Match) -> dict:
    return {
        "key": match.key,
        "distance": match.distance,
        "similarity": round(match.similarity, 4),
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
        "feature hash": s.settings.hash,
        "stores texts": s.store_text,
        "schema version": s.schema_version,
        "created with": s.created_with,
        "size (bytes)": s.file_bytes,
    }
    if as_json:
        print(json.dumps(rows, ensure_ascii=False))
        return
    table = Table(show_header=False)
    for name, value in rows.items():
        table.add_row(name, f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value))
    out.print(table)


@app.command("spark-dedup")
@friendly_errors
def spark_dedup(
    input_path: Annotated[str, typer.Argument(metavar="INPUT", help="Parquet (file or folder) or JSONL with id and text columns.", show_default=False)],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Output folder: Parquet tables, manifest.json, shards.", show_default=False)],
    k: Annotated[int, typer.Option("--k", "-k", help="Largest Hamming distance of a pair (0-10).")] = 3,
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
    weights: Annotated[Optional[str], typer.Option(help="'count', 'log' or 'binary' \\[default: count].")] = None,
    hmm: Annotated[Optional[bool], typer.Option("--hmm/--no-hmm", help="jieba HMM for words \\[default: off].")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an earlier output in --out.")] = False,
) -> None:
    """Fingerprints, near-duplicate pairs, clusters and the kept documents of a corpus, on Apache Spark."""
    try:
        spark_job = importlib.import_module("simhash_sqlite.spark")  # pyspark only now: the base install has none
    except ImportError as exc:
        raise InvalidInput(str(exc)) from None
    requested = {"features": features, "ngram": ngram, "weights": weights, "hmm": hmm}
    settings = FingerprintSettings(**{name: v for name, v in requested.items() if v is not None})
    spark = spark_job.session(master or _default_master())
    try:
        report = spark_job.run_dedup(
            spark, input_path, str(out_dir), settings=settings, k=k, blocks=blocks, id_col=id_col, text_col=text_col,
            fmt=input_format, keep_by=keep_by, descending=descending,
            against=None if against is None else str(against), sqlite_shards=sqlite_shards, overwrite=overwrite,
        )
    except spark_job.JOB_ERRORS as exc:
        raise InvalidInput(f"the Spark job failed: {spark_job.first_line(exc)}") from None
    table = Table(show_header=False)
    rows = {
        "documents": report.documents,
        "without features": report.without_features,
        "distinct fingerprints": report.distinct_fingerprints,
        f"pairs within {k}": report.pairs,
        "clusters (= kept)": report.kept,
    }
    if report.matched_existing is not None:
        rows[f"within {k} of {against}"] = report.matched_existing
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
