"""A hand-rolled loop over the google-genai SDK (the Gemini API: calls carry no ids), offline,
in the README's quick-start set-up without ``loopwatch.turn``, under each instrumentation of the
SDK: loopwatch joins calls to results by turn, order, tool and arguments, never by id alone,
and counts the three turns of tests/framework_runs/gemini.py exactly in every order of the three,
with ``generate_content`` and with ``generate_content_stream``.

One process per instrumentation (instrumentors patch the SDK globally); it hands back each
run's metric samples as JSON."""

from __future__ import annotations

from typing import Any

import pytest

from tests.framework_runs.gemini import INSTRUMENTATIONS, MODEL, MODES
from tests.framework_runs.loopback import ORDERS
from tests.support.helpers import run_scenario, venv_python
from tests.support.readings import every_order_params, three_turns_wrong

pytestmark = [pytest.mark.frameworks, pytest.mark.slow]

_RUNS: dict[str, dict[str, Any]] = {}
# calls read without an id or with one repeated in the history, per instrumentation: OpenInference
# records no id, OpenLLMetry an empty one (all 16 requested calls); OpenTelemetry's makes them up
# as {name}_{index}, unique only for a turn's first call of each name and index (9 of 16)
WITHOUT_ID = {"openinference": 16, "openllmetry": 16, "otel-genai": 9}


def run(instrumentation: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if instrumentation not in _RUNS:
        out = tmp_path_factory.mktemp(f"gemini-{instrumentation}") / "run.json"
        args = ["tests.framework_runs.gemini", instrumentation, str(out)]
        _RUNS[instrumentation] = run_scenario(venv_python(None), args, out)
    return _RUNS[instrumentation]


@pytest.mark.parametrize(
    ("instrumentation", "order", "mode"), every_order_params(INSTRUMENTATIONS, ORDERS, MODES)
)
def test_three_turns_in_every_order(
    instrumentation: str,
    order: tuple[int, ...],
    mode: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Whatever turn comes first: one turn at max attempts 6 with one timeout loop, a no-rows
    streak of 4, the bulk turn at max attempts 1 with six calls and no loop; malformed
    messages counted, turns not changed by them."""
    result = run(instrumentation, tmp_path_factory)
    wrong = three_turns_wrong(
        result,
        order,
        mode,
        MODEL,
        [
            (
                "calls without a unique id",
                "loopwatch_messages_malformed_total",
                {"reason": "call_without_id"},
                WITHOUT_ID[instrumentation],
            ),
            (
                "every result joined to its call",
                "loopwatch_messages_malformed_total",
                {"reason": "result_without_call"},
                0,
            ),
        ],
    )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("instrumentation", list(INSTRUMENTATIONS))
def test_instrument_switches_on_the_installed_instrumentation(
    instrumentation: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """What loopwatch.instrument() switched on for google-genai, and the versions run."""
    result = run(instrumentation, tmp_path_factory)
    assert INSTRUMENTATIONS[instrumentation][0] in result["switched"]
    assert result["versions"]["google-genai"] == "2.34.0"
