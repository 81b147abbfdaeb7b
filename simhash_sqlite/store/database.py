"""Opening index files: connection settings, the schema's migrations, and refusing foreign files."""

from __future__ import annotations

import json
import os
import re
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import apsw

from ..errors import DamagedIndex, DiskFull, ForeignSchema, IndexNotFound, NotAnIndex, SchemaTooNew

if TYPE_CHECKING:  # annotations only: core.sketch imports numpy, which a search by key does without
    from ..core.sketch import SketchScheme
    from .documents import ShortTexts

# "SIMH" in ASCII: PRAGMA application_id marks a SQLite file as ours.
APPLICATION_ID = 0x53494D48
BUSY_TIMEOUT_MS = 10_000
# How long a writer keeps asking for the write lock (each ask waits up to BUSY_TIMEOUT_MS in SQLite's
# busy handler) before SQLITE_BUSY reaches the caller.
LOCK_WAIT_SECONDS = 120.0
# Before the first write on a connection, SQLite's quick check runs for at most this long (0.3 s for a
# 1M-document index, 190 MB, warm cache): a damaged file is refused rather than written into. On a
# larger file the check stops there and the write goes on (simq integrity reads every page).
QUICK_CHECK_SECONDS = 2.0
# Migrations that only add tables of their own, which the code reads as empty when they are missing: a
# file without them (made by an older version) is still read, read-only, without the upgrade it cannot
# take. Written to, it is migrated as always. (sources also adds documents' line columns: store/texts.py
# reads them only where the table is there.)
OPTIONAL_MIGRATIONS = frozenset({"labels", "sources"})


class IndexFile(Protocol):
    """What the layers below SimhashIndex read of an open index: its connection and how it was made.
    SimhashIndex is one; naming the protocol here keeps the imports running one way (no import of
    index.py from below)."""

    conn: apsw.Connection
    sketch_scheme: SketchScheme
    store_text: bool
    short_texts: ShortTexts
    key_root: str | None  # the folder relative file keys are taken from (store.texts.key_path)


@lru_cache(maxsize=None)
def migrations() -> tuple[tuple[int, str, str], ...]:
    """(number, name, sql) of every migration, in order.

    A wheel carries them as simhash_sqlite/migrations (hatch force-include); a source checkout or
    an editable install reads the top-level migrations/ folder; a package in a zip file, through
    importlib.resources (imported only then: its readers import zipfile, a cost of every start).
    """
    package = Path(__file__).resolve().parents[1]
    folder: Any = next((f for f in (package / "migrations", package.parent / "migrations") if f.is_dir()), None)
    if folder is None:
        from importlib import resources

        folder = resources.files("simhash_sqlite") / "migrations"
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_(\w+)\.sql", entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    found.sort()
    if [number for number, _, _ in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations in {folder} are not numbered 0001, 0002, ... without gaps")
    return tuple(found)


def schema_version() -> int:
    """The schema version this code writes: the number of the last migration."""
    return migrations()[-1][0]


def connect(
    path: str | os.PathLike, *, create: bool, readonly: bool = False, first_meta: dict[str, str] | None = None
) -> apsw.Connection:
    """An apsw connection to a checked index file, migrated to the current schema.

    create: make the file (and its schema) when it does not exist; otherwise IndexNotFound.
    first_meta: simhash_meta rows of a new index (its settings), written in the transaction that makes
    its schema, so that a process killed while it creates the index leaves an empty file (which the next
    add creates) or a whole index, never a schema without settings.
    A file that is not SQLite, not ours, from a newer schema, or carrying schema objects our
    migrations do not create (triggers, views, tables, indexes) is refused before anything is
    written or any of its SQL can run.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise NotAnIndex(f"{path} is a directory, not an index file")
    exists = os.path.exists(path) and os.path.getsize(path) > 0
    if not exists and not create:
        raise IndexNotFound(f"no index at {path} (create one with: simq add --db {path} FILES)")
    with disk_errors(path):
        return _connect(path, create=create, readonly=readonly, first_meta=first_meta)


def _connect(path: str, *, create: bool, readonly: bool, first_meta: dict[str, str] | None = None) -> apsw.Connection:
    if readonly:
        conn = open_readonly(path)
    else:
        try:
            conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
        except apsw.CantOpenError:
            raise IndexNotFound(f"cannot open {path} (missing folder or no permission)") from None
    try:
        if not readonly:
            harden(conn)
            conn = readable(conn, path)
        with conn:  # one read snapshot: another process may be migrating the file between these reads
            version = check_ours(conn, path)
            verify_schema(conn, path, version)
        if not read_only(conn):
            use_wal(conn)
            if version < schema_version():
                _migrate(conn, version, first_meta if create else None)
            finish_interrupted_load(conn)
        elif version == 0:  # no schema yet: its creating add has not written it (or was killed before)
            raise IndexNotFound(f"the index {path} was never finished (run simq add --db {path} FILES)")
        elif not readable_without_upgrade(version):
            raise NotAnIndex(
                f"{path} needs a schema upgrade (made with schema {version}, this version writes {schema_version()}), "
                f"and a search or a read-only file is never written: upgrade it once where it can be written, with "
                f"simq vacuum --db {path}"
            )
    except BaseException:
        conn.close()
        raise
    return conn


def use_wal(conn: apsw.Connection, *, wait: float = LOCK_WAIT_SECONDS) -> None:
    """PRAGMA journal_mode=wal, asked again while another connection holds the write lock.

    A new file starts in rollback-journal mode; turning it into WAL writes its header, and the pragma
    takes the write lock by upgrading a read transaction of its own. SQLite never runs the busy handler
    for such an upgrade (two readers each waiting for the other to finish would wait forever), so while
    another process writes the file (most often: creates it, when two adds start at once) the pragma
    fails with SQLITE_BUSY at once, whatever the busy timeout. Having failed, it changed nothing and let
    its read lock go: it is asked again until `wait` seconds have passed, as BEGIN IMMEDIATE is in
    write_transaction(). A file already in WAL mode takes no lock here.
    """
    retry_busy(conn, "PRAGMA journal_mode=wal", deadline=time.monotonic() + wait)


def readable_without_upgrade(version: int) -> bool:
    """A file at this schema version can be read by this code as it is: every later migration is optional."""
    return all(name in OPTIONAL_MIGRATIONS for number, name, _ in migrations() if number > version)


def has_table(conn: apsw.Connection, name: str) -> bool:
    """The file has this table (an optional migration's table is missing from an older, read-only file)."""
    return conn.execute("SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = ?", (name,)).get is not None


SIDE_FILES = ("-wal", "-shm")
# A -shm file in use is at least 32 KiB (one region of the WAL index); a shorter one is one that SQLite
# created and could not grow, which no connection can be using.
SHM_REGION = 32768


@contextmanager
def disk_errors(path: str) -> Iterator[None]:
    """Opening an index on a full disk: SQLite cannot grow the -shm (or -wal) file and says "disk I/O
    error". Say what is full and which file, and take away the side files this open left that no
    connection can be using (an empty -wal, a -shm shorter than one region), so nothing is changed."""
    before = {end for end in SIDE_FILES if os.path.lexists(path + end)}
    try:
        yield
    except (apsw.IOError, apsw.FullError) as exc:
        _tidy_side_files(path, before)
        raise DiskFull(disk_message(path, exc)) from None


def _tidy_side_files(path: str, before: set[str]) -> None:
    wal, shm = path + "-wal", path + "-shm"
    try:
        unused = (
            "-wal" not in before and "-shm" not in before
            and (not os.path.exists(wal) or os.path.getsize(wal) == 0)
            and (not os.path.exists(shm) or os.path.getsize(shm) < SHM_REGION)
        )
        if unused:
            for side in (wal, shm):
                with suppress(FileNotFoundError):
                    os.unlink(side)
    except OSError:
        pass


def free_bytes(path: str) -> int | None:
    """Bytes free to this user on the file system holding path (None: unknown)."""
    try:
        info = os.statvfs(os.path.dirname(os.path.abspath(path)) or ".")
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


def disk_message(path: str, exc: BaseException) -> str:
    """What a full disk (or an I/O error) on an index file means for the user, naming the file."""
    free = free_bytes(path)
    if isinstance(exc, apsw.FullError) or (free is not None and free < FULL_BELOW):
        return (
            f"the disk holding {path} is full ({free if free is not None else 0:,} bytes free): SQLite could not "
            f"grow {path} or its -wal/-shm files; nothing was written after the last commit; free some space and "
            "run the command again"
        )
    return f"SQLite could not read or write {path} or its -wal/-shm files ({exc}); nothing was written"


# Less free space than this is a full disk for the messages (SQLite grows files by pages, the -shm by 32 KiB).
FULL_BELOW = 1 << 20


def read_only(conn: apsw.Connection) -> bool:
    """The connection cannot write: opened read-only (or fell back to it), or PRAGMA query_only."""
    return conn.readonly("main") or bool(conn.pragma("query_only"))


def open_readonly(path: str) -> apsw.Connection:
    """A connection that never writes, to a file that may sit where we cannot write (see readable()).

    A read-only connection to a WAL file makes its -wal and -shm files and, unlike a read-write one,
    cannot remove them when it closes. So when they are not there yet and we could write them, the
    connection is read-write with PRAGMA query_only: its statements cannot write, and closing it
    leaves the folder as it was (checkpointing an empty WAL writes nothing to the file). So it is too
    where a writer was killed inside a rollback-journal transaction (a new file, before it turns to WAL):
    SQLite rolls the hot -journal back on the first read, which a read-only connection cannot do.
    """
    # The header is read (a descriptor opened and closed) only when no -wal, -shm or -journal file is there:
    # closing any descriptor of the file drops every POSIX lock this process holds on it, SQLite's
    # included, and a connection of this process that has read a WAL file keeps its -shm file there.
    tidy = not any(os.path.exists(path + end) for end in ("-wal", "-shm", "-journal")) and _is_wal(path)
    writable = os.access(path, os.W_OK) and os.access(os.path.dirname(os.path.abspath(path)), os.W_OK)
    flags = apsw.SQLITE_OPEN_READWRITE if writable and (tidy or _hot_journal(path)) else apsw.SQLITE_OPEN_READONLY
    try:
        conn = apsw.Connection(path, flags=flags)
        conn.pragma("query_only", 1)
    except apsw.CantOpenError:
        raise IndexNotFound(f"cannot open {path} (missing folder or no permission)") from None
    try:
        harden(conn)
        return readable(conn, path)
    except BaseException:
        conn.close()
        raise


def _hot_journal(path: str) -> bool:
    """A rollback journal is there with something in it: a transaction its writer did not finish (killed), which
    the next connection that can write rolls back before it reads."""
    try:
        return os.path.getsize(path + "-journal") > 0
    except OSError:
        return False


def _is_wal(path: str) -> bool:
    """The file's header says WAL mode (bytes 18 and 19 are 2)."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(20)
    except OSError:
        return False
    return len(header) == 20 and header.startswith(b"SQLite format 3\x00") and header[18:20] == b"\x02\x02"


def readable(conn: apsw.Connection, path: str) -> apsw.Connection:
    """conn, or when it cannot read the file, a connection that can: an immutable one.

    Reading a WAL file needs its -shm file. In a folder we cannot write (another user's shared index,
    a package's data folder, a read-only mount) SQLite cannot create it and fails with CantOpenError
    or ReadOnlyError even for a read; such a file is opened as immutable: read as it is, without
    locks. That is sound only when no writer has changes in its -wal file, which a reader there
    could not see, and no killed writer left a hot -journal, whose unfinished pages it would read: then
    the file is refused with the reason.
    """
    try:
        conn.execute("SELECT count(*) FROM sqlite_schema").get
        return conn
    except (apsw.NotADBError, apsw.CorruptError):
        return conn  # readable, but not an index or damaged: check_ours() says which
    except (apsw.CantOpenError, apsw.ReadOnlyError):
        conn.close()
    wal = path + "-wal"
    if os.path.exists(wal) and os.path.getsize(wal) > 0:
        raise IndexNotFound(
            f"cannot read {path}: its folder is not writable and {wal} holds changes not yet in the file; "
            "ask its owner to run any simq command on it (which folds them in), or copy the index with its -wal file"
        )
    if _hot_journal(path):  # an immutable reader would read the unfinished transaction's pages as they lie
        raise IndexNotFound(
            f"cannot read {path}: {path}-journal holds a transaction a writer did not finish, which only a "
            "connection that can write there rolls back; ask its owner to run any simq command on it"
        )
    import urllib.parse  # (here: a rare case, and a search's start-up does without it)

    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?immutable=1"
    conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    harden(conn)
    return conn


def harden(conn: apsw.Connection) -> None:
    """Settings for files that may come from elsewhere (apsw best practice, applied per connection)."""
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, 1)
    conn.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
    conn.config(apsw.SQLITE_DBCONFIG_DQS_DML, 0)
    conn.config(apsw.SQLITE_DBCONFIG_DQS_DDL, 0)
    conn.pragma("foreign_keys", 1)


def check_ours(conn: apsw.Connection, path: str) -> int:
    """The file's schema version; raises unless it is our index or a new, empty database."""
    try:
        app_id = conn.pragma("application_id")
        version = conn.pragma("user_version")
        objects = conn.execute("SELECT count(*) FROM sqlite_schema").get
    except (apsw.NotADBError, apsw.CorruptError):
        raise NotAnIndex(f"{path} is not a SQLite database (or it is damaged)") from None
    if app_id == 0 and version == 0 and objects == 0:
        return 0  # an empty database: ours to create
    if app_id != APPLICATION_ID:
        raise NotAnIndex(f"{path} is a SQLite database but not a simhash-sqlite index")
    if version > schema_version():
        raise SchemaTooNew(
            f"{path} has schema version {version}, newer than this simhash-sqlite understands "
            f"({schema_version()}); upgrade simhash-sqlite to open it"
        )
    return version


# Tables SQLite itself may add to any file (ANALYZE, PRAGMA optimize): data for the query planner.
_PLANNER_TABLES = ("sqlite_stat1", "sqlite_stat4")

SchemaObject = tuple[str, str, str, "str | None"]  # type, name, tbl_name, sql


def schema_objects(conn: apsw.Connection) -> frozenset[SchemaObject]:
    return frozenset(conn.execute("SELECT type, name, tbl_name, sql FROM main.sqlite_schema"))


@lru_cache(maxsize=None)
def expected_schema(version: int) -> tuple[frozenset[SchemaObject], frozenset[SchemaObject]]:
    """(required, allowed extras): the objects our migrations 1..version create, found by applying
    them to an in-memory database, and the planner tables SQLite may add to such a file."""
    conn = apsw.Connection(":memory:")
    try:
        for number, _name, sql in migrations():
            if number <= version:
                conn.execute(sql)
        required = schema_objects(conn)
        conn.execute("ANALYZE")
        extras = frozenset(o for o in schema_objects(conn) - required if o[1] in _PLANNER_TABLES)
    finally:
        conn.close()
    return required, extras


def schema_problems(conn: apsw.Connection, version: int) -> list[str]:
    """What differs between the file's schema and the one our migrations make at `version`.

    Compares the stored SQL of every table, index, view and trigger, so an extra trigger, a view, a
    table we did not create, an expression index or an altered column definition are all caught.
    """
    required, extras = expected_schema(version)
    found = schema_objects(conn)
    problems = []
    expected_names = {(kind, name): sql for kind, name, _table, sql in required}
    for kind, name, table, sql in sorted(found - required - extras, key=lambda o: (o[0], o[1])):
        if (kind, name) in expected_names:
            problems.append(f'{kind} "{name}" is not defined as simhash-sqlite defines it')
        elif kind in ("trigger", "index"):
            problems.append(f'{kind} "{name}" on "{table}" was not created by simhash-sqlite')
        else:
            problems.append(f'{kind} "{name}" was not created by simhash-sqlite')
    found_names = {(kind, name) for kind, name, _table, _sql in found}
    # A bulk load builds these again by sorting once it ends (search_indexes_dropped says so): not missing.
    building = {("index", name) for name, _ in search_indexes(version)} if bulk_load(conn) else set()
    for kind, name, _table, _sql in sorted(required, key=lambda o: (o[0], o[1])):
        if (kind, name) not in found_names and (kind, name) not in building:
            problems.append(f'{kind} "{name}" is missing')
    return problems


# Indexes built by sort. An add that writes more documents than the index held (store.writer) drops the
# search indexes, the four block indexes and the content hash's, writes its rows without them, and builds
# them again by sorting once it ends: at 10M documents their row-by-row upkeep was 89% of a load's time
# (BENCHMARKS.md). While they are missing, simhash_meta holds this key, naming the loading process;
# searches stay exact meanwhile (SQLite scans the table instead), and the indexes are built by the loader
# as it ends, even on an error or Ctrl-C, or, when it was killed, by the next connection that can write.
BULK_LOAD = "bulk_load"
# The page cache (MiB) while the indexes are built: SQLite's sorter keeps this much in memory before it
# spills a sorted run to a temporary file. Small runs sort within the CPU's caches and the helper threads
# sort and merge them in parallel; one large in-memory sort is slower and single-threaded. The five
# indexes of a 10M-document crawl index (2 cores, threads 2): 1,024 MiB 65 s wall, 65 CPU-s; 4 MiB 19-21
# s, 32-38 CPU-s (2 MiB and 8-32 MiB within 10-30% of that); 1M documents: 4.2 against 1.6 s.
BUILD_CACHE_MIB = 4


def search_indexes(version: int | None = None) -> list[tuple[str, str]]:
    """(name, sql) of the indexes on documents that a bulk load drops: all but the key's (UNIQUE), in
    the form our migrations create them (never SQL read from a file)."""
    required, _extras = expected_schema(schema_version() if version is None else version)
    return sorted(
        (name, sql) for kind, name, table, sql in required if kind == "index" and table == "documents" and sql
    )


def bulk_load(conn: apsw.Connection) -> dict | None:
    """The record of a bulk load whose indexes are not built yet: {"pid", "host", "started"}; else None."""
    try:
        value = conn.execute("SELECT value FROM main.simhash_meta WHERE key = ?", (BULK_LOAD,)).get
    except apsw.SQLError:  # no simhash_meta yet: a new file
        return None
    if value is None:
        return None
    try:
        record = json.loads(value)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def loader_running(record: dict) -> bool:
    """The process a bulk load record names is still running on this machine (so it will build the
    indexes itself). A record from another machine, or naming no process, counts as ended."""
    pid = record.get("pid")
    import socket  # (here: only a bulk load's record names a host; a search's start-up does without it)

    if record.get("host") != socket.gethostname() or isinstance(pid, bool) or not isinstance(pid, int) or pid < 1:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: another user's process
        return True
    return True


def drop_search_indexes(conn: apsw.Connection) -> None:
    """In a write transaction: drop the search indexes and record the bulk load (this process)."""
    for name, _sql in search_indexes():
        conn.execute(f'DROP INDEX IF EXISTS "{name}"')
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    import socket

    record = {"pid": os.getpid(), "host": socket.gethostname(), "started": started}
    conn.execute(
        "INSERT INTO simhash_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (BULK_LOAD, json.dumps(record)),
    )


def build_search_indexes(conn: apsw.Connection) -> None:
    """Build the missing search indexes by sorting, in one transaction, and end the bulk load record.
    Another loader may have built them first: each is built only where it is missing."""
    cache, threads = conn.pragma("cache_size"), conn.pragma("threads")
    conn.pragma("cache_size", -BUILD_CACHE_MIB * 1024)
    conn.pragma("threads", min(4, os.cpu_count() or 1))  # SQLite's sorter merges on helper threads
    try:
        with write_transaction(conn):
            present = {name for (name,) in conn.execute("SELECT name FROM main.sqlite_schema WHERE type = 'index'")}
            for name, sql in search_indexes():
                if name not in present:
                    conn.execute(sql)
            conn.execute("DELETE FROM simhash_meta WHERE key = ?", (BULK_LOAD,))
    finally:
        conn.pragma("cache_size", cache)
        conn.pragma("threads", threads)


def finish_interrupted_load(conn: apsw.Connection) -> None:
    """A writable connection to a file whose bulk load was killed before it built the search indexes
    builds them now (a running loader builds its own)."""
    record = bulk_load(conn)
    if record is not None and not loader_running(record):
        build_search_indexes(conn)


def verify_schema(conn: apsw.Connection, path: str, version: int) -> None:
    """Refuse a file whose schema is not exactly what our migrations create at its version.

    Runs before any function of ours is registered and before anything is written: SQL stored in a
    file from elsewhere (a trigger, a view, an expression index) never gets a chance to run.
    """
    try:
        problems = schema_problems(conn, version)
    except (apsw.CorruptError, apsw.SQLError) as exc:
        raise NotAnIndex(f"{path}: its schema cannot be read ({exc}); the file is damaged") from None
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise ForeignSchema(
            f"{path} is refused: its schema differs from what simhash-sqlite creates ({shown}). "
            f"Its SQL could run when the index is used; inspect it with: sqlite3 {path} .schema"
        )


def _migrate(conn: apsw.Connection, current: int, first_meta: dict[str, str] | None = None) -> None:
    """Apply the migrations after `current`, each in its own transaction with its user_version; a new file
    (current 0) with first_meta gets them all and those rows in one transaction (connect)."""
    if current == 0 and first_meta:
        with write_transaction(conn):
            if conn.pragma("user_version") == 0:  # (another process may have made it while we waited)
                for number, _name, sql in migrations():
                    _apply(conn, number, sql)
                record_meta(conn, first_meta)
        current = conn.pragma("user_version")
    for number, _name, sql in migrations():
        if number <= current:
            continue
        with write_transaction(conn):
            # Another process may have migrated while we waited for the write lock.
            if conn.pragma("user_version") >= number:
                continue
            _apply(conn, number, sql)


def record_meta(conn: apsw.Connection, rows: dict[str, str]) -> None:
    """simhash_meta rows not yet there, inside the caller's transaction (another process that made the same
    index may have written them first: its rows stay)."""
    conn.executemany("INSERT INTO simhash_meta (key, value) VALUES (?, ?) ON CONFLICT DO NOTHING", rows.items())


def _apply(conn: apsw.Connection, number: int, sql: str) -> None:
    """One migration, inside the caller's transaction, and the version it brings the file to."""
    conn.execute(sql)
    conn.pragma("application_id", APPLICATION_ID)
    conn.pragma("user_version", number)


@contextmanager
def write_transaction(conn: apsw.Connection, *, wait: float = LOCK_WAIT_SECONDS) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception (KeyboardInterrupt included).

    IMMEDIATE takes the write lock up front, so a concurrent writer waits in the busy handler instead
    of failing later when a read transaction tries to become a write one. SQLITE_BUSY on BEGIN or
    COMMIT is retried for up to `wait` seconds: both are safe to repeat (a BEGIN that failed did
    nothing; a COMMIT that failed with BUSY leaves the transaction open, to be committed again).
    """
    deadline = time.monotonic() + wait
    ensure_sound(conn)
    retry_busy(conn, "BEGIN IMMEDIATE", deadline=deadline)
    try:
        yield
        retry_busy(conn, "COMMIT", deadline=deadline)
    except BaseException:
        if not conn.get_autocommit():
            conn.execute("ROLLBACK")
        raise


def retry_busy(conn: apsw.Connection, sql: str, *, deadline: float | None = None) -> None:
    """Run a statement that has no effect when it fails with SQLITE_BUSY, retrying until deadline."""
    deadline = time.monotonic() + LOCK_WAIT_SECONDS if deadline is None else deadline
    pause = 0.005
    while True:
        try:
            conn.execute(sql)
            return
        except apsw.BusyError:
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.25)


_sound: weakref.WeakSet[apsw.Connection] = weakref.WeakSet()  # connections whose file passed the check


def ensure_sound(conn: apsw.Connection, seconds: float = QUICK_CHECK_SECONDS) -> None:
    """Refuse to write to a damaged file: SQLite's quick check, once per connection, before its first
    write. It reads every page of every table and index for at most `seconds`; past that the rest goes
    unchecked (raise the bound, or run simq integrity, for a full verdict on a very large file)."""
    if conn in _sound:
        return
    problems = quick_check(conn, seconds)
    if problems:
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        raise DamagedIndex(damaged_message(conn.filename, shown, _user_version(conn)))
    _sound.add(conn)


def _user_version(conn: apsw.Connection) -> int | None:
    try:
        return conn.pragma("user_version")
    except apsw.Error:
        return None


def quick_check(conn: apsw.Connection, seconds: float = QUICK_CHECK_SECONDS, limit: int = 5) -> list[str]:
    """PRAGMA quick_check's findings ([] when sound, or when it ran out of time before finding any)."""
    deadline = time.monotonic() + seconds

    def out_of_time() -> bool:
        return time.monotonic() > deadline  # True interrupts the statement

    conn.set_progress_handler(out_of_time, 1000)
    try:
        rows = [row[0] for row in conn.execute(f"PRAGMA quick_check({int(limit)})")]
    except apsw.InterruptError:
        return []
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        return [str(exc)]
    finally:
        conn.set_progress_handler(None)
    return [] if rows == ["ok"] else check_messages(rows)


def damaged_message(path: str, detail: str, version: int | None = None) -> str:
    """What a command says when it meets a damaged file (it has written nothing)."""
    return (
        f"{path} is damaged ({detail}); nothing was written. See what is wrong: simq integrity --db {path}; "
        + recovery_hint(path, version)
    )


def recovery_hint(path: str, version: int | None = None) -> str:
    """How to get back what a damaged index still holds: recovery_command(), then an integrity check;
    or a new index from the inputs."""
    return (
        f"to recover what can be read: {recovery_command(path, version)}, "
        "then simq integrity --db recovered.db (rows on damaged pages are lost: add their files again); "
        "or build a new index: simq add --db NEW.db FILES"
    )


def recovery_command(path: str, version: int | None = None) -> str:
    """The shell line that copies what a damaged index still holds into recovered.db (docs/cli.md shows
    it for corpus.db; tests/test_docs.py keeps the two equal). sqlite3's .dump writes every row it can
    read but ends with ROLLBACK when it met damage (made COMMIT here), and keeps neither the application
    id nor the schema version (set again: this code's, which simq opens)."""
    version = schema_version() if version is None else version
    return (
        f"(sqlite3 {path} .dump | sed 's/^ROLLBACK; -- due to errors$/COMMIT;/'; "
        f"echo 'PRAGMA application_id={APPLICATION_ID}; PRAGMA user_version={version};') | sqlite3 recovered.db"
    )


def check_messages(rows: list[str]) -> list[str]:
    """integrity_check/quick_check rows as one finding per line, without SQLite's "*** in database" header."""
    lines = (line.strip() for row in rows for line in str(row).splitlines())
    return [line for line in lines if line and not line.startswith("*** in database")]
