"""Hand-rolled agents (a loop over the raw openai / anthropic SDK, no framework), offline, under
each instrumentation of those SDKs: loopwatch reads the tool calls out of the model calls'
messages and counts the three turns of tests/framework_runs/handrolled.py exactly.

No span executes a tool here: a call is the request in one model call's output joined by call id
to its result in a later call's input. Turns come from the user messages (no agent span), in all
three variants: (a) every model call its own trace, (b) each turn under a plain HTTP server
span, (c) all three turns under one batch span. The ``loopwatch`` mode has no instrumentation:
``@loopwatch.tool`` spans and ``loopwatch.turn``.

Each instrumentation runs in a process of its own (instrumentors patch the SDKs globally and read
the environment once); the processes hand back metric samples and spans as JSON.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.framework_runs.handrolled import (
    COMBINATIONS,
    FIXTURES,
    MODELS,
    VARIANTS,
    VENVS,
)
from tests.helpers import run_scenario, venv_python

pytestmark = [pytest.mark.frameworks, pytest.mark.slow]

Sample = tuple[str, dict[str, str], float]
_RUNS: dict[tuple[str, str], dict[str, Any]] = {}


def run(instrumentation: str, sdk: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The combination's three variants, run once per test session."""
    if (instrumentation, sdk) not in _RUNS:
        out = tmp_path_factory.mktemp(f"{instrumentation}-{sdk}") / "run.json"
        args = ["tests.framework_runs.handrolled", instrumentation, sdk, str(out)]
        _RUNS[(instrumentation, sdk)] = run_scenario(
            venv_python(VENVS.get(instrumentation)), args, out
        )
    return _RUNS[(instrumentation, sdk)]


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


def _params() -> list[Any]:
    return [
        pytest.param(instrumentation, sdk, variant, id=f"{instrumentation}-{sdk}-{variant}")
        for instrumentation, sdk in COMBINATIONS
        for variant in VARIANTS
    ]


@pytest.mark.parametrize(("instrumentation", "sdk", "variant"), _params())
def test_three_turns_of_a_handrolled_loop(
    instrumentation: str, sdk: str, variant: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Turn 1: six reworded create_ticket calls that time out (one key, a repeat loop); turn 2:
    four empty searches (a no-rows streak of 4); turn 3: six create_ticket calls for six orders
    in one model message (max attempts 1, no loop)."""
    result = run(instrumentation, sdk, tmp_path_factory)
    r = Readings(result["variants"][variant]["samples"])
    wrong = [
        f"{what}: {metric}{labels} = {r.value(metric, **labels)}, want {want}"
        for what, metric, labels, want in expected(instrumentation, sdk)
        if r.value(metric, **labels) != want
    ]
    h = "loopwatch_turn_max_attempts"
    got = [r.bucket(h, 1), r.bucket(h, 5), r.bucket(h, 6)]
    if got != [2, 2, 3]:
        wrong.append(f"turn max attempts: buckets le=1,5,6 = {got}, want [2, 2, 3] (1, 1, 6)")
    assert not wrong, "\n".join(wrong)


def _without_times(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in s.items() if k not in ("start_time_unix_nano", "end_time_unix_nano")}
        for s in spans
    ]


RECORDED = [c for c in COMBINATIONS if c[0] != "loopwatch"]


@pytest.mark.parametrize(
    ("instrumentation", "sdk"), RECORDED, ids=[f"{i}-{s}" for i, s in RECORDED]
)
def test_recorded_spans_are_what_the_pinned_packages_emit(
    instrumentation: str, sdk: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """tests/fixtures/handrolled/ holds what these versions emit (ids are seeded, so only the
    times differ). After a pin changes: ``python -m tests.framework_runs.handrolled
    --record-all``."""
    result = run(instrumentation, sdk, tmp_path_factory)
    fixture = json.loads((FIXTURES / f"{instrumentation}-{sdk}.json").read_text(encoding="utf-8"))
    assert fixture["versions"] == result["versions"]
    for variant in ("a", "b"):
        recorded = _without_times(fixture["variants"][variant])
        assert recorded == _without_times(result["variants"][variant]["spans"]), variant
