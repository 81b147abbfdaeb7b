"""The docs stay true to the code: every command, option, SQL function and public name is documented,
and every `simq ...` command line in README.md and docs/*.md parses with the real CLI.

Command lines are parsed with the typer app's click commands (make_context), never run: no file is
read or written. docs/cli.md is regenerated in memory and compared, so a changed --help fails here
until `.venv/bin/python docs/generate_cli.py` is run.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
from pathlib import Path

import pytest
import typer

import simhash_sqlite
from simhash_sqlite import SimhashIndex
from simhash_sqlite.cli.app import app
from simhash_sqlite.find.near_table import COLUMNS as NEAR_COLUMNS
from simhash_sqlite.find.near_table import NAME as NEAR_TABLE
from simhash_sqlite.store.functions import FUNCTIONS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
DOC_PAGES = ("cli.md", "python-api.md", "sql.md", "quality.md", "scale.md", "web.md")


def _generator():
    spec = importlib.util.spec_from_file_location("generate_cli", DOCS / "generate_cli.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()
COMMANDS = GENERATOR.commands()
GROUP = typer.main.get_command(app)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _section(text: str, heading: str) -> str:
    """The text under a Markdown heading, up to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(heading + "\n")
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, start + len(heading))
    return text[start : end.start() if end else len(text)]


# -- the pages -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DOC_PAGES)
def test_each_reference_page_exists_and_the_readme_links_it(name):
    assert (DOCS / name).is_file()
    assert f"docs/{name}" in _read(README), f"README.md does not link docs/{name}"


def test_readme_stays_short():
    lines = _read(README).count("\n")
    assert lines < 200, f"README.md has {lines} lines; move detail into docs/"


def test_local_links_point_at_files():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", _read(page)):
            if "://" in target or target.startswith("mailto:"):
                continue
            assert (page.parent / target).exists(), f"{page.name} links {target}, which does not exist"


# -- the command line ------------------------------------------------------------------------------


def test_cli_md_is_the_current_help():
    current = _read(GENERATOR.CLI_MD)
    stale = "docs/cli.md is out of date: run .venv/bin/python docs/generate_cli.py"
    assert current == GENERATOR.rendered(current), stale


def test_the_recovery_line_in_cli_md_is_the_one_simq_gives():
    """docs/cli.md shows the line the error message gives (recovery_command: one source); an older
    schema version there made a file simq refuses. tests/test_readonly_and_damaged.py runs the line."""
    from simhash_sqlite.store.database import recovery_command

    assert f"\n{recovery_command('corpus.db')}\n" in _read(DOCS / "cli.md")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_and_option_is_in_cli_md(name):
    section = _section(_read(DOCS / "cli.md"), f"### simq {name}")
    for param in COMMANDS[name].params:
        if getattr(param, "hidden", False):
            continue  # an old name kept as an alias: left out of --help on purpose
        for option in (*param.opts, *getattr(param, "secondary_opts", ())):
            if option.startswith("--"):
                assert option in section, f"docs/cli.md: simq {name} lacks {option}"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_is_shown_in_the_readme_or_a_guide(name):
    """Beyond the generated reference, each command appears in a command line a reader can copy."""
    prose = "\n".join(_read(page) for page in PAGES if page.name != "cli.md")
    assert re.search(rf"simq {re.escape(name)}\b", prose), f"no example of simq {name} outside docs/cli.md"


FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
SHELL_FENCES = {"", "sh", "bash", "shell", "console"}
SEPARATORS = {"&&", "||", "|", ";", "&", "(", ")"}
REDIRECTS = {">", ">>", "<", ">&", "<<", "<<<"}
SHELL_WORDS = {"do", "then", "else", "time", "exec", "!"}


def _command_lines(text: str) -> list[tuple[str, bool]]:
    """(line, whole) for every shell line in a fenced block (whole) and every inline `simq ...` span."""
    found = []
    for language, body in FENCE.findall(text):
        if language not in SHELL_FENCES:
            continue
        for line in re.sub(r"\\\n", " ", body).splitlines():
            line = line.strip()
            if "simq" in line and not line.startswith(("#", "│", "╭", "╰", "Usage:")):
                found.append((line.removeprefix("$ "), True))
    prose = FENCE.sub("", text)
    # Inline spans, except usage synopses such as `simq serve [--db PATH] [--open]`.
    found += [(span, False) for span in re.findall(r"`(simq [^`]+)`", prose) if "[-" not in span]
    return found


def _simq_invocations(line: str) -> list[list[str]]:
    """The argument lists of every simq command in a shell line (after &&, |, ; and env settings)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    tokens = list(lexer)
    invocations, current = [], []
    for token in [*tokens, ";"]:
        if token in SEPARATORS:
            invocations.append(current)
            current = []
        else:
            current.append(token)
    found = []
    for words in invocations:
        cleaned, skip = [], False
        for i, word in enumerate(words):
            if skip:
                skip = False
            elif word in REDIRECTS:
                skip = True
                if cleaned and cleaned[-1].isdigit() and f"{cleaned[-1]}{word}" in line:
                    cleaned.pop()  # 2> file: a file descriptor, not an argument
            else:
                cleaned.append(word)
        while cleaned and (cleaned[0] in SHELL_WORDS or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", cleaned[0])):
            cleaned.pop(0)
        if cleaned and (cleaned[0] == "simq" or cleaned[0].endswith("/simq")):
            found.append(cleaned[1:])
        elif cleaned[:3] in (["python", "-m", "simhash_sqlite"], [".venv/bin/python", "-m", "simhash_sqlite"]):
            found.append(cleaned[3:])
    return found


def _parse(args: list[str], whole: bool) -> None:
    """Parse like `simq ARGS` would, without running the command; raise on a usage error.

    An inline span may leave out a required argument (`simq add --store-text`); a whole command line
    may not. Top-level options (--help, --version) are parsed by the group itself.
    """
    root = GROUP.context_class(GROUP, info_name="simq")
    if not args or args[0].startswith("-"):
        try:
            GROUP.make_context("simq", list(args))
        except typer.Exit as done:  # --help or --version: printed, exit 0
            assert done.exit_code == 0
        return
    command = GROUP.get_command(root, args[0])
    assert command is not None, f"no command simq {args[0]}"
    try:
        command.make_context(args[0], list(args[1:]), parent=root)
    except typer.Exit as done:
        assert done.exit_code == 0
    except Exception as exc:
        if whole or type(exc).__name__ != "MissingParameter":
            raise


def _all_command_lines():
    for page in PAGES:
        for line, whole in _command_lines(_read(page)):
            for args in _simq_invocations(line):
                if any(arg in ("--install-completion", "--show-completion") for arg in args):
                    continue  # these write to the shell's start-up files: never run them in a test
                yield pytest.param(args, whole, id=f"{page.name}: simq {' '.join(args)}"[:120])


@pytest.mark.parametrize(("args", "whole"), list(_all_command_lines()))
def test_command_lines_in_the_docs_parse(args, whole):
    try:
        _parse(args, whole)
    except Exception as exc:
        pytest.fail(f"simq {shlex.join(args)}: {type(exc).__name__}: {exc}")


def test_the_parser_check_catches_bad_lines():
    """The check above can fail: unknown options, bad values and unknown commands are caught."""
    for args in (["near", "--bogus", "x"], ["near", "--k", "many", "x"], ["nosuch"], ["near", "--db"]):
        with pytest.raises(Exception):
            _parse(args, True)
    with pytest.raises(Exception):
        _parse(["add"], True)
    _parse(["add"], False)  # a fragment in prose may leave out its inputs
    assert _simq_invocations("cat a.txt | SIMQ_DB=x.db simq add - && simq near --db x.db 'a > b' 2> err") == [
        ["add", "-"],
        ["near", "--db", "x.db", "a > b"],
    ]


def test_the_docs_show_enough_command_lines():
    lines = list(_all_command_lines())
    assert len(lines) >= 40, f"only {len(lines)} simq command lines found in the docs: is the extraction broken?"


# -- SQL ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.name)
def test_every_sql_function_is_in_sql_md(function):
    row = next((line for line in _read(DOCS / "sql.md").splitlines() if line.startswith(f"| `{function.name}(")), None)
    assert row is not None, f"docs/sql.md's function table lacks {function.name}"
    assert f"`{function.example}`" in row and str(function.result) in row


def test_simhash_near_and_its_columns_are_in_sql_md():
    text = _read(DOCS / "sql.md")
    assert f"`{NEAR_TABLE}(" in text
    for column in (*NEAR_COLUMNS, "query", "k", "checked"):
        assert f"`{column}`" in text, f"docs/sql.md does not name simhash_near's column {column}"


def test_the_portable_query_in_sql_md_is_the_one_the_tests_run():
    """tests/test_portability.py runs README.md's pure-SQL block in stock sqlite3; sql.md shows the same."""

    def portable(text: str) -> str:
        return next(block for block in re.findall(r"```sql\n(.*?)```", text, re.S) if "WITH RECURSIVE" in block)

    assert portable(_read(DOCS / "sql.md")) == portable(_read(README))


# -- the library -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", simhash_sqlite.__all__)
def test_every_public_name_is_in_python_api_md(name):
    text = _read(DOCS / "python-api.md")
    assert re.search(rf"`(simhash_sqlite\.)?{re.escape(name)}\b", text), f"docs/python-api.md does not document {name}"


@pytest.mark.parametrize("method", sorted(m for m in vars(SimhashIndex) if not m.startswith("_")))
def test_every_index_method_is_in_python_api_md(method):
    text = _read(DOCS / "python-api.md")
    assert re.search(rf"\.{re.escape(method)}\b", text), f"docs/python-api.md does not document SimhashIndex.{method}"


# -- dependencies --------------------------------------------------------------------------------------


def test_every_dependency_and_extra_is_explained():
    pyproject = _read(ROOT / "pyproject.toml")
    pyproject = re.sub(r"#.*", "", pyproject)  # comments name things too
    dependencies = re.search(r"^dependencies = \[(.*?)^\]", pyproject, re.M | re.S).group(1)
    names = re.findall(r'"([A-Za-z0-9_.-]+)', dependencies)
    optional = re.search(r"^\[project.optional-dependencies\](.*?)^\[", pyproject, re.M | re.S).group(1)
    extras = re.findall(r"^(\w+) = \[", optional, re.M)
    text = "\n".join(_read(page) for page in PAGES)
    for name in names:
        assert re.search(rf"\*\*{re.escape(name)}\*\*", text), f"the docs do not say why {name} is a dependency"
    for extra in extras:
        assert f"[{extra}]" in text, f"the docs do not say what the [{extra}] extra is for"


def test_ci_runs_exactly_the_readme_commands():
    """The README's first two shell blocks are the set-up and the test command; .ci/run runs both."""
    blocks = [body.strip() for language, body in FENCE.findall(_read(README)) if language == "sh"][:2]
    setup, tests = blocks
    assert re.search(r"pip install \.( |$)", setup) and "[" not in setup  # the base package only: no extras
    extras = re.search(r"pip install '?\.\[([\w,]+)\]", tests).group(1).split(",")
    assert {"test", "spark"} <= set(extras) and "pytest" in tests
    ci = _read(ROOT / ".ci" / "run").splitlines()
    assert setup in ci and tests in ci
    assert ci.index(setup) < ci.index(tests)


def test_python_examples_run(tmp_path, monkeypatch, capsys):
    """README.md's and docs/python-api.md's Python blocks run, in order, on a copy of examples/."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    texts = [path.read_text(encoding="utf-8") for path in sorted((tmp_path / "examples").glob("*.txt"))]
    namespace = {"pairs": [(f"doc{i}", text) for i, text in enumerate(texts)], "texts": texts}
    try:
        simhash_sqlite.loadable_path()
        extension = True
    except simhash_sqlite.ExtensionMissing:
        extension = False
    for page in (README, DOCS / "python-api.md"):
        for number, block in enumerate(re.findall(r"```python\n(.*?)```", _read(page), re.S)):
            code = compile(block, f"{page.name}, Python block {number + 1}", "exec")
            if "simhash_sqlite.load(" in block and not extension:  # built without the C parts: says so
                with pytest.raises(simhash_sqlite.ExtensionMissing):
                    exec(code, namespace)
                continue
            exec(code, namespace)
    namespace["index"].close()
    assert "examples/sqlite_intro_edited.txt" in capsys.readouterr().out


def test_sql_examples_run(tmp_path, monkeypatch):
    """docs/sql.md's SQL blocks run on an index of examples/, and simhash_near finds the copies."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    with SimhashIndex("demo.db", create=True) as index:
        index.add(simhash_sqlite.Document(f"examples/{path.name}", path.read_text(encoding="utf-8"))
                  for path in sorted(Path("examples").glob("*.txt")))
        for block in re.findall(r"```sql\n(.*?)```", _read(DOCS / "sql.md"), re.S):
            for statement in block.split(";"):
                if statement.strip():
                    index.conn.execute(statement).fetchall()
        rows = index.conn.execute(
            "SELECT key FROM simhash_near(simhash_from_hex('140601520678e7a0'), 9) ORDER BY key"
        ).fetchall()
    assert [key for (key,) in rows] == [
        "examples/sqlite_intro.txt", "examples/sqlite_intro_edited.txt", "examples/sqlite_intro_mirror.txt"
    ]
