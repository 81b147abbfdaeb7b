"""Shared by the web tests: a corpus with planted near-duplicates (and hostile HTML in it), indexes made
from it, and `simq serve` started for real in a subprocess on a free local port."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from simhash_sqlite import Document, SimhashIndex

# Folders the browser tests saved screenshots in; conftest.py names them at the end of the run.
SCREENSHOTS = pytest.StashKey[list]()


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# simq serve, the Datasette plugin and the charts need the [web] extra; without it their tests skip.
web_extra = pytest.mark.skipif(
    not (_has("datasette") and _has("sqlite_utils") and _has("matplotlib")),
    reason="the [web] extra is not installed: pip install '.[test,web]'",
)

HOSTILE = (
    "<script>alert('pwned')</script><b>bold</b> & <img src=x onerror=alert(2)> "
    "This page pretends to be harmless while carrying markup in its text."
)


def _words(rng: random.Random, vocab: list[str], n: int) -> list[str]:
    return [rng.choice(vocab) for _ in range(n)]


def corpus(seed: int = 7) -> list[Document]:
    """Families of an original and edited copies (near-duplicates at several distances), unrelated
    singletons, a text with HTML and script in it and its copy, and a Chinese text and its repost."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghiklmnoprstuvwy") for _ in range(rng.randint(3, 9))) for _ in range(400)]
    docs = []
    for family in range(6):
        words = _words(rng, vocab, rng.randint(150, 260))
        original = " ".join(words)
        docs.append(Document(f"family{family}/original.txt", original))
        for copy in range(1 + family % 3):
            edited = [w if rng.random() > 0.01 * (copy + 1) else rng.choice(vocab) for w in words]
            text = " ".join(edited)
            if copy == 1:
                text = "Reposted from elsewhere.\n\n" + text
            docs.append(Document(f"family{family}/copy{copy}.txt", text))
    for single in range(8):
        docs.append(Document(f"single/{single}.txt", " ".join(_words(rng, vocab, rng.randint(100, 200)))))
    body = " ".join(_words(rng, vocab, 120))
    docs.append(Document("hostile/<script>.html", HOSTILE + "\n" + body))
    docs.append(Document("hostile/copy.html", HOSTILE + "\n" + body + " " + " ".join(_words(rng, vocab, 2))))
    chinese = "数据库是按照数据结构来组织、存储和管理数据的仓库。" * 6
    chinese += "SQLite 是一个嵌入式的关系数据库，常用于移动设备和桌面软件。" * 4
    docs.append(Document("zh/original.txt", chinese))
    docs.append(Document("zh/repost.txt", "转载：" + chinese.replace("常用于", "常常用于")))
    return docs


def stored_index(path: Path) -> list[Document]:
    """An index with stored texts and its clusters (at the defaults of simq clusters)."""
    docs = corpus()
    with SimhashIndex(path, create=True, store_text=True) as index:
        index.add(docs)
        index.clusters()
    return docs


def file_index(folder: Path, db: Path) -> dict[str, Path]:
    """An index of files without stored texts; then one file deleted and one edited since.
    Returns the paths by role: kept, deleted, edited (keys are the absolute paths)."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = corpus()
    family = [d for d in docs if d.key.startswith("family2/")]
    paths = {}
    for role, doc in zip(("kept", "deleted", "edited"), family):
        path = folder / f"{role}.txt"
        path.write_text(doc.text, encoding="utf-8")
        paths[role] = path
    with SimhashIndex(db, create=True, store_text=False) as index:
        index.add(Document(str(p), p.read_text(encoding="utf-8")) for p in paths.values())
        index.clusters()
    paths["deleted"].unlink()
    paths["edited"].write_text(paths["edited"].read_text(encoding="utf-8") + " edited afterwards", encoding="utf-8")
    return paths


# The venv's simq by path, as a user runs it (python -m simhash_sqlite where no script was installed).
SIMQ = [str(Path(sys.executable).with_name("simq"))] if Path(sys.executable).with_name("simq").exists() else [
    sys.executable, "-m", "simhash_sqlite"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


@contextlib.contextmanager
def serving(db: Path, cwd: Path, *options: str, env: dict | None = None):
    """`simq serve --db DB --port P [options]` in a subprocess until the block ends; yields the base URL."""
    port = free_port()
    command = [*SIMQ, "serve", "--db", str(db), "--port", str(port), *options]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    env.pop("SIMQ_DB", None)
    log = open(cwd / f"serve-{port}.log", "w+")  # noqa: SIM115 (read back if the server fails)
    process = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"simq serve exited with {process.returncode}:\n{log.read()}")
            with contextlib.suppress(OSError):
                if get(base + "/-/versions.json")[0] == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("simq serve did not answer within 60 s")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
