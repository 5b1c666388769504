"""A hand-rolled loop over LiteLLM, offline, in the README's quick-start set-up without
``loopwatch.turn``: loopwatch counts the three turns of tests/framework_runs/litellm_loop.py
exactly in every order of the three, unary and streamed, with the model calls traced by
LiteLLM's own OpenTelemetry callback (``litellm.callbacks = ["otel"]``) and by OpenInference's
and OpenLLMetry's instrumentations of LiteLLM.

The callback's spans are the hard case: the calls the model asked for are only in
``gen_ai.completion.{i}.function_call.*`` (no id), the next input has lost them (the assistant
message is ``"parts": []``), and the spans end on LiteLLM's logging thread, so a step's
``@loopwatch.tool`` span may reach loopwatch before the model call that asked for it.

One process per instrumentation, in ``.venv-litellm`` (pyproject.toml's ``litellm`` extra says
why a venv of its own); it hands back each run's metric samples as JSON."""

from __future__ import annotations

from typing import Any

import pytest

from tests.framework_runs.litellm_loop import INSTRUMENTATIONS, MODEL, MODES
from tests.framework_runs.loopback import ORDERS
from tests.support.helpers import run_scenario, venv_python
from tests.support.readings import every_order_params, three_turns_wrong

pytestmark = [pytest.mark.frameworks, pytest.mark.slow]

VENV = ".venv-litellm"
_RUNS: dict[str, dict[str, Any]] = {}
# calls read without an id: the callback writes none for the calls a model call asks for (all
# 16); the other two write the API's ids
WITHOUT_ID = {"litellm-otel": 16, "openinference": 0, "openllmetry": 0}
# the model label: the callback names the model without its provider prefix, the other two
# as LiteLLM was asked for it
TURN_MODEL = {
    "litellm-otel": MODEL,
    "openinference": f"openai/{MODEL}",
    "openllmetry": f"openai/{MODEL}",
}
VERSIONS = {
    "litellm-otel": {"litellm": "1.110.2"},
    "openinference": {"litellm": "1.110.2", "openinference-instrumentation-litellm": "0.1.51"},
    "openllmetry": {"litellm": "1.110.2", "opentelemetry-instrumentation-litellm": "0.62.4"},
}


def run(instrumentation: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if instrumentation not in _RUNS:
        out = tmp_path_factory.mktemp(f"litellm-{instrumentation}") / "run.json"
        args = ["tests.framework_runs.litellm_loop", instrumentation, str(out)]
        _RUNS[instrumentation] = run_scenario(venv_python(VENV), args, out)
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
    streak of 4, the bulk turn at max attempts 1 with six calls and no loop; every result
    joined to its call, whichever of a step's spans arrived first."""
    result = run(instrumentation, tmp_path_factory)
    wrong = three_turns_wrong(
        result,
        order,
        mode,
        TURN_MODEL[instrumentation],
        [
            (
                "calls without an id",
                "loopwatch_messages_malformed_total",
                {"reason": "call_without_id"},
                WITHOUT_ID[instrumentation],
            ),
            (
                "nothing else malformed",
                "loopwatch_messages_malformed_total",
                {},
                WITHOUT_ID[instrumentation],
            ),
        ],
    )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("instrumentation", list(INSTRUMENTATIONS))
def test_the_instrumentation_run_and_its_versions(
    instrumentation: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The model calls were traced by the instrumentation named, and no other (instrument()
    switched on OpenInference's where both are installed), at the versions the README names."""
    result = run(instrumentation, tmp_path_factory)
    how, _package, scope = INSTRUMENTATIONS[instrumentation]
    assert result["scopes"] == [scope]
    assert result["switched"] == (["litellm"] if how == "instrument()" else [])
    assert result["versions"] == VERSIONS[instrumentation]
