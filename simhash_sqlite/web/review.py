"""The review pages of `simq serve --review`: label pairs, choose what to keep, calibrate from the
labels, download the decisions. Routes are added to the plugin's (datasette_plugin.register_routes).

Writes: only labels and keepers (labels.py), only when the server was started with --review
(enable()), one transaction each, on the worker process's writing connection (worker.py: this,
Datasette's process, never opens the file with apsw; review_work.py is what runs there). Every POST must carry
Datasette's CSRF token matching its cookie (_token_refused: 403 without it, cookie or not) and come from
this server's own pages (same_origin.py); without --review every POST is refused (403) and the pages
only show what is there.
"""

from __future__ import annotations

import asyncio
import io
import os
import secrets
import urllib.parse
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from datasette.utils.asgi import NotFound, Response

from ..errors import SimhashError
from ..find.review import deletions, write_decisions
from ..store.labels import LABELS, WORDS, keep, set_label
from . import review_work, worker

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
_samples: dict[tuple, Future] = {}  # (path, documents, last id, threshold) -> Future of (population size, sample)


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
    """Open the writing connection before serving (in the worker): migrates an older index to the labels
    tables, runs the one-off check before the first write, and refuses a read-only file in one line."""
    worker.call("write", worker.with_writer, path, review_work.prepare).result()


async def _labels(path: str, work, *args):
    """work(index, *args) on the worker's labels lane (small reads, never queued behind a search)."""
    return await asyncio.wrap_future(worker.call("labels", worker.with_index, path, work, *args))


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

    # Called by the templates (Datasette renders them async: Jinja awaits what these return).
    async def current_label(a: str, b: str):
        return await _labels(path, review_work.current_label, a, b) if path else None

    async def cluster_state(keys, kept: str) -> dict:
        """{key: label against the kept one}, and the keepers among the keys."""
        return await _labels(path, review_work.cluster_state, list(keys), kept)

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
    """work(connection, *args, **kwargs) on the worker's one writing connection to the file."""
    return await asyncio.wrap_future(worker.call("write", worker.with_writer, path, work, *args, **kwargs))


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
        others = await _labels(path, review_work.cluster_members, form.get("cluster", ""))
        if key not in others:
            raise SimhashError(f"{key!r:.80} is not a member of cluster {form.get('cluster')!r:.20}")
        await _write(path, keep, key, _review.reviewer, others=others, duplicates=form.get("rest") == "duplicate")
    except SimhashError as exc:
        return Response.text(f"error: {exc}", status=400)
    following = await _labels(path, review_work.next_cluster, int(form["cluster"]))
    fallback = f"{base}/clusters/{following}" if following is not None else f"{base}/clusters"
    return Response.redirect(_back(form, fallback), status=303)


# -- the sample to label ----------------------------------------------------------------------------


async def _sample(path: str, threshold: float):
    """(population size, sample) of the index as it is, or None while it is being drawn (in the worker,
    once for each state of the documents)."""
    key = (path, await _labels(path, review_work.version), threshold)
    future = _samples.get(key)
    if future is None or (future.done() and isinstance(future.exception(), worker.WorkerStopped)):
        future = _samples[key] = worker.call("sample", worker.with_index, path, review_work.sample, threshold)
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
    labelled = await _labels(path, review_work.labelled, [(p.first, p.second) for p in sample])
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


async def labels_view(request, datasette):
    name, path = await plugin._database(request, datasette)
    context = plugin._context(datasette, name, path=path, current="labels")
    threshold = _review.threshold if _review else 0.8
    return await plugin._guarded(datasette, request, name, "simhash_labels.html", context, review_work.labels_page,
                                 threshold)


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
