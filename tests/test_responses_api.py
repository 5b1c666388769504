"""A hand-rolled loop over the OpenAI Responses API, offline, in the README's quick-start set-up
without ``loopwatch.turn``, under each OpenAI instrumentation: loopwatch counts the three turns
of tests/framework_runs/responses.py exactly in every order of the three, with the whole input
sent each time and with ``previous_response_id`` (each call's input only the results, the calls
in the previous call's output), unary and streamed.

One process per instrumentation (instrumentors patch the SDK globally); it hands back each
run's metric samples as JSON."""

from __future__ import annotations

from typing import Any

import pytest

from tests.framework_runs.loopback import ORDERS
from tests.framework_runs.responses import INSTRUMENTATIONS, MODEL, MODES, PACKAGES
from tests.support.helpers import run_scenario, venv_python
from tests.support.readings import every_order_params, three_turns_wrong

pytestmark = [pytest.mark.frameworks, pytest.mark.slow]

_RUNS: dict[str, dict[str, Any]] = {}
VERSIONS = {
    "openinference": "0.1.66",
    "openllmetry": "0.62.4",
    "otel-genai": "1.3b0",
}


def run(instrumentation: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if instrumentation not in _RUNS:
        out = tmp_path_factory.mktemp(f"responses-{instrumentation}") / "run.json"
        args = ["tests.framework_runs.responses", instrumentation, str(out)]
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
    """Whatever turn comes first, stateless or chained: one turn at max attempts 6 with one
    timeout loop, a no-rows streak of 4, the bulk turn at max attempts 1 with six calls and no
    loop; every result joined to its call (OpenLLMetry's calls carry the item id ``fc_...``,
    their results the ``call_id``), no message counted malformed."""
    result = run(instrumentation, tmp_path_factory)
    wrong = three_turns_wrong(
        result,
        order,
        mode,
        MODEL,
        [
            ("no message malformed", "loopwatch_messages_malformed_total", {}, 0),
        ],
    )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("instrumentation", list(INSTRUMENTATIONS))
def test_the_versions_run(instrumentation: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The SDK and instrumentation versions the numbers above hold for (the README's table)."""
    result = run(instrumentation, tmp_path_factory)
    assert result["versions"] == {
        "openai": "3.57.0",
        PACKAGES[instrumentation]: VERSIONS[instrumentation],
    }
