"""simq serve: Datasette on one index, read-only, with this package's plugin (datasette_plugin.py)."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import webbrowser
from collections.abc import Callable
from pathlib import Path

from ..errors import InvalidInput, MissingExtra
from ..index import SimhashIndex
from ..store.labels import validate_reviewer

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8001
REVIEW_HOSTS = ("127.0.0.1", "localhost")
READY_SECONDS = 30.0


def clusters_url(path: str | os.PathLike, host: str, port: int) -> str:
    """The clusters page of the index as Datasette names it (its file name without the suffix)."""
    from datasette.utils import tilde_encode

    return f"http://{host}:{port}/{tilde_encode(Path(path).stem)}/-/simhash/clusters"


def check_servable(path: str | os.PathLike) -> bool:
    """Refuse what Datasette could not serve read-only and consistent: a file that is not an index. Returns
    whether it can be served live (read-only connections through its WAL, which see what simq add and
    simq clusters write while the server runs): the file and its folder can be written, for the -shm
    file. Otherwise it is served immutable, as it is now, and refused while its WAL holds commits not yet
    in the file (an immutable reader would not see them). Run in the worker process: it opens the file
    with apsw (worker.py)."""
    with SimhashIndex(path, readonly=True):
        pass
    folder = os.path.dirname(os.path.abspath(path))
    if os.access(path, os.R_OK | os.W_OK) and os.access(folder, os.W_OK | os.X_OK):
        return True
    wal = f"{os.fspath(path)}-wal"
    if os.path.exists(wal) and os.path.getsize(wal) > 0:
        raise InvalidInput(
            f"{wal} holds changes not yet written into {path}: a writer (simq add, rm, clusters) is running or "
            "was stopped; wait for it to finish, or run simq integrity --db on the index once, then serve it"
        )
    return False


def _port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no conflict
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise InvalidInput(f"cannot listen on {host}:{port} ({exc.strerror or exc}); give another --port") from None


def _open_when_ready(url: str, host: str, port: int) -> None:
    """Open the browser once the server accepts connections (it starts after this returns)."""

    def wait_then_open() -> None:
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((host, port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.2)
        webbrowser.open(url)

    threading.Thread(target=wait_then_open, daemon=True).start()


def serve(
    path: str | os.PathLike,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    open_browser: bool = False,
    on_ready: Callable[[], None] | None = None,
    review: str | None = None,
) -> None:
    """Run Datasette on the index until interrupted: the file opened read-only (live through its WAL where
    the folder can be written, else immutable: check_servable), our SQL functions on its connections, our
    pages under /DB/-/simhash/; then no -wal or -shm file is left behind.
    on_ready: called once the checks have passed, as the server starts.

    review: the reviewer's name, to let the review pages write labels and keepers into the index (an
    older index gets their tables first; a read-only one is refused), on a connection of their own;
    Datasette still writes nothing."""
    try:
        import click
        from datasette.cli import cli
        from datasette.plugins import pm
    except ImportError:
        raise MissingExtra("simq serve needs Datasette: pip install 'simhash-sqlite[web]'") from None
    if review is not None and host not in REVIEW_HOSTS:
        raise InvalidInput(f"simq serve --review listens on this machine only (127.0.0.1), not {host}")
    if review is not None:
        host = DEFAULT_HOST  # localhost too: bound to 127.0.0.1, whatever the name resolves to first
        reviewer = validate_reviewer(review)
    from . import datasette_plugin, worker
    from . import review as web_review

    # This process opens the file with the stdlib's sqlite3 only (Datasette's connections); apsw, in the
    # worker process, does everything else: the checks, the labels, the pages' searches (worker.py).
    path = os.fspath(path)
    live = False
    try:
        if review is not None:  # (folds a WAL left by an earlier review server into the file)
            web_review.enable(reviewer)
            web_review.prepare(path)
        live = worker.call("read", check_servable, path).result()
        _port_free(host, port)
        if not pm.is_registered(datasette_plugin) and pm.get_plugin("simhash_sqlite") is None:
            pm.register(datasette_plugin, name="simhash_sqlite")  # run from a source tree without entry points
        if on_ready is not None:
            on_ready()
        if open_browser:
            _open_when_ready(clusters_url(path, host, port), host, port)
        # Live: Datasette's connections are read-only (mode=ro) through the WAL, so its pages (the tables, the
        # SQL box) answer from the file as it is while simq add or simq clusters write it; immutable ones
        # kept what they had read and called the rest "malformed".
        args = ["serve", path] if live else ["serve", "--immutable", path]
        _run_datasette(cli, click, [*args, "--host", host, "--port", str(port)])
    finally:
        datasette_plugin.close_connections()
        worker.stop(fold=[path] if live else [])  # the last connection to the file: no -wal or -shm left


def _run_datasette(cli, click, args: list[str]) -> None:
    # uvicorn stops on SIGTERM, then raises it again once its own handler is gone: with the default
    # handler the process would end there, before the -wal and -shm files are folded away.
    previous = signal.signal(signal.SIGTERM, _stop) if threading.current_thread() is threading.main_thread() else None
    try:
        cli.main(args=args, prog_name="simq serve", standalone_mode=False)
    except click.ClickException as exc:
        raise InvalidInput(f"datasette: {exc.format_message()}") from None
    except _Stopped:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class _Stopped(Exception):
    """SIGTERM after the server has shut down."""


def _stop(signum, frame) -> None:
    raise _Stopped()
