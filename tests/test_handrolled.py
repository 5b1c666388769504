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
    VARIANTS,
    VENVS,
)
from tests.support.helpers import run_scenario, venv_python
from tests.support.readings import Readings, expected

pytestmark = [pytest.mark.frameworks, pytest.mark.slow]

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
