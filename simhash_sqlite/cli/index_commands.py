"""simq's commands that build and keep the index: add, stats, rm, integrity, vacuum."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import apsw
import typer
from rich.text import Text

from ..core.settings import RECOMMENDED_K, SHORT_TEXT
from ..errors import InvalidArgument, InvalidInput
from ..find.clusters import candidates_text
from ..find.review import (
    check_decisions,
    read_decisions,
)
from ..index import SimhashIndex
from ..pipeline.sources import STDIN, Reader, stale_keys
from ..store.documents import AddReport
from ..store.integrity import integrity_check
from ..store.writer import MAX_BATCH_SIZE
from ..web.plots import (
    cluster_sizes,
    size_bands,
    size_chart,
)
from . import output
from .errors import fail, friendly_errors
from .inputs import input_reader, print_reader_notes, size_of
from .options import (
    DEFAULT_DB,
    INDEX_PANEL,
    SHOWN_SKIPS,
    DbOption,
    EncodingOption,
    ErrorsOption,
    FeaturesOption,
    FormatOption,
    HmmOption,
    IdFieldOption,
    JsonlOption,
    JsonOption,
    NgramOption,
    RequireIdOption,
    TextFieldOption,
    WeightsOption,
)
from .output import out
from .reports import counted, progress_to, recommended_k, say, tell_sketch_upgrade, warn

commands = typer.Typer()  # this module's commands; app.py lists them all, in --help's order


@commands.command(rich_help_panel=INDEX_PANEL)
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
    reader = input_reader(jsonl, text_field, id_field, encoding, errors, require_id=require_id, stdin_key=key)
    paths = reader.expand(inputs)  # missing paths fail here, before the index is touched
    new_file = not db.exists()
    with SimhashIndex(
        db, create=True, features=features, ngram=ngram, weights=weights, hmm=hmm, store_text=store_text
    ) as index:
        if new_file and index.key_root is None:
            with contextlib.suppress(OSError):  # (a working folder that is gone: keys from it, as before)
                index.record_key_root(os.getcwd())  # files keyed relative to it, found from anywhere
        report = AddReport()
        total = sum(size_of(path) for path, _ in paths) or None  # stdin and pipes: no size known
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
        raise fail(f"nothing added: {counted(reader.skip_count, 'input was', 'inputs were')} skipped (see above)")
    if reader.failed:
        raise fail(f"{counted(reader.skip_count, 'input was', 'inputs were')} skipped (see above); the rest was added")


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
    print_reader_notes(reader)
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
        + (f", {counted(reader.duplicate_count, 'repeated id')}" if reader.duplicate_count else ""),
    )


@commands.command(rich_help_panel=INDEX_PANEL)
@friendly_errors
def stats(db: DbOption = Path(DEFAULT_DB), format_: FormatOption = None, as_json: JsonOption = False) -> None:
    """How many documents the index holds, how its fingerprints are made, and its size."""
    format_ = output.choose_format(format_, as_json)
    with SimhashIndex(db, readonly=True) as index:
        tell_sketch_upgrade(index)
        s = index.stats()
        sizes = cluster_sizes(index.conn) if s.clusters is not None else []
    rows = {
        "file": s.path,
        "documents": s.documents,
        "without features": s.without_features,
        "fingerprints": s.settings.describe(),
        "recommended k": recommended_k(s.settings),
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


@commands.command(rich_help_panel=INDEX_PANEL)
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
    not_there = f", {counted(missing, 'key')} not in the index" if missing else ""
    say(f"{db}: {removed + len(matched):,} removed{not_there}")


def _key_lines(path: Path) -> list[str]:
    raw = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 (byte offset {exc.start})") from None
    return [line for line in text.splitlines() if line]


@commands.command(rich_help_panel=INDEX_PANEL)
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
        report = integrity_check(db, rehash=rehash, on_progress=progress_to(progress, task))
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
        raise fail(f"{db}: {counted(len(report.failed), 'check')} failed: {names}")


@commands.command(rich_help_panel=INDEX_PANEL)
@friendly_errors
def vacuum(db: DbOption = Path(DEFAULT_DB)) -> None:
    """Give the space of removed and updated documents back to the disk (rewrites the file).

    An index made by an earlier version is brought up to date first (its schema, and sketches of the
    documents whose texts can be read), as by any command that writes; searches never write."""
    with SimhashIndex(db) as index:
        tell_sketch_upgrade(index)
        before, after = index.vacuum()
    say(f"{db}: {before:,} -> {after:,} bytes")

