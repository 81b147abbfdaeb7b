"""The command line's conventions, through the real CLI: formats, -o, exit codes, --help, user data that
looks like rich markup, pipes (no wrapping, a closed pipe), NO_COLOR, completion, and a fuzz test."""

import csv
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli import as_foreground

from simhash_sqlite.cli.app import app
from simhash_sqlite.store.integrity import problems

SIMQ = Path(sys.executable).parent / "simq"  # the venv's console script, by absolute path

BASE = (
    "SQLite is a C-language library that implements a small, fast, self-contained, high-reliability, "
    "full-featured SQL database engine. It is the most used database engine in the world. "
)
# Keys that rich would read as markup (or choke on), and one with a control character.
ODD_KEYS = ["[/wiki/Foo]", "[bold red]x[/]", "line\nbreak", "tab\there \\[esc]", "[link=http://x]y"]


def simq(runner, *args, input=None, **kwargs):
    return runner.invoke(app, [str(a) for a in args], input=input, **kwargs)


def ok(result):
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "Traceback" not in result.output
    return result


@pytest.fixture
def odd(runner, tmp_path):
    """An index named with brackets, of files and JSONL ids that look like markup."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "report [draft].txt").write_text(BASE * 2 + "draft", encoding="utf-8")
    (folder / "report [final].txt").write_text(BASE * 2 + "final", encoding="utf-8")
    data = tmp_path / "odd.jsonl"
    data.write_text(
        "".join(json.dumps({"id": key, "text": BASE * 2 + str(i)}) + "\n" for i, key in enumerate(ODD_KEYS)),
        encoding="utf-8",
    )
    db = tmp_path / "idx [v2].db"
    result = ok(simq(runner, "add", "--db", db, "--store-text", folder, data))
    assert f"{db}: 7 added" in result.stdout  # the path as given, brackets and all
    return db, folder


def test_user_data_is_never_markup(runner, odd):
    db, folder = odd
    shown = [os.path.normpath(folder / "report [draft].txt"), os.path.normpath(folder / "report [final].txt")]
    for args in (["dupes"], ["clusters", "--min-size", "2"], ["near", "--key", "[/wiki/Foo]"],
                 ["near", "--key", "[bold red]x[/]"], ["explain", "[/wiki/Foo]", "[link=http://x]y"], ["stats"]):
        result = ok(simq(runner, args[0], "--db", db, *args[1:]))
        text = result.stdout + result.stderr
        if args[0] in ("dupes", "near", "explain"):
            assert "[/wiki/Foo]" in text or "[bold red]x[/]" in text
        if args[0] == "dupes":
            assert all(key in text for key in shown)
            assert "line\\nbreak" in text  # a control character shows escaped: one row stays one line
            assert "[bold red]x[/]" in text and "[link=http://x]y" in text
        if args[0] == "stats":
            assert "idx [v2].db" in text
    # Errors keep the user's brackets too.
    result = simq(runner, "near", "--db", db, "--key", "[/nope]")
    assert result.exit_code == 1 and "[/nope]" in result.stderr and "Traceback" not in result.output
    result = simq(runner, "stats", "--db", db.with_name("gone [old].db"))
    assert result.exit_code == 1 and "gone [old].db" in result.stderr


@pytest.mark.parametrize("command", [
    ["near", "--key", "[/wiki/Foo]"], ["dupes"], ["clusters"], ["sql", "SELECT key, length FROM documents"],
    ["stats"], ["integrity"], ["explain", "[/wiki/Foo]", "[bold red]x[/]"], ["calibrate", "--max-k", "6"],
    ["hash", "some text to fingerprint"],
])
def test_every_record_command_prints_every_format(runner, odd, tmp_path, command):
    db, _ = odd
    args = [command[0], "--db", db, *command[1:]]
    as_json = json.loads(ok(simq(runner, *args, "--format", "json")).stdout)
    assert json.loads(ok(simq(runner, *args, "--json")).stdout) == as_json  # --json is the short form
    lines = ok(simq(runner, *args, "--format", "jsonl")).stdout.splitlines()
    records = [json.loads(line) for line in lines]
    assert records and all(isinstance(r, dict) for r in records)
    for fmt, delimiter in (("csv", ","), ("tsv", "\t")):
        rows = list(csv.reader(io.StringIO(ok(simq(runner, *args, "--format", fmt)).stdout), delimiter=delimiter))
        assert len(rows) >= 2 and all(len(row) == len(rows[0]) for row in rows)
    ok(simq(runner, *args, "--format", "table"))
    if isinstance(as_json, list):  # records: json is the array of what jsonl prints line by line
        assert as_json == records
    if command[0] in ("near", "dupes", "clusters", "sql"):  # output that can be large takes -o
        target = tmp_path / "out [1].jsonl"
        result = ok(simq(runner, *args, "--format", "jsonl", "-o", target))
        assert result.stdout.strip() == "" and target.read_text(encoding="utf-8").splitlines() == lines


def test_format_errors_and_exit_codes(runner, odd, tmp_path):
    db, _ = odd
    for args in (["dupes", "--format", "xml"], ["stats", "--json", "--format", "csv"], ["near", "x", "--format", "?"]):
        result = simq(runner, args[0], "--db", db, *args[1:])
        assert result.exit_code == 2 and result.stderr.splitlines()[-1].startswith("error:"), result.output
    assert simq(runner, "dupes", "--db", db, "--bogus").exit_code == 2  # usage
    assert simq(runner, "nosuchcommand").exit_code == 2
    assert simq(runner, "near").exit_code == 2  # parses, but nothing to search for: a usage error too
    # Every input skipped is an error, not success.
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01" * 100)
    result = simq(runner, "add", "--db", tmp_path / "b.db", tmp_path / "blob.bin")
    assert result.exit_code == 1 and "nothing added" in result.stderr and "1 input was skipped" in result.stderr
    result = simq(runner, "dedup", tmp_path / "blob.bin", "-o", tmp_path / "kept.jsonl")
    assert result.exit_code == 1 and "nothing read" in result.stderr and "kept.jsonl left as it was" in result.stderr
    version = ok(simq(runner, "--version"))
    assert version.stdout.startswith("simq (simhash-sqlite) ")


def test_plurals(runner, tmp_path):
    folder = tmp_path / "two"
    folder.mkdir()
    (folder / "a.txt").write_text(BASE * 2, encoding="utf-8")
    (folder / "b.txt").write_text(BASE * 2 + "!", encoding="utf-8")
    db = tmp_path / "p.db"
    ok(simq(runner, "add", "--db", db, folder))
    text = ok(simq(runner, "dupes", "--db", db)).stdout
    assert "1 pair:" in text and "1 pairs" not in text
    result = ok(simq(runner, "near", "--db", db, "--key", str(folder / "a.txt")))
    assert "1 match:" in result.stdout and "1 matches" not in result.stdout
    result = ok(simq(runner, "clusters", "--db", db))
    assert "in 1 cluster " in result.stderr and "1 clusters" not in result.stderr and "1 pair joined" in result.stderr
    result = ok(simq(runner, "rm", "--db", db, str(folder / "a.txt"), "absent"))
    assert "1 key not in the index" in result.stdout


def test_help_shows_defaults_and_no_value_after_flags(runner):
    for command, wanted in (
        ("add", ["[default: chars]", "[default: 5]", "[default: binary]", "[default: no-hmm]"]),
        ("dedup", ["[default: chars]", "[default: binary]", "--hmm"]),
        ("spark-dedup", ["--id-field", "--text-field", "--input-format", "[default: binary]"]),
        ("near", ["[default: jsonl for *.jsonl and stdin, else paths]", "[default: 12 with --check"]),
        ("dupes", ["--format", "table, json, jsonl, csv or tsv", "[default: table]", "--json", "--out"]),
    ):
        text = ok(simq(runner, command, "--help", terminal_width=200, env={"COLUMNS": "200"})).stdout
        for fragment in wanted:
            assert fragment in text, (command, fragment)
        assert "<bool>" not in text and " n-grams ." not in text
        assert "'count', 'log' or 'binary'" not in text  # dedup's help once said count while binary was used
    spark = ok(simq(runner, "spark-dedup", "--help", terminal_width=200, env={"COLUMNS": "200"})).stdout
    assert "--id-col" not in spark and "--text-col" not in spark  # the old names still parse, unlisted
    calibrate = ok(simq(runner, "calibrate", "--help", terminal_width=200, env={"COLUMNS": "200"})).stdout
    assert "--threshold" in calibrate and "--jaccard" not in calibrate  # the same name as near and dupes


def test_old_option_names_still_work(runner, odd):
    db, _ = odd
    new = json.loads(ok(simq(runner, "calibrate", "--db", db, "--max-k", "4", "--threshold", "0.7", "--json")).stdout)
    old = json.loads(ok(simq(runner, "calibrate", "--db", db, "--max-k", "4", "--jaccard", "0.7", "--json")).stdout)
    assert new == old and new["threshold"] == 0.7


# -- the real script in a pipe ---------------------------------------------------------------------


def _script():
    if not SIMQ.exists():
        pytest.skip(f"no simq script beside {sys.executable}")
    return str(SIMQ)


@pytest.fixture
def many(tmp_path):
    """800 documents with keys of over 300 characters: a text and its copy, 400 times, the texts far apart. The
    pairs in JSONL (300 KB) and the keys (250 KB) are far past a pipe's buffer: `head` closes it mid-write.
    (The texts were once one text with a number, all near one another: 319,439 pairs, 6.5 s of CPU to list.)"""
    data = tmp_path / "many.jsonl"
    long_key = "k" * 300
    rng = random.Random(5)
    vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 9))) for _ in range(2000)]
    with data.open("w", encoding="utf-8") as handle:
        for i in range(400):
            text = f"{i} " + " ".join(rng.choices(vocabulary, k=40))
            handle.write(json.dumps({"id": f"{long_key}-{i}-a", "text": text}) + "\n")
            handle.write(json.dumps({"id": f"{long_key}-{i}-b", "text": text + " copy"}) + "\n")
    db = tmp_path / "many.db"
    run = subprocess.run([_script(), "add", "--db", str(db), str(data)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return db, long_key


def test_a_closed_pipe_ends_quietly_and_piped_tables_do_not_wrap(many):
    db, long_key = many
    simq_path = _script()
    for args in (["dupes", "--no-check", "--format", "jsonl"], ["dupes", "--no-check"],
                 ["sql", "SELECT key FROM documents"]):
        command = " ".join([simq_path, *args[:1], "--db", str(db), *(f"'{a}'" for a in args[1:])])
        run = subprocess.run(["bash", "-c", f"set -o pipefail; {command} | head -n 3"], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert run.stderr == "" and len(run.stdout.splitlines()) == 3
    # Not a terminal: each row of a table is one line, whatever the width of a key (or an exported COLUMNS).
    run = subprocess.run([simq_path, "dupes", "--db", str(db), "--no-check"], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "40"})
    assert run.returncode == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if long_key in line]
    assert len(rows) == 50 and all(line.count(long_key) == 2 for line in rows)  # 50 shown, both keys whole
    every = subprocess.run([simq_path, "dupes", "--db", str(db), "--no-check", "--format", "jsonl"],
                           capture_output=True, text=True)
    total = len(every.stdout.splitlines())
    assert total > 50 and f"{total - 50:,} more pairs not shown" in run.stdout


def test_colour_only_on_a_terminal_and_never_under_no_color(many):
    db, _ = many
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE")}
    forced = subprocess.run([_script(), "integrity", "--db", str(db)], capture_output=True, text=True,
                            env={**env, "FORCE_COLOR": "1"})
    assert "\x1b[" in forced.stdout  # a terminal (forced): colour
    for extra in ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, {}):  # NO_COLOR, or a pipe: none
        run = subprocess.run([_script(), "integrity", "--db", str(db)], capture_output=True, text=True,
                             env={**env, **extra})
        assert run.returncode == 0 and "\x1b[" not in run.stdout + run.stderr and "blocks match" in run.stdout


def test_shell_completion():
    env = {**os.environ, "_SIMQ_COMPLETE": "complete_bash", "COMP_WORDS": "simq du", "COMP_CWORD": "1"}
    assert subprocess.run([_script()], capture_output=True, text=True, env=env).stdout.split() == ["dupes"]
    env.update(COMP_WORDS="simq dupes --format js", COMP_CWORD="3")
    assert subprocess.run([_script()], capture_output=True, text=True, env=env).stdout.split() == ["json", "jsonl"]


def test_ctrl_c_is_130_with_one_line(many):
    """Any command (here one waiting on stdin), not only add: "interrupted" and 130, no traceback."""
    db, _ = many
    process = subprocess.Popen([_script(), "near", "--db", str(db), "--batch", "-"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=as_foreground)
    deadline = time.time() + 30
    while time.time() < deadline and not _has_open(process.pid, db):  # the index is open: past start-up
        time.sleep(0.05)
    time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    process.stdin.close()
    assert process.returncode == 130 and stderr.strip() == "error: interrupted", stderr


def _has_open(pid: int, path: Path) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    if not fds.is_dir():
        time.sleep(2)  # no /proc: give it time
        return True
    try:
        return any(os.readlink(fd) == str(path) for fd in fds.iterdir())
    except OSError:
        return False


def test_version_from_the_script():
    run = subprocess.run([_script(), "--version"], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.startswith("simq (simhash-sqlite) ")


# -- fuzz: random keys, stdin and flags never give a traceback or a damaged index -----------------

ODD = list("[]/\\\"'\n\r\t\x1b\x00\x7f:;=@#* ") + ["[/]", "[bold]", "[/wiki/Foo]", "[link=x]", "[red on blue]"]
pieces = st.one_of(st.sampled_from(ODD), st.characters(codec="utf-8", categories=["L", "N", "P", "S"]))
keys = st.lists(pieces, min_size=1, max_size=8).map("".join)
commands = st.sampled_from([  # those that show keys in tables, more often
    ["dupes"], ["dupes", "--no-check"], ["clusters"], ["clusters", "--min-size", "1"], ["explain"], ["explain"],
    ["near", "--key"], ["near", "--key"], ["dupes"], ["clusters"], ["stats"], ["integrity"],
    ["sql", "SELECT key FROM documents"], ["calibrate", "--max-k", "4"], ["near", "-"], ["near", "--file", "-"],
    ["near", "--batch", "-"], ["rm", "--from", "-"], ["hash"], ["add", "-"], ["add", "--jsonl", "-"],
])
flags = st.lists(st.sampled_from([
    ["--format", "json"], ["--format", "jsonl"], ["--format", "csv"], ["--format", "tsv"], ["--format", "table"],
    ["--json"], ["--k", "0"], ["--k", "64"], ["--k", "-1"], ["--limit", "0"], ["--no-check"], ["--threshold", "1"],
    ["--format", "x[y]"], ["--bogus"], ["--out", "-"],
]), max_size=3)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chosen=st.lists(keys, min_size=2, max_size=6, unique=True), command=commands, extra=flags,
       stdin=st.one_of(st.text(max_size=300), keys.map(lambda k: json.dumps({"id": k, "text": BASE + k}))))
def test_fuzz_cli_no_traceback_no_damage(runner, chosen, command, extra, stdin):
    folder = tempfile.mkdtemp()
    try:
        db = Path(folder) / "f [1].db"
        data = Path(folder) / "d.jsonl"
        data.write_text("".join(json.dumps({"id": k, "text": BASE + k}) + "\n" for k in chosen), encoding="utf-8")
        simq(runner, "add", "--db", db, "--store-text", data)
        args = list(command)
        if command == ["explain"]:
            args += chosen[:2]
        elif command == ["near", "--key"]:
            args.append(chosen[-1])
        args += [a for flag in extra for a in flag]
        result = simq(runner, args[0], "--db", db, *args[1:], input=stdin)
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
        assert result.exit_code in (0, 1, 2), result.output
        assert "Traceback" not in result.output
        if result.exit_code == 1:
            assert any(line.startswith("error:") for line in result.stderr.splitlines()) or "skipped" in result.stderr
        if db.exists():
            assert problems(db) == []
    finally:
        shutil.rmtree(folder)


# -- output.render itself: every format gives back what it was given ------------------------------

values = st.one_of(st.none(), st.booleans(), st.integers(), keys, st.text(max_size=20))


@settings(max_examples=50, deadline=None)
@given(rows=st.lists(st.tuples(keys, values), min_size=1, max_size=5))
def test_render_round_trips(rows):
    from simhash_sqlite.cli import output

    records = [{"key": key, "value": value} for key, value in rows]
    for fmt in ("json", "jsonl", "csv", "tsv", "table"):
        handle = io.StringIO()
        assert output.render(records, fmt, handle) == len(records)
        text = handle.getvalue()
        if fmt == "json":
            assert json.loads(text) == records
        elif fmt == "jsonl":
            assert [json.loads(line) for line in text.splitlines()] == records
        elif fmt in ("csv", "tsv"):
            parsed = list(csv.DictReader(io.StringIO(text, newline=""), delimiter="," if fmt == "csv" else "\t"))
            assert [r["key"] for r in parsed] == [r["key"] for r in records]
        else:  # one line a row, whatever the key holds
            assert len(text.splitlines()) == len(records) + 4
