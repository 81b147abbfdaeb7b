"""The Datasette plugin (pip install 'simhash-sqlite[web]'; `simq serve` starts Datasette with it).

On every connection Datasette opens it loads the SQLite extension (simhash_near, where the install built
it) and registers our scalar SQL functions, from the table the apsw side uses (store.functions.FUNCTIONS),
with the settings of the index the connection is to: also under a plain `datasette corpus.db`. It adds
pages to review near-duplicates before deleting them, under /DATABASE/-/simhash/: search, clusters,
one cluster, a pair side by side, and calibration. The pages call the library in a worker process of
their own (worker.py), where apsw opens the file: Datasette's connections are the stdlib's sqlite3, and
two SQLite libraries in one process break each other's locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.parser
import email.policy
import email.utils
import re
import sys
import threading
import urllib.parse
from importlib import resources

from datasette import hookimpl
from datasette.utils import await_me_maybe, tilde_decode
from datasette.utils.asgi import Base400, NotFound, Response
from datasette.views.base import DatasetteError
from jinja2 import ChoiceLoader, FileSystemLoader

from ..core.settings import CONFIRM_K, DEFAULT_THRESHOLD, RECOMMENDED_K
from ..errors import IndexNotFound, InvalidInput, NotAnIndex, SimhashError, printable
from ..native.extension import load as load_extension
from ..store.functions import prepare_sqlite3_connection
from . import review as web_review
from . import same_origin, worker
from .pages import MAX_QUERY_BYTES, calibration_view, cluster_view, clusters_page, pair_view, query_text, search

PREFIX = "/-/simhash"
_SEARCH_PATH = re.compile(r"^/[^/]+" + re.escape(PREFIX) + r"/search$")


# Every Datasette started, so that simq serve can close their connections when it stops (then the worker's
# last connection removes the -wal and -shm files).
_everything: list = []
_everything_lock = threading.Lock()


def close_connections() -> None:
    """Close the connections of Datasette's databases (after the server stopped)."""
    with _everything_lock:
        opened, _everything[:] = list(_everything), []
    for datasette in opened:
        for db in datasette.databases.values():
            with contextlib.suppress(Exception):
                db.close()


async def _run(path: str, work, *args, **kwargs):
    """work(index, *args, **kwargs) on a read-only index of `path`, in the worker process (worker.py)."""
    return await asyncio.wrap_future(worker.call("read", worker.with_index, path, work, *args, **kwargs))


@hookimpl
def startup(datasette):
    """Have each worker thread open the served indexes and read the fingerprints a search scans, in the
    background, so that the first search answers as fast as the next ones (BENCHMARKS.md, Web view)."""
    paths = [db.path for db in datasette.databases.values() if _is_index(db)]
    with _everything_lock:
        _everything.append(datasette)
    for _ in range(worker.READ_THREADS):
        worker.call("read", worker.warm, paths, CONFIRM_K)


# -- SQL functions on Datasette's connections ----------------------------------------------------


@hookimpl
def prepare_connection(conn, database, datasette):
    # simhash_near (the SQL editor, canned queries) from the loadable extension, where the install built
    # it and this Python's sqlite3 loads extensions; then the scalar functions from the package's table,
    # over the extension's (the same results, and `words` settings too: docs/sql.md).
    # ExtensionMissing, or the driver's error (sqlite3's, pysqlite3's): the connection goes without it.
    with contextlib.suppress(Exception):
        load_extension(conn)
    prepare_sqlite3_connection(conn)


# -- templates and navigation --------------------------------------------------------------------


@hookimpl
def prepare_jinja2_environment(env, datasette):
    templates = str(resources.files("simhash_sqlite.web") / "templates")
    env.loader = ChoiceLoader([env.loader, FileSystemLoader(templates)])
    # Keys as the CLI shows them: control, bidi and other invisible characters escaped (\u202e, \r), so
    # that no key can reorder or hide what the page shows (HTML escaping is Jinja's, as before).
    env.filters["printable"] = printable


@hookimpl(hookwrapper=True)
def handle_exception(datasette, request, exception):
    """A 4xx (an unmatched page of ours: NotFound; SQL Datasette refuses) answers without Datasette's rich
    traceback print: Datasette 0.65 calls rich's print_exception outside an except block, which rich 15 refuses with an
    error of its own, so every 404 became a 500 with a traceback in the log. Datasette's own handler
    still renders the page; only its console print is left out, for client errors."""
    outcome = yield
    client_error = isinstance(exception, DatasetteError) and exception.status < 500  # ?sql= that is no SELECT
    if not (isinstance(exception, Base400) or client_error):
        return
    outcome.force_result([_without_rich(response) for response in outcome.get_result()])


def _without_rich(response):
    if not callable(response):
        return response

    async def quiet():
        from datasette import handle_exception as default

        rich, default.rich = getattr(default, "rich", None), None
        try:
            return await await_me_maybe(response)
        finally:
            default.rich = rich

    return quiet


def _is_index(db) -> bool:
    """A file Datasette serves, which our pages may try to open (they say so if it is no index)."""
    return db.path is not None and not db.is_memory


async def _looks_like_index(db) -> bool:
    """A file with our settings table: worth a link to our pages."""
    return _is_index(db) and "simhash_meta" in await db.table_names()


@hookimpl
def menu_links(datasette, actor, request):
    return [{"href": datasette.urls.path(PREFIX), "label": "Near-duplicates (simhash)"}]


@hookimpl
def database_actions(datasette, actor, database, request):
    async def links():
        if not await _looks_like_index(datasette.get_database(database)):
            return []
        base = _base(datasette, database)
        return [
            {"href": f"{base}/search", "label": "Search near-duplicates"},
            {"href": f"{base}/clusters", "label": "Near-duplicate clusters"},
            {"href": f"{base}/calibrate", "label": "Calibrate k"},
        ]

    return links


@hookimpl
def asgi_wrapper(datasette):
    """Every request checked for this server's Host, every POST for its own origin (same_origin.py)."""
    return same_origin.guard


@hookimpl
def skip_csrf(datasette, scope):
    """The search form changes nothing (a forged post can only run a search), and asgi-csrf 0.11 fails
    on every multipart post with python-multipart 0.0.34 (its FormParser no longer takes FileClass)."""
    return scope["type"] == "http" and _SEARCH_PATH.match(scope.get("path", "")) is not None


def _base(datasette, database: str) -> str:
    return f"{datasette.urls.database(database)}{PREFIX}"


@hookimpl
def register_routes(datasette):
    db = r"^/(?P<database>[^/]+)" + PREFIX
    return [
        (rf"^{PREFIX}/?$", home_view),
        (db + r"/?$", home_view),
        (db + r"/search$", search_view),
        (db + r"/clusters$", clusters_view),
        (db + r"/clusters/(?P<cluster>\d{1,18})$", cluster_page_view),
        (db + r"/pair$", pair_page_view),
        (db + r"/calibrate$", calibrate_view),
        *web_review.routes(db),
    ]


async def _render(datasette, request, template: str, context: dict, status: int = 200) -> Response:
    html = await datasette.render_template(template, context, request=request)
    return Response.html(html, status=status)


async def _database(request, datasette) -> tuple[str, str]:
    """(name, path) of the database in the URL; NotFound unless it is a file Datasette serves."""
    name = tilde_decode(request.url_vars["database"])
    try:
        db = datasette.get_database(name)
    except KeyError:
        raise NotFound(f"no database {name}") from None
    if not _is_index(db):
        raise NotFound(f"{name} is not a simhash-sqlite index file")
    return name, db.path


def _context(datasette, name: str, **more) -> dict:
    base = _base(datasette, name)
    return {
        "database": name,
        "pages": {"search": f"{base}/search", "clusters": f"{base}/clusters", "pair": f"{base}/pair",
                  "calibrate": f"{base}/calibrate", "cluster": f"{base}/clusters/"},
        "documents_url": datasette.urls.table(name, "documents"),
        "clusters_table_url": datasette.urls.table(name, "clusters"),
        "quote": urllib.parse.quote,
        "urlencode": urllib.parse.urlencode,
        **web_review.context(datasette, name, more.get("path") or ""),
        **more,
    }


async def _guarded(datasette, request, name: str, template: str, context: dict, work, *args, **kwargs) -> Response:
    """Run work on the index and render the page; the library's own errors (a file that is not an
    index, bad input) are shown on the page, never a traceback."""
    try:
        result = await _run(context["path"], work, *args, **kwargs)
    except (IndexNotFound, NotAnIndex) as exc:
        raise NotFound(str(exc)) from None
    except SimhashError as exc:
        return await _render(datasette, request, template, {**context, "error": str(exc)}, status=400)
    return await _render(datasette, request, template, {**context, "result": result})


# -- pages -----------------------------------------------------------------------------------------


async def home_view(request, datasette):
    names = [name for name, db in datasette.databases.items() if await _looks_like_index(db)]
    if "database" in request.url_vars:
        name, _ = await _database(request, datasette)
        return Response.redirect(f"{_base(datasette, name)}/clusters")
    links = [(name, _base(datasette, name)) for name in names]
    return await _render(datasette, request, "simhash_home.html", {"indexes": links})


async def search_view(request, datasette):
    name, path = await _database(request, datasette)
    if request.method == "POST":
        try:
            form = await _posted_form(request)
        except InvalidInput as exc:
            context = _context(datasette, name, path=path, current="search", form={}, error=str(exc))
            return await _render(datasette, request, "simhash_search.html", context, status=400)
    else:
        form = {key: request.args.get(key) for key in request.args}
    text, key = form.get("text") or None, form.get("key") or None
    upload = form.get("file")
    context = _context(datasette, name, path=path, current="search", form=form, confirm_k=CONFIRM_K,
                       recommended_k=RECOMMENDED_K, default_jaccard=DEFAULT_THRESHOLD)
    try:
        if isinstance(upload, bytes) and upload:
            text = query_text(upload)
        k = _int(form.get("k"), "k")
        limit = _int(form.get("limit"), "limit")
        threshold = _float(form.get("jaccard"), "jaccard", DEFAULT_THRESHOLD)
        confirm = form.get("confirm", "1") != "0"
    except InvalidInput as exc:
        return await _render(datasette, request, "simhash_search.html", {**context, "error": str(exc)}, status=400)
    if text is None and key is None:
        return await _render(datasette, request, "simhash_search.html", context)
    if text is not None and key is not None:
        error = "give a text (or a file) or a key, not both"
        return await _render(datasette, request, "simhash_search.html", {**context, "error": error}, status=400)
    context["query_text"] = text
    return await _guarded(datasette, request, name, "simhash_search.html", context, search, text, key=key, k=k,
                          check=confirm, threshold=threshold, limit=limit, uncertain=form.get("uncertain") == "1")


async def clusters_view(request, datasette):
    name, path = await _database(request, datasette)
    try:
        page = _int(request.args.get("page"), "page") or 1
    except InvalidInput as exc:
        raise NotFound(str(exc)) from None
    context = _context(datasette, name, path=path, current="clusters")
    return await _guarded(datasette, request, name, "simhash_clusters.html", context, clusters_page, page)


async def cluster_page_view(request, datasette):
    name, path = await _database(request, datasette)
    cluster = int(request.url_vars["cluster"])
    context = _context(datasette, name, path=path)
    return await _guarded(datasette, request, name, "simhash_cluster.html", context, cluster_view, cluster)


async def pair_page_view(request, datasette):
    name, path = await _database(request, datasette)
    a, b = request.args.get("a"), request.args.get("b")
    context = _context(datasette, name, path=path, a=a, b=b)
    if not a or not b:
        return await _render(datasette, request, "simhash_pair.html",
                             {**context, "error": "give two keys of the index: pair?a=KEY&b=KEY"}, status=400)
    return await _guarded(datasette, request, name, "simhash_pair.html", context, pair_view, a, b)


async def calibrate_view(request, datasette):
    name, path = await _database(request, datasette)
    context = _context(datasette, name, path=path, current="calibrate")
    return await _guarded(datasette, request, name, "simhash_calibrate.html", context, calibration_view)


# -- form parsing ----------------------------------------------------------------------------------


def _int(value: str | None, name: str) -> int | None:
    if value is None or value.strip() == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number, not {value!r:.40}") from None


def _float(value: str | None, name: str, default: float) -> float:
    if value is None or value.strip() == "":
        return default
    try:
        return float(value)
    except ValueError:
        raise InvalidInput(f"{name} must be a number, not {value!r:.40}") from None


async def _body(request, limit: int) -> bytes:
    """The request body, refused past `limit` bytes (a bytearray: repeated bytes joins are quadratic)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise InvalidInput(f"the upload is larger than {limit >> 20} MiB")
    body = bytearray()
    while True:
        message = await request.receive()
        body += message.get("body", b"")
        if len(body) > limit:
            raise InvalidInput(f"the upload is larger than {limit >> 20} MiB")
        if not message.get("more_body", False):
            return bytes(body)


async def _posted_form(request) -> dict[str, str | bytes]:
    """The fields of a POSTed form: text fields as str, an uploaded file ("file") as bytes."""
    content_type = request.headers.get("content-type", "")
    body = await _body(request, MAX_QUERY_BYTES + (1 << 20))
    if content_type.startswith("application/x-www-form-urlencoded"):
        return dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    if not content_type.startswith("multipart/form-data"):
        raise InvalidInput("post the search form (multipart/form-data)")
    header = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1", "replace")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(header + body)
    form: dict[str, str | bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not name:
            continue
        field = email.utils.collapse_rfc2231_value(name)  # (a str already under the HTTP policy)
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):  # None for a part that is itself multipart
            payload = b""
        if part.get_filename() is not None or field == "file":
            form[field] = payload
        else:
            form[field] = payload.decode("utf-8", "replace")
    return form


web_review.install(sys.modules[__name__])  # the review pages render and run with this module's helpers
