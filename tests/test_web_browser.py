"""The Datasette pages in a real headless browser: Debian's chromium driven by Playwright (never a
browser download), against `simq serve` on indexes made here. Screenshots go to a folder named at the
end of the test run (SIMQ_SCREENSHOTS chooses it). Without chromium, Playwright or the [web] extra,
these tests skip and say why."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import urllib.parse
from pathlib import Path

import pytest
from test_cli import simq
from web_helpers import HOSTILE, SCREENSHOTS, file_index, serving, stored_index

from simhash_sqlite import SimhashIndex

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_missing = [
    name for name, present in (
        ("chromium (Debian: apt-get install chromium)", CHROMIUM),
        ("playwright (pip install '.[test,web]')", importlib.util.find_spec("playwright")),
        ("datasette (pip install '.[web]')", importlib.util.find_spec("datasette")),
        ("matplotlib (pip install '.[web]')", importlib.util.find_spec("matplotlib")),
    ) if not present
]
pytestmark = pytest.mark.skipif(
    bool(_missing), reason=f"needs a browser and the web extra; missing: {', '.join(_missing)}"
)


@pytest.fixture(scope="module")
def shots(request, tmp_path_factory) -> Path:
    chosen = os.environ.get("SIMQ_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    request.config.stash.setdefault(SCREENSHOTS, []).append(folder)  # conftest.py names it at the end
    return folder


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where chromium's sandbox refuses to start
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    dialogs = []
    tab.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    tab.dialogs = dialogs  # a script from a document that ran would open one
    yield tab
    context.close()


@pytest.fixture(scope="module")
def stored_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("served")
    db = folder / "index.db"
    docs = stored_index(db)
    with serving(db, cwd=folder) as base:
        yield base + "/index/-/simhash", db, {d.key: d.text for d in docs}


def test_clusters_page_lists_clusters_by_size_with_links(page, stored_server, shots):
    base, db, _ = stored_server
    page.goto(f"{base}/clusters")
    assert page.locator("h1").inner_text() == "Near-duplicate clusters in index"
    with SimhashIndex(db, readonly=True) as index:
        expected = sorted(((c.size, c.representative) for c in index.cluster_list()), key=lambda t: -t[0])
    rows = page.locator("#clusters tbody tr")
    assert rows.count() == len(expected) >= 6
    shown = [(int(rows.nth(i).locator("td").nth(1).inner_text()), rows.nth(i).locator("td").nth(2).inner_text())
             for i in range(rows.count())]
    assert [size for size, _ in shown] == [size for size, _ in expected]
    assert set(shown) == set(expected)
    assert page.locator("#sizes tbody tr").count() >= 2
    page.screenshot(path=shots / "clusters.png", full_page=True)
    rows.first.locator("a").click()
    page.wait_for_selector("#members")
    assert page.locator("#members tbody tr").count() == shown[0][0]
    page.screenshot(path=shots / "cluster.png", full_page=True)
    page.locator("#members a", has_text="compare").first.click()
    page.wait_for_selector("#left")
    assert "near-duplicates" in page.locator("#summary").inner_text()
    assert page.locator("#left .changed-a, #right .changed-b").count() >= 1
    page.screenshot(path=shots / "pair.png", full_page=True)


def test_search_page_answers_as_simq_near_for_text_and_file(page, stored_server, shots, runner, tmp_path):
    base, db, texts = stored_server
    query = texts["family3/original.txt"].replace(" ", "  ", 3) + " with a short tail"
    answer = json.loads(simq(runner, "near", "--db", db, "--json", query).stdout)
    expected = [(m["key"], str(m["distance"])) for m in answer]
    assert expected
    page.goto(f"{base}/search")
    page.fill("#text", query)
    page.click("input[type=submit]")
    page.wait_for_selector("#matches")
    rows = page.locator("#matches tbody tr")
    got = [(rows.nth(i).locator("td").nth(0).inner_text(), rows.nth(i).locator("td").nth(1).inner_text())
           for i in range(rows.count())]
    assert got == expected
    words = {"exact": "exact Jaccard", "estimated": "estimated Jaccard (stored sketch)"}
    assert page.locator("#matches tbody td:nth-child(5)").all_inner_texts() == [words[m["checked_by"]] for m in answer]
    assert page.locator("#matches tbody td:nth-child(6)").all_inner_texts() == [f"{m['certainty']:.3f}" for m in answer]
    page.screenshot(path=shots / "search-text.png", full_page=True)
    upload = tmp_path / "query.txt"
    upload.write_text(query, encoding="utf-8")
    page.goto(f"{base}/search")
    page.set_input_files("#file", str(upload))
    page.click("input[type=submit]")
    page.wait_for_selector("#matches")
    assert page.locator("#matches tbody td:nth-child(1)").all_inner_texts() == [key for key, _ in expected]
    page.screenshot(path=shots / "search-file.png", full_page=True)


def test_markup_in_texts_and_keys_is_shown_as_text(page, stored_server, shots):
    base, _, texts = stored_server
    pair = urllib.parse.urlencode({"a": "hostile/<script>.html", "b": "hostile/copy.html"})
    page.goto(f"{base}/pair?{pair}")
    page.wait_for_selector("#left")
    assert page.locator("h1").inner_text().startswith("hostile/<script>.html")
    assert HOSTILE in page.locator("#left").inner_text()
    assert page.locator("#left b, #left img, #left script").count() == 0
    page.screenshot(path=shots / "hostile-pair.png", full_page=True)
    query = texts["hostile/copy.html"]
    page.goto(f"{base}/search?" + urllib.parse.urlencode({"text": query}))
    assert page.locator("#text").input_value() == query
    assert "hostile/<script>.html" in page.locator("#matches tbody td:nth-child(1)").all_inner_texts()
    assert page.locator("section.content script, section.content img, section.content b").count() == 0
    assert page.dialogs == []
    page.screenshot(path=shots / "hostile-search.png", full_page=True)


def test_calibrate_page_shows_the_distribution_image(page, stored_server, shots):
    base, _, _ = stored_server
    page.goto(f"{base}/calibrate")
    image = page.locator("#distribution")
    assert image.evaluate("img => img.complete && img.naturalWidth") > 300
    assert page.locator("#calibration tbody tr").count() == 17
    page.screenshot(path=shots / "calibrate.png", full_page=True)


def test_pages_say_where_texts_are_not_stored_and_files_are_gone(page, tmp_path, shots):
    db = tmp_path / "files.db"
    paths = file_index(tmp_path / "docs", db)
    with serving(db, cwd=tmp_path) as server:
        base = server + "/files/-/simhash"
        pair = urllib.parse.urlencode({"a": str(paths["kept"]), "b": str(paths["deleted"])})
        page.goto(f"{base}/pair?{pair}")
        note = page.locator(".missing-text").inner_text()
        assert str(paths["deleted"]) in note and "no file" in note
        assert "of 64 bits" in page.locator("#summary").inner_text()
        page.screenshot(path=shots / "pair-file-gone.png", full_page=True)
        page.goto(f"{base}/search?" + urllib.parse.urlencode({"key": str(paths["kept"])}))
        page.wait_for_selector("#matches")
        checks = set(page.locator("#matches tbody td:nth-child(5)").all_inner_texts())
        assert checks == {"estimated Jaccard (stored sketch)"}  # the files are gone: the sketches stand in
        assert "estimated from the sketches" in page.locator(".simhash-note").inner_text()
        page.screenshot(path=shots / "search-no-texts.png", full_page=True)


def test_clusters_page_says_how_to_make_clusters(page, tmp_path):
    db = tmp_path / "bare.db"
    with SimhashIndex(db, create=True) as index:
        index.add([])
    with serving(db, cwd=tmp_path) as server:
        page.goto(server + "/bare/-/simhash/clusters")
        assert "No clusters yet: make them with simq clusters --db" in page.locator(".simhash-note").inner_text()
