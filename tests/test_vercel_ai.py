"""The Vercel AI SDK's own ``ai.*`` spans, as the real SDK wrote them (AI SDK 6's default
telemetry and AI SDK 7's LegacyOpenTelemetry; tests/fixtures/vercel_ai/), sent to a real
``loopwatch serve`` over OTLP/HTTP: the three turns' exact numbers, each read from the
difference the turn made to /metrics, with the function id as the agent and the model id as the
model. Then read_span on those spans one by one."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from loopwatch.conventions import read_span
from loopwatch.conventions.read import UNREAD_PREFIXES, may_be_genai
from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.records import Link, LlmMark, ToolCall, TurnMark
from loopwatch.core.span_view import SpanView
from loopwatch.service.otlp_json import decode
from testkit.serve_process import ServeProcess
from tests.support.recording import Recording
from tests.support.service import get, post
from tests.support.vercel_ai import RECORDINGS, requests

AGENT, MODEL = "support", "gpt-4.1-mini"
TURN = {"service": "support-agent", "agent": AGENT, "model": MODEL}

TOML = """
[serve]
grace_seconds = 0.0

[tools.create_ticket]
identity = ["customer_id", "order_id"]

[tools.search_orders]
result = "rows"
"""
DECLARED = Config(
    tools={
        "create_ticket": ToolDeclaration(identity=("customer_id", "order_id")),
        "search_orders": ToolDeclaration(result="rows"),
    }
)

Sample = tuple[str, tuple[tuple[str, str], ...]]


def _samples(text: str) -> dict[Sample, float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("loopwatch_")
    }


class Turn:
    """What one turn added to /metrics."""

    def __init__(self, before: dict[Sample, float], after: dict[Sample, float]) -> None:
        self.added = {k: v - before.get(k, 0.0) for k, v in after.items()}

    def value(self, name: str, **labels: str) -> float:
        return sum(
            v
            for (n, got), v in self.added.items()
            if n == name and all(dict(got).get(k) == want for k, want in labels.items())
        )


def _scrape(bound: ServeProcess) -> dict[Sample, float]:
    status, text, _ = get(bound.metrics, "/metrics")
    assert status == 200
    return _samples(text)


def _turns_total(samples: dict[Sample, float]) -> float:
    return sum(v for (n, _), v in samples.items() if n == "loopwatch_turns_total")


def _until_turns(bound: ServeProcess, want: int, timeout: float = 20.0) -> dict[Sample, float]:
    deadline = time.monotonic() + timeout
    while True:
        samples = _scrape(bound)
        if _turns_total(samples) >= want:
            assert _turns_total(samples) == want
            return samples
        assert time.monotonic() < deadline, f"turns_total stayed {_turns_total(samples)}"
        time.sleep(0.05)


_SERVED: dict[str, list[Turn]] = {}


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("vercel_ai") / "loopwatch.toml"
    path.write_text(TOML)
    return path


def served(recording: str, config: Path) -> list[Turn]:
    """Each turn of the recording posted to one ``loopwatch serve`` in turn; what each added."""
    if recording not in _SERVED:
        with ServeProcess(args=("--config", str(config))) as bound:
            turns = []
            before = _scrape(bound)
            for done, body in enumerate(requests(recording), 1):
                status, answer, _ = post(bound.http, body, "application/json")
                assert status == 200, answer
                after = _until_turns(bound, done)
                turns.append(Turn(before, after))
                before = after
            _SERVED[recording] = turns
    return _SERVED[recording]


def _one_turn(turn: Turn) -> None:
    assert turn.value("loopwatch_turns_total") == 1
    assert turn.value("loopwatch_turns_total", **TURN) == 1
    assert turn.value("loopwatch_turn_max_attempts_count", **TURN) == 1
    assert turn.value("loopwatch_calls_without_arguments_total") == 0
    assert turn.value("loopwatch_late_spans_total") == 0


@pytest.mark.parametrize("recording", RECORDINGS)
def test_six_timeouts_with_reworded_summaries_are_one_timeout_loop(
    recording: str, config: Path
) -> None:
    turn = served(recording, config)[0]
    _one_turn(turn)
    assert turn.value("loopwatch_turn_max_attempts_sum", **TURN) == 6
    calls = {"tool": "create_ticket", "error_class": "timeout"}
    assert turn.value("loopwatch_tool_calls_total", **TURN, **calls) == 6
    assert turn.value("loopwatch_tool_calls_total") == 6
    assert turn.value("loopwatch_repeat_calls_total", **TURN, **calls) == 5
    assert turn.value("loopwatch_repeat_calls_total") == 5
    assert turn.value("loopwatch_loops_total", **TURN, **calls, kind="repeat") == 1
    assert turn.value("loopwatch_loops_total") == 1


@pytest.mark.parametrize("recording", RECORDINGS)
def test_four_empty_searches_are_a_no_rows_streak(recording: str, config: Path) -> None:
    turn = served(recording, config)[1]
    _one_turn(turn)
    search = {"tool": "search_orders"}
    assert turn.value("loopwatch_no_rows_streak_count", **TURN, **search) == 1
    assert turn.value("loopwatch_no_rows_streak_sum", **TURN, **search) == 4
    assert turn.value("loopwatch_tool_calls_total", **TURN, **search, error_class="ok") == 4
    assert turn.value("loopwatch_tool_calls_total") == 4
    assert turn.value("loopwatch_loops_total", **TURN, **search, kind="no_rows") == 1
    assert turn.value("loopwatch_loops_total") == 1
    assert turn.value("loopwatch_turn_max_attempts_sum") == 1
    assert turn.value("loopwatch_repeat_calls_total") == 0


@pytest.mark.parametrize("recording", RECORDINGS)
def test_six_parallel_tickets_for_six_orders_are_no_loop(recording: str, config: Path) -> None:
    turn = served(recording, config)[2]  # streamText
    _one_turn(turn)
    calls = {"tool": "create_ticket", "error_class": "ok"}
    assert turn.value("loopwatch_tool_calls_total", **TURN, **calls) == 6
    assert turn.value("loopwatch_tool_calls_total") == 6
    assert turn.value("loopwatch_turn_max_attempts_sum") == 1
    assert turn.value("loopwatch_repeat_calls_total") == 0
    assert turn.value("loopwatch_loops_total") == 0


# --------------------------------------------------------------------------------------------
# read_span on the recorded spans, as the service converts them
# --------------------------------------------------------------------------------------------


def views(recording: str) -> Iterator[SpanView]:
    for body in requests(recording):
        yield from decode(body).spans


@pytest.mark.parametrize("recording", RECORDINGS)
def test_each_span_is_read(recording: str) -> None:
    kinds: dict[str, set[str]] = {}
    asked: set[str] = set()
    for view in views(recording):
        attributes = Recording(view.attributes)
        attributes.asked = asked
        record = read_span(dataclasses.replace(view, attributes=attributes), DECLARED)
        kinds.setdefault(view.name, set()).add(type(record).__name__)
        # the processor's pre-filter lets every one through
        assert may_be_genai(view.name, view.attributes)
        if isinstance(record, TurnMark):
            assert (record.agent, record.model) == (AGENT, MODEL)
        elif isinstance(record, LlmMark):
            assert record.model == MODEL
    assert kinds == {
        "ai.toolCall": {"ToolCall"},
        "ai.generateText": {"TurnMark"},
        "ai.generateText.doGenerate": {"LlmMark"},
        "ai.streamText": {"TurnMark"},
        "ai.streamText.doStream": {"LlmMark"},
    }
    # nothing read_span asks for is an attribute the service skips
    assert sorted(k for k in asked if k.startswith(UNREAD_PREFIXES)) == []
    assert {"ai.toolCall.args", "ai.toolCall.result", "ai.telemetry.functionId"} <= asked


def _tool_calls(recording: str, turn: int) -> list[ToolCall]:
    spans = decode(requests(recording)[turn]).spans
    return [r for r in (read_span(v, DECLARED) for v in spans) if isinstance(r, ToolCall)]


@pytest.mark.parametrize("recording", RECORDINGS)
def test_failed_tool_call(recording: str) -> None:
    calls = _tool_calls(recording, 0)
    assert len(calls) == 6
    assert {c.tool for c in calls} == {"create_ticket"}
    assert {c.error_class for c in calls} == {"timeout"}
    assert all(c.arguments_known for c in calls)
    # reworded summaries, one identity: one key
    assert len({c.key for c in calls}) == 1


@pytest.mark.parametrize("recording", RECORDINGS)
def test_empty_results_and_successful_calls(recording: str) -> None:
    searches = _tool_calls(recording, 1)
    assert [(c.tool, c.error_class, c.result) for c in searches] == [
        ("search_orders", "ok", "empty")
    ] * 4
    tickets = _tool_calls(recording, 2)
    assert [(c.tool, c.error_class) for c in tickets] == [("create_ticket", "ok")] * 6
    assert len({c.key for c in tickets}) == 6


def test_a_span_without_arguments_or_function_id() -> None:
    """``recordOutputs: false`` drops the arguments and result; no ``functionId``, no agent."""
    [tool, *_] = (v for v in views(RECORDINGS[0]) if v.name == "ai.toolCall")
    bare = {
        k: v
        for k, v in tool.attributes.items()
        if k not in ("ai.toolCall.args", "ai.toolCall.result", "ai.telemetry.functionId")
    }
    record = read_span(dataclasses.replace(tool, attributes=bare), DECLARED)
    assert isinstance(record, ToolCall)
    assert (record.tool, record.error_class, record.arguments_known) == (
        "create_ticket",
        "timeout",
        False,
    )
    [root, *_] = (v for v in views(RECORDINGS[0]) if v.name == "ai.generateText")
    attributes = {k: v for k, v in root.attributes.items() if k != "ai.telemetry.functionId"}
    turn = read_span(dataclasses.replace(root, attributes=attributes), DECLARED)
    assert isinstance(turn, TurnMark)
    assert (turn.agent, turn.model) == (None, MODEL)


def test_an_embedding_span_is_plain() -> None:
    """``ai.embed`` carries ``ai.operationId`` too, but is neither a turn nor a tool call."""
    [tool, *_] = (v for v in views(RECORDINGS[0]) if v.name == "ai.toolCall")
    attributes = {"ai.operationId": "ai.embed", "ai.telemetry.functionId": AGENT}
    embed = dataclasses.replace(tool, name="ai.embed", attributes=attributes, events=())
    record = read_span(embed, DECLARED)
    assert isinstance(record, Link)
