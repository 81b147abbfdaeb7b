"""Is an index file whole? The checks of `simq check` (checks.py) as a list of problems.

Used by the crash, concurrency and fuzz tests and the stress scripts in bench/, which only need to
know whether anything failed and what.
"""

from __future__ import annotations

import os

from .checks import check_index
from .errors import SimhashError


def problems(path: str | os.PathLike) -> list[str]:
    """What is wrong with the index file at path, one line per failed check; [] when it is whole.

    Opens its own read-only connection, so it can run beside writers (it sees the last commit). A
    file whose first transaction never committed (an add killed at once) is empty, and passes: the
    next open creates the schema.
    """
    try:
        report = check_index(path)
    except SimhashError as exc:
        return [str(exc)]
    return [f"{result.name}: {result.detail}" for result in report.failed]
