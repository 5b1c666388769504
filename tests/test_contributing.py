"""CONTRIBUTING.md's generated-files table names every generator there is, and nothing else:
each command's module is a generator, each generator has a row, each path named exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Generated files"
# folders that hold no generator: hidden ones (.git, .venv*), builds, packages from npm
SKIPPED = {"build", "node_modules"}
COMMAND = re.compile(r"`python -m ([\w.]+)`")
CODE = re.compile(r"`([^`]+)`")


def table_rows() -> list[list[str]]:
    """The cells of each row of the generated-files table, header and rule left out."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    lines = [x for x in section.splitlines() if x.startswith("|")]
    return [[c.strip() for c in x.strip("|").split(" | ")] for x in lines[2:]]


def _imports_command_line(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(node, ast.ImportFrom)
        and node.module == "mixin.generate"
        and any(a.name == "command_line" for a in node.names)
        for node in ast.walk(tree)
    )


def generators() -> set[str]:
    """Modules that run the shared generator command line (mixin/generate.py's)."""
    found = set()
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).parts
        if any(p.startswith(".") or p in SKIPPED for p in parts):
            continue
        if _imports_command_line(path):
            found.add(".".join(parts)[: -len(".py")])
    return found


def test_the_table_names_exactly_the_generators_that_exist() -> None:
    named = [m for row in table_rows() for m in COMMAND.findall(row[2])]
    assert sorted(named) == sorted(generators())
    assert sorted(generators()) == [
        "alerts.build",
        "dashboards.build",
        "docs_gen.frameworks",
        "docs_gen.metrics",
        "docs_gen.settings",
    ]


def test_every_path_the_table_names_exists() -> None:
    missing = []
    for row in table_rows():
        for path in CODE.findall(row[0]) + CODE.findall(row[1]):
            if not list(ROOT.glob(path.rstrip("/"))):
                missing.append(path)
    assert missing == []
