"""The index in a browser, no server: `simq publish` writes a static page running SQLite compiled to
WebAssembly with the extension built in; in headless Chromium (Playwright, Debian's chromium) it opens the
published index and a chosen file, searches by text and by key at any k, shows the pair, and answers what
the package answers (the hosts' table, tests/test_hosts.py)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_hosts import cases, corpus, row

from simhash_sqlite import Document, SimhashIndex

ROOT = Path(__file__).resolve().parents[1]
BROWSER = ROOT / "simhash_sqlite" / "web" / "browser"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_missing = [name for name, present in (
    ("chromium (Debian: apt-get install chromium)", CHROMIUM),
    ("playwright (pip install '.[test]')", importlib.util.find_spec("playwright")),
) if not present]  # fmt: skip


def simq(*args: str) -> subprocess.CompletedProcess:
    """The venv's simq, by path."""
    return subprocess.run([str(Path(sys.executable).parent / "simq"), *args], capture_output=True, text=True,
                          timeout=300)  # fmt: skip


pytestmark = [
    pytest.mark.slow,  # a browser: about 10 s
    pytest.mark.skipif(bool(_missing), reason=f"needs a browser; missing: {', '.join(_missing)}"),
]


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """An index of the hosts' corpus, with its texts (the pair view shows them), published by simq."""
    folder = tmp_path_factory.mktemp("publish")
    path = folder / "hosts.db"
    stored, _ = corpus()
    with SimhashIndex(path, create=True, store_text=True) as index:
        index.add(Document(key, text) for key, text in stored.items())
    out = folder / "site"
    run = simq("publish", str(path), str(out))
    assert run.returncode == 0, run.stderr
    assert f"wrote {out / 'index.html'}" in run.stdout
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["app.js", "hosts.db", "index.html", "index.json", "sqlite-simhash.js", "sqlite-simhash.wasm"])
    return path, out


@contextlib.contextmanager
def static_server(folder: Path):
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def page(published):
    from playwright.sync_api import sync_playwright

    _, site = published
    with static_server(site) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        tab = browser.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda error: errors.append(str(error)))
        tab.goto(f"{base}/index.html")
        tab.wait_for_selector("body[data-ready='1']", timeout=30_000)
        yield tab
        assert not errors, errors
        browser.close()


def expected_rows(path: Path, by: str, query, k: int, checked: int) -> list[tuple]:
    with SimhashIndex(path, readonly=True) as index:
        if by == "key":
            matches = index.near(key=query, k=k, check=bool(checked))
        elif isinstance(query, str) and by == "text":
            matches = [] if index.fingerprint(query) is None else index.near(query, k=k, check=bool(checked))
        else:
            matches = index.near(fingerprint=query & ((1 << 64) - 1), k=k, check=bool(checked))
    from simhash_sqlite import to_signed

    return [row((m.key, m.distance, m.similarity, to_signed(m.fingerprint), m.jaccard,
                 m.checked_by if checked else None, m.certainty if checked else None)) for m in matches]  # fmt: skip


def browser_rows(page, by: str, query, k: int, checked: int) -> list[tuple]:
    rows = page.evaluate("([by, q, k, c]) => search(by, q, k, c).rows", [by, str(query), k, checked])
    return [row(r) for r in rows]


def test_the_published_page_answers_the_hosts_table_by_text(published, page):
    path, _ = published
    table = [(q, k, c) for q, k, c in cases() if isinstance(q, str)]
    got = [browser_rows(page, "text", q, k, c) for q, k, c in table]
    want = [expected_rows(path, "text", q, k, c) for q, k, c in table]
    assert sum(map(len, want)) > 40
    assert_same_table(got, want, table)


def assert_same_table(got, want, table):
    differ = [(case[1:], g, w) for case, g, w in zip(table, got, want) if g != w]
    assert not differ, differ[:2]


def test_search_by_key_at_any_k(published, page):
    path, _ = published
    keys = ["family00/copy0", "family05/copy3", "short2/copy1", "family09/copy4"]
    table = [(key, k, c) for key in keys for k in (0, 3, 7, 12, 20, 40) for c in (1, 0)]
    got = [browser_rows(page, "key", q, k, c) for q, k, c in table]
    want = [expected_rows(path, "key", q, k, c) for q, k, c in table]
    assert any(want)
    assert_same_table(got, want, table)


def test_the_form_searches_and_shows_the_pair(published, page):
    path, _ = published
    stored, _ = corpus()
    text = next(t for t in stored.values() if len(expected_rows(path, "text", t, 12, 1)) >= 2)
    page.fill("#query", text)
    page.fill("#k", "12")
    page.click("#go")
    page.wait_for_selector("#results:not([hidden]) tr.row >> nth=1")
    keys = page.eval_on_selector_all("#results tr.row", "rows => rows.map(r => r.dataset.key)")
    assert keys == [r[0] for r in expected_rows(path, "text", text, 12, 1)]
    assert page.inner_text("#status").startswith(f"{len(keys)} matches within 12 (")
    page.click("#results tr.row >> nth=1")
    assert page.inner_text("#pair-key") == keys[1]
    assert page.inner_text("#pair-text") == stored[keys[1]]
    assert page.inner_text("#pair-query") == text
    assert "checked by" in page.inner_text("#pair-about")
    page.fill("#k", "65")
    page.click("#go")
    assert page.inner_text("#status") == "k must be a whole number from 0 to 64"
    page.check("input[value=key]")
    page.fill("#query", "no/such/key")
    page.fill("#k", "3")
    page.click("#go")
    assert page.inner_text("#status") == 'error: no document has the key "no/such/key"'


def test_the_file_button_opens_another_index(published, page, tmp_path):
    other = tmp_path / "other.db"
    with SimhashIndex(other, create=True) as index:
        index.add([Document("a", "one text about sqlite and near duplicates"), Document("b", "something else")])
    page.set_input_files("#file", str(other))
    page.wait_for_function("document.getElementById('opened').textContent.startsWith('other.db: 2 documents')")
    assert browser_rows(page, "text", "one text about sqlite and near duplicates", 3, 1)[0][:2] == ("a", 0)
    page.set_input_files("#file", str(Path(__file__)))  # not an index: said, and the search stays off
    page.wait_for_function("document.getElementById('status').className === 'error'")
    assert "cannot be opened as an index" in page.inner_text("#status")
    assert page.is_disabled("#go")


def test_by_key_without_stored_texts_the_fingerprint_is_searched(page, tmp_path):
    """In an index without its texts, a key's search is its fingerprint's, judged by distance (docs/sql.md)."""
    path = tmp_path / "bare.db"
    stored, _ = corpus()
    with SimhashIndex(path, create=True) as index:
        index.add(Document(key, text) for key, text in stored.items())
        fingerprint = index.get("family00/copy0").fingerprint
    page.set_input_files("#file", str(path))
    page.wait_for_function("document.getElementById('opened').textContent.startsWith('bare.db: ')")
    for k, checked in ((12, 1), (20, 0)):
        want = [r for r in expected_rows(path, "fingerprint", fingerprint, k, checked) if r[0] != "family00/copy0"]
        assert browser_rows(page, "key", "family00/copy0", k, checked) == want
        assert want and all(r[5] == ("distance" if checked else None) for r in want)


def test_publish_refuses_what_is_not_an_index_and_writes_nothing(tmp_path):
    bogus = tmp_path / "notes.db"
    bogus.write_text("not sqlite")
    out = tmp_path / "site"
    run = simq("publish", str(bogus), str(out))
    assert run.returncode == 1 and run.stderr.startswith("error: ") and "Traceback" not in run.stderr
    assert not out.exists()
    index = tmp_path / "ok.db"
    with SimhashIndex(index, create=True) as made:
        made.add([Document("a", "some text to publish")])
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "index.html").write_text("my own page")
    run = simq("publish", str(index), str(mine))
    assert run.returncode == 1
    assert run.stderr == f"error: {mine} holds other files: publish into a new or empty folder\n"
    assert [p.name for p in mine.iterdir()] == ["index.html"] and (mine / "index.html").read_text() == "my own page"
    assert simq("publish", str(index), str(out)).returncode == 0
    assert simq("publish", str(index), str(out)).returncode == 0  # again, over its own earlier publish


def test_the_committed_webassembly_is_what_the_build_script_makes(tmp_path):
    """wasm/build.sh rebuilds the committed files byte for byte (where emcc and the amalgamation are)."""
    if shutil.which("emcc") is None:
        pytest.skip("emcc is not installed (Debian: apt-get install emscripten)")
    amalgamation = os.environ.get("SIMHASH_SQLITE_AMALGAMATION")
    if not amalgamation and shutil.which("npm") is None:
        pytest.skip("no amalgamation: set SIMHASH_SQLITE_AMALGAMATION or install npm")
    run = subprocess.run(["bash", str(ROOT / "wasm" / "build.sh"), str(tmp_path)], capture_output=True, text=True,
                         timeout=900)  # fmt: skip
    if run.returncode and "Unicode" in run.stderr:
        pytest.skip(run.stderr.strip().splitlines()[-1])
    assert run.returncode == 0, run.stderr[-2000:]
    for name in ("sqlite-simhash.js", "sqlite-simhash.wasm"):
        built = hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()
        assert built == hashlib.sha256((BROWSER / name).read_bytes()).hexdigest(), name


def test_the_page_is_listed_in_index_json(published):
    _, site = published
    assert json.loads((site / "index.json").read_text()) == {"index": "hosts.db"}
