"""core.layers on hostile shapes: a long chain of nested same-tool spans, and parent cycles."""

from __future__ import annotations

import json
import time

from loopwatch.core.config import Config
from loopwatch.core.keys import AttemptKey, attempt_key
from loopwatch.core.layers import merge_layers
from loopwatch.core.records import ToolCall
from tests.support.span_shapes import tool_call, view


def _call(span_id: int, parent_id: int | None, error_class: str = "ok") -> ToolCall:
    return ToolCall(
        span_id,
        parent_id,
        span_id,
        span_id + 1,
        "search",
        AttemptKey("search", "abc", error_class),
        error_class,
        "unknown" if error_class != "ok" else "rows",
        True,
        "",
        None,
    )


def _chain(n: int) -> list[ToolCall]:
    """n same-tool spans, each the direct child of the one before, innermost last."""
    return [_call(1, None)] + [_call(i, i - 1) for i in range(2, n + 1)]


def _costs(*chains: list[ToolCall]) -> list[float]:
    """Each chain's best merge time, the chains taking turns: the machine's speed drifts by up
    to 2x over seconds, and measured one after the other a slow moment may fall on one only."""
    best = [float("inf")] * len(chains)
    for _ in range(5):
        for i, calls in enumerate(chains):
            start = time.thread_time()
            merge_layers(calls)
            best[i] = min(best[i], time.thread_time() - start)
    return best


def test_a_nested_chain_is_one_call_and_costs_linear_time() -> None:
    merged = merge_layers(_chain(2_000))
    assert [c.span_id for c in merged] == [1]
    # linear: 4x the spans costs about 4x; a walk to the top per span would cost 16x
    small, large = _costs(_chain(2_000), _chain(8_000))
    assert large / small < 8


def test_parent_cycles_terminate() -> None:
    merged = merge_layers([_call(1, 2), _call(2, 1, "timeout")])
    assert len(merged) == 1
    assert merged[0].error_class == "timeout"


def test_a_writes_layers_keep_its_key_ok() -> None:
    """An MCP call is two layers (the SDK's own span, loopwatch's around it): merged, a write's
    success keeps the key the monitor and the breaker give it, outcome "ok" whatever it
    answered, so its layered and single-layer calls are one key."""
    write = AttemptKey("create_ticket", "c1", "ok")
    outer = ToolCall(1, None, 1, 4, "create_ticket", write, "ok", "rows", True, "", None)
    outer.effect = "write"
    inner = ToolCall(
        2, 1, 2, 3, "create_ticket", AttemptKey("create_ticket", "?2", "ok"), "ok", "empty",
        False, "", None,
    )  # fmt: skip
    inner.effect = "write"
    (merged,) = merge_layers([outer, inner])
    assert merged.key == write and merged.effect == "write"
    assert merged.error_class == "ok" and merged.arguments_known


def test_an_undeclared_write_that_failed_inside_is_keyed_as_its_failures() -> None:
    """A framework's span saw an undeclared write succeed, the span inside it (an MCP client's)
    saw it fail: merged, the call has the key a failed call with the same arguments gets. A
    failure keeps a field named as prose ("note") that a write's success is keyed without."""
    arguments = {"customer_id": "c1", "note": "urgent"}
    outer = tool_call(
        view(
            "execute_tool create_ticket",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "create_ticket",
                "gen_ai.tool.call.arguments": json.dumps(arguments),
                "gen_ai.tool.call.result": '{"ticket": "T-1"}',
            },
        ),
        Config(),
    )
    inner = ToolCall(
        outer.span_id + 1, outer.span_id, 0, 1, "create_ticket",
        AttemptKey("create_ticket", "?", "timeout"), "timeout", "unknown", False, "", None,
    )  # fmt: skip
    (merged,) = merge_layers([outer, inner])
    failed = attempt_key("create_ticket", arguments, "timeout", None)
    assert merged.key == failed and merged.error_class == "timeout"
