"""Everyday faults (issue 24), each replayed the way a user meets it: through the real CLI (typer's
CliRunner, and the venv's `simq` by path in a subprocess) or the real server (`simq serve` on a loopback
port). Then a fuzz suite replays every case with random variations and asserts, for each run: no
traceback on stderr or in the server log, the exit status docs/cli.md documents (0, 1 error, 2 usage),
the index and output files unchanged when a command fails (hashed before and after), and a peak memory
within MEMORY_BOUND_MIB for the small inputs here (the huge-line bounds: test_huge_line_memory_is_bounded,
and bench/huge_line_memory.py for the sizes of the issue).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner
from web_helpers import get, serving, web_extra

from simhash_sqlite.cli.app import app

SIMQ = str(Path(sys.executable).with_name("simq"))  # the venv's console script, by path
# Peak resident memory of one simq process (and its pool workers) on the small inputs of this file. An
# idle `simq stats` peaks near 60 MiB here (numpy, apsw, typer, rich); the largest input below is 4 MiB.
MEMORY_BOUND_MIB = 400

TEXT = (
    "SQLite is a small, fast, self-contained, high-reliability, full-featured SQL database engine. "
    "It is the most used database engine in the world, built into all mobile phones and most computers. "
)


# -- helpers ---------------------------------------------------------------------------------------


class Run:
    """A finished simq process: exit code, stdout, stderr, peak memory (MiB, the process and its pool)."""

    def __init__(self, code: int, stdout: str, stderr: str, peak_mib: float) -> None:
        self.code, self.stdout, self.stderr, self.peak_mib = code, stdout, stderr, peak_mib

    def __repr__(self) -> str:
        return f"Run(code={self.code}, stderr={self.stderr[-2000:]!r}, peak={self.peak_mib:.0f} MiB)"


# Starts simq and writes its peak RSS (KiB, wait4's ru_maxrss, which covers its reaped pool workers) to a file.
# A process forked from pytest itself would count pytest's own memory in its peak (the high-water mark
# survives exec), so simq is started from this small launcher.
LAUNCHER = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""


def run(*args, cwd: Path, stdin: bytes | None = None, env: dict | None = None, timeout: float = 120) -> Run:
    """`simq ARGS` by path in a subprocess (from LAUNCHER), with its peak RSS."""
    environment = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    environment.pop("SIMQ_DB", None)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryDirectory() as folder:
        peak_file = os.path.join(folder, "peak")
        process = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, peak_file, SIMQ, *map(str, args)], cwd=cwd, env=environment,
            stdout=out, stderr=err, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        )
        if stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                process.stdin.write(stdin)
            process.stdin.close()
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                process.kill()
                raise AssertionError(f"simq {args} ran past {timeout} s")
            time.sleep(0.01)
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        with open(peak_file) as peak:
            peak_kib = int(peak.read())
        return Run(process.returncode, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"),
                   peak_kib / 1024)


def assert_clean(result: Run, code: int, fragment: str | None = None) -> None:
    """The documented exit status, no traceback, and on failure one `error:` line last on stderr."""
    assert result.code == code, result
    assert "Traceback" not in result.stderr + result.stdout, result
    assert result.peak_mib < MEMORY_BOUND_MIB, result
    if code != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert lines and lines[-1].startswith("error:"), result
        assert sum(line.startswith("error:") for line in lines) == 1, result
    if fragment is not None:
        assert fragment in result.stderr, result


def cli(*args, input: str | bytes | None = None):
    """`simq ARGS` through typer's CliRunner (in this process)."""
    return CliRunner().invoke(app, [str(a) for a in args], input=input)


def assert_cli_clean(result, code: int, fragment: str | None = None) -> None:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    if code != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert lines and lines[-1].startswith("error:"), result.stderr
        assert sum(line.startswith("error:") for line in lines) == 1, result.stderr
    if fragment is not None:
        assert fragment in result.stderr, result.stderr


def files_of(folder: Path) -> dict[str, str]:
    """Every file under folder (names and contents, -wal/-shm included), to compare before and after."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.startswith(".")
    }


def make_index(folder: Path, name: str = "index.db", n: int = 12, store_text: bool = True) -> Path:
    """An index of n short documents (two near-duplicate families), made through the CLI."""
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / f"{name}.jsonl"
    with open(source, "w", encoding="utf-8") as handle:
        for i in range(n):
            family = i % 2
            text = f"{TEXT * (2 + family)} family {family} copy {i}"
            handle.write(json.dumps({"id": f"doc{i}", "text": text}) + "\n")
    db = folder / name
    result = cli("add", source, "--db", db, *(["--store-text"] if store_text else []))
    assert result.exit_code == 0, result.output
    source.unlink()
    return db


@pytest.fixture
def indexed(tmp_path) -> Path:
    return make_index(tmp_path)


# -- tracebacks where the docs promise one error line ---------------------------------------------


def test_near_batch_answers_every_line_after_invalid_utf8(indexed):
    folder = indexed.parent
    bad = folder / "bad.jsonl"
    bad.write_bytes(b'{"text":"caf\xe9 ok"}\n' + json.dumps({"text": TEXT * 2}).encode() + b"\n")
    (folder / "latin1.txt").write_bytes("café au lait ".encode("latin-1") * 40)
    (folder / "good.txt").write_text(TEXT * 2, encoding="utf-8")
    (folder / "paths.txt").write_bytes(b"latin1.txt\ncaf\xe9.txt\ngood.txt\n")
    before = files_of(folder)
    for args, stdin in ((["--batch", "bad.jsonl"], None), (["--batch", "-"], bad.read_bytes())):
        result = run("near", "--db", indexed, *args, cwd=folder, stdin=stdin)
        assert_clean(result, 1, "line 1: not UTF-8")
        answers = [json.loads(line) for line in result.stdout.splitlines()]
        assert len(answers) == 2 and "not UTF-8" in answers[0]["error"], answers
        assert answers[1]["matches"], answers
    result = run("near", "--db", indexed, "--batch", "paths.txt", cwd=folder)
    assert_clean(result, 1)
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [("error" in a) for a in answers] == [True, True, False], answers
    assert "not utf-8 text" in answers[0]["error"] and "not UTF-8" in answers[1]["error"]
    assert answers[2]["matches"]
    assert files_of(folder) == before


def fill(folder: Path) -> None:
    """Fill the file system holding folder to the last block."""
    with open(folder / "filler", "wb", buffering=0) as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 4096)


def test_a_full_disk_is_one_line_naming_the_file_and_changes_nothing(tmp_path, small_disk):
    db = small_disk / "index.db"
    shutil.copy(make_index(tmp_path / "made"), db)
    (small_disk / "kept.jsonl").write_text("precious\n", encoding="utf-8")
    (small_disk / "more.txt").write_text(TEXT * 3, encoding="utf-8")
    fill(small_disk)
    before = files_of(small_disk)
    result = run("stats", "--db", db, cwd=small_disk)  # the console script, then the rest in this process
    assert_clean(result, 1, "is full")
    assert str(db) in result.stderr, result
    for command in (["integrity"], ["near", "hello"], ["dupes"], ["clusters"], ["calibrate"],
                    ["add", small_disk / "more.txt"], ["rm", "doc1"]):
        result = cli(*command, "--db", db)
        assert_cli_clean(result, 1, "is full")
        assert str(db) in result.stderr, result.stderr
        assert files_of(small_disk) == before, command
    result = run("dedup", "more.txt", "-o", "kept.jsonl", cwd=small_disk)
    assert_clean(result, 1, "kept.jsonl")
    assert "full" in result.stderr
    assert files_of(small_disk) == before


TAMPERED = [
    ("fingerprint", "not json"),
    ("fingerprint", "[1,2]"),
    ("fingerprint", '{"features": "chars", "ngram": "5", "weights": "binary"}'),
    ("fingerprint", '{"features": "chars", "ngram": 500, "weights": "binary"}'),
    ("store_text", "yes"),
    ("sketch", '{"bins": 2000000000, "bits": 8, "ngram": 5, "size_bits": 16, "version": 2}'),
    ("sketch", '{"bins": 944, "bits": 1, "ngram": 5, "size_bits": 16, "version": 9}'),
    ("sketch", "[]"),
]


def tamper(db: Path, key: str, value: str) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("INSERT OR REPLACE INTO simhash_meta (key, value) VALUES (?, ?)", (key, value))
    conn.close()


@pytest.mark.parametrize(("key", "value"), TAMPERED)
def test_tampered_metadata_is_refused_on_open_naming_the_key(indexed, key, value):
    tamper(indexed, key, value)
    before = files_of(indexed.parent)
    for command in (["near", "hello"], ["stats"], ["dupes"], ["hash", "hello"], ["sql", "SELECT 1"]):
        result = cli(*command, "--db", indexed)
        assert_cli_clean(result, 1, f"simhash_meta {key!r}")
    result = cli("integrity", "--db", indexed)
    assert result.exit_code == 1 and f"simhash_meta {key!r}" in result.stdout, result.output
    assert files_of(indexed.parent) == before


@pytest.mark.parametrize("value", ['{"k": 3}', "not json", '{"k": 99, "representative": "first", "documents": 1, '
                                   '"at": "x", "jaccard": 0.8}', '{"k": 3, "representative": "first", '
                                   '"documents": -1, "at": "x", "jaccard": 0.8}'])
def test_a_tampered_clusters_record_is_named_and_simq_clusters_records_it_again(indexed, value):
    assert cli("clusters", "--db", indexed).exit_code == 0
    tamper(indexed, "clusters", value)
    result = cli("stats", "--db", indexed)
    assert_cli_clean(result, 1, "simhash_meta 'clusters'")
    assert "simq clusters" in result.stderr
    result = cli("integrity", "--db", indexed)
    assert result.exit_code == 1 and "simhash_meta 'clusters'" in result.stdout, result.output
    assert cli("clusters", "--db", indexed).exit_code == 0
    assert cli("stats", "--db", indexed).exit_code == 0
    assert cli("integrity", "--db", indexed).exit_code == 0


# -- output files and counts ------------------------------------------------------------------------


def test_a_failed_dedup_leaves_its_output_files_as_they_were(tmp_path):
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": 1, "body": TEXT}) + "\n", encoding="utf-8")
    (tmp_path / "keep.jsonl").write_text("precious\n", encoding="utf-8")
    (tmp_path / "dropped.jsonl").write_text("also precious\n", encoding="utf-8")
    before = files_of(tmp_path)
    result = run("dedup", "in.jsonl", "-o", "keep.jsonl", "--dupes", "dropped.jsonl", cwd=tmp_path)
    assert_clean(result, 1, "nothing read")
    assert "keep.jsonl and dropped.jsonl left as they were" in result.stderr
    assert "its fields: body, id" in result.stderr
    assert files_of(tmp_path) == before
    # and on success the files are replaced whole
    result = run("dedup", "in.jsonl", "-o", "keep.jsonl", "--dupes", "dropped.jsonl", "--text-field", "body",
                 cwd=tmp_path)
    assert_clean(result, 0)
    assert json.loads((tmp_path / "keep.jsonl").read_text(encoding="utf-8"))["id"] == 1
    assert (tmp_path / "dropped.jsonl").read_text(encoding="utf-8") == ""
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "dropped.jsonl", "in.jsonl", "keep.jsonl"]


@pytest.mark.slow
def test_two_concurrent_adds_report_what_each_wrote(tmp_path):
    n = 12_000
    with open(tmp_path / "in.jsonl", "w", encoding="utf-8") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": i, "text": f"record {i} " + TEXT[: 40 + i % 60]}) + "\n")
    environment = {**os.environ, "NO_COLOR": "1"}
    command = [SIMQ, "add", "in.jsonl", "--db", "live.db", "--batch-size", "200"]
    first = subprocess.Popen(command, cwd=tmp_path, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    second = subprocess.Popen(command, cwd=tmp_path, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    totals = {"added": 0, "unchanged": 0}
    for process in (first, second):
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        assert b"Traceback" not in err
        summary = out.decode().strip().splitlines()[-1]
        for name in totals:
            totals[name] += int(summary.split(f" {name}")[0].rsplit(" ", 1)[-1].replace(",", ""))
    assert totals == {"added": n, "unchanged": n}, totals
    with contextlib.closing(apsw.Connection(str(tmp_path / "live.db"))) as conn:
        assert conn.execute("SELECT count(*) FROM documents").get == n


def test_integrity_finds_clusters_of_documents_deleted_behind_its_back(indexed):
    assert cli("clusters", "--db", indexed).exit_code == 0
    conn = sqlite3.connect(indexed)
    with conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("DELETE FROM documents WHERE key IN ('doc0', 'doc1')")
    conn.close()
    result = cli("integrity", "--db", indexed)
    assert result.exit_code == 1, result.output
    assert "clusters" in result.stderr and "no longer" in result.stdout, result.output
    stats = cli("stats", "--db", indexed)
    assert stats.exit_code == 0 and "STALE" in stats.stdout, stats.output
    assert cli("clusters", "--db", indexed).exit_code == 0
    assert cli("integrity", "--db", indexed).exit_code == 0


def test_stdin_jsonl_whose_first_record_lacks_the_text_field_is_read_as_jsonl(tmp_path):
    stdin = b'{"id": "a", "body": "x"}\n' + json.dumps({"id": "b", "text": TEXT}).encode() + b"\n"
    result = run("add", "-", "--db", "s.db", cwd=tmp_path, stdin=stdin)
    assert_clean(result, 1, "<stdin>:1: no text field 'text' (its fields: body, id)")
    assert "1 added" in result.stdout
    with contextlib.closing(apsw.Connection(str(tmp_path / "s.db"))) as conn:
        assert [row[0] for row in conn.execute("SELECT key FROM documents")] == ["b"]
    result = run("add", "-", "--db", "t.db", "--text-field", "body", cwd=tmp_path,
                 stdin=b'{"id": 1, "body": 5}\n')
    assert_clean(result, 1, "field 'body' is not a string (its fields: body, id)")
    assert not (tmp_path / "t.db").exists()


def test_an_add_that_skips_every_input_creates_no_index(tmp_path):
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": 1, "body": TEXT}) + "\n", encoding="utf-8")
    (tmp_path / "binary.txt").write_bytes(b"\0\1\2" * 100)
    for inputs in (["in.jsonl"], ["binary.txt"], ["in.jsonl", "binary.txt"]):
        result = run("add", *inputs, "--db", "new.db", cwd=tmp_path)
        assert_clean(result, 1, "nothing added")
        assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["binary.txt", "in.jsonl"]


# -- the same options for the same things ---------------------------------------------------------


def test_near_file_and_hash_file_take_encoding_and_errors(indexed):
    folder = indexed.parent
    latin = folder / "latin.txt"
    latin.write_bytes(TEXT.replace("fast", "fäst").encode("latin-1") * 2)
    for command in (["near", "-f", latin], ["hash", "-f", latin]):
        assert_cli_clean(cli(*command, "--db", indexed), 1, "--encoding")
        decoded = cli(*command, "--db", indexed, "--encoding", "latin-1")
        assert decoded.exit_code == 0, decoded.output
        replaced = cli(*command, "--db", indexed, "--errors", "replace")
        assert replaced.exit_code == 0, replaced.output
    expected = cli("hash", TEXT.replace("fast", "fäst") * 2, "--db", indexed).stdout
    assert cli("hash", "-f", latin, "--db", indexed, "--encoding", "latin-1").stdout == expected
    assert_cli_clean(cli("hash", "-f", latin, "--encoding", "no-such-codec"), 2, "no-such-codec")


def test_hash_dash_reads_stdin(tmp_path):
    from_stdin = cli("hash", "-", "--db", tmp_path / "none.db", input=TEXT)
    assert from_stdin.exit_code == 0, from_stdin.output
    assert from_stdin.stdout == cli("hash", TEXT, "--db", tmp_path / "none.db").stdout
    assert from_stdin.stdout != cli("hash", "--db", tmp_path / "none.db", "--", "-x-").stdout
    by_path = run("hash", "-", cwd=tmp_path, stdin=TEXT.encode())
    assert_clean(by_path, 0)
    assert by_path.stdout == from_stdin.stdout


BAD_VALUES = [
    ["near", "x", "--format", "xml"],
    ["near", "x", "-k", "65"],
    ["near", "x", "-k", "-1"],
    ["near", "x", "--jaccard", "0"],
    ["dupes", "--jaccard", "1.5"],
    ["clusters", "--representative", "tallest"],
    ["stats", "--format", "yaml"],
    ["near", "x", "--plan", "sideways"],
    ["near", "x", "-k", "abc"],
    ["near", "x", "--bogus"],
    ["add"],
    ["no-such-command"],
    ["add", "x", "--batch-size", "0"],
    ["add", "x", "--errors", "loud"],
]


@pytest.mark.parametrize("args", BAD_VALUES, ids=lambda a: " ".join(a))
def test_usage_errors_exit_2_with_one_line(indexed, args):
    before = files_of(indexed.parent)
    result = cli(*args, "--db", indexed) if args[0] != "no-such-command" else cli(*args)
    assert_cli_clean(result, 2)
    assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1, result.stderr
    assert files_of(indexed.parent) == before


def test_usage_errors_through_the_console_script_are_one_line(tmp_path):
    result = run("near", "x", "--bogus", cwd=tmp_path)
    assert_clean(result, 2, "No such option: --bogus")
    assert result.stderr.count("\n") == 1
    helped = run("near", "-h", cwd=tmp_path)
    assert helped.code == 0 and "Usage: simq near" in helped.stdout
    bare = run(cwd=tmp_path)
    assert bare.code == 2 and "Usage: simq" in bare.stdout + bare.stderr and "integrity" in bare.stdout


def test_sql_params_have_a_text_form(indexed):
    def value(*params):
        result = cli("sql", "SELECT :k, typeof(:k)", "--db", indexed, "--format", "json", *params)
        assert result.exit_code == 0, result.output
        return tuple(json.loads(result.stdout)[0].values())

    assert value("-p", "k=007") == (7, "integer")
    assert value("-p", "k:text=007") == ("007", "text")
    assert value("-p", "k:int=12") == (12, "integer")
    assert value("-p", "k:real=1.5") == (1.5, "real")
    assert value("-p", "k:text=a=b") == ("a=b", "text")
    assert_cli_clean(cli("sql", "SELECT :k", "--db", indexed, "-p", "k:int=x"), 2, "k:int=x")
    assert_cli_clean(cli("sql", "SELECT :k", "--db", indexed, "-p", "k:blob=x"), 2, "text, int or real")


def test_messages_name_the_options_of_the_command(indexed, tmp_path):
    result = cli("add", tmp_path / "x.txt", "--db", indexed, "--no-store-text")
    (tmp_path / "x.txt").write_text(TEXT, encoding="utf-8")
    result = cli("add", tmp_path / "x.txt", "--db", indexed, "--no-store-text")
    assert_cli_clean(result, 1, "--store-text")
    assert "store_text" not in result.stderr
    result = cli("add", tmp_path / "x.txt", "--db", indexed, "--ngram", "3")
    assert_cli_clean(result, 1, "--ngram 3")
    assert "ngram=" not in result.stderr
    result = cli("dedup", tmp_path / "x.txt", "-o", tmp_path / "o.jsonl", "--against", indexed, "--ngram", "3")
    assert_cli_clean(result, 1, "--ngram")
    assert "--db" not in result.stderr and "ngram=" not in result.stderr


def test_the_readme_shows_the_summary_line_simq_prints(tmp_path):
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    examples = Path(__file__).resolve().parent.parent / "examples"
    assert cli("add", "--db", tmp_path / "demo.db", examples).exit_code == 0
    result = cli("near", "--db", tmp_path / "demo.db", "--file", examples / "sqlite_intro.txt")
    summary = result.stdout.strip().splitlines()[-1]
    assert summary.startswith("3 matches") and summary in readme


# -- memory and disk ------------------------------------------------------------------------------


def huge_line(path: Path, characters: int, seed: int = 1) -> None:
    """One JSONL record whose text is `characters` long: random words, no newline inside."""
    import random

    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    text = " ".join(rng.choices(words, k=characters // 6 + 1))[:characters]
    path.write_text(json.dumps({"id": "big", "text": text}) + "\n", encoding="utf-8")


# The peak of one process reading one JSONL line of 12 M characters; done whole, the feature arrays of the text
# took about 46 bytes a character (550 MiB here, 2.7 GB at 60 MB); in pieces, the line, its text and one piece.
HUGE_LINE_CHARS = 12_000_000
HUGE_LINE_BOUND_MIB = 360


@pytest.mark.slow
def test_huge_line_memory_is_bounded(tmp_path):
    huge_line(tmp_path / "big.jsonl", HUGE_LINE_CHARS)
    for command in (["dedup", "big.jsonl", "-o", "kept.jsonl"], ["add", "big.jsonl", "--db", "s.db", "--store-text"],
                    ["add", "big.jsonl", "--db", "n.db"]):
        result = run(*command, cwd=tmp_path, timeout=300)
        assert result.code == 0 and "Traceback" not in result.stderr, result
        assert result.peak_mib < HUGE_LINE_BOUND_MIB, (command, result.peak_mib)
    stored, bare = (contextlib.closing(apsw.Connection(str(tmp_path / name))) for name in ("s.db", "n.db"))
    with stored as stored, bare as bare:
        assert stored.execute("SELECT length(text) FROM documents").get == HUGE_LINE_CHARS
        query = "SELECT fingerprint, sketch FROM documents"
        assert stored.execute(query).fetchall() == bare.execute(query).fetchall()


def test_long_texts_in_pieces_give_the_whole_texts_fingerprints_and_sketches(monkeypatch):
    """What bounds the memory of a huge line (pieces past fingerprint.LONG_TEXT) changes no fingerprint or sketch."""
    from simhash_sqlite.core import fingerprint
    from simhash_sqlite.core.settings import FingerprintSettings

    texts = [TEXT * 40, "a short text", TEXT * 90 + " and a tail", "", "数据库是按照数据结构来组织的仓库。" * 300]
    for chosen in (FingerprintSettings(), FingerprintSettings(weights="log"), FingerprintSettings(weights="count"),
                   FingerprintSettings(ngram=3), FingerprintSettings(features="words", ngram=2)):
        whole = fingerprint.simhash_and_sketch_many(texts, chosen)
        with monkeypatch.context() as patch:
            patch.setattr(fingerprint, "LONG_TEXT", 1000)
            assert fingerprint.simhash_and_sketch_many(texts, chosen) == whole
            assert fingerprint.simhash_many(texts, chosen) == whole[0]


def test_dedup_of_a_text_over_the_whole_text_limit_says_why(tmp_path, monkeypatch):
    big = tmp_path / "big.txt"
    big.write_text(TEXT * 500, encoding="utf-8")
    monkeypatch.setattr("simhash_sqlite.store.texts.READ_WHOLE_BYTES", 4096)
    result = cli("dedup", big, "-o", tmp_path / "kept.jsonl")
    assert_cli_clean(result, 1, "big.txt")
    assert "no index settings" not in result.stderr
    assert "JSONL" in result.stderr
    result = cli("dedup", "-", "-o", tmp_path / "kept.jsonl", input=TEXT * 500)
    assert_cli_clean(result, 1, "JSONL")
    assert not (tmp_path / "kept.jsonl").exists()


def test_a_bulk_add_keeps_its_wal_in_proportion_to_the_index(tmp_path):
    with open(tmp_path / "in.jsonl", "w", encoding="utf-8") as handle:
        for i in range(6000):
            handle.write(json.dumps({"id": i, "text": f"record {i} {TEXT}"}) + "\n")
    environment = {**os.environ, "NO_COLOR": "1"}
    process = subprocess.Popen([SIMQ, "add", "in.jsonl", "--db", "w.db", "--store-text", "--batch-size", "100"],
                               cwd=tmp_path, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    largest = 0
    while process.poll() is None:
        with contextlib.suppress(OSError):
            largest = max(largest, os.path.getsize(tmp_path / "w.db-wal"))
        time.sleep(0.005)
    assert process.returncode == 0, process.stderr.read()
    size = os.path.getsize(tmp_path / "w.db")
    # SQLite's own checkpoint is at 1000 pages (4 MiB); the bulk one scales with the file, never below that
    assert largest <= max(size, 4 << 20) + (1 << 20), (largest, size)


# -- the review server while the index changes ------------------------------------------------------


def sql_rows(base: str, database: str, sql: str) -> list[dict]:
    status, body = get(f"{base}/{database}.json?" + urllib.parse.urlencode({"sql": sql, "_shape": "array"}))
    assert status == 200, body
    return json.loads(body)


def server_logs(folder: Path) -> str:
    return "".join(p.read_text(encoding="utf-8", errors="replace") for p in folder.glob("serve-*.log"))


@web_extra
def test_the_server_answers_while_add_and_clusters_write_the_index(tmp_path):
    db = make_index(tmp_path, "live.db", n=12)
    with open(tmp_path / "more.jsonl", "w", encoding="utf-8") as handle:
        for i in range(300):
            handle.write(json.dumps({"id": f"more{i}", "text": f"{TEXT * 2} more {i % 7}"}) + "\n")
    with serving(db, tmp_path) as base:
        assert sql_rows(base, "live", "SELECT count(*) AS n FROM documents") == [{"n": 12}]
        assert get(f"{base}/live/documents")[0] == 200
        added = run("add", "more.jsonl", "--db", db, cwd=tmp_path)
        assert_clean(added, 0)
        assert sql_rows(base, "live", "SELECT count(*) AS n FROM documents") == [{"n": 312}]
        status, page = get(f"{base}/live/documents")
        assert status == 200 and "312 rows" in page, page[:2000]
        clustered = run("clusters", "--db", db, cwd=tmp_path)
        assert_clean(clustered, 0)
        rows = sql_rows(base, "live", "SELECT count(*) AS n FROM clusters")[0]["n"]
        with contextlib.closing(apsw.Connection(str(db))) as conn:
            assert rows == conn.execute("SELECT count(*) FROM clusters").get > 0
        status, page = get(f"{base}/live/clusters")
        assert status == 200 and f"{rows} rows" in page
        status, page = get(f"{base}/live/-/simhash/clusters")
        assert status == 200 and "malformed" not in page
        # unmatched pages of ours are 404s, with the newest rich allowed
        for path in ("/live/-/simhash/nowhere", "/live/-/simhash/clusters/x", "/nodb/-/simhash/clusters"):
            assert get(base + path)[0] == 404, path
    log = server_logs(tmp_path)
    assert "Traceback" not in log and "malformed" not in log, log[-3000:]
    assert not (tmp_path / "live.db-wal").exists() and not (tmp_path / "live.db-shm").exists()


@web_extra
def test_keys_with_bidi_controls_and_carriage_returns_are_escaped_on_the_pages(tmp_path):
    (tmp_path / "in.jsonl").write_text(
        "".join(json.dumps({"id": key, "text": TEXT * 3 + suffix}) + "\n"
                for key, suffix in (("\u202eevil.txt", ""), ("cr\rkey", " edited"), ("plain", " again"))),
        encoding="utf-8",
    )
    db = tmp_path / "keys.db"
    assert_clean(run("add", "in.jsonl", "--db", db, "--store-text", cwd=tmp_path), 0)
    assert_clean(run("clusters", "--db", db, cwd=tmp_path), 0)
    with serving(db, tmp_path) as base:
        pages = [get(f"{base}/keys/-/simhash/clusters"), get(f"{base}/keys/-/simhash/clusters/1"),
                 get(f"{base}/keys/-/simhash/search?" + urllib.parse.urlencode({"key": "plain"})),
                 get(f"{base}/keys/-/simhash/pair?" + urllib.parse.urlencode({"a": "\u202eevil.txt", "b": "cr\rkey"}))]
    for status, page in pages:
        assert status == 200, page[:1000]
        assert "\u202e" not in page and "cr\rkey" not in page
    shown = "".join(page for _, page in pages)
    assert "\\u202eevil.txt" in shown and "cr\\rkey" in shown
    assert "Traceback" not in server_logs(tmp_path)
    assert not (tmp_path / "keys.db-wal").exists() and not (tmp_path / "keys.db-shm").exists()


@web_extra
def test_the_server_refuses_sql_that_is_no_select_with_a_400_and_no_traceback(indexed, tmp_path):
    """Datasette answers ?sql= that is not a SELECT with a 400 and printed a rich traceback of it to the log
    (found by test_fuzz_the_server, now and then)."""
    db = tmp_path / "f.db"
    shutil.copy(indexed, db)
    with serving(db, tmp_path) as base:
        answers = [get(f"{base}/f?" + urllib.parse.urlencode({"sql": sql})) for sql in ("x", "update documents", ";")]
        assert get(f"{base}/f?" + urllib.parse.urlencode({"sql": "select count(*) from documents"}))[0] == 200
    assert [status for status, _ in answers] == [400, 400, 400]
    assert "Traceback" not in server_logs(tmp_path)


# -- the fuzz suite: every case above, varied --------------------------------------------------------

FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
DOCUMENTED_CODES = {0, 1, 2}


def assert_documented(result, folder: Path, before: dict[str, str]) -> None:
    """No traceback, an exit status docs/cli.md documents, one error line on failure, nothing changed on failure."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in DOCUMENTED_CODES, result.output
    assert "Traceback" not in result.output
    if result.exit_code:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert lines and lines[-1].startswith("error:"), result.stderr
        if "the rest was" not in lines[-1]:  # a partial add or dedup (some inputs skipped) did the rest
            assert files_of(folder) == before


@pytest.fixture(scope="module")
def fuzz_index(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz")
    db = make_index(folder, n=16)
    assert cli("clusters", "--db", db).exit_code == 0
    return db


line_bytes = st.one_of(
    st.binary(max_size=60).filter(lambda b: b"\n" not in b),
    st.builds(lambda t, junk: json.dumps({"text": t}).encode()[:-2] + junk + b'"}',
              st.text(max_size=30), st.binary(max_size=4).filter(lambda b: b"\n" not in b)),
    st.sampled_from([b'{"text":"caf\xe9 ok"}', b'{"hash":"zz"}', b'{"key":"doc1"}', b"\xff\xfe", b"[]", b"{}",
                     json.dumps({"text": TEXT}).encode(), b'{"text": 5}']),
)


@FUZZ
@given(lines=st.lists(line_bytes, min_size=1, max_size=6))
def test_fuzz_near_batch_answers_each_line(fuzz_index, lines):
    folder = fuzz_index.parent
    before = files_of(folder)
    result = cli("near", "--db", fuzz_index, "--batch", "-", input=b"\n".join(lines) + b"\n")
    assert result.exit_code in (0, 1), result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    answers = result.stdout.splitlines()
    assert len(answers) == sum(1 for line in lines if line.decode("utf-8", "replace").strip()), (lines, answers)
    assert files_of(folder) == before


@FUZZ
@given(key=st.sampled_from(["fingerprint", "store_text", "sketch", "clusters", "created_with", "jieba_version"]),
       value=st.one_of(st.text(max_size=40), st.sampled_from(["{}", "[]", "null", "1e999", '{"bins": -1}']),
                       st.builds(json.dumps, st.dictionaries(
                           st.sampled_from(["features", "ngram", "weights", "hash", "hmm", "version", "bins", "bits",
                                            "size_bits", "k", "representative", "documents", "at", "jaccard"]),
                           st.one_of(st.integers(-2**40, 2**40), st.text(max_size=8), st.booleans(), st.none(),
                                     st.floats(allow_nan=False))))),
       command=st.sampled_from([["near", "hello"], ["stats"], ["dupes"], ["integrity"], ["hash", "x"],
                                ["sql", "SELECT count(*) FROM documents"]]))
def test_fuzz_tampered_metadata(fuzz_index, tmp_path, key, value, command):
    db = tmp_path / "t.db"
    shutil.copy(fuzz_index, db)
    tamper(db, key, value)
    before = files_of(tmp_path)
    result = cli(*command, "--db", db)
    assert_documented(result, tmp_path, before)
    if result.exit_code and command[0] != "integrity":
        assert f"simhash_meta {key!r}" in result.stderr, result.stderr


@FUZZ
@given(option=st.sampled_from(["-k", "--jaccard", "--format", "--limit", "--plan"]),
       value=st.one_of(st.integers(-200, 200).map(str), st.floats(allow_nan=True).map(str), st.text(max_size=10)),
       command=st.sampled_from(["near", "dupes", "clusters"]))
def test_fuzz_option_values(fuzz_index, option, value, command):
    if command != "near" and option in ("--limit", "--plan"):
        option = "-k"
    args = [command, *(["hello"] if command == "near" else []), "--db", fuzz_index, option, value]
    before = files_of(fuzz_index.parent)
    result = cli(*args)
    if command == "clusters" and result.exit_code == 0:
        return  # it rewrote the clusters table, as asked
    assert_documented(result, fuzz_index.parent, before)
    if result.exit_code:
        assert result.exit_code == 2, (args, result.stderr)
        assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1, result.stderr


record = st.one_of(
    st.fixed_dictionaries({"id": st.one_of(st.text(max_size=8), st.integers(), st.none(), st.booleans()),
                           "text": st.one_of(st.text(max_size=80), st.integers(), st.none())}),
    st.dictionaries(st.text(max_size=6), st.text(max_size=10), max_size=3),
)


@FUZZ
@given(records=st.lists(record, min_size=1, max_size=5), garbage=st.binary(max_size=20))
def test_fuzz_jsonl_on_stdin(tmp_path, records, garbage):
    folder = tmp_path / "run"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    (folder / "kept.jsonl").write_text("precious\n", encoding="utf-8")
    stdin = b"".join(json.dumps(r).encode() + b"\n" for r in records) + garbage
    before = files_of(folder)
    added = cli("add", "-", "--db", folder / "new.db", input=stdin)
    assert_documented(added, folder, before)
    if added.exit_code == 1 and "nothing added" in added.stderr:
        assert not (folder / "new.db").exists()
    before = files_of(folder)
    kept = cli("dedup", "-", "-o", folder / "kept.jsonl", input=stdin)
    assert_documented(kept, folder, before)


@FUZZ
@given(pairs=st.lists(st.text(max_size=12), min_size=1, max_size=3))
def test_fuzz_sql_params(fuzz_index, pairs):
    result = cli("sql", "SELECT 1", "--db", fuzz_index, *[arg for p in pairs for arg in ("-p", p)])
    assert_documented(result, fuzz_index.parent, files_of(fuzz_index.parent))


@web_extra
@pytest.mark.slow
def test_fuzz_the_server(fuzz_index, tmp_path):
    """Random paths under our pages and random query strings: a page, a 400 or a 404, never a 500 or a traceback."""
    db = tmp_path / "f.db"
    shutil.copy(fuzz_index, db)
    paths = st.tuples(
        st.sampled_from(["/f/-/simhash/", "/f/-/simhash/clusters/", "/f/-/simhash/pair", "/f/-/simhash/search",
                         "/nodb/-/simhash/", "/f/-/simhash/calibrate", "/f/"]),
        st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
        st.dictionaries(st.sampled_from(["a", "b", "key", "text", "k", "page", "limit", "jaccard", "sql"]),
                        st.text(max_size=12), max_size=3),
    )
    with serving(db, tmp_path) as base:

        @settings(max_examples=40, deadline=None)
        @given(case=paths)
        def request(case):
            prefix, tail, query = case
            url = base + prefix + urllib.parse.quote(tail) + ("?" + urllib.parse.urlencode(query) if query else "")
            status, _ = get(url)
            assert status in (200, 302, 400, 404), (url, status)

        request()
    log = server_logs(tmp_path)
    assert "Traceback" not in log, log[-3000:]
    assert files_of(tmp_path).keys() >= {"f.db"}
    assert not (tmp_path / "f.db-wal").exists()


@pytest.mark.slow
def test_fuzz_replays_through_the_console_script_within_the_memory_bound(fuzz_index, tmp_path):
    """A sample of the cases above through `simq` by path: the same answers, peak memory under MEMORY_BOUND_MIB."""
    db = tmp_path / "r.db"
    shutil.copy(fuzz_index, db)
    tamper(db, "sketch", '{"bins": 2000000000, "bits": 8, "ngram": 5, "size_bits": 16, "version": 2}')
    before = files_of(tmp_path)
    for args, stdin, code in (
        (["near", "--db", fuzz_index, "--batch", "-"], b'{"text":"caf\xe9"}\n{"key":"doc1"}\n', 1),
        (["near", "hello", "--db", db], None, 1),
        (["dupes", "--db", db], None, 1),
        (["near", "x", "--db", fuzz_index, "-k", "65"], None, 2),
        (["hash", "-", "--db", fuzz_index], TEXT.encode(), 0),
        (["add", "-", "--db", tmp_path / "n.db"], b'{"x": 1}\n', 1),
    ):
        assert_clean(run(*args, cwd=tmp_path, stdin=stdin), code)
        assert files_of(tmp_path) == before, args


def test_an_empty_new_index_goes_only_while_no_other_process_has_it_open(tmp_path):
    """An add that skipped every input removes the file it made, but not one a second add (creating the same
    file at the same moment) has open: that add's documents would go with it."""
    from simhash_sqlite import Document, SimhashIndex
    from simhash_sqlite.cli.index_commands import _remove_index_file

    paths = [tmp_path / f"{name}.db" for name in ("alone", "shared", "filled")]
    for path in paths:
        SimhashIndex(path, create=True).close()
    with SimhashIndex(paths[2]) as index:
        index.add([Document("a", TEXT)])
    other = SimhashIndex(paths[1], readonly=True)  # another process's connection, having read the file
    try:
        assert len(other) == 0
        for path in paths:
            _remove_index_file(path)
        assert not paths[0].exists() and not Path(f"{paths[0]}-wal").exists()
        assert paths[1].exists() and len(other) == 0
    finally:
        other.close()
    assert paths[2].exists()
    with SimhashIndex(paths[2], readonly=True) as index:
        assert len(index) == 1
