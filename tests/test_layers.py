"""The package's imports run one way (ARCHITECTURE.md): a module imports only from its own folder and from the
layers below it, at module level or inside a function alike."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "simhash_sqlite"
# ARCHITECTURE.md's drawing, top to bottom; the surfaces share a level, and the CLI may start the others.
RANK = {"cli": 8, "quick": 7, "web": 7, "sql": 7, "spark": 7, "analysis": 6, "pipeline": 5, "index": 4, "find": 3,
        "store": 2, "core": 1, "native": 0, "errors": -1, "version": -1}


def upward_imports(path: Path, package: Path = PACKAGE) -> list[str]:
    """`file:line: layer -> layer` for each import of `path` that reaches its own level or a higher one."""
    parts = list(path.relative_to(package).with_suffix("").parts)
    folder = parts[:-1]  # the package a relative import starts from (an __init__'s own folder)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts or parts[0] not in RANK:
        return []
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            target = folder[: len(folder) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            target = target or [alias.name for alias in node.names]
        elif node.module and node.module.split(".")[0] == "simhash_sqlite":
            target = node.module.split(".")[1:] or [alias.name for alias in node.names]
        else:
            continue
        if target[0] != parts[0] and target[0] in RANK and RANK[target[0]] >= RANK[parts[0]]:
            found.append(f"{path.relative_to(package)}:{node.lineno}: {parts[0]} -> {target[0]}")
    return found


def test_the_check_sees_an_upward_import(tmp_path):
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "pages.py").write_text("from ..cli.output import printable\nfrom ..find import check\n")
    (tmp_path / "find").mkdir()
    (tmp_path / "find" / "__init__.py").write_text("def f():\n    from ..pipeline import dedup\n")
    assert upward_imports(tmp_path / "web" / "pages.py", tmp_path) == ["web/pages.py:1: web -> cli"]
    assert upward_imports(tmp_path / "find" / "__init__.py", tmp_path) == ["find/__init__.py:2: find -> pipeline"]


def test_every_import_of_the_package_runs_downwards():
    found = [line for path in sorted(PACKAGE.rglob("*.py")) for line in upward_imports(path)]
    assert found == [], "imports against ARCHITECTURE.md's layers:\n" + "\n".join(found)
