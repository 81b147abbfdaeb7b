"""Hostile and odd input: every case ends in a message and an exit code, never a traceback or a damaged index."""

import json
import os
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli import ENGLISH, assert_clean_error, simq
from unprivileged import run_unprivileged

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.pipeline import sources
from simhash_sqlite.store.integrity import problems


def no_traceback(result):
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output


def test_odd_files_in_a_folder(runner, db_path, tmp_path):
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "with space é 中文.txt").write_text(ENGLISH)
    os.mkfifo(folder / "pipe")  # reading it would block forever
    os.symlink(folder / "nowhere", folder / "broken.txt")
    (folder / os.fsdecode(b"caf\xe9.txt")).write_text("a name that is not UTF-8")
    (folder / "empty.txt").write_bytes(b"")
    (folder / "late_nul.txt").write_bytes(b"text " * 4000 + b"\x00 more text")  # NUL after the sniffed part
    (folder / "one_line.txt").write_text("word " * 1_000_000)  # a 5 MB line
    result = simq(runner, "add", "--db", db_path, folder)
    no_traceback(result)
    assert result.exit_code == 0  # found in a folder walk: skipped with a reason, not a failure
    for fragment in ("pipe: not a regular file", "broken.txt: broken symbolic link", "not valid UTF-8"):
        assert fragment in result.stderr
    assert "4 added" in result.stdout and "3 skipped" in result.stdout and "1 without features" in result.stdout
    with SimhashIndex(db_path) as index:
        assert index.get(os.path.normpath(folder / "with space é 中文.txt")) is not None
    named = simq(runner, "add", "--db", db_path, folder / "pipe", folder / "broken.txt")
    assert named.exit_code == 1 and "2 skipped" in named.stdout  # named inputs that fail: exit 1
    assert problems(db_path) == []


def test_unreadable_files(db_path, tmp_path):
    """chmod 000 does not stop root: the add runs without privileges (see unprivileged.py), which
    works wherever the clone sits, a private folder included."""
    locked = tmp_path / "locked.txt"
    locked.write_text("secret text")
    os.chmod(locked, 0)
    try:
        run = run_unprivileged(["add", "--db", db_path, locked], cwd=tmp_path)
    finally:
        os.chmod(locked, 0o600)
    assert run.returncode == 1 and "locked.txt: Permission denied" in run.stderr and "Traceback" not in run.stderr
    assert not db_path.exists()  # every input skipped: no index is left


def test_encoding_policies(runner, db_path, tmp_path):
    latin = tmp_path / "latin.txt"
    latin.write_bytes("déjà vu, café crème".encode("latin-1"))
    result = simq(runner, "add", "--db", db_path, latin)
    assert result.exit_code == 1 and "not utf-8 (byte 0xe9 at offset 1)" in result.stderr
    for policy in ("replace", "ignore", "backslashreplace"):
        assert simq(runner, "add", "--db", db_path, "--errors", policy, latin).exit_code == 0
    assert simq(runner, "add", "--db", db_path, "--encoding", "latin-1", latin).exit_code == 0
    utf16 = tmp_path / "u16.txt"
    utf16.write_text(ENGLISH, encoding="utf-16")  # has NUL bytes, so it reads as binary unless told
    assert "binary" in simq(runner, "add", "--db", db_path, utf16).stderr
    assert simq(runner, "add", "--db", db_path, "--encoding", "utf-16", utf16).exit_code == 0
    assert_clean_error(simq(runner, "add", "--db", db_path, "--encoding", "klingon", latin), "unknown encoding", 2)
    assert_clean_error(simq(runner, "add", "--db", db_path, "--errors", "surrogateescape", latin), "errors must be", 2)
    assert problems(db_path) == []


def test_jsonl_repeated_ids_odd_lines_and_long_lines(runner, db_path, tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "MAX_RECORD_BYTES", 1000)
    data = tmp_path / "d.jsonl"
    lines = [
        json.dumps({"id": "a", "text": "first version of a"}),
        json.dumps({"id": "b", "text": "text with a \u0000 NUL inside"}),
        json.dumps({"id": "a", "text": "second version of a"}),
        '{"id": "c", "text": "lone \\ud800 surrogate"}',
        '{"id": "d", "text": "raw \x00 NUL byte"}',
        "[" * 100_000,
        json.dumps({"id": "e", "text": "x" * 5000}),  # longer than the (lowered) line limit
        json.dumps({"id": "f", "text": "after the long line"}),
    ]
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = simq(runner, "add", "--db", db_path, data)
    no_traceback(result)
    assert result.exit_code == 1
    assert "d.jsonl:3: id 'a' again (first at" in result.stderr and "the first record is kept" in result.stderr
    assert "d.jsonl:4" in result.stderr and "surrogate" in result.stderr
    assert "d.jsonl:5: not JSON" in result.stderr
    assert "d.jsonl:6" in result.stderr
    assert "d.jsonl:7: line longer than" in result.stderr
    assert "1 repeated id" in result.stdout and "1 repeated ids" not in result.stdout
    with SimhashIndex(db_path) as index:
        assert sorted(index.keys()) == ["a", "b", "f"]
        assert index.get("a").fingerprint == index.fingerprint("first version of a")
    assert problems(db_path) == []


def mount_tmpfs(path, options):
    path.mkdir(exist_ok=True)
    run = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if run.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {run.stderr.strip()}")


def test_full_disk_keeps_every_committed_batch(runner, tmp_path):
    disk = tmp_path / "small"
    mount_tmpfs(disk, "size=256k")
    try:
        data = tmp_path / "d.jsonl"
        data.write_text("".join(json.dumps({"id": i, "text": f"{ENGLISH} {i}"}) + "\n" for i in range(5000)))
        db = disk / "i.db"
        result = simq(runner, "add", "--db", db, "--batch-size", "100", "--progress-json", data)
        assert_clean_error(result, "is full")
        committed = [json.loads(line)["documents"] for line in result.stderr.splitlines() if line.startswith("{")]
        assert committed  # some batches went in before the disk filled up
        assert problems(db) == []
        with SimhashIndex(db) as index:
            assert len(index) == committed[-1]
            assert simq(runner, "near", "--db", db, "--key", "0", "--k", "0").exit_code == 0
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_read_only_media_can_be_searched_but_not_written(runner, tmp_path):
    disk = tmp_path / "media"
    mount_tmpfs(disk, "size=4m")
    try:
        db = disk / "i.db"
        (tmp_path / "a.txt").write_text(ENGLISH)
        assert simq(runner, "add", "--db", db, tmp_path / "a.txt").exit_code == 0
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        assert "1 unchanged" in simq(runner, "add", "--db", db, tmp_path / "a.txt").stdout  # nothing to write
        (tmp_path / "b.txt").write_text("a new text to add")
        assert_clean_error(simq(runner, "add", "--db", db, tmp_path / "b.txt"), "read-only")
        assert_clean_error(simq(runner, "rm", "--db", db, "x"), "read-only")
        result = simq(runner, "near", "--db", db, ENGLISH, "--k", "0", "--json")
        assert result.exit_code == 0 and len(json.loads(result.stdout)) == 1
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_truncated_and_corrupted_index_files(runner, tmp_path):
    source = tmp_path / "good.db"
    with SimhashIndex(source, create=True) as index:
        index.add(Document(f"k{i}", f"{ENGLISH} number {i}") for i in range(1500))
    size = source.stat().st_size
    damaged = tmp_path / "bad.db"
    cases = [("truncate", n) for n in (50, 4096, size // 2)]
    cases += [("garbage", offset) for offset in (20, 100, 3 * 4096, size // 2)]
    errors = 0
    for how, where in cases:
        shutil.copyfile(source, damaged)
        with open(damaged, "r+b") as handle:
            if how == "truncate":
                handle.truncate(where)
            else:
                handle.seek(where)
                handle.write(os.urandom(512))
        for command in (["stats"], ["near", ENGLISH, "--k", "64", "--limit", "5"], ["add", str(tmp_path / "new.txt")]):
            (tmp_path / "new.txt").write_text(f"new text {how} {where}")
            result = simq(runner, command[0], "--db", damaged, *command[1:])
            no_traceback(result)
            if result.exit_code != 0:
                errors += 1
                assert_clean_error(result, "")
                assert any(w in result.stderr for w in ("damaged", "not a SQLite", "not a simhash")), result.stderr
    assert errors >= 10  # most damage is noticed (garbage in a page no command reads can go unseen)


@st.composite
def jsonl_lines(draw):
    kind = draw(st.sampled_from(["record", "json", "bytes"]))
    if kind == "record":
        record = {"id": draw(st.one_of(st.text(max_size=20), st.integers(), st.none(), st.booleans())),
                  "text": draw(st.one_of(st.text(max_size=200), st.integers(), st.none()))}
        return json.dumps(record, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    if kind == "json":
        nested = st.recursive(st.none() | st.text(max_size=5), lambda c: st.lists(c, max_size=3))
        return json.dumps(draw(nested)).encode()
    return draw(st.binary(max_size=200)).replace(b"\n", b" ")


@given(
    files=st.lists(st.binary(max_size=3000), max_size=4),
    lines=st.lists(jsonl_lines(), max_size=12),
    store_text=st.booleans(),
)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fuzz_random_bytes_and_jsonl(runner, tmp_path_factory, files, lines, store_text):
    folder = tmp_path_factory.mktemp("fuzz")
    inputs = []
    for i, content in enumerate(files):
        path = folder / f"f{i}.txt"
        path.write_bytes(content)
        inputs.append(path)
    data = folder / "data.jsonl"
    data.write_bytes(b"\n".join(lines) + b"\n")
    inputs.append(data)
    db = folder / "i.db"
    flag = "--store-text" if store_text else "--no-store-text"
    result = simq(runner, "add", "--db", db, flag, *inputs)
    no_traceback(result)
    assert result.exit_code in (0, 1)
    for line in result.stderr.splitlines():
        assert line.startswith(("skipped", "warning", "error:")) or not line.strip(), line
    if result.exit_code == 0:
        assert "added" in result.stdout
    if "nothing added" in result.stderr:  # every input skipped: no index is left
        assert not db.exists()
    else:
        assert problems(db) == []
    before = stored_rows(db)
    again = simq(runner, "add", "--db", db, *inputs)  # the same input again leaves the same index
    no_traceback(again)
    assert stored_rows(db) == before
    if "added" in again.stdout:  # repeated ids too: the first record stays, so the second add is a no-op
        assert " 0 added, 0 updated" in again.stdout


def stored_rows(db):
    if not db.exists():
        return None
    with SimhashIndex(db) as index:
        return sorted(index.conn.execute("SELECT key, fingerprint, content_hash, text FROM documents"))


def test_ids_with_markup_control_characters_and_nul(runner, db_path, tmp_path):
    data = tmp_path / "ids.jsonl"
    records = [{"id": "[/]x", "text": ""}, {"id": "tab\there\x1esep", "text": ""}, {"id": "nul\u0000id", "text": "t"}]
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = simq(runner, "add", "--db", db_path, data)
    no_traceback(result)
    assert result.exit_code == 1 and "ids.jsonl:3: the id contains a NUL character" in result.stderr
    assert "[/]x: no features" in result.stderr and "tab\\there\\x1esep: no features" in result.stderr
    lines = [line for line in result.stderr.splitlines() if "shorter than" not in line]  # the short-text warning
    assert len(lines) == 4  # one line per message, and the error line
    assert lines[-1].startswith("error: 1 input was skipped")
    with SimhashIndex(db_path) as index:
        assert sorted(index.keys()) == ["[/]x", "tab\there\x1esep"]
        with pytest.raises(Exception, match="NUL"):
            index.remove(["a\x00b"])


# -- requests to simq serve from elsewhere (the server itself: tests/test_web_origin.py) --------------


def _scope(method: str, host: bytes | None, port: int = 8001, **headers: bytes) -> dict:
    pairs = [(b"host", host)] if host is not None else []
    pairs += [(name.replace("_", "-").encode(), value) for name, value in headers.items()]
    return {"type": "http", "method": method, "scheme": "http", "server": ("127.0.0.1", port), "headers": pairs}


@given(host=st.binary(max_size=40), origin=st.binary(max_size=40), site=st.binary(max_size=20),
       method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "HEAD"]))
@settings(max_examples=300, deadline=None)
def test_fuzz_host_origin_and_fetch_site_headers(host, origin, site, method):
    """Any bytes in Host, Origin and Sec-Fetch-Site: an answer, never an exception, and only the loopback
    names of the server's port, posted from exactly its own origin, pass."""
    from simhash_sqlite.web.same_origin import allowed_hosts, refusal

    why = refusal(_scope(method, host, origin=origin, sec_fetch_site=site))
    name = host.decode("latin-1").strip().lower()
    if why is None:
        assert name in allowed_hosts(8001)
        if method not in ("GET", "HEAD"):
            assert origin.decode("latin-1").strip().lower() == f"http://{name}"
            assert site.decode("latin-1").strip().lower() in ("", "same-origin")


@pytest.mark.parametrize(("method", "host", "headers", "refused"), [
    ("GET", b"127.0.0.1:8001", {}, False),
    ("GET", b"localhost:8001", {}, False),
    ("GET", b"[::1]:8001", {}, False),
    ("GET", b"evil.example:8001", {}, True),  # DNS rebinding: the attacker's name
    ("GET", b"127.0.0.1:8002", {}, True),
    ("GET", b"127.0.0.1", {}, True),  # port 80 only
    ("GET", None, {}, True),
    ("POST", b"127.0.0.1:8001", {"origin": b"http://127.0.0.1:8001", "sec_fetch_site": b"same-origin"}, False),
    ("POST", b"localhost:8001", {"origin": b"http://localhost:8001"}, False),
    ("POST", b"127.0.0.1:8001", {}, False),  # no browser: the CSRF token decides (review.py)
    ("POST", b"127.0.0.1:8001", {"origin": b"http://localhost:8001"}, True),
    ("POST", b"127.0.0.1:8001", {"origin": b"http://127.0.0.1:8099"}, True),  # same site, another origin
    ("POST", b"127.0.0.1:8001", {"origin": b"null"}, True),
    ("POST", b"127.0.0.1:8001", {"origin": b"https://127.0.0.1:8001"}, True),
    ("POST", b"127.0.0.1:8001", {"sec_fetch_site": b"same-site"}, True),
    ("POST", b"127.0.0.1:8001", {"sec_fetch_site": b"cross-site"}, True),
    ("POST", b"127.0.0.1:8001", {"sec_fetch_site": b"none"}, True),
    ("DELETE", b"127.0.0.1:8001", {"origin": b"http://evil.example"}, True),
])
def test_cross_site_and_rebinding_requests_are_refused(method, host, headers, refused):
    from simhash_sqlite.web.same_origin import refusal

    assert (refusal(_scope(method, host, **headers)) is not None) == refused


def test_a_server_on_another_address_checks_origins_not_names():
    """Bound to a public address (read-only simq serve --host 0.0.0.0), the names it is reached by are
    the user's to choose: any Host, but a POST still only from the origin it was sent to."""
    from simhash_sqlite.web.same_origin import refusal

    public = {**_scope("GET", b"search.example.org"), "server": ("10.0.0.5", 8001)}
    assert refusal(public) is None
    post = {**_scope("POST", b"search.example.org", origin=b"http://evil.example"), "server": ("10.0.0.5", 8001)}
    assert refusal(post) is not None


def test_an_in_process_client_has_no_port_and_no_host_to_check():
    """Datasette's own client and httpx's ASGI transport give a server without a port: no socket, so no page of
    another site reaches it; a cross-origin POST is still refused."""
    from simhash_sqlite.web.same_origin import refusal

    assert refusal({**_scope("GET", b"localhost"), "server": ("127.0.0.1", None)}) is None
    post = {**_scope("POST", b"localhost", origin=b"http://evil.example"), "server": ("127.0.0.1", None)}
    assert refusal(post) is not None


# -- another SQLite user of the same file (the server's two processes: tests/test_web_locks.py) ---------


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="needs the sqlite3 shell")
def test_a_sqlite3_shell_beside_our_connections_finds_the_file_locked(tmp_path):
    """A second open of the index in the same process must not drop the first connection's locks (a
    close of any descriptor of the file drops all of the process's POSIX locks on it): else the shell,
    finding the file unlocked, removes the live WAL as it closes and what is written next is lost."""
    db = tmp_path / "index.db"
    with SimhashIndex(db, create=True) as writer:
        writer.add([Document(f"first{i}", f"the first batch of texts, number {i} of them") for i in range(5)])
        with SimhashIndex(db, readonly=True) as reader:  # opened and closed while the writer holds the file
            assert len(reader) == 5
        shell = subprocess.run(["sqlite3", str(db), "select count(*) from documents"], capture_output=True,
                               text=True, timeout=60)
        assert shell.returncode == 0 and shell.stdout.strip() == "5"
        assert os.path.exists(f"{db}-wal") and os.path.exists(f"{db}-shm")
        writer.add([Document(f"second{i}", f"the second batch of texts, number {i} of them") for i in range(5)])
    with SimhashIndex(db, readonly=True) as index:
        assert len(index) == 10
