"""simq's commands for SQL and the browser: serve, shell, publish, sql, extension."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.text import Text

from ..errors import InvalidArgument
from ..index import SimhashIndex
from ..sql.user_sql import parse_params, run_query
from . import output
from .errors import friendly_errors
from .options import DEFAULT_DB, SQL_PANEL, DbOption, FormatOption, JsonOption, OutOption
from .output import plain
from .reports import say

commands = typer.Typer()  # this module's commands; app.py lists them all, in --help's order


@commands.command(rich_help_panel=SQL_PANEL)
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


@commands.command(rich_help_panel=SQL_PANEL)
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


@commands.command(rich_help_panel=SQL_PANEL)
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


@commands.command("sql", rich_help_panel=SQL_PANEL)
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


@commands.command("extension", rich_help_panel=SQL_PANEL)
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

