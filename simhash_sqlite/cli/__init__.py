"""The `simq` command line: a thin layer over the library (app.py) and its terminal output (output.py)."""

from .app import app, main

__all__ = ["app", "main"]
