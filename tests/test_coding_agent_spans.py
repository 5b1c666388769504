"""The coding agents' spans: Claude Code's span beta (the command on ``claude_code.tool``, the
error on its child ``claude_code.tool.execution``) and gemini-cli's ``tool_call`` spans; and an
agent that sends spans and events for its calls counts each call once."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from loopwatch.conventions.read import read_span
from loopwatch.core.config import Config
from loopwatch.core.records import Link, ToolCall
from loopwatch.core.span_view import STATUS_ERROR, STATUS_UNSET, SpanView
from loopwatch.metrics.exporter import LoopwatchMetrics
from loopwatch.service.otlp_logs import log_views, parse_logs_json
from loopwatch.service.pipeline import LogBatch, Pipeline
from testkit import coding_agents
from tests.support.service import value

COMMAND = coding_agents.COMMAND
INTERACTION = 0x10


def claude_code_beta(trace: int, commands: list[str], failed: bool) -> list[SpanView]:
    """One prompt as Claude Code's span beta exports it: an interaction, and per call a
    ``claude_code.tool`` span with its ``claude_code.tool.execution`` child (children first)."""
    spans: list[SpanView] = []
    for i, command in enumerate(commands):
        start = 1_000 + i * 100
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "Bash",
            "tool_name": "Bash",
            "full_command": command,
            "session.id": "5c6f8a0e",
        }
        execution = {"error.type": "ShellError", "error_class": "ShellError"} if failed else {}
        spans.append(
            SpanView(
                trace,
                0x200 + i,
                0x100 + i,
                "claude_code.tool.execution",
                start + 10,
                start + 50,
                execution,
                status_code=STATUS_ERROR if failed else STATUS_UNSET,
                status_description="Exit code 7" if failed else "",
                service="claude-code",
            )
        )
        spans.append(
            SpanView(
                trace,
                0x100 + i,
                INTERACTION,
                "claude_code.tool",
                start,
                start + 60,
                attrs,
                service="claude-code",
            )
        )
    interaction = {"user_prompt_length": 42, "session.id": "5c6f8a0e"}
    spans.append(
        SpanView(
            trace,
            INTERACTION,
            None,
            "claude_code.interaction",
            0,
            10_000,
            interaction,
            service="claude-code",
        )
    )
    return spans


def _run(*batches: list[SpanView] | LogBatch) -> CollectorRegistry:
    registry = CollectorRegistry()
    pipeline = Pipeline(Config(grace_seconds=0.0), LoopwatchMetrics(registry), worker=False)
    for batch in batches:
        pipeline.process(batch)
    pipeline.advance()
    pipeline.finish()
    return registry


def test_claude_codes_beta_spans_six_failing_commands_are_one_loop() -> None:
    registry = _run(claude_code_beta(1, [COMMAND] * 6, failed=True))
    assert value(registry, "loopwatch_turns_total", agent="claude-code") == 1
    assert value(registry, "loopwatch_tool_calls_total", tool="Bash", error_class="tool_error") == 6
    assert value(registry, "loopwatch_tool_calls_total") == 6  # the executions are layers
    assert value(registry, "loopwatch_turn_max_attempts_sum") == 6
    assert value(registry, "loopwatch_loops_total", tool="Bash", kind="repeat") == 1
    assert value(registry, "loopwatch_calls_without_arguments_total") == 0  # full_command


def test_claude_codes_beta_spans_six_different_commands_are_no_loop() -> None:
    registry = _run(claude_code_beta(1, list(coding_agents.HEALTHY), failed=False))
    assert value(registry, "loopwatch_tool_calls_total", tool="Bash", error_class="ok") == 6
    assert value(registry, "loopwatch_turn_max_attempts_sum") == 1
    assert value(registry, "loopwatch_loops_total") == 0


def test_the_command_is_read_as_the_calls_arguments() -> None:
    span = claude_code_beta(1, [COMMAND], failed=True)[1]
    record = read_span(span, Config())
    assert type(record) is ToolCall
    assert (record.tool, record.arguments_known) == ("Bash", True)


def test_tool_call_spans_are_tool_calls_and_gemini_clis_own_are_read_from_its_events() -> None:
    attrs = {
        "gen_ai.operation.name": "tool_call",
        "gen_ai.tool.name": "run_shell_command",
        "gen_ai.tool.call_id": "call-1",
        "gen_ai.agent.name": "another-agent",
    }
    record = read_span(SpanView(1, 2, None, "tool_call", 0, 10, attrs), Config())
    assert type(record) is ToolCall
    assert (record.tool, record.agent) == ("run_shell_command", "another-agent")
    # gemini-cli's own: each a trace of its own, without its prompt; its events make the turn
    gemini = {**attrs, "gen_ai.agent.name": "gemini-cli", "gen_ai.conversation.id": "b1946ac9"}
    assert type(read_span(SpanView(1, 2, None, "tool_call", 0, 10, gemini), Config())) is Link
    llm = {
        "gen_ai.operation.name": "llm_call",
        "gen_ai.request.model": "gemini-2.5-pro",
        "gen_ai.agent.name": "gemini-cli",
        "gen_ai.prompt.name": "b1946ac9########1",
    }
    assert type(read_span(SpanView(3, 4, None, "llm_call", 0, 10, llm), Config())) is Link


def test_an_agent_sending_spans_and_events_counts_each_call_once() -> None:
    events = (coding_agents.FIXTURES / coding_agents.name("claude-code", "loop", True)).read_bytes()
    logs = LogBatch(log_views(parse_logs_json(events)))
    registry = _run(claude_code_beta(1, [COMMAND] * 6, failed=True), logs)
    assert value(registry, "loopwatch_tool_calls_total") == 6
    assert value(registry, "loopwatch_loops_total") == 1
    assert value(registry, "loopwatch_turns_total") == 1  # the events' model call makes no turn
