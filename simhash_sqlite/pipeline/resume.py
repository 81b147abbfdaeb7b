"""dedup's outputs written so that a killed run (SIGKILL, Ctrl-C, a full disk) continues where it stopped.

While it runs, `simq dedup -o OUT` writes OUT.partial (and DUPES.partial for --dupes) and, every
COMMIT_SECONDS, commits: the lines decided so far are written whole and synced, and then OUT.resume
(JSON: the arguments, the inputs' sizes and times, how many input documents were decided, the files'
lengths and the counts) is replaced, with OUT.resume-kept beside it (one byte a decided document: kept or
not). Only a finished run renames OUT.partial to OUT, so OUT is always a whole earlier output or the new
one. Run again with the same arguments, a run cuts the files back to their committed lengths (dropping
any line a kill left half written), reads the input again, takes the documents the earlier run kept as
kept without searching (Deduplicator.prime), and goes on from the first undecided one: the kept set is
the uninterrupted run's. A stream (stdin) is resumed the same way when it is given again from its start;
its first documents are read and skipped.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import InvalidInput
from .dedup import DecidedBatch, DedupReport
from .sources import LineBatch

COMMIT_SECONDS = 2.0  # the environment's SIMQ_COMMIT_SECONDS, where set, instead (tests commit more often)
STATE_VERSION = 1
_COUNTS = ("read", "kept", "dropped", "without_features", "estimated", "exact", "by_distance", "characters")


def input_identity(paths: list[str]) -> list[list[Any]]:
    """Each input as [path, size, modification time in ns] ([path] for stdin): a changed input is refused."""
    out: list[list[Any]] = []
    for path in paths:
        try:
            info = os.stat(path) if path != "-" else None
        except OSError:
            info = None
        out.append([path] if info is None else [path, info.st_size, info.st_mtime_ns])
    return out


@contextlib.contextmanager
def _named(shown: str) -> Iterator[None]:
    """An OSError names the output the user gave (OUT, not OUT.partial or OUT.resume)."""
    try:
        yield
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, shown) from None


class _File:
    """An append-only file written in whole lines: a failed write (a full disk) is cut back to the lines
    written before it. Errors name `shown`."""

    def __init__(self, path: str, keep: int | None, shown: str, mode_of: str | None = None) -> None:
        self.path, self.shown = path, shown
        flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_BINARY", 0)
        mode = 0o666
        if mode_of is not None and os.path.exists(mode_of):
            mode = os.stat(mode_of).st_mode & 0o777
        if keep is None:
            flags |= os.O_TRUNC
        with _named(shown):
            self.fd = os.open(path, flags, mode)
        if keep is not None:
            length = os.fstat(self.fd).st_size
            if length < keep:
                os.close(self.fd)
                raise InvalidInput(f"{path} is shorter than its last commit ({length:,} < {keep:,} bytes): it was "
                                   "changed; run with --restart")
            os.ftruncate(self.fd, keep)
        self.length = keep or 0
        os.lseek(self.fd, self.length, os.SEEK_SET)

    def flush(self, pending: list[bytes]) -> None:
        """Write pending whole, or none of it."""
        if not pending:
            return
        data = memoryview(b"".join(pending))
        written = 0
        try:
            while written < len(data):
                written += os.write(self.fd, data[written:])
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, self.length)  # no part of a line stays
                os.lseek(self.fd, self.length, os.SEEK_SET)
            raise OSError(exc.errno, exc.strerror, self.shown) from None
        self.length += written

    def sync(self) -> None:
        with _named(self.shown):
            os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


@contextlib.contextmanager
def _interrupts_after() -> Iterator[None]:
    """SIGINT's handler run after the block, not within it (the main thread only: where Python runs it)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is None:
        yield  # (None: a handler not set from Python, which could not be put back)
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, _frame: caught.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught and callable(previous):
            previous(signal.SIGINT, None)  # (the default one raises KeyboardInterrupt)


class ResumableOutput:
    """The kept records (and the dropped ones, with dupes) of one dedup run, resumable. arguments: what
    decides the output (a changed one is refused); inputs: input_identity() of the inputs."""

    def __init__(self, out: str, dupes: str | None, arguments: dict[str, Any], inputs: list[list[Any]]) -> None:
        self.out, self.dupes = out, dupes
        self.state_path, self.kept_path = out + ".resume", out + ".resume-kept"
        self.identity = {"version": STATE_VERSION, "arguments": arguments, "inputs": inputs,
                         "dupes": None if dupes is None else os.path.abspath(dupes)}
        self.files: list[_File] = []
        self.decided = 0  # input documents decided and committed
        self.counts: dict[str, int] = {}  # committed
        self.pending_counts = dict.fromkeys(_COUNTS, 0)  # written
        self.batches: list[tuple[bytes, bytes, bytes, dict[str, int]]] = []  # written, not yet in the files
        self.left: list[LineBatch] = []  # what kept_before() left of a LineBatch it cut (rest())
        self.last_commit = time.monotonic()
        self.resumed = self.finished = False
        # A commit's writes, syncs and state are done on a thread of its own while the run goes on (maybe_commit):
        # the files are written by it alone until it is waited for (_wait), which raises what it raised.
        self.committing: threading.Thread | None = None
        self.failure: BaseException | None = None
        try:
            self.every = float(os.environ.get("SIMQ_COMMIT_SECONDS", COMMIT_SECONDS))
        except ValueError:
            self.every = COMMIT_SECONDS

    def earlier(self) -> dict[str, Any] | None:
        """The committed state of an interrupted run of this output, if any."""
        try:
            with open(self.state_path, encoding="utf-8") as handle:
                state = json.load(handle)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise InvalidInput(f"{self.state_path} cannot be read ({exc}); run with --restart") from None
        return state if isinstance(state, dict) else None

    def open(self, resume: bool | None) -> bool:
        """Start, or continue an interrupted run (resume None: when there is one; True: there must be one;
        False: start again). True when continuing."""
        state = self.earlier() if resume is not False else None
        partial = self.out + ".partial"
        if state is not None and not os.path.exists(partial):
            state = None  # its output is gone: nothing to continue
        if resume and state is None:
            raise InvalidInput(f"nothing to resume: no interrupted run writing {self.out} ({self.state_path})")
        if state is not None:
            changed = [name for name in ("version", "arguments", "inputs", "dupes")
                       if state.get(name) != json.loads(json.dumps(self.identity[name]))]
            if changed:
                what = {"version": "another version of simq", "arguments": "other arguments",
                        "inputs": "inputs of other sizes or times", "dupes": "another --dupes file"}
                raise InvalidInput(f"{self.out} has an interrupted run made with "
                                   f"{' and '.join(what[c] for c in changed)}; run with --restart to start again, "
                                   "or with the arguments and inputs it had to continue it")
            self.decided, self.counts = int(state["decided"]), dict(state["counts"])
            self.pending_counts.update({name: int(self.counts.get(name, 0)) for name in _COUNTS})
            if not os.path.exists(self.kept_path) or os.path.getsize(self.kept_path) < self.decided:
                raise InvalidInput(f"{self.kept_path} is shorter than its last commit; run with --restart")
        lengths = state["lengths"] if state is not None else [None, None, None]
        try:
            self.files = [_File(partial, lengths[0], self.out, self.out), _File(self.kept_path, lengths[1], self.out)]
            if self.dupes is not None:
                self.files.append(_File(self.dupes + ".partial", lengths[2], self.dupes, self.dupes))
            if state is None:
                self._write_state()
        except OSError:
            if state is None:  # nothing was committed: nothing stays
                self.discard()
            raise
        self.resumed = state is not None
        return self.resumed

    def kept_before(self, entries: Iterator[Any]) -> Iterator[Any]:
        """The interrupted run's kept documents, from the first documents it decided of entries (which are
        taken from it); raises when entries end before them. A LineBatch (Reader.entry_batches) counts as its
        records: the kept ones come as a LineBatch of their own, and where the decided ones end within one, its
        undecided records are left for the run (rest())."""
        self.left = []
        read = 0
        with open(self.kept_path, "rb") as handle:
            while read < self.decided:
                entry = next(entries, None)
                if entry is None:
                    raise InvalidInput(f"the inputs hold fewer documents ({read:,}) than the interrupted run "
                                       f"decided ({self.decided:,}); run with --restart")
                count = len(entry) if type(entry) is LineBatch else 1
                flags = handle.read(min(count, self.decided - read))
                if len(flags) < min(count, self.decided - read):
                    raise InvalidInput(f"{self.kept_path} is shorter than its last commit; run with --restart")
                read += len(flags)
                if type(entry) is not LineBatch:
                    if flags[0]:
                        yield entry
                    continue
                kept = np.flatnonzero(np.frombuffer(flags, dtype=np.uint8))
                if len(kept):
                    yield entry.take(kept)
                if len(flags) < count:
                    self.left.append(entry.take(np.arange(len(flags), count)))

    def rest(self, entries: Iterator[Any]) -> Iterator[Any]:
        """entries after kept_before() took the decided ones: the undecided records of a LineBatch it cut first."""
        return itertools.chain(self.left, entries)

    def restore(self, report: DedupReport) -> None:
        """The counts of the run continued, into the report of this one (which counts on from them)."""
        for name in _COUNTS:
            setattr(report, name, int(self.counts.get(name, 0)))

    def write(self, decided: DecidedBatch, out: bytes, dupes: bytes = b"") -> None:
        """A batch of decided documents: the kept records' lines (out), and the dropped ones' dupes lines.
        Held whole until commit() writes it: a Ctrl-C while a batch is handed over leaves it all out or all in
        (a batch's lines in one file and not its flags in the other would be written twice on resume)."""
        batch = (out, dupes if self.dupes is not None else b"", decided.kept_flags(), decided.counts())
        self.batches.append(batch)  # (one step)

    def _take_batches(self) -> list[list[bytes]]:
        """The whole batches written so far, as each file's bytes (in self.files' order: kept lines, flags, dupes
        lines), counted. Counted here, not taken from the report: it counts a batch as it is decided, before its
        decisions are written."""
        batches, self.batches = self.batches, []
        counts = self.pending_counts
        out: list[bytes] = []
        flags: list[bytes] = []
        dupes: list[bytes] = []
        for lines, dupe_lines, batch_flags, batch_counts in batches:
            out.append(lines)
            flags.append(batch_flags)
            if dupe_lines:
                dupes.append(dupe_lines)
            for name, count in batch_counts.items():
                counts[name] += count
        return [out, flags, dupes][: len(self.files)]

    def maybe_commit(self) -> None:
        """commit() every so often, without waiting for it: its files are written and synced on a thread while the
        run goes on (the serial loop of dedup does not wait for the disk); an error it met is raised by the next."""
        if time.monotonic() - self.last_commit >= self.every:
            self.commit(wait=False)

    def commit(self, wait: bool = True) -> None:
        """The lines written so far, whole, on disk; then the state that names them (after the commit before:
        one at a time). A Ctrl-C meanwhile is raised once they agree. wait: return once it is done (decided and
        counts say what it committed), else at once."""
        with _interrupts_after():
            self._wait()
            pending = self._take_batches()
            counts = dict(self.pending_counts)
            self.last_commit = time.monotonic()
            if not wait:
                self.committing = threading.Thread(target=self._commit_on_thread, args=(pending, counts),
                                                   name="simq-dedup-commit")
                self.committing.start()
                return
            self._commit_files(pending, counts)

    def _commit_files(self, pending: list[list[bytes]], counts: dict[str, int]) -> None:
        for file, data in zip(self.files, pending):
            file.flush(data)
        for file in self.files:
            file.sync()
        self.decided = counts["read"]
        self.counts = counts
        self._write_state()

    def _commit_on_thread(self, pending: list[list[bytes]], counts: dict[str, int]) -> None:
        try:
            self._commit_files(pending, counts)
        except BaseException as exc:  # (raised again in the main thread by _wait)
            self.failure = exc

    def _wait(self, raising: bool = True) -> None:
        """The commit under way on its thread done; what it raised, raised here (unless not raising)."""
        if self.committing is not None:
            self.committing.join()
            self.committing = None
        failure, self.failure = self.failure, None
        if failure is not None and raising:
            raise failure

    def _write_state(self) -> None:
        state = dict(self.identity, decided=self.decided, counts=self.counts,
                     lengths=[f.length for f in self.files[:2]] + [self.files[2].length if self.dupes else None])
        temporary = self.state_path + ".tmp"
        try:
            with _named(self.out):
                with open(temporary, "w", encoding="utf-8") as handle:
                    json.dump(state, handle)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temporary, self.state_path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def finish(self) -> None:
        """The run is done: the outputs take their places, and the state goes."""
        self.commit()
        for file in self.files:
            file.close()
        with _named(self.out):
            # OUT first: a run killed between the two finds no OUT.partial and starts again (see open()).
            os.replace(self.out + ".partial", self.out)
            if self.dupes is not None:
                os.replace(self.dupes + ".partial", self.dupes)
        self.finished = True
        self.discard()

    def discard(self) -> None:
        """Remove the partial outputs and the state (a run that read nothing leaves the outputs as they were)."""
        self._wait(raising=False)
        for file in self.files:
            try:
                file.close()
            except OSError:
                pass
        for path in (self.out + ".partial", self.kept_path, self.state_path, self.state_path + ".tmp",
                     None if self.dupes is None else self.dupes + ".partial"):
            if path is not None:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass

    def abandon(self) -> None:
        """At the end of a run that did not finish: its files stay for the next run to continue from, unless
        it committed nothing of its own or of a run it continued (then they go)."""
        if self.finished:
            return
        self._wait(raising=False)  # (the run failed or was interrupted: that is the error to show)
        if self.decided == 0 and not self.resumed:
            self.discard()
        else:
            self.close()

    def close(self) -> None:
        """Leave the files as committed (an interrupted run)."""
        self._wait(raising=False)
        for file in self.files:
            try:
                file.close()
            except OSError:
                pass
        self.files = []

