"""simq serve --review writes only for its own pages: raw HTTP requests against the real server (the
venv's simq by path) with every way a request can come from elsewhere (no token, no cookie, another
Origin, another site, another Host), and a real page of another origin in Debian's chromium that
auto-submits a form to the server. Each is refused (403) and changes nothing; the server's own form
still works. (The slow lane: servers and a browser.)"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import re
import subprocess
import threading
import urllib.parse

import pytest
from test_web_browser import _missing, browser, page  # noqa: F401 (fixtures)
from web_helpers import SIMQ, free_port, serving, stored_index

from simhash_sqlite import SimhashIndex
from simhash_sqlite.store.labels import keeper_keys, read_labels


def decisions(db) -> tuple[list, set]:
    with SimhashIndex(db, readonly=True) as index:
        return [(x.first, x.second, x.label) for x in read_labels(index.conn)], keeper_keys(index.conn)


def a_cluster(db) -> tuple[int, str, str]:
    """(cluster, representative, another member) of the largest cluster."""
    with SimhashIndex(db, readonly=True) as index:
        cluster, size = index.conn.execute(
            "SELECT cluster, size FROM clusters WHERE id = cluster ORDER BY size DESC, cluster LIMIT 1").fetchone()
        keys = [k for (k,) in index.conn.execute(
            "SELECT d.key FROM clusters c JOIN documents d ON d.id = c.id WHERE c.cluster = ? "
            "ORDER BY c.id = c.cluster DESC, c.id", (cluster,))]
    assert size >= 2
    return cluster, keys[0], keys[1]


def request(port: int, method: str, path: str, body: str | None = None, headers: dict | None = None):
    """(status, headers, text) of one raw request; the Host header is whatever `headers` says."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Host": f"127.0.0.1:{port}", **(headers or {})}
        if body is not None:
            headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.headers, response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def session(port: int, path: str) -> tuple[str, str]:
    """(cookie header, form token) from one of the server's pages, as a browser holds them."""
    status, headers, html = request(port, "GET", path)
    assert status == 200
    cookie = next(c.split(";")[0] for c in headers.get_all("set-cookie") if c.startswith("ds_csrftoken="))
    return cookie, re.search(r'name="csrftoken" value="([^"]+)"', html).group(1)


def test_writes_need_the_token_the_servers_own_origin_and_host(tmp_path):
    db = tmp_path / "index.db"
    stored_index(db)
    cluster, representative, member = a_cluster(db)
    with serving(db, tmp_path, "--review", "--reviewer", "ann") as server:
        port = int(server.rsplit(":", 1)[1])
        base = "/index/-/simhash"
        own = f"http://127.0.0.1:{port}"
        cookie, token = session(port, f"{base}/pair?" + urllib.parse.urlencode({"a": representative, "b": member}))
        label = {"a": representative, "b": member, "label": "not_duplicate"}
        keep = {"key": member, "cluster": str(cluster), "rest": "duplicate"}
        good = {"Cookie": cookie, "Origin": own, "Sec-Fetch-Site": "same-origin"}
        forged = [  # (fields added, headers): every one refused
            ({}, {}),  # curl -d: no token, no cookie (asgi-csrf lets a cookieless POST through)
            ({"csrftoken": token}, {}),  # the token without its cookie
            ({}, {"Cookie": cookie}),  # the cookie without the token
            ({"csrftoken": "x" + token}, {"Cookie": cookie}),
            ({"csrftoken": token}, {**good, "Origin": "http://evil.example"}),
            ({"csrftoken": token}, {**good, "Origin": f"http://127.0.0.1:{port + 1}"}),  # another port: same site
            ({"csrftoken": token}, {**good, "Origin": "null"}),
            ({"csrftoken": token}, {**good, "Sec-Fetch-Site": "cross-site"}),
            ({"csrftoken": token}, {**good, "Sec-Fetch-Site": "same-site"}),
            ({"csrftoken": token}, {**good, "Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}),
            ({}, {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}),  # what chromium sends cross-site
        ]
        for fields, headers in forged:
            for path, form in (("label", label), ("keep", keep)):
                status, _, text = request(port, "POST", f"{base}/{path}", urllib.parse.urlencode({**form, **fields}),
                                          headers)
                assert status == 403, (path, fields, headers, status, text)
        assert decisions(db) == ([], set())
        # GET pages too: a name other than the loopback ones (DNS rebinding) reads nothing
        for host, expected in ((f"evil.example:{port}", 403), (f"127.0.0.1.nip.io:{port}", 403), ("127.0.0.1", 403),
                               (f"localhost:{port}", 200), (f"[::1]:{port}", 200), (f"LOCALHOST:{port}", 200)):
            status, _, text = request(port, "GET", f"{base}/clusters", headers={"Host": host})
            assert status == expected, (host, text)
            assert (representative in text) == (expected == 200)
        assert request(port, "GET", "/index/documents.json", headers={"Host": "evil.example"})[0] == 403
        # the server's own pages, as a browser posts them
        for path, form in (("label", label), ("keep", keep)):
            status, _, text = request(port, "POST", f"{base}/{path}",
                                      urllib.parse.urlencode({**form, "csrftoken": token}), good)
            assert status == 303, text
        status, _, _ = request(port, "POST", f"{base}/label", urllib.parse.urlencode({**label, "csrftoken": token}),
                               {"Cookie": cookie})  # not from a browser (no Origin): the token decides
        assert status == 303
    labels, keepers = decisions(db)
    assert keepers == {member} and (min(representative, member), max(representative, member), "not_duplicate") in labels


@pytest.mark.parametrize("host", ["0.0.0.0", "::1", "192.168.1.1"])
def test_review_binds_127_0_0_1_only(tmp_path, host):
    db = tmp_path / "index.db"
    stored_index(db)
    done = subprocess.run([*SIMQ, "serve", "--db", str(db), "--review", "--host", host, "--port", str(free_port())],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.startswith("error:") and "127.0.0.1" in done.stderr
    assert "Traceback" not in done.stderr


@contextlib.contextmanager
def another_site(pages: dict[str, str]):
    """A tiny web server on another port of 127.0.0.1, serving the given HTML pages; yields its port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = pages.get(self.path.split("?")[0], "").encode()
            self.send_response(200 if body else 404)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


def auto_submit(action: str, fields: dict[str, str]) -> str:
    inputs = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in fields.items())
    return (f'<html><body><form id="f" method="post" action="{action}">{inputs}</form>'
            '<script>document.getElementById("f").submit()</script></body></html>')


@pytest.mark.skipif(bool(_missing), reason=f"needs a browser and the web extra; missing: {', '.join(_missing)}")
def test_a_page_of_another_origin_cannot_write_through_the_browser(page, tmp_path):  # noqa: F811
    db = tmp_path / "index.db"
    stored_index(db)
    cluster, representative, member = a_cluster(db)
    with serving(db, tmp_path, "--review", "--reviewer", "ann") as server:
        base = server + "/index/-/simhash"
        pages = {
            "/keep.html": auto_submit(f"{base}/keep", {"key": member, "cluster": str(cluster), "rest": "duplicate"}),
            "/label.html": auto_submit(f"{base}/label", {"a": representative, "b": member, "label": "not_duplicate"}),
        }
        pair_page = f"{base}/pair?" + urllib.parse.urlencode({"a": representative, "b": member})
        page.goto(pair_page)  # the reviewer has the server open: the browser holds its CSRF cookie
        assert any(c["name"] == "ds_csrftoken" for c in page.context.cookies())
        with another_site(pages) as port:
            # 127.0.0.1:OTHER is the same site (the cookie goes along), localhost:OTHER another site (it does not)
            for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
                for name, target in (("/keep.html", "/keep"), ("/label.html", "/label")):
                    with page.expect_response(lambda r, target=target: r.url.endswith(target)) as answered:
                        page.goto(origin + name)
                    assert answered.value.status == 403, (origin, name)
                    assert answered.value.request.headers.get("origin") == origin
        assert decisions(db) == ([], set())
        page.goto(pair_page)  # the server's own form still works in the same browser
        page.click("#label-not_duplicate")
        page.wait_for_function("document.querySelector('#current-label').dataset.label === 'not_duplicate'")
    labels, keepers = decisions(db)
    assert labels == [(min(representative, member), max(representative, member), "not_duplicate")] and not keepers
