"""Labels beside another SQLite: rounds of `simq serve --review` writing labels while the stock `sqlite3`
shell reads the index, each round ended by a SIGKILL of the server and its worker process; after each
kill every label the server acknowledged (HTTP 303) must be in the file, and the file must be whole.

    .venv/bin/python bench/foreign_reads.py --rounds 20

A round: start the server (its own process group), read a pair page for the CSRF cookie and token,
post --labels labels, read the index with `sqlite3 INDEX 'select count(*) from labels'` (a reader that
takes the -wal and -shm files away as it closes when it finds the file unlocked), post --labels more,
read again, then SIGKILL the group. Before the fix, the server process held Datasette's sqlite3 and
apsw's SQLite on the same file, each close by one dropped the other's POSIX locks, the shell removed
the live WAL, and the labels posted after it went into a deleted file: lost at the kill.
Exits 1 when a label is lost or the file is damaged.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

import apsw
from common import SIMQ, print_machine, yes_no

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.store.integrity import integrity_check
from simhash_sqlite.store.labels import LABELS


def build(db: Path, documents: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 8))) for _ in range(2000)]
    docs = [Document(f"doc{i:05d}", " ".join(rng.choices(words, k=80))) for i in range(documents)]
    with SimhashIndex(db, create=True, store_text=True) as index:
        index.add(docs)
    return [d.key for d in docs]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def request(port: int, method: str, path: str, body: str | None = None, headers: dict | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def start(db: Path, port: int) -> subprocess.Popen:
    command = [*SIMQ, "serve", "--db", str(db), "--port", str(port), "--review", "--reviewer", "bench"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while True:
        try:
            if request(port, "GET", "/-/versions.json")[0] == 200:
                return process
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"simq serve --review did not start (exit {process.poll()})")
        time.sleep(0.2)


def foreign_read(db: Path) -> int:
    done = subprocess.run(["sqlite3", str(db), "select count(*) from labels"], capture_output=True, text=True,
                          timeout=60)
    if done.returncode:
        raise SystemExit(f"sqlite3 failed: {done.stderr.strip()}")
    return int(done.stdout)


def stored(db: Path) -> dict[tuple[str, str], str]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {(a, b): label for a, b, label in conn.execute("SELECT first, second, label FROM labels")}
    finally:
        conn.close()


def one_round(db: Path, keys: list[str], labels: int, rng: random.Random) -> tuple[int, int, bool, bool]:
    """(labels acknowledged, lost, -wal and -shm still there after the foreign reads, file whole)."""
    port = free_port()
    process = start(db, port)
    base = f"/{db.stem}/-/simhash"
    acknowledged: dict[tuple[str, str], str] = {}
    kept_wal = True
    try:
        status, headers, page = request(port, "GET", f"{base}/pair?" + urllib.parse.urlencode({"a": keys[0],
                                                                                              "b": keys[1]}))
        cookie = next(c.split(";")[0] for c in headers.get_all("set-cookie") if c.startswith("ds_csrftoken="))
        token = re.search(rb'name="csrftoken" value="([^"]+)"', page).group(1).decode()
        for part in range(2):
            for _ in range(labels):
                a, b = sorted(rng.sample(keys, 2))
                label = rng.choice(LABELS)
                body = urllib.parse.urlencode({"a": a, "b": b, "label": label, "csrftoken": token})
                status, _, text = request(port, "POST", f"{base}/label", body, {
                    "Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie,
                    "Origin": f"http://127.0.0.1:{port}", "Host": f"127.0.0.1:{port}"})
                if status != 303:
                    raise SystemExit(f"label refused: HTTP {status}: {text[:200]!r}")
                acknowledged[(a, b)] = label
            foreign_read(db)
            kept_wal = kept_wal and all(os.path.exists(f"{db}{end}") for end in ("-wal", "-shm"))
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the server and its worker process at once
        process.wait()
    found = stored(db)
    lost = sum(1 for pair, label in acknowledged.items() if found.get(pair) != label)
    return len(acknowledged), lost, kept_wal, integrity_check(db).ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--labels", type=int, default=10, help="labels posted before and after each foreign read")
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if shutil.which("sqlite3") is None:
        raise SystemExit("needs the sqlite3 shell (Debian: apt-get install sqlite3)")
    print_machine()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="foreign-reads-") as folder:
        db = Path(folder) / "index.db"
        keys = build(db, args.documents, args.seed)
        print("| round | labels acknowledged | lost | -wal, -shm kept through the foreign reads | file whole |")
        print("| ---: | ---: | ---: | --- | --- |")
        total = lost_total = 0
        whole = True
        for n in range(1, args.rounds + 1):
            acknowledged, lost, kept_wal, ok = one_round(db, keys, args.labels, rng)
            total, lost_total, whole = total + acknowledged, lost_total + lost, whole and ok
            print(f"| {n} | {acknowledged} | {lost} | {yes_no(kept_wal)} | {yes_no(ok)} |")
        print(f"\n{args.rounds} rounds: {total} labels acknowledged, {lost_total} lost; "
              f"every file whole: {yes_no(whole)}")
    if lost_total or not whole:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
