"""The `simq` command line: a thin layer over the library (app.py, the *_commands.py modules) and its terminal
output (output.py).

`main` loads on first use, so that the quick lane (quick/lane.py) can print through output.py on a terminal
without importing typer and every command module. The Typer app is `cli.app.app` (`cli.app` is the module).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    if name == "main":
        main = importlib.import_module(f"{__name__}.app").main
        globals()["main"] = main
        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
