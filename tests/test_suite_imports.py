"""The suite's own layout: tests and benchmarks share ``testkit`` and import neither each other
nor, from tests, another test file (shared helpers live in tests/support/). Read from the
source: every import, at module level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported(path: Path) -> set[str]:
    """The absolute module names ``path`` imports anywhere (``from a import b``: a and a.b)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def offenders(folder: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    """Files under ``folder`` importing a module under one of ``forbidden`` (dotted prefixes)."""
    out: dict[str, list[str]] = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        bad = sorted(
            name
            for name in imported(path)
            if any(name == f or name.startswith(f"{f}.") for f in forbidden)
        )
        if bad:
            out[str(path.relative_to(ROOT))] = bad
    return out


def test_tests_do_not_import_benchmarks() -> None:
    assert offenders("tests", ("benchmarks",)) == {}


def test_benchmarks_do_not_import_tests() -> None:
    assert offenders("benchmarks", ("tests",)) == {}


def test_testkit_imports_neither_tests_nor_benchmarks() -> None:
    assert offenders("testkit", ("tests", "benchmarks")) == {}


def test_no_test_file_imports_another() -> None:
    test_modules = tuple(f"tests.{p.stem}" for p in sorted((ROOT / "tests").glob("test_*.py")))
    assert len(test_modules) > 50
    assert offenders("tests", test_modules) == {}


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(
        "import os\n"
        "def f():\n"
        "    from benchmarks.bench_replay import stored_stream\n"
        "    import tests.test_compare as c\n"
    )
    assert imported(tmp_path / "t.py") == {
        "os",
        "benchmarks.bench_replay",
        "benchmarks.bench_replay.stored_stream",
        "tests.test_compare",
    }
