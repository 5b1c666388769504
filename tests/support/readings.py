"""A framework run's metric samples, and every number the three scripted turns must give."""

from __future__ import annotations

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
