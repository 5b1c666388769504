"""What ``import loopwatch`` offers: everything the API raises and returns is exported, every
public class and function says what it does, and a Config is checked when it is made."""

from __future__ import annotations

import inspect

import pytest

import loopwatch


def test_what_the_api_raises_and_returns_is_exported() -> None:
    assert issubclass(loopwatch.UndeclaredToolError, LookupError)
    with pytest.raises(loopwatch.UndeclaredToolError, match="'lw_nothing' has no identity"):
        loopwatch.idempotency_key("lw_nothing", {"a": 1}, config=loopwatch.Config())
    assert isinstance(loopwatch.turn(agent="support"), loopwatch.Turn)
    assert isinstance(loopwatch.attempt_key("t", {}, "timeout", None), loopwatch.AttemptKey)
    assert sorted(loopwatch.__all__) == sorted(
        name for name in vars(loopwatch) if not name.startswith("_") and name in loopwatch.__all__
    )


def test_every_public_name_has_a_docstring() -> None:
    for name in loopwatch.__all__:
        value = getattr(loopwatch, name)
        assert inspect.getdoc(value), name
        if inspect.isclass(value):
            for attr, member in vars(value).items():
                if callable(member) and not attr.startswith("_"):
                    assert inspect.getdoc(member), f"{name}.{attr}"


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
