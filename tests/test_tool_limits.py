"""Each tool's declaration and thresholds, remembered across turns (core.tool_limits): a turn
summarized with them has the numbers of one summarized without, and a declaration the decorator
adds later applies to the turns after it."""

from __future__ import annotations

import pytest

from loopwatch.core.config import Config
from loopwatch.core.declarations import REGISTRY, ToolDeclaration
from loopwatch.core.keys import AttemptKey
from loopwatch.core.records import ToolCall
from loopwatch.core.summary import REPEAT, summarize
from loopwatch.core.tool_limits import REMEMBERED_NAME_CHARS, REMEMBERED_TOOLS, LimitsByTool


def lookups(tool: str, count: int) -> list[ToolCall]:
    """``count`` successful calls of ``tool`` with one key, each after the last."""
    key = AttemptKey(tool, "order-1", "ok")
    return [
        ToolCall(i, None, 10 * i, 10 * i + 5, tool, key, "ok", "rows", True, "", None)
        for i in range(1, count + 1)
    ]


def test_remembered_limits_give_the_numbers_of_a_lookup_per_turn() -> None:
    config = Config(loop_threshold=3)
    limits = LimitsByTool(config)
    for count in (2, 3, 4, 3):
        calls = lookups("lookup_order", count)
        remembered = summarize(1, "svc", None, calls, [], config, limits=limits)
        assert remembered == summarize(1, "svc", None, calls, [], config)
        assert remembered.tools[0].loops == ((("ok", REPEAT),) if count >= 3 else ())


def test_a_declaration_added_later_applies_to_the_turns_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the decorator's registry is the process's: this declaration ends with the test
    monkeypatch.setattr(REGISTRY, "by_tool", dict(REGISTRY.by_tool))
    config = Config(loop_threshold=3)
    limits = LimitsByTool(config)
    calls = lookups("lookup_order", 3)
    before = summarize(1, "svc", None, calls, [], config, limits=limits)
    assert (before.tools[0].loops, limits.of("lookup_order").loop_threshold) == (
        (("ok", REPEAT),),
        3,
    )
    REGISTRY.add("lookup_order", ToolDeclaration(loop_threshold=5), lambda: None)
    after = summarize(1, "svc", None, calls, [], config, limits=limits)
    assert (after.tools[0].loops, limits.of("lookup_order").loop_threshold) == ((), 5)


def test_the_tools_remembered_are_bounded() -> None:
    config = Config(loop_threshold=3)
    limits = LimitsByTool(config)
    first = limits.of("tool_0")
    for i in range(1, REMEMBERED_TOOLS + 1):
        limits.of(f"tool_{i}")
    # past the bound every name was forgotten: the first is looked up again, the same
    assert limits.of("tool_0") is not first
    assert limits.of("tool_0") == first


def test_a_long_tool_name_is_looked_up_not_kept() -> None:
    # a hostile span's tool name of megabytes pins nothing
    limits = LimitsByTool(Config(loop_threshold=3))
    long = "x" * (REMEMBERED_NAME_CHARS + 1)
    first = limits.of(long)
    assert limits.of(long) is not first
    assert limits.of(long) == first
    short = "x" * REMEMBERED_NAME_CHARS
    assert limits.of(short) is limits.of(short)
