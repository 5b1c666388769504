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
from tests.support.readings import Readings, expected

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


def _params() -> list[Any]:
    return [
        pytest.param(i, order, mode, id=f"{i}-{''.join(map(str, order))}-{mode}")
        for i in INSTRUMENTATIONS
        for order in ORDERS
        for mode in MODES
    ]


@pytest.mark.parametrize(("instrumentation", "order", "mode"), _params())
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
    r = Readings(result["runs"][f"{''.join(map(str, order))}-{mode}"])
    wants = [
        (what, metric, labels, want)
        for what, metric, labels, want in expected("openinference", "openai")
        if what != "the turns' label"
    ]
    wants += [
        ("the turns' label", "loopwatch_turns_total", {"model": MODEL}, 3),
        ("no turn ended early", "loopwatch_turns_evicted_total", {}, 0),
        ("no message malformed", "loopwatch_messages_malformed_total", {}, 0),
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
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("instrumentation", list(INSTRUMENTATIONS))
def test_the_versions_run(instrumentation: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The SDK and instrumentation versions the numbers above hold for (the README's table)."""
    result = run(instrumentation, tmp_path_factory)
    assert result["versions"] == {
        "openai": "3.57.0",
        PACKAGES[instrumentation]: VERSIONS[instrumentation],
    }
