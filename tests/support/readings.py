"""A framework run's metric samples, and every number the three scripted turns must give."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tests.framework_runs.handrolled import (
    MODELS,
)

Sample = tuple[str, dict[str, str], float]


class Readings:
    def __init__(self, samples: list[Sample]) -> None:
        self.samples = samples

    def value(self, name: str, **labels: str) -> float:
        return sum(
            v
            for n, got, v in self.samples
            if n == name and all(got.get(k) == want for k, want in labels.items())
        )

    def bucket(self, histogram: str, le: float, **labels: str) -> float:
        """Observations of ``histogram`` at most ``le`` (cumulative bucket)."""
        return sum(
            v
            for n, got, v in self.samples
            if n == f"{histogram}_bucket"
            and float(got["le"]) == le
            and all(got.get(k) == want for k, want in labels.items())
        )


def expected(instrumentation: str, sdk: str) -> list[tuple[str, str, dict[str, str], float]]:
    """(what, metric, labels, value): every number the three turns must give."""
    turn_labels = {"agent": "support"} if instrumentation == "loopwatch" else {"model": MODELS[sdk]}
    ct, so = {"tool": "create_ticket"}, {"tool": "search_orders"}
    return [
        ("three turns, not one per model call", "loopwatch_turns_total", {}, 3),
        ("the turns' label", "loopwatch_turns_total", turn_labels, 3),
        ("turns with tool calls", "loopwatch_turn_max_attempts_count", {}, 3),
        ("max attempts 6 + 1 + 1", "loopwatch_turn_max_attempts_sum", {}, 8),
        (
            "create_ticket timeouts",
            "loopwatch_tool_calls_total",
            {**ct, "error_class": "timeout"},
            6,
        ),
        ("create_ticket successes", "loopwatch_tool_calls_total", {**ct, "error_class": "ok"}, 6),
        ("search_orders calls", "loopwatch_tool_calls_total", {**so, "error_class": "ok"}, 4),
        ("no other tool call", "loopwatch_tool_calls_total", {}, 16),
        ("timeout repeats", "loopwatch_repeat_calls_total", {**ct, "error_class": "timeout"}, 5),
        ("no other repeat", "loopwatch_repeat_calls_total", {}, 5),
        (
            "one repeat loop of create_ticket",
            "loopwatch_loops_total",
            {**ct, "error_class": "timeout", "kind": "repeat"},
            1,
        ),
        ("one no-rows loop", "loopwatch_loops_total", {**so, "kind": "no_rows"}, 1),
        ("no other loop", "loopwatch_loops_total", {}, 2),
        ("create_ticket in two turns", "loopwatch_tool_max_attempts_count", ct, 2),
        ("create_ticket max 6 then 1", "loopwatch_tool_max_attempts_sum", ct, 7),
        ("search_orders max 1", "loopwatch_tool_max_attempts_sum", so, 1),
        ("one streak of search_orders", "loopwatch_no_rows_streak_count", so, 1),
        ("a no-rows streak of 4", "loopwatch_no_rows_streak_sum", so, 4),
        ("every call with its arguments", "loopwatch_calls_without_arguments_total", {}, 0),
    ]


Want = tuple[str, str, dict[str, str], float]


def every_order_params(
    instrumentations: Iterable[str], orders: Iterable[tuple[int, ...]], modes: Iterable[str]
) -> list[Any]:
    """(instrumentation, order, mode) for a loopback runner's runs, with readable ids."""
    import pytest

    orders, modes = list(orders), list(modes)
    return [
        pytest.param(i, order, mode, id=f"{i}-{''.join(map(str, order))}-{mode}")
        for i in instrumentations
        for order in orders
        for mode in modes
    ]


def three_turns_wrong(
    run: dict[str, Any], order: tuple[int, ...], mode: str, model: str, more: list[Want]
) -> list[str]:
    """What a loopback run of the three turns in ``order`` got wrong: the hand-rolled numbers
    (turns labelled ``model``), nothing evicted, ``more``, and max attempts 1, 1 and 6."""
    r = Readings(run["runs"][f"{''.join(map(str, order))}-{mode}"])
    wants = [w for w in expected("openinference", "openai") if w[0] != "the turns' label"]
    wants += [
        ("the turns' label", "loopwatch_turns_total", {"model": model}, 3),
        ("no turn ended early", "loopwatch_turns_evicted_total", {}, 0),
        *more,
    ]
    wrong = [
        f"{what}: {metric}{labels} = {r.value(metric, **labels)}, want {want}"
        for what, metric, labels, want in wants
        if r.value(metric, **labels) != want
    ]
    h = "loopwatch_turn_max_attempts"
    got = [r.bucket(h, 1), r.bucket(h, 5), r.bucket(h, 6)]
    if got != [2, 2, 3]:
        wrong.append(f"turn max attempts: buckets le=1,5,6 = {got}, want [2, 2, 3] (1, 1, 6)")
    return wrong
