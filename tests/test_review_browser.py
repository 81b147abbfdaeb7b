"""simq serve --review as a person uses it, in Debian's chromium through Playwright: label pairs with
clicks and keys, keep one member of a cluster in one click, see the labels after a restart and the
calibration follow them, download the decisions; and what the server refuses (a POST without the CSRF
token, every write without --review), and a SIGKILL while it writes."""

from __future__ import annotations

import http.cookiejar
import json
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
from test_web_browser import _missing, browser, page, shots  # noqa: F401 (fixtures)
from web_helpers import free_port, get, serving, stored_index

from simhash_sqlite import SimhashIndex
from simhash_sqlite.store.integrity import integrity_check
from simhash_sqlite.store.labels import keeper_keys, read_labels

pytestmark = pytest.mark.skipif(
    bool(_missing), reason=f"needs a browser and the web extra; missing: {', '.join(_missing)}"
)


def labels_in(db):
    with SimhashIndex(db, readonly=True) as index:
        return {(x.first, x.second): (x.label, x.reviewer) for x in read_labels(index.conn)}


def test_label_the_sample_with_clicks_and_keys_and_see_it_after_a_restart(page, tmp_path, shots):  # noqa: F811
    db = tmp_path / "index.db"
    stored_index(db)
    with serving(db, tmp_path, "--review", "--reviewer", "ann") as server:
        base = server + "/index/-/simhash"
        page.goto(f"{base}/review")
        page.wait_for_selector("#pair-title")
        assert page.locator("#progress strong").inner_text() == "0"
        first = (page.locator("input[name=a]").input_value(), page.locator("input[name=b]").input_value())
        page.screenshot(path=shots / "review-sample.png", full_page=True)
        page.click("#label-duplicate")  # a click
        page.wait_for_selector("#pair-title")
        assert page.locator("#progress strong").inner_text() == "1"
        second = (page.locator("input[name=a]").input_value(), page.locator("input[name=b]").input_value())
        assert second != first
        page.keyboard.press("n")  # a key
        page.wait_for_function("document.querySelector('#progress strong').innerText === '2'")
        third = (page.locator("input[name=a]").input_value(), page.locator("input[name=b]").input_value())
        page.keyboard.press("j")  # next: skips without a label
        page.wait_for_function(f"document.querySelector('input[name=a]').value !== {json.dumps(third[0])} || "
                               f"document.querySelector('input[name=b]').value !== {json.dumps(third[1])}")
        assert page.locator("#progress strong").inner_text() == "2"
        page.keyboard.press("u")
        page.wait_for_function("document.querySelector('#progress strong').innerText === '3'")
        page.screenshot(path=shots / "review-after-three.png", full_page=True)
    assert not [end for end in ("-wal", "-shm") if (tmp_path / f"index.db{end}").exists()]  # folded away on stop
    stored = labels_in(db)
    assert stored[tuple(sorted(first))] == ("duplicate", "ann")
    assert stored[tuple(sorted(second))] == ("not_duplicate", "ann")
    assert tuple(sorted(third)) not in stored and len(stored) == 3
    assert integrity_check(db).ok
    with serving(db, tmp_path) as server:  # restarted, read-only: the labels are shown, not writable
        page.goto(f"{server}/index/-/simhash/pair?" + urllib.parse.urlencode({"a": first[0], "b": first[1]}))
        assert page.locator("#current-label").get_attribute("data-label") == "duplicate"
        assert page.locator("#label-duplicate").count() == 0
        assert "simq serve --review" in page.locator("form.simhash-label").inner_text()
        page.screenshot(path=shots / "pair-labelled-read-only.png", full_page=True)


def test_decide_clusters_in_one_click_each_watch_the_calibration_and_export(page, tmp_path, shots):  # noqa: F811
    db = tmp_path / "index.db"
    stored_index(db)
    with SimhashIndex(db, readonly=True) as index:
        order = sorted(index.cluster_list(), key=lambda c: (-c.size, c.cluster))
    with serving(db, tmp_path, "--review", "--reviewer", "bob") as server:
        base = server + "/index/-/simhash"
        page.goto(f"{base}/labels")
        assert page.locator("#no-labels").count() == 1
        page.goto(f"{base}/clusters/{order[0].cluster}")
        page.screenshot(path=shots / "cluster-decide.png", full_page=True)
        # Cluster 1: one action (keep its last member; the rest become its duplicates).
        choice = order[0].members[-1]
        page.locator(f"#decide tr[data-key='{choice}'] button.keep").click()
        page.wait_for_url(f"{base}/clusters/{order[1].cluster}")  # the next cluster opens by itself
        # Cluster 2: two actions (one member is not a duplicate, then keep the representative).
        odd = order[1].members[-1]
        page.locator(f"#decide tr[data-key='{odd}'] button.not-duplicate").click()
        page.wait_for_url(f"{base}/clusters/{order[1].cluster}")
        assert page.locator(f"#decide tr[data-key='{odd}'] td.label").inner_text() == "not a duplicate"
        page.locator(f"#decide tr[data-key='{order[1].representative}'] button.keep").click()
        page.wait_for_url(f"{base}/clusters/{order[2].cluster}")
        page.goto(f"{base}/labels")
        # a handful of labels, nearly all "duplicate": no threshold yet, and what is missing for one
        assert page.locator("#recommended").count() == 0
        assert "from 10 of each" in page.locator("#no-recommendation").inner_text()
        counts = page.locator("#label-counts").inner_text()
        assert page.locator("#label-chart").evaluate("img => img.complete && img.naturalWidth") > 300
        page.screenshot(path=shots / "labels-calibration.png", full_page=True)
        with page.expect_download() as download:
            page.click("#decisions-jsonl")
        rows = [json.loads(line) for line in open(download.value.path(), encoding="utf-8")]
        # More labels: the calibration changes.
        page.goto(f"{base}/review")
        for _ in range(3):
            before = page.locator("#progress strong").inner_text()
            page.keyboard.press("n")
            page.wait_for_function(
                f"(document.querySelector('#progress strong') || {{}}).innerText === '{int(before) + 1}'")
        page.goto(f"{base}/labels")
        assert page.locator("#label-counts").inner_text() != counts
    with SimhashIndex(db, readonly=True) as index:
        keepers = keeper_keys(index.conn)
    assert keepers == {choice, order[1].representative}
    deleted = {row["key"]: row for row in rows}
    assert choice not in deleted and odd not in deleted
    assert all(deleted[m]["kept"] == choice and deleted[m]["label"] == "duplicate"
               for m in order[0].members if m != choice)
    assert {r["checked_by"] for r in rows} <= {"exact", "estimated"} and min(r["jaccard"] for r in rows) >= 0.8


def _session(base: str, pair_url: str):
    """An opener with Datasette's CSRF cookie, and the form token from a page."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar),
                                         _NoRedirect())
    html = opener.open(pair_url, timeout=30).read().decode()
    token = re.search(r'name="csrftoken" value="([^"]+)"', html).group(1)
    return opener, token


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _post(opener, url: str, fields: dict) -> int:
    data = urllib.parse.urlencode(fields).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/x-www-form-urlencoded"})
    try:
        with opener.open(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_writes_need_the_token_review_mode_and_keys_of_the_index(tmp_path):
    db = tmp_path / "index.db"
    stored_index(db)
    pair = {"a": "family1/original.txt", "b": "family1/copy0.txt"}
    for options, review in (((), False), (("--review",), True)):
        with serving(db, tmp_path, *options) as server:
            base = server + "/index/-/simhash"
            opener, token = _session(base, f"{base}/pair?" + urllib.parse.urlencode(pair))
            label = {**pair, "label": "duplicate"}
            assert _post(opener, f"{base}/label", label) == 403  # no token
            assert get(f"{base}/label")[0] == 405
            if not review:
                for path, fields in (("label", label), ("keep", {"key": pair["a"], "cluster": "1"})):
                    assert _post(opener, f"{base}/{path}", {**fields, "csrftoken": token}) == 403
                continue
            assert _post(opener, f"{base}/label", {**label, "b": "not/there.txt", "csrftoken": token}) == 400
            assert _post(opener, f"{base}/label", {**label, "label": "maybe", "csrftoken": token}) == 400
            assert _post(opener, f"{base}/label", {**label, "csrftoken": token}) == 303
    assert list(labels_in(db)) == [tuple(sorted(pair.values()))]


def test_labels_survive_a_sigkill_of_the_server_while_it_writes(tmp_path):
    db = tmp_path / "index.db"
    stored_index(db)
    with SimhashIndex(db, readonly=True) as index:
        pairs = [(p.first, p.second) for p in index.dupes()]
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "simhash_sqlite", "serve", "--db", str(db), "--port", str(port), "--review"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/index/-/simhash"
    try:
        deadline = time.monotonic() + 60
        while get(f"http://127.0.0.1:{port}/-/versions.json")[0] != 200 if _up(port) else True:
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.2)
        a, b = pairs[0]
        opener, token = _session(base, f"{base}/pair?" + urllib.parse.urlencode({"a": a, "b": b}))
        acknowledged = []
        for n, (a, b) in enumerate(pairs * 20):
            label = ("duplicate", "not_duplicate", "unsure")[n % 3]
            if _post(opener, f"{base}/label", {"a": a, "b": b, "label": label, "csrftoken": token}) == 303:
                acknowledged.append(((min(a, b), max(a, b)), label))
            if n == len(pairs) + 5:
                process.send_signal(signal.SIGKILL)  # mid-stream: the next posts find no server
                break
    finally:
        process.kill()
        process.wait()
    assert len(acknowledged) > len(pairs)
    expected = dict(acknowledged)  # the last acknowledged label of each pair
    report = integrity_check(db)
    assert report.ok, [r.detail for r in report.failed]
    stored = labels_in(db)
    assert {pair: label for pair, (label, _) in stored.items()} == expected
    with SimhashIndex(db) as index:  # and every other command still works on it
        assert len(list(index.dupes())) == len(pairs) - sum(1 for x in expected.values() if x == "not_duplicate")


def _up(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0
