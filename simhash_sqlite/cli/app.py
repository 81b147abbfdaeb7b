"""simq: the command line over simhash_sqlite. Each command parses, makes library calls, renders.

Exit status, the same for every command: 0 success; 1 an error (one "error:" line on stderr: bad
input, a refused or damaged index, every input skipped, a failed check); 2 a command line that does
not parse (unknown option, missing argument, a value of the wrong type or out of range: errors.InvalidArgument),
one "error:" line too; 130 interrupted (Ctrl-C).
A closed pipe (simq dupes | head) ends quietly with 0, as ripgrep does: the reader had what it wanted.
Output conventions (formats, markup, colour, pipes, progress) are in output.py; the commands are in
the *_commands.py modules, listed here (COMMANDS) in --help's order; their shared options in options.py,
the turning of errors into those exit statuses in errors.py.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import native
from ..core.pool import calm_collector
from ..version import __version__
from . import params
from .errors import fail_line

# typer 0.2x parses with its own copy of click (typer._click); earlier versions with click itself.
try:
    _click = typer.core._click
except AttributeError:  # pragma: no cover (older typer)
    import click as _click  # type: ignore[no-redef]

# Spellings of earlier versions (CHANGELOG.md): still accepted so that no script breaks, never shown.
OLD_OPTIONS = {"--confirm": "--check", "--no-confirm": "--no-check", "--jaccard": "--threshold"}
OLD_COMMANDS = {"check": "integrity"}


# Every command, in the order --help and docs/cli.md list them (grouped by each one's rich_help_panel), and
# the module that defines it: a command line imports and builds only the command it runs (typer would build
# every command's parameters, their annotations read, on each start: a tenth of a search's start-up).
COMMANDS = {
    "add": "index_commands",
    "near": "search_commands",
    "hash": "search_commands",
    "stats": "index_commands",
    "serve": "sql_commands",
    "shell": "sql_commands",
    "publish": "sql_commands",
    "sql": "sql_commands",
    "extension": "sql_commands",
    "rm": "index_commands",
    "integrity": "index_commands",
    "calibrate": "pairs_commands",
    "explain": "search_commands",
    "decisions": "pairs_commands",
    "vacuum": "index_commands",
    "dupes": "pairs_commands",
    "clusters": "pairs_commands",
    "dedup": "dedup_commands",
    "spark-dedup": "dedup_commands",
}


def registered(module: str) -> dict[str, typer.models.CommandInfo]:
    """The commands a *_commands module defines (its `commands` Typer), by name."""
    # __import__ rather than importlib.import_module: -X importtime (bench/startup.py) counts it
    commands: typer.Typer = __import__(f"{__package__}.{module}", fromlist=["commands"]).commands
    return {info.name or typer.main.get_command_name(getattr(info.callback, "__name__", "")): info
            for info in commands.registered_commands}


class _Commands(typer.core.TyperGroup):
    """simq's group: old spellings become the current ones before click parses, and --help lists
    the commands in COMMANDS' order, grouped by task (rich_help_panel), each built when first asked
    for. A command line that does not parse (click's usage errors) is one "error:" line and exit
    status 2, as docs/cli.md promises, where typer would draw a box around it."""

    def list_commands(self, ctx):
        return [*COMMANDS, *(name for name in super().list_commands(ctx) if name not in COMMANDS)]

    def get_command(self, ctx, cmd_name):
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            one = typer.Typer(rich_markup_mode=app.rich_markup_mode, add_completion=False)
            one.registered_commands = [registered(COMMANDS[cmd_name])[cmd_name]]
            self.commands[cmd_name] = typer.main.get_command(one)
        return super().get_command(ctx, cmd_name)

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


app = typer.Typer(
    name="simq",
    cls=_Commands,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


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


def main() -> None:
    calm_collector()  # a command runs once and exits
    app()


if __name__ == "__main__":
    main()
