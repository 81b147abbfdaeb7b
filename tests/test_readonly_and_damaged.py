"""Indexes users cannot write (another user's, a read-only folder) and damaged index files, through
the real simq script run without privileges, CliRunner and the library."""

import json
import os
import random

import pytest
from test_cli import ENGLISH, assert_clean_error, simq
from unprivileged import python_unprivileged, run_unprivileged

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.errors import DamagedIndex
from simhash_sqlite.store.database import quick_check
from simhash_sqlite.store.integrity import integrity_check, problems

READ_COMMANDS = [
    ["stats"],
    ["stats", "--json"],
    ["near", ENGLISH[:120]],
    ["near", "--key", "a.txt"],
    ["near", "--file", "b.txt"],
    ["dupes"],
    ["dupes", "--format", "jsonl"],
    ["clusters"],
    ["sql", "SELECT count(*) FROM documents"],
    ["integrity"],
    ["integrity", "--json"],
    ["explain", "a.txt", "b.txt"],
    ["calibrate"],
    ["hash", "some text to fingerprint"],
]


@pytest.fixture
def locked_folder(tmp_path):
    """An index of three texts in a folder that is then made read-only (chmod 555)."""
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "a.txt").write_text(ENGLISH)
    (folder / "b.txt").write_text(ENGLISH.replace("library", "module"))
    (folder / "c.txt").write_text("A different text altogether, about gardening and tomatoes in the spring sun.")
    with SimhashIndex(folder / "idx.db", create=True) as index:
        index.add(Document(name, (folder / name).read_text()) for name in ("a.txt", "b.txt", "c.txt"))
    os.chmod(folder, 0o555)
    yield folder
    os.chmod(folder, 0o755)


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_every_read_command_works_in_a_folder_the_user_cannot_write(locked_folder, command):
    before = sorted(os.listdir(locked_folder))
    run = run_unprivileged([*command, "--db", "idx.db"], cwd=locked_folder)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "error" not in run.stderr
    assert sorted(os.listdir(locked_folder)) == before  # no -wal, -shm or journal left (none could be made)


def test_reads_find_what_the_index_holds_there(locked_folder):
    near = run_unprivileged(["near", "--key", "a.txt", "--json", "--db", "idx.db"], cwd=locked_folder)
    assert [m["key"] for m in json.loads(near.stdout)] == ["b.txt"]
    clusters = run_unprivileged(["clusters", "--format", "jsonl", "--db", "idx.db"], cwd=locked_folder)
    assert json.loads(clusters.stdout)["members"] == ["a.txt", "b.txt"]
    assert "Not saved: the index is read-only here" in clusters.stderr


def test_writing_there_fails_cleanly(locked_folder):
    run = run_unprivileged(["rm", "a.txt", "--db", "idx.db"], cwd=locked_folder)
    assert run.returncode == 1 and "read-only" in run.stderr and "Traceback" not in run.stderr


def test_the_library_reads_it_too(locked_folder):
    code = (
        "from simhash_sqlite import SimhashIndex\n"
        "from simhash_sqlite.store.integrity import problems\n"
        "with SimhashIndex('idx.db') as index:\n"
        "    print(len(index), [m.key for m in index.near(key='a.txt', k=12)])\n"
        "print(problems('idx.db'))\n"
    )
    run = python_unprivileged(code, cwd=locked_folder)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:2] == ["3 ['b.txt']", "[]"]


def test_a_wal_with_changes_is_read_or_refused_never_missed(tmp_path):
    """With its -shm file there, the -wal's changes are read; without it (a copy of the index and its
    -wal), an immutable reader would miss them, so the reader is told so instead."""
    import shutil

    folder, copy = tmp_path / "shared", tmp_path / "copy"
    folder.mkdir()
    copy.mkdir()
    writer = SimhashIndex(folder / "idx.db", create=True)  # kept open: its WAL is not folded in yet
    writer.conn.pragma("wal_autocheckpoint", 0)
    writer.add([Document("a.txt", ENGLISH)])
    for name in ("idx.db", "idx.db-wal"):
        shutil.copyfile(folder / name, copy / name)
    os.chmod(folder, 0o555)
    os.chmod(copy, 0o555)
    try:
        live = run_unprivileged(["stats", "--json", "--db", "idx.db"], cwd=folder)
        copied = run_unprivileged(["stats", "--db", "idx.db"], cwd=copy)
    finally:
        os.chmod(folder, 0o755)
        os.chmod(copy, 0o755)
        writer.close()
    assert live.returncode == 0 and json.loads(live.stdout)["documents"] == 1, live.stderr
    assert copied.returncode == 1 and "holds changes not yet in the file" in copied.stderr, copied.stderr


# A writer killed inside a rollback-journal transaction: its uncommitted pages partly in the file, the hot journal
# beside it holding what they were.
_KILLED_WRITER = """
import sys, time, apsw
conn = apsw.Connection(sys.argv[1])
conn.pragma("cache_size", 1)  # (pages spill into the file before the commit)
conn.execute("BEGIN IMMEDIATE")
conn.execute("CREATE TABLE junk(x)")
conn.execute("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 3000) "
             "INSERT INTO junk SELECT randomblob(1000) FROM r")
conn.execute("UPDATE documents SET length = length + 1")
print("written", flush=True)
time.sleep(60)
"""


def test_a_killed_writers_journal_is_rolled_back_or_refused_never_read_as_it_lies(tmp_path):
    """A hot -journal: a reader that can write the folder rolls it back (what SQLite does for any connection
    that can), one that cannot is told why; an immutable reader would read the unfinished pages."""
    import subprocess
    import sys

    import apsw

    folder = tmp_path / "shared"
    folder.mkdir()
    db = folder / "idx.db"
    with SimhashIndex(db, create=True) as index:
        index.add([Document("a.txt", ENGLISH)])
    conn = apsw.Connection(str(db))
    conn.pragma("journal_mode", "delete")  # (a new file is in this mode until it turns to WAL)
    conn.close()
    writer = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(db)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline() == "written\n"
    writer.kill()
    writer.wait()
    assert (folder / "idx.db-journal").stat().st_size > 0
    os.chmod(folder, 0o555)
    try:
        locked = run_unprivileged(["stats", "--json", "--db", "idx.db"], cwd=folder)
    finally:
        os.chmod(folder, 0o755)
    assert locked.returncode == 1 and "Traceback" not in locked.stderr, locked.stderr
    assert locked.stderr.startswith("error: ") and "did not finish" in locked.stderr, locked.stderr
    assert (folder / "idx.db-journal").stat().st_size > 0  # left as it was
    owner = run_unprivileged(["stats", "--json", "--db", "idx.db"], cwd=folder)
    assert owner.returncode == 0, owner.stderr
    assert json.loads(owner.stdout)["documents"] == 1
    assert not (folder / "idx.db-journal").exists()  # rolled back: the file as it was committed
    assert problems(db) == []
    with SimhashIndex(db, readonly=True) as index:
        assert not index.conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'junk'").fetchall()


def _damaged(tmp_path, pages=3):
    """An index of 3000 texts with random bytes written over `pages` pages in the middle."""
    path = tmp_path / "damaged.db"
    rnd = random.Random(0)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi".split()
    with SimhashIndex(path, create=True) as index:
        index.add(Document(f"doc{i}", " ".join(rnd.choice(words) for _ in range(60))) for i in range(3000))
    size = os.path.getsize(path)
    middle = size // 4096 // 2
    with open(path, "r+b") as handle:
        for page in range(middle, middle + pages):
            handle.seek(page * 4096)
            handle.write(random.Random(page).randbytes(4096))
    return path


def test_check_reports_damage_in_its_table_and_json(runner, tmp_path):
    path = _damaged(tmp_path)
    table = simq(runner, "integrity", "--db", path)
    assert table.exit_code == 1
    assert "integrity_check" in table.stdout and "FAILED" in table.stdout and "page" in table.stdout
    assert "sqlite3 FILE" not in table.output and "sqlite3" in table.stdout  # the recovery names the file
    as_json = simq(runner, "integrity", "--db", path, "--json")
    assert as_json.exit_code == 1
    report = json.loads(as_json.stdout)
    failed = {c["name"]: c["detail"] for c in report["checks"] if not c["ok"]}
    assert report["ok"] is False and "page" in failed["integrity_check"] and str(path) in failed["integrity_check"]
    assert any("integrity_check" in p for p in problems(path))  # the library says so instead of raising


def test_writing_commands_refuse_a_damaged_file_and_leave_it_as_it_was(runner, tmp_path):
    path = _damaged(tmp_path)
    new = tmp_path / "new.txt"
    new.write_text(ENGLISH)
    before = path.read_bytes()
    for command in (["add", new], ["rm", "doc1"], ["rm", "--glob", "doc*"], ["clusters"]):
        result = simq(runner, *command, "--db", path)
        assert_clean_error(result, "is damaged")
        assert "simq integrity" in result.stderr and ".dump" in result.stderr
    assert path.read_bytes() == before
    with pytest.raises(DamagedIndex):
        with SimhashIndex(path) as index:
            index.add([Document("x", ENGLISH)])


def test_the_recovery_the_message_gives_works(tmp_path):
    import shutil
    import subprocess

    if shutil.which("sqlite3") is None:
        pytest.skip("no sqlite3 command-line shell to follow the recovery with")
    path = _damaged(tmp_path, pages=2)
    hint = integrity_check(path).failed[0].detail
    recipe = hint[hint.index("(sqlite3"): hint.index(" | sqlite3 recovered.db") + len(" | sqlite3 recovered.db")]
    subprocess.run(recipe, shell=True, cwd=tmp_path, check=True, capture_output=True)
    recovered = tmp_path / "recovered.db"
    assert problems(recovered) == []
    with SimhashIndex(recovered) as index:
        assert 0 < len(index) <= 3000
        index.add([Document("new", ENGLISH)])  # writable again


def test_quick_check_is_bounded_in_time(tmp_path):
    with SimhashIndex(tmp_path / "fine.db", create=True) as index:
        rnd = random.Random(1)
        index.add_fingerprints((f"k{i}", rnd.getrandbits(64)) for i in range(50_000))
        assert quick_check(index.conn) == []
        assert quick_check(index.conn, seconds=0) == []  # out of time at once: no verdict, no error
        index.add([Document("after", ENGLISH)])  # the connection is fine afterwards
    path = _damaged(tmp_path)
    with SimhashIndex(path) as index:
        assert quick_check(index.conn)
