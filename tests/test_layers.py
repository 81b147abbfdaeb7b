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


def module_imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of the package (a path without .py) -> the package's modules it imports, at any place in
    it, TYPE_CHECKING blocks included (a name imported from a folder counts as its module where it is one)."""
    modules = {str(path.relative_to(package).with_suffix("")) for path in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name in sorted(modules):
        folder = name.split("/")[:-1]
        graph[name] = found = set()
        for node in ast.walk(ast.parse((package / f"{name}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = folder[: len(folder) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "simhash_sqlite":
                base = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:
                for parts in ([*base, alias.name], [*base, alias.name, "__init__"], base, [*base, "__init__"]):
                    target = "/".join(parts)
                    if target in modules and target != name:
                        found.add(target)
                        break
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in order:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], order[target])
        if low[node] == order[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return found


def test_the_check_sees_a_circle_through_a_type_only_import(tmp_path):
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "a.py").write_text("from .b import B\n")
    (tmp_path / "store" / "b.py").write_text("import typing\nif typing.TYPE_CHECKING:\n    from .c import C\n")
    (tmp_path / "store" / "c.py").write_text("from . import a\n")
    (tmp_path / "store" / "d.py").write_text("from . import a\n")
    assert circles(module_imports(tmp_path)) == [["store/a", "store/b", "store/c"]]


def test_no_module_imports_itself_through_others():
    """ARCHITECTURE.md: no circles, not even under TYPE_CHECKING (a Protocol names what a module needs)."""
    assert circles(module_imports()) == []
