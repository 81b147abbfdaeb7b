"""simq serve beside other SQLite users of the same file: the stock sqlite3 shell (Debian's
/usr/bin/sqlite3) reading the index while the review server writes labels, then a SIGKILL of the server
and its worker; and simq add writing beside a read-only server. Nothing acknowledged is lost, no page
answers 500. (The slow lane: servers; bench/foreign_reads.py runs 20 rounds of the first.)"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import time
import urllib.parse

import pytest
from web_helpers import SIMQ, free_port, serving, stored_index

from simhash_sqlite import SimhashIndex
from simhash_sqlite.store.integrity import integrity_check
from simhash_sqlite.store.labels import LABELS, read_labels

SQLITE3 = shutil.which("sqlite3")
pytestmark = [
    pytest.mark.skipif(SQLITE3 is None, reason="needs the sqlite3 shell (Debian: apt-get install sqlite3)"),
    pytest.mark.skipif(not __import__("importlib").util.find_spec("datasette"), reason="needs the web extra"),
]


def request(port: int, method: str, path: str, body: str | None = None, headers: dict | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.headers, response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def foreign_read(db, sql: str = "select count(*) from labels") -> str:
    done = subprocess.run([SQLITE3, str(db), sql], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def start_review(db, port: int) -> subprocess.Popen:
    """simq serve --review in a process group of its own (so that one SIGKILL takes its worker too)."""
    process = subprocess.Popen([*SIMQ, "serve", "--db", str(db), "--port", str(port), "--review"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while True:
        try:
            if request(port, "GET", "/-/versions.json")[0] == 200:
                return process
        except OSError:
            pass
        assert process.poll() is None and time.monotonic() < deadline, "simq serve --review did not start"
        time.sleep(0.2)


def test_labels_survive_a_sqlite3_shell_reading_the_index_and_a_sigkill(tmp_path):
    db = tmp_path / "index.db"
    keys = [d.key for d in stored_index(db)]
    rng = random.Random(5)
    acknowledged: dict[tuple[str, str], str] = {}
    for _ in range(2):  # rounds: each server killed, the next started on what it left
        port = free_port()
        process = start_review(db, port)
        try:
            base = "/index/-/simhash"
            _, headers, page = request(port, "GET", f"{base}/pair?" + urllib.parse.urlencode({"a": keys[0],
                                                                                             "b": keys[1]}))
            cookie = next(c.split(";")[0] for c in headers.get_all("set-cookie") if c.startswith("ds_csrftoken="))
            token = re.search(r'name="csrftoken" value="([^"]+)"', page).group(1)
            for _ in range(2):
                for _ in range(4):
                    a, b = sorted(rng.sample(keys, 2))
                    label = rng.choice(LABELS)
                    status, _, text = request(
                        port, "POST", f"{base}/label", urllib.parse.urlencode({"a": a, "b": b, "label": label,
                                                                               "csrftoken": token}),
                        {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie})
                    assert status == 303, text
                    acknowledged[(a, b)] = label
                foreign_read(db)  # the shell opens, reads and closes the file: it must find it locked
                assert all(os.path.exists(f"{db}{end}") for end in ("-wal", "-shm"))  # the live WAL stays
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        assert integrity_check(db).ok
        with SimhashIndex(db, readonly=True) as index:
            stored = {(x.first, x.second): x.label for x in read_labels(index.conn)}
        assert {pair: stored.get(pair) for pair in acknowledged} == acknowledged


def test_a_read_only_server_answers_after_simq_add_and_a_shell_beside_it(tmp_path):
    db = tmp_path / "index.db"
    docs = stored_index(db)
    new = tmp_path / "new"
    new.mkdir()
    with serving(db, tmp_path) as server:
        port = int(server.rsplit(":", 1)[1])
        base = "/index/-/simhash"
        pair = urllib.parse.urlencode({"a": docs[0].key, "b": docs[1].key})
        for n in range(3):
            for path in (f"{base}/pair?{pair}", f"{base}/search?key={urllib.parse.quote(docs[0].key)}",
                         f"{base}/clusters"):
                status, _, text = request(port, "GET", path)
                assert status == 200, (n, path, text[-300:])
            assert foreign_read(db, "select count(*) from documents") == str(len(docs) + n)
            text_file = new / f"added{n}.txt"
            text_file.write_text(f"a text added while the server runs, number {n}: " + docs[n].text[:400])
            added = subprocess.run([*SIMQ, "add", "--db", str(db), str(text_file)], capture_output=True, text=True,
                                   timeout=120, cwd=tmp_path)
            assert added.returncode == 0, added.stderr
            query = urllib.parse.urlencode({"sql": "select count(*) as n from documents", "_shape": "array"})
            status, _, text = request(port, "GET", f"/index.json?{query}")
            assert status == 200, text[-300:]
            assert json.loads(text) == [{"n": len(docs) + n + 1}]
            status, _, text = request(port, "GET", "/index/documents.json?_shape=array&_size=max")
            assert status == 200 and "malformed" not in text, text[-300:]
            assert len(json.loads(text)) == len(docs) + n + 1
    assert integrity_check(db).ok
