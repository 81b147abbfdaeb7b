"""The web search page at scale: how long `simq serve` takes to answer the search form on a large index,
against the same search made in-process through the library, side by side.

    .venv/bin/pip install -e '.[web]'
    .venv/bin/python bench/web_search.py EN.jsonl ZH.jsonl      # BENCHMARKS.md: the shared corpus's two files
    .venv/bin/python bench/web_search.py DATA.jsonl --size 1000000 --queries 60 --dir /tmp/simq-web

The index: --size random fingerprints (add_fingerprints, no text), plus --texts documents of the JSONL
files (stored, --store-text) each with an edited copy (a planted near-duplicate). The queries are other
edited copies of indexed texts, so each has near-duplicates to find and check by exact Jaccard.

Each query is POSTed as the search form sends it (multipart/form-data) to a real `simq serve`
on 127.0.0.1, over one kept-alive connection, at the page's defaults (those of `simq near`: candidates
within k=12, exact Jaccard >= 0.8). The baseline is SimhashIndex.near() in this process on an index opened
the same way and prepared the same way (the fingerprints read for the scan first, as the server does when
it starts), the two taking turns query by query. The first query of each is reported apart: the bench
sends the server its first query as soon as it answers, so that one waits for the server's reading.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
from common import SIMQ, print_machine

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.core.settings import CONFIRM_K


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_texts(paths: list[str], limit: int, min_chars: int = 400) -> list[str]:
    texts = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            texts.extend(t for line in handle if len(t := json.loads(line)["text"]) >= min_chars)
    random.Random(1).shuffle(texts)
    return texts[:limit]


def edited(text: str, rng: random.Random, share: float = 0.01) -> str:
    """A copy with about `share` of its characters changed, in a few runs (a light edit)."""
    chars = list(text)
    for _ in range(max(1, int(len(chars) * share / 5))):
        at = rng.randrange(len(chars))
        chars[at : at + 5] = rng.choice(["edit", "修改", "x", ""])
    return "".join(chars)


def build(db: Path, size: int, texts: list[str]) -> float:
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    fingerprints = rng.integers(0, 2**64, size=size, dtype=np.uint64).tolist()
    edit = random.Random(2)
    with SimhashIndex(db, create=True, store_text=True) as index:
        index.add_fingerprints((f"random/{i}", fp) for i, fp in enumerate(fingerprints))
        docs = [Document(f"text/{i}", t) for i, t in enumerate(texts)]
        docs += [Document(f"text/{i}/copy", edited(t, edit)) for i, t in enumerate(texts)]
        index.add(docs)
        index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return time.perf_counter() - started


class Page:
    """The search form of a running simq serve, posted over one kept-alive connection."""

    def __init__(self, port: int, database: str) -> None:
        self.path = f"/{database}/-/simhash/search"
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def search(self, text: str) -> tuple[float, int]:
        """(seconds to the full answer, matches on the page)."""
        boundary = uuid.uuid4().hex
        fields = {"text": text}
        body = "".join(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
            for name, value in fields.items()
        ) + f"--{boundary}--\r\n"
        data = body.encode("utf-8")
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}", "Content-Length": str(len(data))}
        started = time.perf_counter()
        self.conn.request("POST", self.path, body=data, headers=headers)
        response = self.conn.getresponse()
        page = response.read().decode()
        seconds = time.perf_counter() - started
        if response.status != 200:
            raise RuntimeError(f"the page answered {response.status}: {page[:500]}")
        return seconds, page.count(">its neighbours</a>")


def serve(db: Path, port: int) -> subprocess.Popen:
    command = [*SIMQ, "serve", "--db", str(db), "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            http.client.HTTPConnection("127.0.0.1", port, timeout=2).request("GET", "/-/versions.json")
            return process
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(process.stderr.read().decode()) from None
            time.sleep(0.3)
    process.kill()
    raise RuntimeError("simq serve did not start")


def summary(name: str, first: float, times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    return f"| {name} | {first * 1000:.0f} | {statistics.median(ms):.1f} | {p90:.1f} | {ms[-1]:.1f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", nargs="+", help="JSONL files with a 'text' field")
    parser.add_argument("--size", type=int, default=1_000_000, help="random fingerprints in the index")
    parser.add_argument("--texts", type=int, default=500, help="stored texts (each with an edited copy)")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--dir", help="where to build the index (default: a temporary folder, removed)")
    args = parser.parse_args()
    print_machine()

    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="simq-web-"))
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "web.db"
    for stale in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        stale.unlink(missing_ok=True)
    texts = read_texts(args.data, args.texts)
    built = build(db, args.size, texts)
    rng = random.Random(3)
    queries = [edited(texts[rng.randrange(len(texts))], rng) for _ in range(args.queries + 1)]
    documents = args.size + 2 * len(texts)
    print(f"index: {documents:,} documents ({args.size:,} random fingerprints, {len(texts)} stored texts and as many "
          f"edited copies), {db.stat().st_size / 2**20:.0f} MiB, built in {built:.1f} s; {args.queries} queries "
          f"of {statistics.median(len(q) for q in queries):,.0f} characters (median) at k={CONFIRM_K}, exact check")

    port = free_port()
    process = serve(db, port)
    index = SimhashIndex(db, readonly=True)
    try:
        page = Page(port, db.stem)
        web_first, shown = page.search(queries[0])  # the server is just up: it may still be warming
        on_page = [shown]
        started = time.perf_counter()
        # what the server does as it starts (datasette_plugin.startup): read the fingerprints to scan
        index.search(fingerprint=0, k=CONFIRM_K, check=False, plan="scan")
        reading = time.perf_counter() - started
        started = time.perf_counter()
        found = [len(index.near(queries[0]))]
        library_first = time.perf_counter() - started
        library, web = [], []
        for i, query in enumerate(queries[1:]):  # interleaved, in turns first, so neither gets the warmer cache
            for side in ("library", "web") if i % 2 else ("web", "library"):
                if side == "web":
                    seconds, shown = page.search(query)
                    web.append(seconds)
                    on_page.append(shown)
                else:
                    started = time.perf_counter()
                    found.append(len(index.near(query)))
                    library.append(time.perf_counter() - started)
    finally:
        index.close()
        process.terminate()
        process.wait(10)
    if on_page != found:
        raise SystemExit(f"the page showed other answers than the library: {on_page} vs {found}")
    print(f"matches per query: median {statistics.median(found)}, all equal on the page and in the library")
    print()
    print("| search at the defaults (k=12, exact Jaccard) | first query ms | median ms | p90 ms | max ms |")
    print("|---|---|---|---|---|")
    print(summary("library: SimhashIndex.near() in-process", library_first, library))
    print(summary("web page: POST search form to simq serve", web_first, web))
    ratio = statistics.median(web) / statistics.median(library)
    print(f"\nweb / library (medians): {ratio:.2f}; reading the {documents:,} fingerprints once (library, before "
          f"its first query): {reading * 1000:.0f} ms")
    if not args.dir:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
