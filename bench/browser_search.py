"""simhash_near in headless Chromium: the page of `simq publish` (SQLite in WebAssembly, the extension built in).

    .venv/bin/python bench/browser_search.py /tmp/crawl.jsonl --index /tmp/crawl.db --queries 50 --k 7

The index: --index PATH, made from the JSONL ({"id", "text"} lines) by `simq add` when absent. Queries: texts
of random records with about 2% of their words dropped, so most have neighbours. The page is published into
a scratch folder, served over HTTP on 127.0.0.1, opened in Debian's chromium through Playwright; each query
runs once through the page's search() (one simhash_near statement, its JSON read back), timed with
performance.now() in the page. Prints the time to open the index, the median and 90th percentile per
search, and whether every answer (keys and distances) is the package's (SimhashIndex.near). The machine
is shared: read the load printed with them.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import SIMQ, machine, yes_no  # noqa: F401 (common puts this checkout first on sys.path)

from simhash_sqlite import SimhashIndex
from simhash_sqlite.web.publish import publish


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def served(folder: Path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def queries(jsonl: Path, count: int, seed: int) -> list[str]:
    texts = [json.loads(line)["text"] for line in jsonl.read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random(seed)
    out = []
    for text in rng.sample(texts, min(count, len(texts))):
        words = text.split(" ")
        out.append(" ".join(w for w in words if rng.random() >= 0.02) if len(words) > 20 else text)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jsonl", type=Path, help="records to index (when --index is absent) and to query")
    parser.add_argument("--index", type=Path, required=True, help="the index (made from the JSONL if absent)")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--k", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(machine(), flush=True)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium is not installed (Debian: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    if not args.index.exists():
        subprocess.run([*SIMQ, "add", "--db", str(args.index), str(args.jsonl)], check=True, capture_output=True)
    texts = queries(args.jsonl, args.queries, args.seed)
    with SimhashIndex(args.index, readonly=True) as index:
        documents = index.stats().documents
        want = [[(m.key, m.distance) for m in index.near(t, k=args.k)] if index.fingerprint(t) is not None else []
                for t in texts]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        publish(args.index, site)
        with served(site) as base, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page()
            started = time.perf_counter()
            page.goto(f"{base}/index.html")
            page.wait_for_selector("body[data-ready='1']", timeout=300_000)
            opened = time.perf_counter() - started
            timed = page.evaluate(
                """([texts, k]) => texts.map((t) => {
                    const t0 = performance.now();
                    const rows = search("text", t, k, 1).rows;
                    return [performance.now() - t0, rows.map((r) => [r[0], r[1]])];
                })""",
                [texts, args.k],
            )
            browser.close()
    ms = sorted(t for t, _ in timed)
    got = [[tuple(r) for r in rows] for _, rows in timed]
    same = got == want
    print("\n| documents | file MB | open s | k | searches | median ms | p90 ms | matches | same as package |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    print(f"| {documents:,} | {args.index.stat().st_size / 1e6:.1f} | {opened:.2f} | {args.k} | {len(ms)} "
          f"| {statistics.median(ms):.1f} | {ms[int(0.9 * (len(ms) - 1))]:.1f} | {sum(map(len, got))} "
          f"| {yes_no(same)} |")
    if not same:
        sys.exit("the page's answers differ from the package's")


if __name__ == "__main__":
    main()
