"""simq's quick lane (simhash_sqlite/quick/lane.py) prints what the full command line prints, byte for byte, and
starts without typer, rich or numpy; where it does not answer, the full command does, the same."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from simhash_sqlite import Document, SimhashIndex, native
from simhash_sqlite.cli.app import app
from simhash_sqlite.quick import lane
from simhash_sqlite.quick.words import plain_table

pytestmark = pytest.mark.skipif(native.core() is None, reason="the quick lane needs the C core")

SIMQ = Path(sys.executable).parent / "simq"
WORDS = "the quick brown fox jumps over lazy dogs while a cat naps in warm afternoon sun by river bank".split()
# Modules the quick lane never imports (each a tenth or more of a start-up).
HEAVY = ("numpy", "typer", "click", "rich")


def both(argv: list[str]) -> tuple[tuple | None, tuple]:
    """((stdout, stderr, status) of the quick lane, or None where it hands the line on), and the full CLI's."""
    quick_out, quick_err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(quick_out), contextlib.redirect_stderr(quick_err):
        status = lane.run(argv)
    quick = None if status is None else (quick_out.getvalue(), quick_err.getvalue(), status)
    if status is None:
        assert quick_out.getvalue() == quick_err.getvalue() == ""  # handed on before printing a thing
    full_out, full_err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(full_out), contextlib.redirect_stderr(full_err):
        try:
            app(argv, prog_name="simq")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0
    return quick, (full_out.getvalue(), full_err.getvalue(), code)


def texts(rng: random.Random, n: int) -> list[str]:
    """Families of near-duplicates (a word or two changed), lengths across the short-text cut, a few blanks."""
    out = []
    while len(out) < n:
        base = [rng.choice(WORDS) for _ in range(rng.choice((3, 12, 40, 120, 300)))]
        for _ in range(rng.randint(1, 4)):
            copy = list(base)
            for _ in range(rng.randint(0, 3)):
                copy[rng.randrange(len(copy))] = rng.choice(WORDS)
            out.append(" ".join(copy) if rng.random() > 0.03 else "  ")
    return out[:n]


@pytest.fixture(params=["stored", "short texts", "jsonl lines"])
def index_of(request, tmp_path, monkeypatch):
    """An index of generated texts: stored, kept only as short texts' data, or read again from JSONL lines."""
    monkeypatch.chdir(tmp_path)
    rng = random.Random(34)
    made = texts(rng, 160)
    db = tmp_path / "index.db"
    if request.param == "jsonl lines":
        source = tmp_path / "docs.jsonl"
        source.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(made)))
        assert both(["add", "--db", str(db), str(source)])[1][2] == 0
    else:
        with SimhashIndex(db, create=True, store_text=request.param == "stored") as index:
            index.add(Document(f"d{i}", t) for i, t in enumerate(made))
    return db, made


@pytest.mark.slow
def test_near_prints_what_the_full_command_prints(index_of):
    db, made = index_of
    rng = random.Random(7)
    answered = 0
    for i in range(0, len(made), 3):
        k = rng.choice([0, 1, 3, 5, 8, 12, 12, 15, rng.randint(0, 64)])
        extra = rng.choice([[], [], ["--json"], ["--format", "jsonl"], ["--limit", "2"], ["--check"]])
        for argv in (["near", "--key", f"d{i}", "--db", str(db), "-k", str(k), *extra],
                     ["near", made[i] + " extra", f"--db={db}", "--k", str(k), *extra]):
            quick, full = both(argv)
            if quick is not None:
                answered += 1
                assert quick == full, argv
    assert both(["near", "--key", "nope", "--db", str(db)])[0] is None  # the full command's error
    assert answered >= len(made) // 3, "the quick lane answered too few of the searches"


@pytest.mark.slow
def test_hash_prints_what_the_full_command_prints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = random.Random(3)
    for text in [*texts(rng, 30), "春眠不觉晓，处处闻啼鸟", "x", "ﬁ ß İstanbul", "\x00", ""]:
        for extra in ([], ["--signed"], ["--json"], ["--format", "jsonl"], ["--format", "csv"]):
            quick, full = both(["hash", text, *extra] if not text.startswith("-") else ["hash", "--", text])
            assert quick is None or quick == full, (text, extra)
    assert both(["hash", "hello world"])[0] is not None
    with SimhashIndex(tmp_path / "ngram3.db", create=True, ngram=3, weights="count") as index:
        index.add([Document("a", "some text")])
    for text in [*texts(rng, 10), "ﬁ ß İstanbul", ""]:
        quick, full = both(["hash", text, "--db", "ngram3.db", "--signed"])
        assert quick is None or quick == full, text


def test_a_search_by_key_prints_what_the_full_command_prints(tmp_path, monkeypatch):
    """The fast lane's sample of the differential test above: one index, keys of each kind of answer."""
    monkeypatch.chdir(tmp_path)
    made = texts(random.Random(5), 40)
    with SimhashIndex(tmp_path / "index.db", create=True) as index:
        index.add(Document(f"d{i}", t) for i, t in enumerate(made))
    answered = 0
    for i, k in ((0, 12), (1, 3), (5, 0), (9, 15), (13, 12), (20, 40)):
        quick, full = both(["near", "--key", f"d{i}", "--db", "index.db", "-k", str(k)])
        answered += quick is not None
        assert quick is None or quick == full
    assert answered >= 3  # (k 40 and keys of long texts whose texts are not kept: the full command)


def test_hash_with_an_index_s_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with SimhashIndex(tmp_path / "simhash.db", create=True, ngram=4) as index:
        index.add([Document("a", "some text")])
    for argv in (["hash", "the quick brown fox"], ["hash", "春眠不觉晓，处处闻啼鸟", "--json"]):
        quick, full = both(argv)
        assert quick is not None and quick == full
        assert quick != both([*argv, "--db", "other.db"])[0]  # the defaults' fingerprint differs (ngram 5)


def test_the_lane_hands_on_what_it_does_not_answer(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for argv in (["hash"], ["hash", "a", "b"], ["hash", "-"], ["hash", "a", "--db"], ["hash", "a", "--nope"],
                 ["hash", "a", "--signed", "--signed"], ["near", "--key", "k", "--threshold", "0.9"],
                 ["near", "--key", "k", "--no-check"], ["near", "--key", "k", "-k", "x"], ["near", "--key", "-k"],
                 ["stats"], ["--version"], []):
        assert both(argv)[0] is None, argv


def test_near_file_prints_what_the_full_command_prints(tmp_path, monkeypatch):
    """--file: a text file read whole as UTF-8 is searched here (pipeline.sources.read_one's text); every other file
    (binary, another encoding, JSONL, a folder, missing, stdin) goes to the full command, with its error."""
    monkeypatch.chdir(tmp_path)
    made = texts(random.Random(11), 40)
    with SimhashIndex(tmp_path / "index.db", create=True, store_text=True) as index:
        index.add(Document(f"d{i}", t) for i, t in enumerate(made))
    files = {
        "plain.txt": made[3].encode(),
        "crlf.txt": made[5].replace(" ", "\r\n").encode() + b"\r\n",
        "bom.txt": b"\xef\xbb\xbf" + made[7].encode(),
        "zh.txt": "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。".encode(),
        "names.txt": b"plain.txt",
        "empty.txt": b"",
        "blank.txt": b" \n\t ",
        "latin1.txt": "caf\xe9 cr\xe8me".encode("latin-1"),
        "nul.txt": b"a\x00b",
        "late_nul.txt": made[9].encode() + b" " * 9000 + b"\x00",
        "docs.jsonl": b'{"text": "x"}\n',
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "folder").mkdir()
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")  # (opened, it would wait for a writer: the lane looks first)
    answered = 0
    for argv in [*(["near", "--file", name, "--db", "index.db"] for name in files),
                 ["near", "-f", "plain.txt", "--db", "index.db", "--json"], ["near", "--file=zh.txt", "--db=index.db"],
                 ["near", "-f", "plain.txt", "-k", "3", "--format", "jsonl", "--db", "index.db"]]:  # fmt: skip
        quick, full = both(argv)
        answered += quick is not None
        assert quick is None or quick == full, argv
    assert answered >= 6
    handed_on = [["--file", name] for name in ("folder", "missing.txt", "latin1.txt", "nul.txt", "docs.jsonl", "-")]
    if hasattr(os, "mkfifo"):
        assert lane._file_text("fifo") is None
    for argv in (*handed_on, ["--file", "plain.txt", "-f", "plain.txt"], ["hello", "--file", "plain.txt"]):
        assert both(["near", *argv, "--db", "index.db"])[0] is None, argv


def test_the_table_is_rich_s():
    from simhash_sqlite.cli import output

    rows = [["doc1", "3", "0.953", "-", "exact", "1.000"], ["a much longer key", "12", "0.812", "0.9", "distance", "-"]]
    columns = ["key", "distance", "similarity", "jaccard", "checked_by", "certainty"]
    drawn = io.StringIO()
    with contextlib.redirect_stdout(drawn):
        output.render([dict(zip(columns, row)) for row in rows], "table", sys.stdout, columns=columns, fold=["key"])
    assert plain_table(columns, rows) == drawn.getvalue()
    assert plain_table(["key"], [["wide 字"]]) is None  # rich measures those


def simq(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """The venv's simq as a user runs it, under -X importtime (its stderr lists every module imported)."""
    environment = {k: v for k, v in os.environ.items() if k not in lane.RICH_VARIABLES and k != lane.DB_VARIABLE}
    return subprocess.run([sys.executable, "-X", "importtime", str(SIMQ), *args], cwd=cwd, capture_output=True,
                          text=True, env={**environment, **env})


def imported(stderr: str) -> set[str]:
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_hash_near_by_key_and_near_of_a_file_start_without_numpy_typer_or_rich(tmp_path):
    with SimhashIndex(tmp_path / "index.db", create=True, store_text=True) as index:
        index.add(Document(f"d{i}", f"{' '.join(WORDS)} {i} {i * 7 % 5}") for i in range(50))
    (tmp_path / "query.txt").write_text(f"{' '.join(WORDS)} 1 2\n", encoding="utf-8")
    for args in (["hash", "some text to fingerprint"], ["hash", "with the index's settings", "--db", "index.db"],
                 ["near", "--key", "d1", "--db", "index.db"], ["near", "--file", "query.txt", "--db", "index.db"]):
        done = simq(args, tmp_path)
        assert done.returncode == 0, done.stderr
        heavy = sorted(name for name in imported(done.stderr) if name.split(".")[0] in HEAVY)
        assert heavy == [], f"simq {args[0]} imported {heavy[:8]}"
        # the same answer from the numpy reference and the full command line (the quick lane hands it on)
        reference = simq(args, tmp_path, SIMHASH_SQLITE_CORE="python")
        assert "numpy" in imported(reference.stderr)
        assert reference.returncode == 0 and reference.stdout == done.stdout


def on_a_terminal(args: list[str], cwd: Path, full: bool = False) -> tuple[int, bytes, set[str]]:
    """(exit status, what a 100-column terminal shows on stdout, modules imported) of simq run as a user runs it
    at a terminal: the venv's simq (the quick lane first), or with full the command line's own main()."""
    import fcntl
    import pty
    import struct
    import termios

    script = SIMQ
    if full:  # the same name as the venv's script, so click calls itself the same
        (cwd / "full").mkdir(exist_ok=True)
        script = cwd / "full" / "simq"
        script.write_text("from simhash_sqlite.cli import main\nmain()\n")
    environment = {k: v for k, v in os.environ.items() if k not in lane.RICH_VARIABLES and k != lane.DB_VARIABLE}
    environment.update(TERM="xterm-256color", COLUMNS="100", LINES="40")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    with open(cwd / "imports.txt", "w+b") as imports:  # (-X importtime's lines: a file, never a full pipe)
        done = subprocess.Popen([sys.executable, "-X", "importtime", str(script), *args], cwd=cwd, env=environment,
                                stdin=subprocess.DEVNULL, stdout=slave, stderr=imports)
        os.close(slave)
        shown = b""
        while True:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # (Linux: EIO once the terminal's last writer has gone)
                break
            if not chunk:
                break
            shown += chunk
        os.close(master)
        status = done.wait()
        imports.seek(0)
        return status, shown, imported(imports.read().decode())


def test_on_a_terminal_near_draws_the_full_command_s_table_without_numpy_or_typer(tmp_path):
    """At a terminal rich draws the table (its widths and styles), so the quick lane prints through the full
    command's own output.py: the same bytes on the terminal, without numpy, typer or click."""
    made = texts(random.Random(11), 60)
    with SimhashIndex(tmp_path / "index.db", create=True, store_text=True) as index:
        index.add(Document(f"d{i}", t) for i, t in enumerate(made))
    searches = (["near", "--key", "d0", "--db", "index.db"], ["near", "--key", "d3", "--db", "index.db", "-k", "3"],
                ["near", made[5] + " extra", "--db", "index.db", "--json"],
                ["near", "--key", "d7", "--db", "index.db", "-k", "0", "--format", "jsonl"])
    drew_a_table = False
    for args in searches:
        status, shown, modules = on_a_terminal(args, tmp_path)
        assert status == 0, shown
        loaded = sorted(name for name in modules if name.split(".")[0] in ("numpy", "typer", "click"))
        assert loaded == [], f"simq {args} imported {loaded[:8]}"
        assert (status, shown) == on_a_terminal(args, tmp_path, full=True)[:2], args
        drew_a_table |= "─".encode() in shown or "━".encode() in shown
    assert drew_a_table
    # hash prints plain text on a terminal too (print, as hash_command)
    status, shown, modules = on_a_terminal(["hash", "the quick brown fox"], tmp_path)
    assert status == 0 and not {"numpy", "typer", "rich"} & {name.split(".")[0] for name in modules}
    assert shown == on_a_terminal(["hash", "the quick brown fox"], tmp_path, full=True)[1]


@pytest.mark.parametrize("where", ["jsonl lines", "files"])
def test_candidates_whose_texts_a_line_or_a_file_holds_are_judged_exactly_here(tmp_path, monkeypatch, where):
    """A crawl added from JSONL (or a folder of files): the extension judges such candidates without their
    texts; the lane judges them again by the exact Jaccard, as native_near does, and answers the same bytes as
    the full command, and the venv's simq does so without numpy."""
    monkeypatch.chdir(tmp_path)
    rng = random.Random(41)
    families = []
    for f in range(12):
        base = [rng.choice(WORDS) for _ in range(rng.choice((30, 80, 200)))]
        family = [" ".join(base)]
        for _ in range(2):
            copy = list(base)
            copy[rng.randrange(len(copy))] = rng.choice(WORDS) + str(f)  # one word: J well above 0.8
            family.append(" ".join(copy))
        family.append(" ".join(base[: len(base) * 2 // 3]))  # a part: J near 0.67, within k of a few
        families.append(family)
    made = {f"f{f}c{c}": text for f, family in enumerate(families) for c, text in enumerate(family)}
    if where == "jsonl lines":
        (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"id": k, "text": t}) + "\n" for k, t in made.items()))
        source = "docs.jsonl"
    else:
        (tmp_path / "docs").mkdir()
        for key, text in made.items():
            (tmp_path / "docs" / f"{key}.txt").write_text(text)
        source = "docs"
    assert both(["add", "--db", "index.db", source])[1][2] == 0
    keys = _keys(tmp_path / "index.db")
    assert len(keys) == len(made)
    exact = 0
    for key in keys:
        for k in ("3", "12", "15"):
            quick, full = both(["near", "--key", key, "--db", "index.db", "-k", k, "--json"])
            assert quick is not None, (key, k)  # answered here, not handed on
            assert quick == full, (key, k)
            exact += sum(match["checked_by"] == "exact" for match in json.loads(quick[0]))
    assert exact >= 24  # the families' copies were judged by their texts
    done = simq(["near", "--key", keys[0], "--db", "index.db", "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert any(match["checked_by"] == "exact" for match in json.loads(done.stdout))
    heavy = sorted(name for name in imported(done.stderr) if name.split(".")[0] in HEAVY)
    assert heavy == [], f"simq near imported {heavy[:8]}"


def _keys(db: Path) -> list[str]:
    """The index's keys in the order added (add keeps a file's key as it names it)."""
    import apsw

    connection = apsw.Connection(str(db))
    try:
        return [key for (key,) in connection.execute("SELECT key FROM documents ORDER BY id")]
    finally:
        connection.close()
