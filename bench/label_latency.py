"""How long saving one label takes on a large index: through the library (set_label, one transaction)
and through `simq serve --review` as the browser does it (a form POST with the CSRF token, answered by a
redirect), on an index of N synthetic fingerprints (add_fingerprints, no texts).

    .venv/bin/python bench/label_latency.py --documents 1000000 --labels 500 --folder /tmp/labels-bench

Prints the median and p99 of each, in milliseconds, and the first label's time apart (the server's
first write runs SQLite's quick check, which `simq serve --review` does at start).
"""

from __future__ import annotations

import argparse
import http.cookiejar
import os
import random
import re
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np

from simhash_sqlite import SimhashIndex
from simhash_sqlite.store.labels import LABELS, open_for_labels, set_label


def build(db: Path, n: int, seed: int) -> float:
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**63, size=n, dtype=np.uint64) * 2 + rng.integers(0, 2, size=n, dtype=np.uint64)
    with SimhashIndex(db, create=True) as index:
        index.add_fingerprints((f"doc-{i:09d}", int(fp)) for i, fp in enumerate(fps.tolist()))
    return time.perf_counter() - started


def pairs(n: int, count: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        a, b = rng.randrange(n), rng.randrange(n)
        if a != b:
            out.append((f"doc-{a:09d}", f"doc-{b:09d}"))
    return out


def summary(times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    p99 = ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))]
    return f"median {statistics.median(ms):.2f} ms, p99 {p99:.2f} ms, max {ms[-1]:.2f} ms ({len(ms)} labels)"


def library(db: Path, todo: list[tuple[str, str]]) -> tuple[float, list[float], float]:
    """(first label's time, the others' times, their CPU seconds in all)."""
    conn = open_for_labels(db)
    times = []
    try:
        for i, (a, b) in enumerate(todo):
            if i == 1:
                cpu = time.process_time()
            started = time.perf_counter()
            set_label(conn, a, b, LABELS[i % 3], "bench")
            times.append(time.perf_counter() - started)
        cpu = time.process_time() - cpu
    finally:
        conn.close()
    return times[0], times[1:], cpu


def cpu_seconds(pid: int) -> float:
    """user + system CPU time so far of a process and the processes it started (the server's worker
    process writes the labels), from Linux /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return own + sum(cpu_seconds(child) for child in children if Path(f"/proc/{child}").exists())


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def served(db: Path, todo: list[tuple[str, str]], port: int) -> tuple[float, list[float], float, float]:
    command = [sys.executable, "-m", "simhash_sqlite", "serve", "--db", str(db), "--port", str(port), "--review",
               "--reviewer", "bench"]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/{db.stem}/-/simhash"
    try:
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect())
        a, b = todo[0]
        while True:
            try:
                page = opener.open(f"{base}/pair?" + urllib.parse.urlencode({"a": a, "b": b}), timeout=60).read()
                break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None:
                    raise SystemExit("simq serve --review exited") from None
                time.sleep(0.2)
        ready = time.perf_counter() - started
        token = re.search(rb'name="csrftoken" value="([^"]+)"', page).group(1).decode()
        times = []
        for i, (a, b) in enumerate(todo):
            if i == 1:
                cpu = cpu_seconds(process.pid)
            body = urllib.parse.urlencode({"a": a, "b": b, "label": LABELS[i % 3], "csrftoken": token}).encode()
            request = urllib.request.Request(f"{base}/label", data=body,
                                             headers={"content-type": "application/x-www-form-urlencoded"})
            began = time.perf_counter()
            try:
                opener.open(request, timeout=60)
                raise SystemExit("expected a redirect")
            except urllib.error.HTTPError as exc:
                if exc.code != 303:
                    raise SystemExit(f"label refused: HTTP {exc.code}: {exc.read()[:200]!r}") from None
            times.append(time.perf_counter() - began)
        return times[0], times[1:], ready, cpu_seconds(process.pid) - cpu
    finally:
        process.terminate()
        process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--labels", type=int, default=500)
    parser.add_argument("--folder", type=Path, required=True, help="where the index is made (kept for reruns)")
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    db = args.folder / f"labels_{args.documents}.db"
    if not db.exists():
        print(f"building {db}: {args.documents:,} fingerprints in {build(db, args.documents, args.seed):.1f} s")
    size = db.stat().st_size / 2**20
    print(f"index {db}: {args.documents:,} documents, {size:,.0f} MiB")
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    first, rest, cpu = library(db, pairs(args.documents, args.labels, args.seed))
    print(f"library set_label: first {first * 1000:.1f} ms (with the quick check); then {summary(rest)}; "
          f"CPU {cpu / len(rest) * 1000:.2f} ms a label")
    first, rest, ready, cpu = served(db, pairs(args.documents, args.labels, args.seed + 1), args.port)
    print(f"simq serve --review up (and answering a pair page) in {ready:.1f} s")
    print(f"HTTP POST /label (CSRF, write, 303): first {first * 1000:.1f} ms; then {summary(rest)}; "
          f"server CPU (with its worker process) {cpu / len(rest) * 1000:.2f} ms a label")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
