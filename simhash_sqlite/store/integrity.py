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
from ..errors import IndexNotFound, NotAnIndex, SchemaTooNew, SimhashError
from .database import (
    bulk_load,
    check_messages,
    check_ours,
    disk_errors,
    loader_running,
    open_readonly,
    recovery_hint,
    schema_problems,
)
from .labels import label_problems
from .meta import clusters_record_problem, meta_problems
from .texts import key_path

SHOWN = 5  # offending keys listed per failed check
SKETCH_SCHEMA = 3  # the migration that added documents.sketch
LABELS_SCHEMA = 4  # the migration that added the labels and keepers tables
SHORT_TEXT_SCHEMA = 5  # the migration that added documents.short_text
SOURCES_SCHEMA = 6  # the migration that added sources and documents' JSONL lines


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
    with disk_errors(os.fspath(path)):
        return _check_index(os.fspath(path), rehash, on_progress)


def _check_index(path: str, rehash: bool, on_progress) -> IntegrityReport:
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
        _step(report, "search indexes", lambda: _check_search_indexes(conn, report))
        _step(report, "unique keys", lambda: _check_keys(conn, report))
        _step(report, "blocks match fingerprints", lambda: _check_blocks(conn, report))
        _step(report, "content hashes", lambda: _check_content_hashes(conn, report))
        _step(report, "texts", lambda: _check_texts(conn, report, store_text))
        if version >= SKETCH_SCHEMA:
            _step(report, "sketches", lambda: _check_sketches(conn, report))
        _step(report, "short texts", lambda: _check_short_texts(conn, report, version, store_text))
        _step(report, "clusters", lambda: _check_clusters(conn, report))
        if version >= SOURCES_SCHEMA:
            _step(report, "jsonl lines", lambda: _check_lines(conn, report))
        if version >= LABELS_SCHEMA:
            _step(report, "labels", lambda: report.add("labels", *label_problems(conn)))
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
    invalid = dict(meta_problems(meta))
    problems = [f"simhash_meta {key!r} cannot be read: {problem}" for key, problem in invalid.items()]
    if "fingerprint" not in meta:
        problems.append("the fingerprint settings are missing from simhash_meta")
    elif "fingerprint" not in invalid:
        settings = FingerprintSettings.from_json(meta["fingerprint"])
        detail = settings.describe()
    if "store_text" not in meta:
        problems.append("simhash_meta 'store_text' is missing")
    elif "store_text" not in invalid:
        store_text = meta["store_text"] == "1"
    report.add("settings", problems, detail)
    return store_text, settings


def _keys(rows) -> str:
    keys = [str(row[0]) for row in rows]
    return ", ".join(keys[:SHOWN]) + (f" and {len(keys) - SHOWN} more" if len(keys) > SHOWN else "")


def _check_search_indexes(conn: apsw.Connection, report: IntegrityReport) -> None:
    """The block and content hash indexes: present, or being built by a running bulk load. A load that was
    killed left them missing: searches stay exact but scan, until a command that writes builds them."""
    record = bulk_load(conn)
    if record is None:
        report.add("search indexes", [], "present")
    elif loader_running(record):
        building = f"being built by a bulk load (process {record.get('pid')}, since {record.get('started')})"
        report.add("search indexes", [], building)
    else:
        report.add("search indexes", [
            f"missing: a bulk load that began {record.get('started')} was stopped before it built them; searches "
            f"are exact but scan the table; the next command that writes (simq add) builds them"
        ], "")


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


def _check_clusters(conn: apsw.Connection, report: IntegrityReport) -> None:
    """The last clustering run's record, and its table against the documents: every row's document and
    representative exist, and every document has a row unless the record says documents changed since (a
    row of a deleted document is removed with it; one left means the documents were changed behind simq's
    back, and the clusters describe documents that are gone)."""
    record = conn.execute("SELECT value FROM simhash_meta WHERE key = 'clusters'").get
    if record is None:
        rows = conn.execute("SELECT count(*) FROM clusters").get
        report.add("clusters", [f"{rows:,} rows but no record of the run that wrote them"] if rows else [],
                   "none yet (simq clusters makes them)")
        return
    problem = clusters_record_problem(record)
    if problem is not None:
        report.add("clusters", [f"simhash_meta 'clusters' cannot be read: {problem}; simq clusters records it again"],
                   "")
        return
    info = json.loads(record)
    gone = list(conn.execute(
        "SELECT DISTINCT c.id FROM clusters c WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.id = c.id) "
        "UNION SELECT DISTINCT c.representative FROM clusters c "
        "WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.id = c.representative) LIMIT 1000"
    ))
    problems = []
    if gone:
        problems.append(
            f"rows for {len(gone):,}{'+' if len(gone) == 1000 else ''} document id(s) that no longer exist "
            f"(e.g. {', '.join(str(row[0]) for row in gone[:SHOWN])}): the documents were deleted behind simq's "
            "back; run simq clusters again"
        )
    missing = conn.execute(
        "SELECT count(*) FROM documents d WHERE NOT EXISTS (SELECT 1 FROM clusters c WHERE c.id = d.id)"
    ).get
    if missing and not info.get("stale"):
        problems.append(
            f"{missing:,} document(s) in no cluster though the record says none changed since: documents were "
            "added behind simq's back; run simq clusters again"
        )
    stale = " (documents changed since: run simq clusters again)" if info.get("stale") else ""
    report.add("clusters", problems, f"k={info['k']}, {info['documents']:,} documents at {info['at']}{stale}")


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


def _check_lines(conn: apsw.Connection, report: IntegrityReport) -> None:
    """A JSONL document's line (migration 0006) names a sources row, at an offset >= 0, of at least one byte, all
    three set or none, and only where no text is stored. The files themselves may have gone or changed: said, not a
    problem (their documents are estimated)."""
    wrong = conn.execute(
        "SELECT key FROM documents WHERE (source IS NULL) + (line_at IS NULL) + (line_bytes IS NULL) NOT IN (0, 3) "
        "OR (source IS NOT NULL AND (line_at < 0 OR line_bytes < 1 OR text IS NOT NULL "
        "OR source NOT IN (SELECT id FROM sources))) ORDER BY id LIMIT 1000"
    ).fetchall()
    count = conn.execute("SELECT count(*) FROM documents WHERE source IS NOT NULL").get
    root = dict(conn.execute("SELECT key, value FROM simhash_meta")).get("key_root")
    changed = 0
    files = conn.execute("SELECT path, size, mtime_ns FROM sources").fetchall()
    for path, size, mtime in files:
        try:
            info = os.stat(key_path(str(path), root if isinstance(root, str) else None))
            changed += (info.st_size, info.st_mtime_ns) != (size, mtime)
        except (OSError, TypeError, ValueError):
            changed += 1
    problems = [f"{len(wrong)} document(s) whose JSONL line is recorded wrongly: {_keys(wrong)}"] if wrong else []
    fine = f"{count:,} document(s) whose JSONL line is recorded, in {len(files):,} file(s)"
    if changed:
        fine += f"; {changed:,} of the files changed or gone since they were added (their lines are checked by hash)"
    report.add("jsonl lines", problems, fine)


def _check_short_texts(conn: apsw.Connection, report: IntegrityReport, version: int, store_text: bool | None) -> None:
    """A short text's exact data (core/short_texts.py) is NULL or a blob within the recorded cut that reads
    back; none without a fingerprint. An index made before it is told so."""
    from ..core.short_texts import SHORT_TEXT_MOST, short_text_of

    if store_text:
        fine = "texts stored: checked from them"
    elif version < SHORT_TEXT_SCHEMA or "short_texts" not in dict(conn.execute("SELECT key, value FROM simhash_meta")):
        report.add("short texts", [], "made before exact short texts: short texts without stored texts are checked "
                                      "by their sketches' estimate (opened for writing, new documents get it)")
        return
    if version < SHORT_TEXT_SCHEMA:
        report.add("short texts", [], fine)
        return
    meta = dict(conn.execute("SELECT key, value FROM simhash_meta"))
    try:
        limit = int(json.loads(meta.get("short_texts", "{}")).get("bytes", 1 << 30))
    except (ValueError, TypeError, AttributeError):
        report.add("short texts", [f"simhash_meta 'short_texts' cannot be read: {meta.get('short_texts')!r}"], "")
        return
    wrong, count = [], 0
    found = conn.execute(
        "SELECT key, short_text, fingerprint IS NULL FROM documents WHERE short_text IS NOT NULL "
        "ORDER BY id"
    )
    for key, data, misplaced in found:
        count += 1
        try:
            if misplaced or not isinstance(data, bytes) or len(data) > limit:
                raise ValueError
            short_text_of(data)
        except ValueError:
            wrong.append((key,))
    problems = [f"{len(wrong)} document(s) whose short text cannot be read: {_keys(wrong)}"] if wrong else []
    if not store_text:
        fine = f"{count:,} document(s) keep exact data"
        start = json.loads(meta["short_texts"]).get("from_id", 0)
        lacking = conn.execute(
            "SELECT count(*) FROM documents WHERE fingerprint IS NOT NULL AND text IS NULL AND short_text IS NULL "
            "AND (length IS NULL OR length <= ?) AND id < ?", (SHORT_TEXT_MOST, start)
        ).get
        if lacking:
            fine += (f"; made before exact short texts: {lacking:,} document(s) added before, of at most "
                     f"{SHORT_TEXT_MOST:,} characters, are checked by their sketches' estimate")
    report.add("short texts", problems, fine)


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
