"""simq shell: apsw's SQL shell on an index, with our functions, simhash_near and dot-commands.

The shell's own commands (.tables, .schema, .mode, .dump, ...) all work; ours are documented in
.help like them (the docstring of each command_<name>: "usage: summary", then details).
"""

from __future__ import annotations

from typing import TextIO

import apsw
import apsw.shell

from ..core.fingerprint import from_hex, to_hex, to_signed
from ..core.settings import CONFIRM_K, RECOMMENDED_K
from ..index import SimhashIndex
from ..store.integrity import integrity_check
from .guard import SCHEMA_HINT, WOULD_CREATE, guard_schema

NEAR_SQL = (
    "SELECT key, distance, round(similarity, 4) AS similarity, simhash_hex(fingerprint) AS fingerprint, "
    "round(jaccard, 4) AS jaccard, checked_by FROM simhash_near(?, ?)"
)
# A key's or a hash's search: the fingerprint alone, so by distance (no text to check against).
NEAR_FINGERPRINT_SQL = (
    "SELECT key, distance, round(similarity, 4) AS similarity, simhash_hex(fingerprint) AS fingerprint "
    "FROM simhash_near(?, ?, 0)"
)


class IndexShell(apsw.shell.Shell):
    """apsw.shell.Shell on a SimhashIndex's connection. Counts errors, so a script can fail the run."""

    def __init__(self, index: SimhashIndex, *, stdin: TextIO | None = None, stdout: TextIO | None = None,
                 stderr: TextIO | None = None, write: bool = False) -> None:
        self.index = index
        self.errors = 0
        self.write_allowed = write
        self._guard(index)
        super().__init__(stdin=stdin, stdout=stdout, stderr=stderr, db=index.conn)
        self.prompt = "simq> "
        self.moreprompt = "  ...> "

    def handle_exception(self):
        self.errors += 1
        return super().handle_exception()

    def _guard(self, index: SimhashIndex) -> None:
        """Read-only unless --write (as simq sql): PRAGMA query_only, and no file created by ATTACH."""
        self.guard = guard_schema(index.conn, read_only=not self.write_allowed)
        index.conn.pragma("query_only", not self.write_allowed)

    def process_sql(self, sql, bindings=None, internal=False, summary=None):
        try:
            return super().process_sql(sql, bindings, internal, summary)
        except apsw.AuthError:  # SQLite has said "not authorized"; say why (the error stays counted)
            if self.guard.created is not None:
                self.write_error("hint: simq shell " + WOULD_CREATE.format(name=self.guard.created) + "\n")
            else:
                self.write_error(f"hint: {SCHEMA_HINT}\n")
            raise
        except apsw.ReadOnlyError:
            if not self.write_allowed:
                self.write_error("hint: simq shell is read-only; start it with --write to change the index\n")
            raise

    def _index(self) -> SimhashIndex:
        if self.index is None or self.db is not self.index.conn:
            raise self.Error("the current connection is not a simhash index (.open FILE opens one)")
        return self.index

    def _text_and_k(self, cmd: list[str], what: str, default_k: int) -> tuple[str, int]:
        if len(cmd) not in (1, 2):
            raise self.Error(f"give {what} and optionally K (default {default_k}); quote a text with spaces")
        try:
            k = int(cmd[1]) if len(cmd) == 2 else default_k
        except ValueError:
            raise self.Error(f"K must be a whole number from 0 to 64, not {cmd[1]!r}") from None
        return cmd[0], k

    def command_near(self, cmd):
        """near TEXT ?K?: Near-duplicates of TEXT: within distance K (default 12), checked, closest first

        Runs SELECT ... FROM simhash_near(TEXT, K), the same search and check as simq near, and shows
        the rows in the current output mode. Quote a text with spaces: .near "some text" 6
        """
        self._index()
        text, k = self._text_and_k(cmd, "a TEXT", CONFIRM_K)
        self.process_sql(NEAR_SQL, (text, k))

    def command_nearkey(self, cmd):
        """nearkey KEY ?K?: Documents within distance K (default 9) of a stored document's fingerprint

        By distance alone (simhash_near(fingerprint, K, 0)); the document itself is left out.
        """
        key, k = self._text_and_k(cmd, "a KEY", RECOMMENDED_K)
        stored = self._index().get(key)
        if stored is None or stored.fingerprint is None:
            raise self.Error(f"no document with key {key!r}, or it has no fingerprint")
        self.process_sql(NEAR_FINGERPRINT_SQL + " WHERE key IS NOT ?", (to_signed(stored.fingerprint), k, key))

    def command_nearhash(self, cmd):
        """nearhash HEX ?K?: Documents within distance K (default 9) of a 16-hex-digit fingerprint
        """
        digits, k = self._text_and_k(cmd, "a HEX fingerprint", RECOMMENDED_K)
        self._index()
        self.process_sql(NEAR_FINGERPRINT_SQL, (to_signed(from_hex(digits)), k))

    def command_hash(self, cmd):
        """hash TEXT: The fingerprint of TEXT with this index's settings (16 hex digits)
        """
        if len(cmd) != 1:
            raise self.Error("give one TEXT (quote it if it has spaces)")
        fingerprint = self._index().fingerprint(cmd[0])
        self.write(self.stdout, ("(no features)" if fingerprint is None else to_hex(fingerprint)) + "\n")

    def command_plan(self, cmd):
        """plan ?K?: How a search for distance K (default 3) runs, and the SQL it runs
        """
        if len(cmd) > 1 or (cmd and not cmd[0].isdigit()):
            raise self.Error("give at most one K, a whole number from 0 to 64")
        k = int(cmd[0]) if cmd else 3
        index = self._index()
        self.write(self.stdout, f"-- {index.plan(k).describe()}\n{index.near_sql(k)};\n")

    def command_stats(self, cmd):
        """stats: Documents, fingerprint settings and size of the index
        """
        s = self._index().stats()
        for name, value in (
            ("file", s.path), ("documents", s.documents), ("without features", s.without_features),
            ("fingerprints", s.settings.describe()), ("stores texts", s.store_text),
            ("schema version", s.schema_version), ("created with", s.created_with),
        ):
            self.write(self.stdout, f"{name + ':':18}{value}\n")

    def command_check(self, cmd):
        """check: Integrity and consistency checks of the index file (as simq integrity)
        """
        report = integrity_check(self._index().path)
        for result in report.results:
            self.write(self.stdout, f"{'ok  ' if result.ok else 'FAIL'}  {result.name}: {result.detail}\n")
        if not report.ok:
            raise self.Error(f"{len(report.failed)} check(s) failed")

    def command_functions(self, cmd):
        """functions: The SQL functions simhash-sqlite adds, with an example each
        """
        from ..store.functions import FUNCTIONS

        for function in FUNCTIONS:
            self.write(self.stdout, f"{function.name}: {function.summary}\n    {function.example}\n")
        self.write(
            self.stdout,
            "simhash_near(query, k, checked): table of near-duplicates; SELECT * FROM simhash_near('text')\n",
        )

    def command_open(self, cmd):
        """open FILE: Open another simhash index (checked, with our functions) instead of this one

        Other SQLite files can be read alongside with ATTACH 'other.db' AS other.
        """
        if len(cmd) != 1 or cmd[0].startswith("--"):
            raise self.Error("give one index FILE (options of the plain shell's .open are not supported here)")
        index = SimhashIndex(cmd[0])
        self._guard(index)
        old, self.index = self.index, index
        self.db = index.conn, index.path
        if old is not None:
            old.close()


def run_shell(index: SimhashIndex, *, stdin: TextIO | None = None, stdout: TextIO | None = None,
              stderr: TextIO | None = None, write: bool = False) -> int:
    """Run the shell until end of input (or .exit). Returns the number of errors a script met;
    0 for an interactive session, where mistakes are part of the work. Read-only unless write."""
    shell = IndexShell(index, stdin=stdin, stdout=stdout, stderr=stderr, write=write)
    intro = (
        f"simhash-sqlite shell on {index.path} (SQLite {apsw.sqlite_lib_version()})\n"
        'Enter ".help" for commands, ".near TEXT K" to search, ".functions" for the SQL functions\n'
    )
    try:
        shell.cmdloop(intro=intro)
    except Exception:  # .bail on: the shell has printed the error and stops at it
        shell.errors = max(shell.errors, 1)
    finally:
        if shell.index is not None and shell.index is not index:
            shell.index.close()
    return 0 if shell.interactive else shell.errors
