"""The `simq` command line: a thin layer over the library (app.py, the *_commands.py modules) and its terminal
output (output.py)."""

from .app import app, main

__all__ = ["app", "main"]
