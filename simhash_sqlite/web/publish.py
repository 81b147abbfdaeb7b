"""`simq publish INDEX DIR`: a static page that searches an index in the browser, with no server.

The page (web/browser/: index.html, app.js) runs SQLite compiled to WebAssembly with the extension built
in (sqlite-simhash.wasm, made by wasm/build.sh from the amalgamation and the package's C files), so its
simhash_near is the extension's: the answers of `simq near`, except that pairs of two short texts are
judged by their sketches (the WebAssembly build has no zlib). DIR gets the page, a copy of the index
(one file, copied whole by SQLite's backup under another name first, so a half-written copy never has the
index's name) and
index.json naming it: served over HTTP (any static host), the page opens it at once; opened as a file,
the page asks for an index file instead.
"""

from __future__ import annotations

import json
import os
import shutil
from importlib import resources
from pathlib import Path

import apsw

from ..errors import InvalidInput
from ..index import SimhashIndex

ASSETS = ("index.html", "app.js", "sqlite-simhash.js", "sqlite-simhash.wasm")


def publish(index_path: str | os.PathLike, folder: str | os.PathLike) -> Path:
    """Write the page, its WebAssembly SQLite and a copy of the index into folder (made if missing);
    returns the page's path. The index is opened read-only first, so a file that is not an index is
    refused before anything is written."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise InvalidInput(f"{folder} is not a folder")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / "index.json").is_file():
        # Never write over someone's files: only a new or empty folder, or an earlier publish (index.json).
        raise InvalidInput(f"{folder} holds other files: publish into a new or empty folder")
    with SimhashIndex(index_path, readonly=True) as index:
        folder.mkdir(parents=True, exist_ok=True)
        name = Path(index_path).name
        copy = folder / name
        partial = folder / f".{name}.partial"
        partial.unlink(missing_ok=True)
        target = apsw.Connection(str(partial))
        try:
            with target.backup("main", index.conn, "main") as backup:
                backup.step(-1)
            target.execute("PRAGMA journal_mode=DELETE")  # one file, read as it is (no -wal beside it)
        finally:
            target.close()
    os.replace(partial, copy)
    browser = resources.files("simhash_sqlite.web") / "browser"
    for asset in ASSETS:
        with resources.as_file(browser / asset) as source:
            shutil.copyfile(source, folder / asset)
    (folder / "index.json").write_text(json.dumps({"index": name}) + "\n", encoding="utf-8")
    return folder / "index.html"
