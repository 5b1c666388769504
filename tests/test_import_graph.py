"""No import circle in the package: the graph of its modules' imports of each other, read from
the source (every import, at module level or inside a function), is acyclic."""

from __future__ import annotations

import ast
from pathlib import Path

import loopwatch

PACKAGE = "loopwatch"


def _module_name(root: Path, path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    root = Path(loopwatch.__file__).parent
    return {_module_name(root, path): path for path in sorted(root.rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The package module an imported name lives in: the longest known prefix of it."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``module`` imports anywhere in its source."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            # ``from package import name``: the submodule ``name`` where there is one
            targets = [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            resolved = _resolve(target, modules)
            if resolved is not None and resolved != module:
                found.add(resolved)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for child in sorted(graph.get(node, ())):
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in on_stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_circle() -> None:
    graph = import_graph()
    assert len(graph) > 50  # the walk found the package's modules
    assert "loopwatch.attach.own_spans" in graph["loopwatch.attach.mcp_client"]  # and their imports
    assert cycles(graph) == []


def test_the_check_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
