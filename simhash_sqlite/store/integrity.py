"""simq integrity: is an index file sound? SQLite's integrity check plus our own consistency checks.

Works on a read-only connection with no functions of ours registered, so it can examine a file
that SimhashIndex would refuse, and it never changes the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import apsw

from ..core.fingerprint import simhash, to_signed
from ..core.settings import FingerprintSettings
from ..errors import IndexNotFound, InvalidInput, NotAnIndex, SchemaTooNew, SimhashError
from .database import check_messages, check_ours, open_readonly, recovery_hint, schema_problems

SHOWN = 5  # offending keys listed per failed check
SKETCH_SCHEMA = 3  # the migration that added documents.sketch


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str


@dataclass
class IntegrityReport:
    path: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(result.ok for result in self.results)

    @property
    def failed(self) -> list[CheckResult]:
        return [result for result in self.results if not result.ok]

    def add(self, name: str, problems: list[str], fine: str) -> bool:
        self.results.append(CheckResult(name, not problems, "; ".join(problems) if problems else fine))
        return not problems


def integrity_check(
    path: str | os.PathLike, *, rehash: bool = False, on_progress: Callable[[int, int], None] | None = None
) -> IntegrityReport:
    """Run every check on the file at path; the report says what failed and why.

    rehash: also recompute the content hash and fingerprint of every stored text (indexes made
    with store_text), which reads and fingerprints the whole corpus; on_progress(done, total) is
    called as it goes (texts re-hashed, of the stored ones).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise IndexNotFound(f"no index at {path}")
    report = IntegrityReport(path)
    try:
        conn = open_readonly(path)
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        report.add("simhash-sqlite file", [f"{path} cannot be read as SQLite ({exc}); {recovery_hint(path)}"], "")
        return report
    try:
        try:
            version = check_ours(conn, path)
        except (NotAnIndex, SchemaTooNew) as exc:
            report.add("simhash-sqlite file", [str(exc)], "")
            return report
        fine = (
            f"application id SIMH, schema version {version}" if version
            else "empty: no schema yet (an add that never committed); the next add creates it"
        )
        report.add("simhash-sqlite file", [], fine)
        schema_ok = report.add(
            "schema", _safely(lambda: schema_problems(conn, version)), "exactly the objects our migrations create"
        )
        damage = _integrity(conn)
        report.add("integrity_check", damage + [recovery_hint(path, version)] if damage else [], "ok")
        if not schema_ok or version == 0:  # contents are read only through a schema we know
            return report
        # On a damaged file a check that reads a damaged page fails with SQLite's error, and says so.
        store_text, fp_settings = _step(report, "settings", lambda: _check_settings(conn, report), (None, None))
        _step(report, "unique keys", lambda: _check_keys(conn, report))
        _step(report, "blocks match fingerprints", lambda: _check_blocks(conn, report))
        _step(report, "content hashes", lambda: _check_content_hashes(conn, report))
        _step(report, "texts", lambda: _check_texts(conn, report, store_text))
        if version >= SKETCH_SCHEMA:
            _step(report, "sketches", lambda: _check_sketches(conn, report))
        if rehash:
            _step(report, "rehash", lambda: _rehash(conn, report, store_text, fp_settings, on_progress))
        return report
    finally:
        conn.close()


def _safely(run) -> list[str]:
    try:
        return run()
    except apsw.Error as exc:
        return [f"SQLite could not run the check: {exc}"]


def _step(report: IntegrityReport, name: str, run, failed=None):
    """Run one content check; an SQLite error (a damaged page) is reported as that check failing."""
    try:
        return run()
    except apsw.Error as exc:
        report.add(name, [f"SQLite could not run the check: {exc}"], "")
        return failed


def _integrity(conn: apsw.Connection) -> list[str]:
    """SQLite's findings ([] when sound). integrity_check stops at some damage with an error of its own;
    quick_check, which skips the index-content comparison, then still lists the damaged pages."""
    for pragma in ("integrity_check(20)", "quick_check(20)"):
        try:
            messages = [row[0] for row in conn.execute(f"PRAGMA {pragma}")]
        except apsw.Error as exc:
            error = f"SQLite could not finish the check: {exc}"
            continue
        return [] if messages == ["ok"] else check_messages(messages)
    return [error]


def _check_settings(conn: apsw.Connection, report: IntegrityReport) -> tuple[bool | None, FingerprintSettings | None]:
    meta = dict(conn.execute("SELECT key, value FROM simhash_meta"))
    problems, detail, store_text, settings = [], "", None, None
    if "fingerprint" not in meta:
        problems.append("the fingerprint settings are missing from simhash_meta")
    else:
        try:
            settings = FingerprintSettings.from_json(meta["fingerprint"])
            detail = settings.describe()
        except (InvalidInput, ValueError, TypeError) as exc:
            problems.append(f"the fingerprint settings cannot be read: {exc}")
    if meta.get("store_text") not in ("0", "1"):
        problems.append(f"store_text must be 0 or 1, not {meta.get('store_text')!r}")
    else:
        store_text = meta["store_text"] == "1"
    report.add("settings", problems, detail)
    return store_text, settings


def _keys(rows) -> str:
    keys = [str(row[0]) for row in rows]
    return ", ".join(keys[:SHOWN]) + (f" and {len(keys) - SHOWN} more" if len(keys) > SHOWN else "")


def _check_keys(conn: apsw.Connection, report: IntegrityReport) -> None:
    # NOT INDEXED: read the table itself, since a damaged UNIQUE index is what this looks for.
    duplicates = list(conn.execute("SELECT key FROM documents NOT INDEXED GROUP BY key HAVING count(*) > 1"))
    report.add("unique keys", [f"keys stored more than once: {_keys(duplicates)}"] if duplicates else [], "ok")


def _check_blocks(conn: apsw.Connection, report: IntegrityReport) -> None:
    """b0..b3 must be the 16-bit blocks of the fingerprint (all NULL with it), or searches miss rows."""
    wrong = list(
        conn.execute(
            """SELECT key FROM documents NOT INDEXED WHERE
                   b0 IS NOT ((fingerprint >> 48) & 65535) OR b1 IS NOT ((fingerprint >> 32) & 65535)
                OR b2 IS NOT ((fingerprint >> 16) & 65535) OR b3 IS NOT (fingerprint & 65535)
               ORDER BY id"""
        )
    )
    problems = (
        [f"{len(wrong)} document(s) whose blocks do not match their fingerprint: {_keys(wrong)}"] if wrong else []
    )
    total = conn.execute("SELECT count(*) FROM documents").get
    report.add("blocks match fingerprints", problems, f"{total:,} documents")


def _check_content_hashes(conn: apsw.Connection, report: IntegrityReport) -> None:
    """A content hash is BLAKE2b-128 (16 bytes) or NULL (fingerprints added without their text)."""
    wrong = list(
        conn.execute(
            "SELECT key FROM documents WHERE content_hash IS NOT NULL AND length(CAST(content_hash AS BLOB)) != 16 "
            "ORDER BY id"
        )
    )
    problems = [f"{len(wrong)} document(s) whose content hash is not 16 bytes: {_keys(wrong)}"] if wrong else []
    report.add("content hashes", problems, "ok")


def _check_texts(conn: apsw.Connection, report: IntegrityReport, store_text: bool | None) -> None:
    if store_text is not False:
        return
    stored = list(conn.execute("SELECT key FROM documents WHERE text IS NOT NULL ORDER BY id"))
    problems = (
        [f"the index does not store texts, yet {len(stored)} document(s) have one: {_keys(stored)}"] if stored else []
    )
    report.add("texts", problems, "none stored, as recorded")


def _recorded_scheme(conn: apsw.Connection):
    """The index's sketch scheme (sketch.SketchScheme.recorded: ValueError where it cannot be read)."""
    from ..core.sketch import SketchScheme

    return SketchScheme.recorded(dict(conn.execute("SELECT key, value FROM simhash_meta")).get("sketch"))


def _check_sketches(conn: apsw.Connection, report: IntegrityReport) -> None:
    """A sketch is NULL or one of the recorded scheme's size; a document without a fingerprint has none."""
    try:
        scheme = _recorded_scheme(conn)
    except ValueError as exc:
        report.add("sketches", [f"the sketch scheme in simhash_meta cannot be read: {exc}"], "")
        return
    wrong = list(
        conn.execute(
            "SELECT key FROM documents WHERE sketch IS NOT NULL AND (typeof(sketch) != 'blob' OR length(sketch) != ? "
            "OR fingerprint IS NULL) ORDER BY id",
            (scheme.nbytes,),
        )
    )
    missing = conn.execute("SELECT count(*) FROM documents WHERE sketch IS NULL AND fingerprint IS NOT NULL").get
    problems = [f"{len(wrong)} document(s) whose sketch is not {scheme.nbytes} bytes: {_keys(wrong)}"] if wrong else []
    detail = f"{scheme.describe()}; {missing:,} document(s) with a fingerprint but no sketch (checked by distance)"
    report.add("sketches", problems, detail)


def _rehash(
    conn: apsw.Connection, report: IntegrityReport, store_text: bool | None, settings, on_progress=None
) -> None:
    """Stored texts must still give their stored content hash, fingerprint and sketch."""
    from .texts import content_hash  # the same hash add() stores

    if not store_text or settings is None:
        report.add("rehash", [], "not run: the index does not store texts (or its settings are unreadable)")
        return
    from ..core.sketch import sketch

    has_sketches = any(row[1] == "sketch" for row in conn.execute("PRAGMA table_info(documents)"))
    try:
        scheme = _recorded_scheme(conn)
    except ValueError:
        has_sketches = False  # the sketches check names it
    query = (
        "SELECT key, fingerprint, content_hash, text, sketch FROM documents WHERE text IS NOT NULL ORDER BY id"
        if has_sketches
        else "SELECT key, fingerprint, content_hash, text, NULL FROM documents WHERE text IS NOT NULL ORDER BY id"
    )
    wrong, checked = [], 0
    total = conn.execute("SELECT count(*) FROM documents WHERE text IS NOT NULL").get if on_progress else 0
    for key, fingerprint, digest, text, stored_sketch in conn.execute(query):
        checked += 1
        if on_progress is not None and checked % 100 == 0:
            on_progress(checked, total)
        expected = simhash(text, settings)
        if content_hash(text) != digest or (None if expected is None else to_signed(expected)) != fingerprint:
            wrong.append((key,))
        elif has_sketches and stored_sketch is not None and sketch(text, scheme) != stored_sketch:
            wrong.append((key,))
    problems = []
    if wrong:
        problems.append(f"{len(wrong)} stored text(s) no longer give their hash, fingerprint or sketch: {_keys(wrong)}")
    what = "fingerprints and sketches" if has_sketches else "fingerprints"
    report.add("rehash", problems, f"{checked:,} stored texts give their {what}")


def problems(path: str | os.PathLike) -> list[str]:
    """What is wrong with the index file at path, one line per failed check; [] when it is whole.

    For the crash, concurrency and fuzz tests and bench/'s stress scripts, which only need to know
    whether anything failed and what. Opens its own read-only connection, so it can run beside writers
    (it sees the last commit). A file whose first transaction never committed (an add killed at once)
    is empty, and passes: the next open creates the schema.
    """
    try:
        report = integrity_check(path)
    except SimhashError as exc:
        return [str(exc)]
    except apsw.Error as exc:  # a file SQLite cannot read at all
        return [f"SQLite: {exc}"]
    return [f"{result.name}: {result.detail}" for result in report.failed]


def report_json(report: IntegrityReport) -> str:
    return json.dumps(
        {"file": report.path, "ok": report.ok, "checks": [r.__dict__ for r in report.results]}, ensure_ascii=False
    )
