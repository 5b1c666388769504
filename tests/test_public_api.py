"""What ``import loopwatch`` offers: everything the API raises and returns is exported, every
public class and function says what it does, and a Config is checked when it is made."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import loopwatch

SRC = Path(__file__).resolve().parents[1] / "src" / "loopwatch"


def test_what_the_api_raises_and_returns_is_exported() -> None:
    assert issubclass(loopwatch.UndeclaredToolError, LookupError)
    with pytest.raises(loopwatch.UndeclaredToolError, match="'lw_nothing' has no identity"):
        loopwatch.idempotency_key("lw_nothing", {"a": 1}, config=loopwatch.Config())
    assert isinstance(loopwatch.turn(agent="support"), loopwatch.Turn)
    assert isinstance(loopwatch.attempt_key("t", {}, "timeout", None), loopwatch.AttemptKey)
    assert sorted(loopwatch.__all__) == sorted(
        name for name in vars(loopwatch) if not name.startswith("_") and name in loopwatch.__all__
    )


def _definitions() -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    """Every module-level class and function of the package's sources, by name (read from the
    sources: the compiled build keeps no class docstrings)."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            overload = any(
                isinstance(d, ast.Name) and d.id == "overload"
                for d in getattr(node, "decorator_list", ())
            )
            # an overload's stub has none: the implementation carries the docstring
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and not overload
            ):
                found.setdefault(node.name, node)
    return found


def test_every_public_name_has_a_docstring() -> None:
    definitions = _definitions()
    for name in loopwatch.__all__:
        node = definitions[name]
        assert ast.get_docstring(node), name
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef) and not member.name.startswith("_"):
                    assert ast.get_docstring(member), f"{name}.{member.name}"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"queue_spans": 0}, r"Config\(queue_spans=...\): must be at least 1, got 0"),
        ({"loop_threshold": 3.5}, r"Config\(loop_threshold=...\): expected int, got 3.5"),
        ({"metrics_port": 70000}, r"Config\(metrics_port=...\): not a port number: 70000"),
        ({"guards_store": "ftp://x"}, r"Config\(guards_store=...\): not a guard store"),
    ],
)
def test_a_config_is_checked_when_it_is_made(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(loopwatch.ConfigError, match=message):
        loopwatch.Config(**kwargs)  # type: ignore[arg-type]
