"""docs/architecture.md names every folder and top-level module of the package, and every module
and folder it names exists; the import layers it states are import-linter contracts that
scripts/test runs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import loopwatch

PACKAGE = Path(loopwatch.__file__).resolve().parent
ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def _named_in_tables() -> set[str]:
    return set(re.findall(r"^\| `([\w./]+)` \|", PAGE, re.M))


def test_every_folder_and_top_level_module_is_named() -> None:
    folders = {f"{p.name}/" for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.name for p in PACKAGE.glob("*.py")}
    assert folders | modules <= _named_in_tables()


def test_every_file_the_page_names_exists() -> None:
    for path in re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)`", PAGE):
        assert (PACKAGE / path).is_file() or (ROOT / path).is_file(), path


def test_the_layers_are_contracts_the_test_command_runs() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    sources = {m for c in contracts for m in c.get("source_modules", c.get("modules", []))}
    assert {f"loopwatch.{f}" for f in ("core", "conventions", "metrics", "guards")} <= sources
    assert "lint-imports" in (ROOT / "scripts" / "test").read_text(encoding="utf-8")
