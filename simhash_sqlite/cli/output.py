"""What simq prints, in one place: consoles, the five record formats, safe text, progress bars.

Conventions (every command follows them):
- Records print as --format table (the default, for people), json (one document), jsonl (one
  object a line), csv or tsv (a header row, then one row a record); -o/--out writes them to a file.
- Nothing a user supplies (keys, paths, texts, error details) is ever read as rich markup: it goes
  out as rich Text, never inside a markup string, and control characters print escaped (\\n, \\x1b)
  so that one record stays one line of a table.
- Colour only on a terminal and never under NO_COLOR; when stdout is not a terminal, tables are not
  wrapped at the terminal's width (each row stays one line, for grep), and progress bars are off.
"""

from __future__ import annotations

import contextlib
import csv
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TextIO, cast

from rich.console import Console, ConsoleDimensions
from rich.table import Column, Table
from rich.text import Text

if TYPE_CHECKING:  # rich.progress is imported by progress(): a search that shows none does not pay for it
    from rich.progress import Progress

from ..errors import InvalidArgument, InvalidInput, printable
from ..quick.words import json_text

FORMATS = ("table", "json", "jsonl", "csv", "tsv")
PIPED_WIDTH = 1 << 20  # "no wrapping" when stdout is a pipe or a file: wider than any real row


def plain(value: object, style: str | None = None) -> Text:
    """User data for a console or a table cell: literal text (no markup), printable, optionally styled."""
    return Text(printable(value), style=style or "")


def line(*parts: str | Text | tuple[str, str]) -> Text:
    """A message from parts: str parts are user data (printed literally), (text, style) tuples are ours."""
    out = Text()
    for part in parts:
        if isinstance(part, tuple):
            out.append(part[0], style=part[1])
        elif isinstance(part, Text):
            out.append_text(part)
        else:
            out.append(printable(part))
    return out


class SimqConsole(Console):
    """A rich Console that writes nothing but what it is given: no highlighting of numbers and
    paths, no colour under NO_COLOR, and no wrapping when its file is not a terminal."""

    def __init__(self, *, stderr: bool = False, file: TextIO | None = None, plain_file: bool = False) -> None:
        no_color = plain_file or os.environ.get("NO_COLOR", "") != ""
        kwargs: dict[str, Any] = {"color_system": None} if no_color else {}
        super().__init__(stderr=stderr, file=file, highlight=False, no_color=no_color or None, **kwargs)

    @property
    def size(self) -> ConsoleDimensions:
        dimensions = super().size
        if not _isatty(self.file):  # even with COLUMNS exported (rich reads it): a pipe has no width
            return ConsoleDimensions(PIPED_WIDTH, dimensions.height)
        return dimensions

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size

    def on_broken_pipe(self) -> None:
        """rich exits 1 here; the command decides (simq: a quiet 0, see cli.friendly_errors)."""
        self.quiet = True
        raise BrokenPipeError("the reader of stdout has gone")


def _isatty(file) -> bool:
    try:
        return bool(file.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


out = SimqConsole()
err = SimqConsole(stderr=True)


def warn(label: str, *parts: str) -> None:
    """A yellow label and a message of user data on stderr, one line."""
    err.print(line((label, "yellow"), " ", *parts), soft_wrap=True)


def say(message: str, *, to_stderr: bool = False) -> None:
    """A summary line (of user data: paths, keys) on stdout, or stderr."""
    (err if to_stderr else out).print(plain(message), soft_wrap=True)


def choose_format(format_: str | None, as_json: bool, default: str = "table", allowed: Iterable[str] = FORMATS) -> str:
    """The format a command prints: --format, or json for --json (its short form), else the default."""
    allowed = tuple(allowed)
    if as_json and format_ not in (None, "json"):
        raise InvalidArgument(f"--json is --format json; it cannot go with --format {format_}")
    chosen = "json" if as_json else (format_ or default)
    if chosen not in allowed:
        raise InvalidArgument(f"--format must be {', '.join(allowed[:-1])} or {allowed[-1]}, not {chosen!r}")
    return chosen


@contextlib.contextmanager
def destination(path: str | os.PathLike | None) -> Iterator[TextIO]:
    """Where records go: the file named by -o/--out (written whole, UTF-8, and moved into place only when
    the command gets to the end: see ReplacedOnSuccess), or stdout for None or "-"."""
    if path is None or str(path) == "-":
        yield sys.stdout
        return
    with ReplacedOnSuccess(path, text=True) as replaced:
        yield cast(TextIO, replaced.handle)
        replaced.commit()


FILE_BUFFER_BYTES = 1 << 20


class ReplacedOnSuccess:
    """An output file written beside its place and moved there (os.replace) only on commit(): a command
    that fails, or is refused, leaves the file as it was (an earlier output, or none). A write that fails
    (a full disk) names the file. Devices and pipes (-o /dev/null, a FIFO) are written in place, and a
    symbolic link's target is replaced, not the link."""

    def __init__(self, path: str | os.PathLike, *, text: bool = False) -> None:
        self.path = os.path.realpath(os.fspath(path))
        self.shown = os.fspath(path)
        self.text = text
        self.temporary: str | None = None
        self.handle: Any = None  # the open file (text or binary), wrapped by _NamedWrites when temporary

    def __enter__(self) -> ReplacedOnSuccess:
        existing = os.stat(self.path) if os.path.exists(self.path) else None
        mode = "w" if self.text else "wb"
        options: dict[str, Any] = {"encoding": "utf-8", "newline": ""} if self.text else {}
        with self._named():
            if existing is not None and not stat.S_ISREG(existing.st_mode):  # /dev/null, a FIFO: in place
                self.handle = open(self.path, mode, **options)  # noqa: SIM115
                return self
            folder, name = os.path.split(self.path)
            fd, self.temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".simq-tmp", dir=folder or ".")
            if existing is not None:
                os.chmod(fd, stat.S_IMODE(existing.st_mode))
            else:  # as open() would make it: 0666 less the umask
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(fd, 0o666 & ~umask)
            # A file of its own: written in 1 MiB blocks (with the default 8 KiB, simq dedup made a system call
            # every third record).
            self.handle = _NamedWrites(os.fdopen(fd, mode, buffering=FILE_BUFFER_BYTES, **options), self)
        return self

    def commit(self) -> None:
        if self.handle is None:
            return
        handle, self.handle = self.handle, None
        with self._named():
            handle.close()
            if self.temporary is not None:
                os.replace(self.temporary, self.path)
                self.temporary = None

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                self.handle.close()
            self.handle = None
        if self.temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.temporary)
            self.temporary = None

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        """An OSError names the output file (a temporary file's name means nothing to the user)."""
        try:
            yield
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, self.shown) from None


class _NamedWrites:
    """A file whose write errors name the output they are for."""

    def __init__(self, handle, owner: ReplacedOnSuccess) -> None:
        self._handle, self._owner = handle, owner

    def write(self, data):
        # As _named() does, without a context manager made per write (one a kept record of simq dedup).
        try:
            return self._handle.write(data)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, self._owner.shown) from None

    def flush(self) -> None:
        with self._owner._named():
            self._handle.flush()

    def close(self) -> None:
        with self._owner._named():
            self._handle.close()

    def __getattr__(self, name):
        return getattr(self._handle, name)


def json_value(value: object) -> object:
    """Blobs (content hashes) as hex; everything else as JSON has it."""
    return value.hex() if isinstance(value, (bytes, bytearray, memoryview)) else value


_json = json_text  # (quick/words.py: the one JSON line every format writes)


def csv_cell(value: object) -> object:
    """A value in a CSV/TSV cell: empty for null, true/false, hex for blobs, JSON for lists and objects."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (list, tuple, dict)):
        return _json(value)
    return value


def table_cell(value: object) -> Text:
    if value is None:
        return Text("-", style="dim")
    if isinstance(value, bool):
        return Text("yes" if value else "no")
    if isinstance(value, int):
        return Text(f"{value:,}")
    if isinstance(value, float):
        return Text(f"{value:.3f}")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Text(bytes(value).hex())
    if isinstance(value, (list, tuple)):
        return plain(", ".join(map(str, value)))
    return plain(value)


Cells = Mapping[str, Callable[[Any], "str | Text"]]


Record = Mapping[str, object] | tuple | list


def render(
    records: Iterable[Record],
    format_: str,
    handle: TextIO | None = None,
    *,
    columns: list[str] | None = None,
    cells: Cells | None = None,
    cell: Callable[[Any], Text] = table_cell,
    title: str | None = None,
    fold: Iterable[str] = (),
) -> int:
    """Print records (dicts with the same keys, or rows in the order of columns) in one of FORMATS;
    returns how many.

    Streams: jsonl, csv, tsv and json write record by record, so a million pairs never sit in memory
    (a table holds what it shows, so give it few). columns: the order and set of fields (default:
    the first record's keys). cells: per column, how the table shows a value, cell: how it shows the
    others (the other formats print the value itself). fold: table columns whose long values wrap
    inside the column (keys, paths).
    """
    handle = sys.stdout if handle is None else handle
    records = iter(records)
    if format_ == "table":
        return _table(records, handle, columns, cells or {}, cell, title, set(fold))
    if format_ == "json":
        count = 0
        handle.write("[")
        for count, record in enumerate(records, 1):
            handle.write((", " if count > 1 else "") + _json(_picked(record, columns)))
        handle.write("]\n")
        return count
    if format_ == "jsonl":
        count = 0
        for count, record in enumerate(records, 1):
            handle.write(_json(_picked(record, columns)) + "\n")
        return count
    if format_ in ("csv", "tsv"):
        delimiter = "\t" if format_ == "tsv" else ","
        writer = csv.writer(handle, delimiter=delimiter, lineterminator="\n")
        # csv quotes a field holding the line terminator (\n) but not a lone \r, which readers take for
        # a line end: a row with one is written with every field quoted
        quoted = csv.writer(handle, delimiter=delimiter, lineterminator="\n", quoting=csv.QUOTE_ALL)
        count = 0
        header: list[str] = []
        for count, record in enumerate(records, 1):
            if count == 1:
                header = columns or list(record)
                writer.writerow(header)
            row = [csv_cell(value) for value in _values(record, header)]
            (quoted if any(isinstance(v, str) and "\r" in v for v in row) else writer).writerow(row)
        if count == 0 and columns:
            writer.writerow(columns)
        return count
    raise InvalidInput(f"unknown format {format_!r}")


def render_one(record: Mapping[str, object], format_: str, handle: TextIO | None = None, *,
               cells: Cells | None = None, title: str | None = None) -> None:
    """One record (stats, a summary): json prints the object itself, a table shows it field by field."""
    handle = sys.stdout if handle is None else handle
    if format_ == "json":
        handle.write(_json(dict(record)) + "\n")
    elif format_ == "table":
        table = Table(show_header=False, title=None if title is None else plain(title))
        table.add_column()
        table.add_column(overflow="fold")
        for name, value in record.items():
            shown = (cells or {}).get(name)
            table.add_row(plain(name), _as_text(shown(value)) if shown else table_cell(value))
        _print(table, handle)
    else:
        render([record], format_, handle)


def _picked(record: Record, columns: list[str] | None) -> Mapping[str, object]:
    if not isinstance(record, Mapping):
        return dict(zip(columns or (), record))
    return record if columns is None else {name: record.get(name) for name in columns}


def _values(record: Record, columns: list[str]) -> list:
    return [record.get(name) for name in columns] if isinstance(record, Mapping) else list(record)


def _as_text(value: str | Text) -> Text:
    return value if isinstance(value, Text) else plain(value)


def _table(records: Iterator, handle: TextIO, columns, cells: Cells, cell, title, fold: set[str]) -> int:
    rows = list(records)
    columns = columns or (list(rows[0]) if rows else [])
    table = Table(*(Column(header=plain(name)) for name in columns), title=None if title is None else plain(title))
    for column, name in zip(table.columns, columns):
        if name in fold:
            column.overflow = "fold"
    for record in rows:
        table.add_row(*(
            _as_text(cells[name](value)) if name in cells else cell(value)
            for name, value in zip(columns, _values(record, columns))
        ))
    _print(table, handle)
    return len(rows)


def _print(renderable, handle: TextIO) -> None:
    if handle is sys.stdout:
        out.print(renderable)
    else:  # a file from -o: no colour (even under FORCE_COLOR), no wrapping
        SimqConsole(file=handle, plain_file=True).print(renderable)


# -- progress ---------------------------------------------------------------------------------


def progress(unit: str = "items", *, hidden: bool = False) -> Progress:
    """A progress display on stderr: a bar with the share done, the rate and the time left where the
    total is known (a spinner with counts where not). Only on a terminal (nothing when stderr is piped
    or redirected, or when hidden: records streaming to the same terminal show the progress) and gone
    when done. unit "bytes" shows the transfer speed, "share" only the share done, others a count and
    its rate. stdout is never redirected into it (rich
    would send it to stderr)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        SpinnerColumn,
        Task,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    class Rate(ProgressColumn):
        """Items a second, for work counted in documents, pairs or queries."""

        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:,.0f} {unit}/s", style="progress.data.speed", no_wrap=True)

    if unit == "bytes":
        amount: list[ProgressColumn] = [TransferSpeedColumn()]
    elif unit == "share":  # a share of the work done, not a count (the pair search's tables)
        amount = []
    else:
        amount = [MofNCompleteColumn(), Rate()]
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        *amount,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("left"),
        console=err,
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
        disable=hidden or not err.is_terminal,
    )
