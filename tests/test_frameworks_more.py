"""Seven more agent frameworks, offline with scripted models, each through the same three turns.

Each framework runs its scenarios (tests/framework_runs/<name>.py) in a process of its own, so
that frameworks which write to the global TracerProvider or patch libraries globally cannot
leak into each other. They run in virtualenvs of their own, made by scripts/test, because their
pins cannot share the test venv's: ``.venv-frameworks-more`` (Strands needs an
opentelemetry-instrumentation release the test venv's opentelemetry-distro pin excludes),
``.venv-adk`` (opentelemetry <= 1.44) and ``.venv-crewai`` (pydantic < 2.13). The processes
hand back their metric samples as JSON; the assertions are here.

The three turns:

- ``timeouts``: ``create_ticket`` (identity ``customer_id``, ``order_id``) times out five times,
  the summary reworded each time: one key, 5 attempts, 4 repeats, one timeout loop.
- ``empty_searches``: four reworded ``search_orders`` calls return ``[]``: a no-rows streak of
  4, one no_rows loop, every key seen once.
- ``bulk``: ``refund_order`` on six different orders (in one model message where the framework
  runs parallel tool calls): six calls, six keys, **no loop**.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.helpers import run_scenario, venv_python

pytestmark = [pytest.mark.frameworks, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Framework:
    module: str  # tests/framework_runs/<module>.py
    agent: str  # the turn's agent label
    venv: str | None = None  # a virtualenv of its own, relative to the repository
    env: dict[str, str] = field(default_factory=dict)
    # calls of tools the framework itself adds to every turn (tool -> calls per turn)
    extra_calls: dict[str, int] = field(default_factory=dict)
    model: str | None = "scripted-v1"  # the model label; None: no span names it ("unknown")
    # the class the timeouts are read as, where the spans hide it
    timeout_class: str = "timeout"


_MORE = ".venv-frameworks-more"
_ADK_CONTENT = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}
FRAMEWORKS = {
    "adk": Framework("adk", agent="support", venv=".venv-adk", env=_ADK_CONTENT),
    "adk-legacy": Framework(
        "adk", agent="support", venv=".venv-adk", env={"ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN": "1"}
    ),
    "strands": Framework("strands", agent="support", venv=_MORE),
    # The AGENT span is named after the agent's run method and holds no agent.name; the
    # instrumentation traces only the model classes it knows (no LLM span for a custom Model);
    # a ToolCallingAgent ends every run with a final_answer call.
    "smolagents": Framework(
        "smolagents", agent="support.run", venv=_MORE, model=None, extra_calls={"final_answer": 1}
    ),
    # No span names the agent: the run's root is a CHAIN span "FunctionAgent.run".
    "llamaindex": Framework("llamaindex", agent="unknown", venv=_MORE),
    # OpenInference alone: the TOOL span's output is the exception's message ("ticket service
    # did not answer") with status OK; no field says the call failed. The five calls are still
    # one key (same identity, same result), a loop of class ok. No LLM span names the model.
    "autogen": Framework("autogen", agent="support", venv=_MORE, model=None, timeout_class="ok"),
    # With AutoGen's own spans too (global provider): its execute_tool span under each TOOL
    # span carries error.type; the two layers are one call. The agent comes from AutoGen's
    # invoke_agent root (it ends before the AGENT span under it).
    "autogen+own-spans": Framework("autogen_both", agent="support", venv=_MORE, model=None),
    # Agno under OpenInference: a failed TOOL span has status ERROR with the exception's message
    # as description, and no exception event or type: "ticket service did not answer" names no
    # class, so the five calls are one key of class tool_error. No LLM span for a custom Model.
    "agno": Framework("agno", agent="support", venv=_MORE, model=None, timeout_class="tool_error"),
    # OpenInference's CrewAI instrumentation writes no LLM span: no model
    "crewai": Framework("crewai", agent="support", venv=".venv-crewai", model=None),
}


class Readings:
    """A scenario's metric samples, read like tests.support.helpers.Pipeline.value."""

    def __init__(self, samples: list[tuple[str, dict[str, str], float]]) -> None:
        self.samples = samples

    def value(self, name: str, **labels: str) -> float:
        return sum(
            v
            for n, got, v in self.samples
            if n == name and all(got.get(k) == want for k, want in labels.items())
        )


_RESULTS: dict[str, dict[str, Readings]] = {}


def run(name: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Readings]:
    """The framework's three scenarios, run once per test session."""
    if name not in _RESULTS:
        framework = FRAMEWORKS[name]
        out = tmp_path_factory.mktemp(name) / "samples.json"
        args = ["tests.framework_runs", framework.module, str(out)]
        raw = run_scenario(venv_python(framework.venv), args, out, framework.env)
        _RESULTS[name] = {scenario: Readings(samples) for scenario, samples in raw.items()}
    return _RESULTS[name]


def _one_turn(r: Readings, framework: Framework) -> None:
    labels = {"agent": framework.agent, "model": framework.model or "unknown"}
    assert r.value("loopwatch_turns_total") == 1
    assert r.value("loopwatch_turns_total", **labels) == 1
    assert r.value("loopwatch_turn_max_attempts_count") == 1


def _extra(framework: Framework) -> float:
    return float(sum(framework.extra_calls.values()))


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_timeouts_with_reworded_summaries_are_one_key(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    framework = FRAMEWORKS[name]
    r = run(name, tmp_path_factory)["timeouts"]
    _one_turn(r, framework)
    cls = framework.timeout_class
    assert r.value("loopwatch_turn_max_attempts_sum") == 5
    assert r.value("loopwatch_tool_calls_total", tool="create_ticket", error_class=cls) == 5
    assert r.value("loopwatch_tool_calls_total") == 5 + _extra(framework)
    assert r.value("loopwatch_repeat_calls_total", tool="create_ticket", error_class=cls) == 4
    assert r.value("loopwatch_repeat_calls_total") == 4
    assert r.value("loopwatch_loops_total", tool="create_ticket", error_class=cls) == 1
    assert r.value("loopwatch_loops_total") == 1
    assert r.value("loopwatch_calls_without_arguments_total") == 0


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_empty_searches_are_a_no_rows_streak(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    framework = FRAMEWORKS[name]
    r = run(name, tmp_path_factory)["empty_searches"]
    _one_turn(r, framework)
    assert r.value("loopwatch_no_rows_streak_count", tool="search_orders") == 1
    assert r.value("loopwatch_no_rows_streak_sum", tool="search_orders") == 4
    assert r.value("loopwatch_tool_calls_total", tool="search_orders", error_class="ok") == 4
    assert r.value("loopwatch_tool_calls_total") == 4 + _extra(framework)
    assert r.value("loopwatch_loops_total", tool="search_orders", kind="no_rows") == 1
    assert r.value("loopwatch_loops_total") == 1
    assert r.value("loopwatch_turn_max_attempts_sum") == 1
    assert r.value("loopwatch_repeat_calls_total") == 0
    assert r.value("loopwatch_calls_without_arguments_total") == 0


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_bulk_refunds_of_six_orders_are_no_loop(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    framework = FRAMEWORKS[name]
    r = run(name, tmp_path_factory)["bulk"]
    _one_turn(r, framework)
    assert r.value("loopwatch_tool_calls_total", tool="refund_order", error_class="ok") == 6
    assert r.value("loopwatch_tool_calls_total") == 6 + _extra(framework)
    assert r.value("loopwatch_turn_max_attempts_sum") == 1
    assert r.value("loopwatch_repeat_calls_total") == 0
    assert r.value("loopwatch_loops_total") == 0
    assert r.value("loopwatch_calls_without_arguments_total") == 0
