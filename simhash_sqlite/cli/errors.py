"""The errors a user can cause, as simq reports them: one "error:" line on stderr and the exit status
app.py's docstring lists (1, 2 for a usage error, 130 interrupted, a quiet 0 for a closed pipe).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys

import apsw
import typer

from ..errors import InvalidArgument, SettingsMismatch, SimhashError
from ..store.database import damaged_message, disk_message
from .output import err, line


def fail(message: str, code: int = 1) -> typer.Exit:
    """One "error:" line on stderr (the message printed literally) and the exit status to raise."""
    return typer.Exit(fail_line(message, code))


def fail_line(message: str, code: int) -> int:
    """Print one "error:" line on stderr (the message printed literally); returns code."""
    err.print(line(("error:", "bold red"), " ", message), soft_wrap=True)
    return code


def friendly_errors(command):
    """Turn the errors a user can cause into one red line and exit code 1, never a traceback;
    Ctrl-C into "interrupted" and 130; a closed stdout pipe into a quiet 0."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            result = command(*args, **kwargs)
            sys.stdout.flush()  # a closed pipe shows here, not at exit (where Python would say 120)
            return result
        except InvalidArgument as exc:  # a value out of its range: a usage error, as click's own
            raise fail(str(exc), 2) from None
        except SettingsMismatch as exc:
            raise fail(_mismatch_message(exc, kwargs)) from None
        except SimhashError as exc:
            raise fail(str(exc)) from None
        except apsw.BusyError:
            raise fail("the index is locked by another process for too long; try again") from None
        except (apsw.FullError, apsw.IOError) as exc:  # after the open (which says so itself): while writing
            named = next((os.fspath(kwargs[name]) for name in ("db", "file") if kwargs.get(name) is not None), None)
            raise fail(disk_message(named or "the index", exc) + (
                "; the index keeps every batch committed before this" if isinstance(exc, apsw.FullError) else ""
            )) from None
        except (apsw.ReadOnlyError, apsw.CantOpenError):
            raise fail("the index file or its folder is read-only") from None
        except (apsw.CorruptError, apsw.NotADBError) as exc:
            named = [kwargs[name] for name in _index_arguments(command) if kwargs.get(name) is not None]
            if not named:
                raise fail(f"an index file is damaged ({exc}); see what is wrong: simq integrity --db FILE") from None
            raise fail(damaged_message(os.fspath(named[0]), str(exc))) from None
        except BrokenPipeError:
            _quiet_stdout()
            raise typer.Exit(0) from None
        except OSError as exc:
            if exc.errno == errno.ENOSPC and exc.filename:
                raise fail(f"the disk holding {exc.filename} is full: {exc.filename} was not written (an earlier "
                           "one is as it was); free some space and run the command again") from None
            raise fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")) from None
        except KeyboardInterrupt:
            raise fail("interrupted", 130) from None

    return wrapper


def _index_arguments(command) -> tuple[str, ...]:
    """The arguments of a command that name index files, the one SQLite reads first first: a damaged
    file is named by them (near --file and hash --file are query texts, never SQLite files)."""
    return ("file", "db") if command.__name__ == "shell" else ("against", "db")


def _option(name: str, value: object) -> str:
    """A setting of SimhashIndex as the option that asks for it: --ngram 3, --no-store-text."""
    flag = name.replace("_", "-")
    if isinstance(value, bool):
        return f"--{flag}" if value else f"--no-{flag}"
    return f"--{flag} {value}"


def _mismatch_message(exc: SettingsMismatch, kwargs: dict) -> str:
    """A setting asked for that the index does not have, in the command's own options."""
    if exc.name is None:
        return str(exc)
    against = kwargs.get("against")
    index = against if against is not None else kwargs.get("db")
    other = "--against" if against is not None else "--db"
    return (
        f"{index} was made with {_option(exc.name, exc.recorded)}; you asked for {_option(exc.name, exc.requested)} "
        f"(fingerprints made otherwise would never match theirs): leave --{exc.name.replace('_', '-')} out, or give "
        f"another {other}"
    )


def _quiet_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null, so that Python's last flush has nowhere to fail."""
    if sys.stdout is sys.__stdout__ and sys.stdout is not None:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())

