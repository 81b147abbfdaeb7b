"""`assert a and b or c` is `(a and b) or c`: a test that meant `a and (b or c)` passes whenever c holds (the
fuzz test of `near --batch` once passed every exit through SystemExit, traceback or not). Every assert in the
project that mixes `and` with `or` must say with parentheses which it means."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("simhash_sqlite", "tests", "bench", "docs")


def _offset(lines: list[str], line: int, col: int) -> int:
    return sum(len(text) for text in lines[: line - 1]) + col


def unparenthesised_mixes(source: str) -> list[int]:
    """Line numbers of the asserts in `source` where an `and` sits directly inside an `or` (or the other way
    round) without parentheses of its own."""
    lines = source.splitlines(keepends=True)
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Assert):
            continue
        for inner in ast.walk(node.test):
            if not isinstance(inner, ast.BoolOp):
                continue
            for value in inner.values:
                if not isinstance(value, ast.BoolOp) or type(value.op) is type(inner.op):
                    continue
                # The operand's own span excludes its parentheses: the characters around it show them (a
                # call's parenthesis before it is not closed right after it).
                before = source[: _offset(lines, value.lineno, value.col_offset)].rstrip()
                assert value.end_lineno is not None and value.end_col_offset is not None
                after = source[_offset(lines, value.end_lineno, value.end_col_offset):].lstrip()
                if not (before.endswith("(") and after.startswith(")")):
                    found.append(value.lineno)
    return sorted(set(found))


def test_the_scan_finds_a_mix_and_passes_the_parenthesised_forms():
    assert unparenthesised_mixes("assert a and b or c\n") == [1]
    assert unparenthesised_mixes("assert a or b and c\n") == [1]
    assert unparenthesised_mixes("assert (\n    f(a)\n    and b\n) or c\nassert x(\n    a,\n) and b or (c)\n") == [5]
    assert unparenthesised_mixes("assert (a and b) or c\nassert a and (b or c)\nassert a or (b and c)\n") == []
    assert unparenthesised_mixes("assert a and b and c\nassert f(a and b or c)\n") == [2]
    assert unparenthesised_mixes("ok = a and b or c\n") == []  # only asserts: elsewhere it is an idiom


def test_no_assert_mixes_and_with_or_without_parentheses():
    offenders = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line in unparenthesised_mixes(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == [], "parenthesise the and/or in: " + ", ".join(offenders)
