"""Running the real simq as a user without privileges, wherever the clone is.

Tests run as root in CI, and root reads and writes any file, so a chmod proves nothing. Dropping
root's capabilities (setpriv --bounding-set=-all) keeps the user id, so the child can still reach the
clone, the venv and pytest's 0700 tmp folders (which root owns), while permission bits apply to it as
to anyone: a chmod 000 file cannot be read and a chmod 555 folder cannot be written. As another user,
the child could read neither the clone nor tmp_path when they sit in a private folder.
"""

import os
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest


def simq_command() -> list[str]:
    """The venv's simq script when there is one (what a user runs), else python -m simhash_sqlite."""
    script = Path(sys.executable).with_name("simq")
    return [str(script)] if script.exists() else [sys.executable, "-m", "simhash_sqlite"]


def _prefix() -> list[str]:
    if os.geteuid() != 0:
        return []  # permission bits already apply
    return ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]


@lru_cache(maxsize=None)
def _why_not() -> str | None:
    """None when unprivileged children can be run and import the package, else why not."""
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "running as root without setpriv: permission bits cannot be made to apply"
    probe = subprocess.run(
        [*_prefix(), sys.executable, "-c", "import simhash_sqlite, os; open('/proc/self/status').read()"],
        capture_output=True, text=True,
    )
    if probe.returncode != 0:
        return f"cannot run python without privileges here: {probe.stderr.strip()[-200:]}"
    return None


def run_unprivileged(args, *, cwd, input=None) -> subprocess.CompletedProcess:
    """simq ARGS as an unprivileged process (skips the test, with the reason, when that is impossible)."""
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    return subprocess.run(
        [*_prefix(), *simq_command(), *map(str, args)], capture_output=True, text=True, cwd=cwd, input=input,
    )


def python_unprivileged(code: str, *, cwd) -> subprocess.CompletedProcess:
    """python -c CODE as an unprivileged process (for the library path)."""
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    return subprocess.run([*_prefix(), sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd)
