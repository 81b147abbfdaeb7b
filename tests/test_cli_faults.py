"""The command line's faults found by an audit (issue 36 items 3-7), each through the real CLI: the
damaged file named rightly, no traceback for a bad port or an early Ctrl-C, options checked as their
help says, searches that never write, and keys that do not depend on the folder simq runs in."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli import ENGLISH, as_foreground, assert_clean_error, simq

from simhash_sqlite import Document, SimhashIndex

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi".split()


def _damaged(tmp_path, documents=600):
    """An index whose documents table has three leaf pages in its middle holding random bytes (its schema page
    is intact): every search reads them (which pages they are depends on the schema's layout, so dbstat says)."""
    path = tmp_path / "damaged.db"
    rnd = random.Random(0)
    with SimhashIndex(path, create=True) as index:
        index.add(Document(f"doc{i}", " ".join(rnd.choice(WORDS) for _ in range(60))) for i in range(documents))
        leaves = [page for (page,) in index.conn.execute(
            "SELECT pageno FROM dbstat WHERE name = 'documents' AND pagetype = 'leaf' ORDER BY pageno")]
    middle = len(leaves) // 2
    with open(path, "r+b") as handle:
        for page in leaves[middle : middle + 3]:
            handle.seek((page - 1) * 4096)
            handle.write(random.Random(page).randbytes(4096))
    return path


def test_a_damaged_index_is_named_not_the_query_file(runner, tmp_path):
    path = _damaged(tmp_path)
    query = tmp_path / "query.txt"
    query.write_text(" ".join(WORDS * 4))
    result = simq(runner, "near", "--file", query, "--db", path, "-k", "20")
    assert_clean_error(result, f"{path} is damaged")
    assert str(query) not in result.stderr
    assert f"sqlite3 {path} .dump" in result.stderr


SIMQ = Path(sys.executable).parent / "simq"  # the venv's script, as a user runs it


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_a_port_out_of_range_is_a_usage_error(runner, tmp_path, port):
    result = simq(runner, "serve", "--port", port, "--db", tmp_path / "none.db")
    assert_clean_error(result, "--port", code=2)


def _loading(pid: int) -> bool:
    """Whether the process has begun to load simq's own modules (a compiled library of theirs is mapped)."""
    with open(f"/proc/{pid}/maps") as maps:
        return any(name in line for line in maps for name in ("apsw", "numpy", "_simhash_core", "pydantic_core"))


# A Ctrl-C that lands in a weakref callback (an import lock's, while a command imports a module lazily):
# Python cannot raise it there and would print "Exception ignored" with a traceback and go on. The test above
# met it once in CI (dedup, 0.05 s); this one makes it land there every time.
_IGNORED_CTRL_C = """
import sys, time, weakref
from simhash_sqlite.__main__ import _interrupt_again
sys.unraisablehook = _interrupt_again
class Lock: pass
lock = Lock()
def cb(_):
    raise KeyboardInterrupt
ref = weakref.ref(lock, cb)
try:
    del lock
    time.sleep(20)
    print("went on")
except KeyboardInterrupt:
    print("stopped")
"""


def test_a_ctrl_c_python_cannot_raise_where_it_lands_stops_the_command_all_the_same():
    run = subprocess.run([sys.executable, "-c", _IGNORED_CTRL_C], capture_output=True, text=True, timeout=30)
    assert run.stdout == "stopped\n" and "Traceback" not in run.stderr and "ignored" not in run.stderr, run


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/maps to time the interrupt")
@pytest.mark.parametrize("after", [0.0, 0.05, 0.15])
@pytest.mark.parametrize("command", ["dupes", "dedup"])
def test_ctrl_c_while_simq_starts_is_a_clean_130(tmp_path, command, after):
    """Ctrl-C while the CLI's modules load or the command line is parsed: one line and 130 (or done)."""
    data = tmp_path / "in.jsonl"
    rnd = random.Random(3)
    with data.open("w") as handle:
        for i in range(3000):
            handle.write(json.dumps({"id": i, "text": " ".join(rnd.choice(WORDS) for _ in range(80))}) + "\n")
    db = tmp_path / "idx.db"
    args = {"dupes": ["dupes", "--db", db], "dedup": ["dedup", data, "--out", tmp_path / "kept.jsonl"]}[command]
    if command == "dupes":
        subprocess.run([SIMQ, "add", data, "--db", db], check=True, capture_output=True)
    process = subprocess.Popen([SIMQ, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=as_foreground)
    deadline = time.monotonic() + 30
    while process.poll() is None and not _loading(process.pid) and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(after)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    if process.returncode == 0:
        return  # done before the interrupt arrived
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1].startswith("error: interrupted"), stderr


@pytest.fixture
def small_index(tmp_path):
    path = tmp_path / "idx.db"
    (tmp_path / "a.txt").write_text(ENGLISH)
    (tmp_path / "b.txt").write_text(ENGLISH.replace("library", "module"))
    with SimhashIndex(path, create=True) as index:
        index.add([Document(name, (tmp_path / name).read_text()) for name in ("a.txt", "b.txt")])
    return path


@pytest.mark.parametrize("args, named", [
    (["decisions", "--format", "xml"], "--format"),
    (["near", "--hash", "123"], "16 hex digits"),
    (["near", "--hash", "xyz"], "--hash"),
    (["near"], "give one of a text"),
    (["near", "some text", "--key", "a.txt"], "give one of a text"),
    (["calibrate", "--pairs", "0"], "--pairs"),
    (["calibrate", "--max-k", "33"], "--max-k"),
    (["add", "a.txt", "--batch-size", "0"], "--batch-size"),
    (["clusters", "--min-size", "0"], "--min-size"),
    (["explain", "a.txt", "b.txt", "--top", "-1"], "--top"),
    (["near", "some text", "--limit", "-1"], "--limit"),
    (["hash"], "give a text or --file"),
    (["rm"], "give keys"),
])
def test_options_out_of_their_range_are_usage_errors_naming_the_option(runner, small_index, args, named):
    before = small_index.read_bytes()
    result = simq(runner, *args, "--db", small_index)
    assert_clean_error(result, named, code=2)
    assert "per_distance" not in result.stderr and "batch_size" not in result.stderr
    assert small_index.read_bytes() == before


def test_every_k_says_what_it_is_for_and_they_agree(runner, tmp_path):
    """stats, calibrate and near's help tell one story: 9 for distance alone, 12 for checked candidates."""
    from simhash_sqlite.core.settings import CONFIRM_K, RECOMMENDED_K

    folder = tmp_path / "texts"
    folder.mkdir()
    rnd = random.Random(5)
    for i in range(30):
        text = " ".join(rnd.choice(WORDS) for _ in range(80))
        (folder / f"{i}.txt").write_text(text)
        (folder / f"{i}b.txt").write_text(text + " and a few more words at the end")
    db = tmp_path / "k.db"
    assert simq(runner, "add", folder, "--db", db).exit_code == 0
    story = f"{RECOMMENDED_K} for distance alone (--no-check"
    checked = f"{CONFIRM_K} for candidates checked by Jaccard"
    stats = json.loads(simq(runner, "stats", "--db", db, "--json").stdout)["recommended k"]
    assert story in stats and checked in stats
    calibrate = simq(runner, "calibrate", "--db", db)
    assert calibrate.exit_code == 0, calibrate.output
    text = " ".join(calibrate.stdout.split())
    assert "for distance alone (--no-check) on this index" in text and story in text and checked in text
    import typer

    from simhash_sqlite.cli.app import app

    group = typer.main.get_command(app)
    near = group.get_command(group.make_context("simq", ["near"]), "near")
    k_help = next(param.help for param in near.params if param.name == "k")
    assert f"default: {CONFIRM_K} with --check, {RECOMMENDED_K} with --no-check" in k_help


def _without_sketches(tmp_path):
    """An index of the current schema whose simhash_meta lacks 'sketch' and whose documents have none,
    as one made before sketches (texts at their files, unchanged)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    rnd = random.Random(7)
    base = [" ".join(rnd.choice(WORDS) for _ in range(120)) for _ in range(6)]
    for i, text in enumerate(base):
        (folder / f"{i}.txt").write_text(text)
        (folder / f"{i}b.txt").write_text(text + " with a few words more")
    db = tmp_path / "old.db"
    with SimhashIndex(db, create=True) as index:
        index.add(Document(str(path), path.read_text()) for path in sorted(folder.iterdir()))
        index.conn.execute("UPDATE documents SET sketch = NULL")
        index.conn.execute("DELETE FROM simhash_meta WHERE key = 'sketch'")
    return db, folder


READS = [
    ["stats"], ["stats", "--json"], ["near", " ".join(WORDS)], ["near", "--key", "KEY"], ["near", "--file", "FILE"],
    ["near", "--hash", "0123456789abcdef"], ["near", "--batch", "QUERIES"], ["hash", "some words"], ["dupes"],
    ["dupes", "--no-check"], ["dupes", "-k", "3"], ["explain", "KEY", "FILE"], ["calibrate", "--pairs", "3"],
    ["sql", "SELECT count(*) FROM documents"], ["integrity"],
]


def _args(command, folder, tmp_path):
    key, file = str(folder / "0.txt"), str(folder / "0b.txt")
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"key": key}) + "\n")
    return [{"KEY": key, "FILE": file, "QUERIES": str(queries)}.get(arg, arg) for arg in command]


def test_a_search_never_writes_an_index_made_before_sketches_and_says_how_to_sketch(runner, tmp_path):
    db, folder = _without_sketches(tmp_path)
    before = db.read_bytes()
    for command in READS:
        result = simq(runner, *_args(command, folder, tmp_path), "--db", db)
        assert result.exit_code == 0, (command, result.output)
        assert db.read_bytes() == before, command
        assert not os.path.exists(f"{db}-wal") or os.path.getsize(f"{db}-wal") == 0, command
        if command[0] in ("near", "dupes", "stats"):
            assert f"sketch them once with simq vacuum --db {db}" in result.stderr, command
    against = simq(runner, "dedup", folder, "--against", db, "--out", tmp_path / "kept.jsonl")  # reads it too
    assert against.exit_code == 0 and db.read_bytes() == before, against.output
    upgraded = simq(runner, "vacuum", "--db", db)
    assert upgraded.exit_code == 0 and "12 documents sketched from their texts" in upgraded.stderr, upgraded.output
    after = simq(runner, "dupes", "--db", db)
    assert after.exit_code == 0 and "made before sketches" not in after.stderr


def test_a_search_refuses_an_older_schema_without_writing_and_says_how_to_upgrade(runner, tmp_path):
    from test_sketch_upgrade import TEXTS, old_index

    db = tmp_path / "schema2.db"
    old_index(db, TEXTS, store_text=True)
    before = db.read_bytes()
    for command in (["near", "--key", "a"], ["dupes"], ["stats"], ["explain", "a", "b"], ["hash", "x y z"]):
        result = simq(runner, *command, "--db", db)
        assert_clean_error(result, "needs a schema upgrade (made with schema 2")
        assert f"simq vacuum --db {db}" in result.stderr
        assert db.read_bytes() == before, command
    assert simq(runner, "vacuum", "--db", db).exit_code == 0
    assert simq(runner, "near", "--key", "a", "--db", db).exit_code == 0


def _project(tmp_path):
    """A folder of texts long enough to be checked from their files (no short-text data), pairs among them."""
    project = tmp_path / "project"
    texts = project / "texts"
    texts.mkdir(parents=True)
    rnd = random.Random(11)
    for i in range(12):
        text = " ".join(rnd.choice(WORDS) + str(rnd.randrange(50)) for _ in range(150))
        (texts / f"{i}.txt").write_text(text)
        words = text.split()
        for _ in range(2 + i):  # from a sure near-duplicate to pairs about the threshold, which need the texts
            words[rnd.randrange(len(words))] = "changed"
        (texts / f"{i}-copy.txt").write_text(" ".join(words))
    return project


def test_dupes_are_the_same_from_any_folder(runner, tmp_path, monkeypatch):
    project = _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(project)
    assert simq(runner, "add", "texts", "--db", "idx.db").exit_code == 0
    here = simq(runner, "dupes", "--db", "idx.db", "--format", "jsonl")
    assert here.exit_code == 0 and "exact" in {json.loads(line)["checked_by"] for line in here.stdout.splitlines()}
    monkeypatch.chdir(elsewhere)
    there = simq(runner, "dupes", "--db", project / "idx.db", "--format", "jsonl")
    assert there.exit_code == 0 and there.stdout == here.stdout
    # An add from another folder keys the same files the same way: nothing new, nothing changed.
    again = simq(runner, "add", project / "texts", "--db", project / "idx.db")
    assert again.exit_code == 0 and "0 added, 0 updated, 24 unchanged" in again.stdout, again.stdout
    (project / "texts" / "0.txt").unlink()
    pruned = simq(runner, "add", "--prune", project / "texts", "--db", project / "idx.db")
    assert pruned.exit_code == 0 and "1 pruned" in pruned.stdout, pruned.output


def test_an_index_without_a_recorded_root_reads_keys_from_the_working_folder_and_says_so(runner, tmp_path,
                                                                                         monkeypatch):
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    assert simq(runner, "add", "texts", "--db", "idx.db").exit_code == 0
    with SimhashIndex(project / "idx.db") as index:  # as an index made before the root was recorded
        index.conn.execute("DELETE FROM simhash_meta WHERE key = 'key_root'")
    here = simq(runner, "dupes", "--db", "idx.db", "--format", "jsonl")
    assert here.exit_code == 0 and "recorded where its file keys" not in here.stderr
    assert json.loads(simq(runner, "stats", "--db", "idx.db", "--json").stdout)["file keys from"].startswith(
        "the current folder")
    monkeypatch.chdir(tmp_path)
    there = simq(runner, "dupes", "--db", project / "idx.db", "--format", "jsonl")
    assert there.exit_code == 0
    assert there.stderr.count("made before simq recorded where its file keys are rooted") == 1, there.stderr
    assert str(tmp_path) in there.stderr


def test_stats_names_the_root_of_the_keys(runner, tmp_path, monkeypatch):
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    assert simq(runner, "add", "texts", "--db", "idx.db").exit_code == 0
    monkeypatch.chdir(tmp_path)
    stats = json.loads(simq(runner, "stats", "--db", project / "idx.db", "--json").stdout)
    assert stats["file keys from"] == str(project)


SAMPLES = {
    "k": ["3", " 3", "+3", "1_000", "3.0", "3.", "3.00", "3.5", "x", "-1", "99999999999999999999", "", "0x10",
          "\u0663", "1e3", ".0", "-2.0"],
    "threshold": ["0.5", "1e-3", "inf", "nan", "x", " .5", ""],
    "limit": ["-1", "0", "5"],
    "db": ["a.db", "", "-", " x "],
    "text": ["abc", "", "-"],
    "check": ["true", "no", "maybe", "1", ""],
}


def test_simqs_parameters_convert_as_typers_own_conversion_does_without_pydantic():
    """cli/params.py converts simq's plain parameters itself (typer's conversion imports pydantic):
    the same values or the same refusals as typer's, for the kinds simq uses."""
    import typer
    from typer._coercion import build_runtime_param

    from simhash_sqlite.cli import params
    from simhash_sqlite.cli.app import app

    group = typer.main.get_command(app)
    near = group.get_command(group.make_context("simq", ["near"]), "near")
    ctx = near.make_context("near", ["x"], resilient_parsing=True)
    by_name = {param.name: param for param in near.params}

    def converted(runtime, value, param):
        try:
            return runtime.coerce(value, param=param, ctx=ctx)
        except typer.BadParameter:
            return "refused"

    for name, values in SAMPLES.items():
        param = by_name[name]
        ours = params.plain_runtime(param.type_descriptor)
        assert ours is not None, name
        theirs = build_runtime_param(param.type_descriptor)
        for value in values:
            expected, got = converted(theirs, value, param), converted(ours, value, param)
            assert got == expected or (expected != expected and got != got), (name, value, expected, got)


@pytest.mark.parametrize("args", [["hash", "some text"], ["near", "--key", "a.txt"], ["stats"]])
def test_a_command_imports_neither_pydantic_nor_what_it_does_not_use(small_index, args):
    run = subprocess.run([sys.executable, "-X", "importtime", SIMQ, *args, "--db", small_index],
                         capture_output=True, text=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr
    imported = {line.split("|")[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "pydantic" not in imported and "typer._adapters" not in imported
    assert "numpy.ma" not in imported and "rich.progress" not in imported and "zipfile" not in imported


def test_simq_lists_every_command_in_its_module_and_builds_each_there():
    """app.py's COMMANDS names each command of the *_commands modules once, with the module defining it, and
    the group builds a command from that module's definition (its options, help and panel) when asked."""
    import inspect

    import typer

    from simhash_sqlite.cli.app import COMMANDS, OLD_COMMANDS, app, registered

    defined = {name: module for module in set(COMMANDS.values()) for name in registered(module)}
    assert defined == COMMANDS
    group = typer.main.get_command(app)
    context = group.make_context("simq", ["--help"], resilient_parsing=True)
    assert group.list_commands(context) == list(COMMANDS)
    for name in [*COMMANDS, *OLD_COMMANDS]:
        command = group.get_command(context, OLD_COMMANDS.get(name, name))
        info = registered(COMMANDS[command.name])[command.name]
        assert inspect.unwrap(command.callback) is inspect.unwrap(info.callback)
        assert command.rich_help_panel == info.rich_help_panel is not None
    assert group.get_command(context, "nosuch") is None


@pytest.mark.parametrize("args", [["hash", "x"], ["hash", "x", "--format", "csv"], ["near", "--key", "a.txt"],
                                  ["near", "--key", "a.txt", "--format", "csv"], ["dupes"], ["serve", "--help"]])
def test_a_command_line_imports_only_its_own_command_module(small_index, args):
    """simq imports the module of the command it runs and no other command's (their library imports with them);
    a command line the quick lane answers (simhash_sqlite/quick/: hash and near --key here), none of them."""
    from simhash_sqlite.cli.app import COMMANDS

    run = subprocess.run([sys.executable, "-X", "importtime", SIMQ, *args, "--db", small_index],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    imported = {line.split("|")[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    commands = {name for name in imported if name.startswith("simhash_sqlite.cli.") and name.endswith("_commands")}
    quick = args in (["hash", "x"], ["near", "--key", "a.txt"]) and _the_quick_lane_can_answer()
    assert commands == (set() if quick else {f"simhash_sqlite.cli.{COMMANDS[args[0]]}"})


def _the_quick_lane_can_answer() -> bool:
    """Whether this build lets the quick lane answer (the C core, and the extension built with zlib: else it
    hands every line to the full command, tests/test_quick_lane.py)."""
    from simhash_sqlite import native
    from simhash_sqlite.native.extension import ExtensionMissing, built_without, loadable_path

    try:
        loadable_path()
    except ExtensionMissing:
        return False
    return native.core() is not None and not built_without()


@pytest.mark.slow
def test_the_real_simq_answers_as_the_whole_app(tmp_path, small_index):
    """The venv's simq (one command built) and the app with every command print the same."""
    whole = [sys.executable, "-c", "import sys; from simhash_sqlite.cli.app import app; sys.argv[0] = 'simq'; app()"]
    for args in (["near", "-h"], ["near", "--key", "a.txt", "--json", "--db", str(small_index)], ["nosuch"],
                 ["check", "--db", str(small_index)], ["near", "--bogus"]):
        one = subprocess.run([SIMQ, *args], capture_output=True, text=True)
        every = subprocess.run([*whole, *args], capture_output=True, text=True)
        assert (one.returncode, one.stdout, one.stderr) == (every.returncode, every.stdout, every.stderr), args


def test_a_key_root_is_recorded_once_and_used_by_the_check(tmp_path, monkeypatch):
    folder = tmp_path / "texts"
    folder.mkdir()
    text = " ".join(WORDS * 30)
    (folder / "a.txt").write_text(text)
    db = tmp_path / "idx.db"
    with SimhashIndex(db, create=True) as index:
        assert index.key_root is None  # made in Python: keys from the working folder, as before
        index.add([Document("a.txt", text)])
        index.record_key_root(folder)
        index.record_key_root(tmp_path)  # once: the keys were made relative to the first
        assert index.key_root == str(folder)
    monkeypatch.chdir(tmp_path)
    with SimhashIndex(db, readonly=True) as index:
        assert index.key_root == str(folder)
        from simhash_sqlite.store.texts import stored_text

        assert stored_text(index, "a.txt") == text
