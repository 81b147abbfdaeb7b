"""The review pages of `simq serve --review`: label pairs, choose what to keep, calibrate from the
labels, download the decisions. Routes are added to the plugin's (datasette_plugin.register_routes).

Writes: only labels and keepers (labels.py), only when the server was started with --review
(enable()), one transaction each, on one writer thread with its own connection. Every POST must carry
Datasette's CSRF token matching its cookie (_token_refused: 403 without it, cookie or not) and come from
this server's own pages (same_origin.py); without --review every POST is refused (403) and the pages
only show what is there.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import io
import os
import secrets
import threading
import urllib.parse
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import apsw
from datasette.utils.asgi import NotFound, Response

from ..errors import SimhashError
from ..find.review import FEW_LABELS, SAMPLE_SIZE, calibrate_labels, deletions, draw_sample, population, write_decisions
from ..store.database import has_table, open_readonly
from ..store.labels import LABELS, WORDS, keep, keeper_keys, label_of, labels_of, open_for_labels, pair_of, set_label
from .plots import labels_png

# How long a page waits for the sample's population before saying it is being drawn (a 1M-document
# index takes minutes: it is drawn once per server, in the background).
SAMPLE_WAIT_SECONDS = 3.0
MAX_FORM_BYTES = 64 << 10



@dataclass(frozen=True)
class Review:
    reviewer: str
    threshold: float = 0.8


_review: Review | None = None
# The Datasette plugin's helpers (its _render, _database, _context, _run, ...): the plugin hands itself
# over (install) when it loads, rather than this module importing it back.
plugin: Any = None
_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simhash-labels")
_write_conns: dict[str, apsw.Connection] = {}
_samples: dict[tuple, Future] = {}  # (path, documents, last id) -> Future of (population, sample)
_sampler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simhash-sample")
_readers = threading.local()
_opened: list[apsw.Connection] = []  # every reader connection, to close when the server stops
_opened_lock = threading.Lock()


def install(host) -> None:
    """Called by datasette_plugin with itself: the helpers the review pages render and run with."""
    global plugin
    plugin = host


def enable(reviewer: str, threshold: float = 0.8) -> None:
    """Let the pages write labels and keepers, under this reviewer's name (simq serve --review)."""
    global _review
    _review = Review(reviewer, threshold)


def enabled() -> bool:
    return _review is not None


def prepare(path: str) -> None:
    """Open the writer's connection before serving: migrates an older index to the labels tables, runs
    the one-off check before the first write, and refuses a read-only file in one line."""
    conn = _writer.submit(_write_conn, path).result()
    from ..store.database import ensure_sound

    _writer.submit(ensure_sound, conn).result()
    _writer.submit(lambda: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()).result()


def _write_conn(path: str):
    if path not in _write_conns:
        if not _write_conns:
            atexit.register(close_connections)
        _write_conns[path] = open_for_labels(path)
    return _write_conns[path]


def close_connections() -> None:
    """When the server stops: fold the labels' WAL back into the file and close every connection these
    pages opened, so that the last one to close can take the -wal and -shm files away (web.serve)."""
    for conn in _write_conns.values():
        with contextlib.suppress(Exception):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    with _opened_lock:
        opened = [*_write_conns.values(), *_opened]
        _write_conns.clear()
        _opened.clear()
    for conn in opened:
        with contextlib.suppress(Exception):
            conn.close()


def _reader(path: str):
    """This thread's read-only connection to the file (labels and keepers are read on every page)."""
    conns = _readers.__dict__.setdefault("conns", {})
    if path not in conns:
        conns[path] = open_readonly(path)
        with _opened_lock:
            _opened.append(conns[path])
    return conns[path]


def routes(db: str) -> list:
    return [
        (db + r"/review$", review_view),
        (db + r"/labels$", labels_view),
        (db + r"/label$", label_post),
        (db + r"/keep$", keep_post),
        (db + r"/decisions\.(?P<format>jsonl|csv)$", decisions_view),
    ]


def context(datasette, name: str, path: str) -> dict:
    """What the review templates need, added to every page's context (datasette_plugin._context)."""
    base = plugin._base(datasette, name)

    def current_label(a: str, b: str):
        if not a or not b or a == b:
            return None
        found = label_of(_reader(path), a, b)
        return None if found is None else found.label

    def cluster_state(keys, kept: str) -> dict:
        """{key: label against the kept one}, and the keepers among the keys."""
        conn = _reader(path)
        labels = labels_of(conn, keys)
        keepers = keeper_keys(conn) & set(keys)
        chosen = [k for k in keys if k in keepers]
        kept = chosen[0] if chosen else kept
        return {"kept": kept, "keepers": keepers,
                "labels": {k: labels.get(pair_of(k, kept)) for k in keys if k != kept}}

    return {
        "review": enabled(),
        "reviewer": _review.reviewer if _review else None,
        "review_pages": {"review": f"{base}/review", "labels": f"{base}/labels", "label": f"{base}/label",
                         "keep": f"{base}/keep", "jsonl": f"{base}/decisions.jsonl", "csv": f"{base}/decisions.csv"},
        "label_words": WORDS,
        "label_names": LABELS,
        "current_label": current_label,
        "cluster_state": cluster_state,
    }


# -- writing ----------------------------------------------------------------------------------------


def _refused(request) -> Response | None:
    if request.method != "POST":
        return Response.text("only POST (a form of the review pages)", status=405, headers={"Allow": "POST"})
    if not enabled():
        return Response.text(
            "read-only: this server writes nothing; start it with simq serve --review to label", status=403
        )
    return None


async def _form(request) -> dict[str, str]:
    body = await plugin._body(request, MAX_FORM_BYTES)
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        raise SimhashError("post the review form (application/x-www-form-urlencoded)")
    return dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


def _token_refused(request, form: dict[str, str]) -> Response | None:
    """403 unless the form's CSRF token (or the X-CSRFToken header) equals the signed token of its
    cookie. Datasette's asgi-csrf checks this only when the request carries a cookie at all, and a form
    posted from another site carries none (SameSite=Lax): without a valid cookie the expected token is
    a fresh random one that nothing sent can match."""
    expected = request.scope.get("csrftoken")
    sent = form.get("csrftoken") or request.headers.get("x-csrftoken", "")
    if callable(expected) and sent and secrets.compare_digest(sent.encode(), str(expected()).encode()):
        return None
    return Response.text("forbidden: the form's CSRF token is missing or does not match its cookie; reload the "
                         "page and try again", status=403)


def _back(form: dict, fallback: str) -> str:
    """Where to go after a decision: the form's `next`, if it is a path on this server."""
    target = form.get("next") or fallback
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else fallback


async def _write(path: str, work, *args, **kwargs):
    def call():
        return work(_write_conn(path), *args, **kwargs)

    return await asyncio.get_running_loop().run_in_executor(_writer, call)


async def label_post(request, datasette):
    if (refused := _refused(request)) is not None:
        return refused
    name, path = await plugin._database(request, datasette)
    base = plugin._base(datasette, name)
    try:
        form = await _form(request)
        if (refused := _token_refused(request, form)) is not None:
            return refused
        saved = await _write(path, set_label, form.get("a", ""), form.get("b", ""), form.get("label", ""),
                             _review.reviewer)
    except SimhashError as exc:
        return Response.text(f"error: {exc}", status=400)
    back = _back(form, f"{base}/pair?" + urllib.parse.urlencode({"a": saved.first, "b": saved.second}))
    return Response.redirect(back, status=303)


async def keep_post(request, datasette):
    if (refused := _refused(request)) is not None:
        return refused
    name, path = await plugin._database(request, datasette)
    base = plugin._base(datasette, name)
    try:
        form = await _form(request)
        if (refused := _token_refused(request, form)) is not None:
            return refused
        key = form.get("key", "")
        others = _cluster_members(path, form.get("cluster", ""))
        if key not in others:
            raise SimhashError(f"{key!r:.80} is not a member of cluster {form.get('cluster')!r:.20}")
        await _write(path, keep, key, _review.reviewer, others=others, duplicates=form.get("rest") == "duplicate")
    except SimhashError as exc:
        return Response.text(f"error: {exc}", status=400)
    following = _next_cluster(path, int(form["cluster"]))
    fallback = f"{base}/clusters/{following}" if following is not None else f"{base}/clusters"
    return Response.redirect(_back(form, fallback), status=303)


def _cluster_members(path: str, cluster: str) -> list[str]:
    if not cluster.isdigit():
        raise SimhashError("give the cluster (a number)")
    rows = _reader(path).execute(
        "SELECT d.key FROM clusters c JOIN documents d ON d.id = c.id WHERE c.cluster = ? ORDER BY c.id",
        (int(cluster),),
    ).fetchall()
    if not rows:
        raise SimhashError(f"no cluster {cluster} in this index")
    return [key for (key,) in rows]


def _next_cluster(path: str, cluster: int) -> int | None:
    """The cluster after this one in the clusters page's order (largest first)."""
    conn = _reader(path)
    size = conn.execute("SELECT size FROM clusters WHERE id = ? AND cluster = ?", (cluster, cluster)).get
    if size is None:
        return None
    return conn.execute(
        "SELECT cluster FROM clusters WHERE id = cluster AND size > 1 AND (size < ? OR (size = ? AND cluster > ?)) "
        "ORDER BY size DESC, cluster LIMIT 1",
        (size, size, cluster),
    ).get


# -- the sample to label ----------------------------------------------------------------------------


def _sample_of(index, threshold: float):
    pop = population(index)
    return pop, draw_sample(pop, SAMPLE_SIZE, threshold)


async def _sample(path: str, threshold: float):
    """(population, sample) of the index as it is, or None while it is being drawn."""
    conn = _reader(path)
    version = conn.execute("SELECT count(*), max(id) FROM documents").get
    key = (path, version, threshold)
    future = _samples.get(key)
    if future is None:
        future = _samples[key] = _sampler.submit(lambda: _sample_of(plugin._index(path), threshold))
    try:
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), SAMPLE_WAIT_SECONDS)
    except asyncio.TimeoutError:
        return None


async def review_view(request, datasette):
    name, path = await plugin._database(request, datasette)
    threshold = _review.threshold if _review else 0.8
    context = plugin._context(datasette, name, path=path, current="review")
    try:
        drawn = await _sample(path, threshold)
    except SimhashError as exc:
        return await plugin._render(datasette, request, "simhash_review.html", {**context, "error": str(exc)}, 400)
    if drawn is None:
        return await plugin._render(datasette, request, "simhash_review.html", {**context, "drawing": True})
    pop, sample = drawn
    done = labels_of(_reader(path), [k for p in sample for k in (p.first, p.second)])
    labelled = [(p.first, p.second) in done for p in sample]
    try:
        after = int(request.args.get("after", "-1"))
    except ValueError:
        raise NotFound("after must be a whole number") from None
    position = next((i for i in range(after + 1, len(sample)) if not labelled[i]), None)
    if position is None:  # wrap around to the first unlabelled one
        position = next((i for i in range(len(sample)) if not labelled[i]), None)
    base = {**context, "population": pop, "sample": sample, "labelled": sum(labelled), "position": position}
    if position is None:
        return await plugin._render(datasette, request, "simhash_review.html", base)
    pair = sample[position]
    try:
        view = await plugin._run(path, plugin.pair_view, pair.first, pair.second)
    except SimhashError as exc:
        return await plugin._render(datasette, request, "simhash_review.html", {**base, "error": str(exc)}, 400)
    return await plugin._render(datasette, request, "simhash_review.html", {**base, "pair": pair, "result": view})


# -- calibration from the labels, and the decisions ---------------------------------------------------


def _labels_page(index, threshold: float) -> dict:
    pop = population(index)
    calibration = calibrate_labels(index, pop)
    png = None
    if calibration.labels:
        png = base64.b64encode(labels_png(calibration, threshold)).decode("ascii")
    rows = index.conn.execute(
        "SELECT first, second, label, reviewer, at FROM labels ORDER BY at DESC, first, second LIMIT 50"
    ).fetchall() if has_table(index.conn, "labels") else []
    return {"calibration": calibration, "png": png, "recent": rows, "threshold": threshold,
            "file": os.path.basename(index.path), "few": FEW_LABELS}


async def labels_view(request, datasette):
    name, path = await plugin._database(request, datasette)
    context = plugin._context(datasette, name, path=path, current="labels")
    threshold = _review.threshold if _review else 0.8
    return await plugin._guarded(datasette, request, name, "simhash_labels.html", context, _labels_page, threshold)


async def decisions_view(request, datasette):
    name, path = await plugin._database(request, datasette)
    fmt = request.url_vars["format"]
    try:
        rows, _ = await plugin._run(path, deletions)
    except SimhashError as exc:
        return Response.text(f"error: {exc}", status=400)
    buffer = io.StringIO()
    write_decisions(rows, buffer, fmt)
    stem = os.path.splitext(os.path.basename(path))[0]
    return Response(
        buffer.getvalue(), status=200, content_type="text/csv; charset=utf-8" if fmt == "csv" else
        "application/x-ndjson; charset=utf-8",
        headers={"content-disposition": f'attachment; filename="{stem}-decisions.{fmt}"'},
    )
