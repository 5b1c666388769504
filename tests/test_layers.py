"""core.layers on hostile shapes: a long chain of nested same-tool spans, and parent cycles."""

from __future__ import annotations

import time

from loopwatch.core.keys import AttemptKey
from loopwatch.core.layers import merge_layers
from loopwatch.core.records import ToolCall


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
