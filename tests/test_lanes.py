"""The lists of the slow lane (conftest.py) name tests that exist: a renamed or deleted test would otherwise
leave its entry doing nothing, and the test it meant would run in the fast lane unnoticed. So do the lists
of files that the two workers take first (LONGEST) or whole (WHOLE_FILES)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import LONGEST, SLOW_CASES, SLOW_FILES, SLOW_TESTS, WHOLE_FILES

TESTS = Path(__file__).resolve().parent


def defined_tests() -> set[str]:
    names = set()
    for path in TESTS.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
                names.add(node.name)
    return names


def test_every_slow_lane_entry_names_a_test_that_exists():
    files = {path.name for path in TESTS.glob("test_*.py")}
    functions = defined_tests()
    assert sorted(SLOW_FILES - files) == []
    assert sorted(set(LONGEST) - files) == [] and sorted(WHOLE_FILES - files) == []
    assert sorted(SLOW_TESTS - functions) == []
    assert sorted(case for case in SLOW_CASES if re.sub(r"\[.*\]$", "", case) not in functions) == []
