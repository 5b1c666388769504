"""The coding agents' log events (tests/fixtures/coding_agents/, in the agents' own attribute
names) read into turns, calls and loops: in the pipeline, and sent to a real `loopwatch serve`
over OTLP/gRPC and OTLP/HTTP (protobuf and JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from prometheus_client import CollectorRegistry

from loopwatch.core.config import Config
from loopwatch.metrics.exporter import LoopwatchMetrics
from loopwatch.service.otlp_logs import log_views, parse_logs_json
from loopwatch.service.pipeline import LogBatch, Pipeline
from testkit import coding_agents
from testkit.serve_process import ServeProcess, wait_for
from tests.support.service import post, value

FIXTURES = coding_agents.FIXTURES
SERVICES = {"claude-code": "claude-code", "gemini-cli": "gemini-cli", "codex": "codex_exec"}
MODELS = {
    "claude-code": "claude-sonnet-4-5-20250929",
    "gemini-cli": "gemini-2.5-pro",
    "codex": "gpt-5-codex",
}
EXPORT_LOGS = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
CASES = [(a, d) for a in coding_agents.AGENTS for d in (False, True)]


def _fixture(agent: str, scenario: str, details: bool) -> bytes:
    return (FIXTURES / coding_agents.name(agent, scenario, details)).read_bytes()


def _read(body: bytes) -> CollectorRegistry:
    registry = CollectorRegistry()
    pipeline = Pipeline(Config(), LoopwatchMetrics(registry, serve=True), worker=False)
    pipeline.process(LogBatch(log_views(parse_logs_json(body))))
    pipeline.finish()
    return registry


def test_the_fixtures_are_what_the_builder_writes(tmp_path: Path) -> None:
    for written in coding_agents.write(tmp_path):
        assert written.read_text() == (FIXTURES / written.name).read_text(), written.name


@pytest.mark.parametrize(("agent", "details"), CASES)
def test_six_identical_failing_commands_are_one_turn_with_one_loop(
    agent: str, details: bool
) -> None:
    registry = _read(_fixture(agent, "loop", details))
    turn = {"service": SERVICES[agent], "agent": agent, "model": MODELS[agent]}
    assert value(registry, "loopwatch_turns_total", **turn) == 1
    assert value(registry, "loopwatch_turns_total") == 1
    assert value(registry, "loopwatch_tool_calls_total", **turn, error_class="tool_error") == 6
    assert value(registry, "loopwatch_turn_max_attempts_count", **turn) == 1
    assert value(registry, "loopwatch_turn_max_attempts_sum", **turn) == 6
    assert value(registry, "loopwatch_loops_total", **turn, kind="repeat") == 1
    assert value(registry, "loopwatch_loops_total") == 1
    assert value(registry, "loopwatch_log_records_total", kind="tool") == 6
    # without arguments a call is keyed by its tool and error class: the six are one key
    without = value(registry, "loopwatch_calls_without_arguments_total")
    default_without = not details and not coding_agents.ARGUMENTS_BY_DEFAULT[agent]
    assert without == (6 if default_without else 0)


@pytest.mark.parametrize(("agent", "details"), CASES)
def test_six_different_commands_that_succeed_are_no_loop(agent: str, details: bool) -> None:
    registry = _read(_fixture(agent, "healthy", details))
    assert value(registry, "loopwatch_turns_total", agent=agent) == 1
    assert value(registry, "loopwatch_tool_calls_total", agent=agent, error_class="ok") == 6
    assert value(registry, "loopwatch_turn_max_attempts_sum") == 1
    assert value(registry, "loopwatch_loops_total") == 0


@pytest.mark.parametrize(("agent", "details"), CASES)
def test_a_second_prompt_of_one_session_is_a_second_turn(agent: str, details: bool) -> None:
    registry = _read(_fixture(agent, "two_prompts", details))
    assert value(registry, "loopwatch_turns_total", agent=agent) == 2
    assert value(registry, "loopwatch_tool_calls_total") == 4
    assert value(registry, "loopwatch_turn_max_attempts_count") == 2
    assert value(registry, "loopwatch_turn_max_attempts_sum") == 2


def test_gemini_clis_own_loop_detection_is_counted_by_type() -> None:
    registry = _read(_fixture("gemini-cli", "loop", False))
    detections = {
        "service": "gemini-cli",
        "source": "gemini-cli",
        "type": "consecutive_identical_tool_calls",
    }
    assert value(registry, "loopwatch_agent_loop_detections_total", **detections) == 1
    assert value(registry, "loopwatch_agent_loop_detections_total") == 1


def test_gemini_cli_without_prompt_logging_hides_its_failures_but_not_its_own_detection() -> None:
    # logPrompts off: no arguments, and the metadata's exit code is filtered out, so six
    # failing commands read as six successes without arguments (never repeats)
    registry = _read((FIXTURES / coding_agents.PROMPTS_OFF).read_bytes())
    assert value(registry, "loopwatch_tool_calls_total", error_class="ok") == 6
    assert value(registry, "loopwatch_loops_total") == 0
    assert value(registry, "loopwatch_agent_loop_detections_total", source="gemini-cli") == 1


def test_a_success_that_exited_non_zero_is_a_failure() -> None:
    # gemini-cli and Codex say success=true for a command that exited 7
    for agent in ("gemini-cli", "codex"):
        document = json.loads(_fixture(agent, "loop", True))
        records = document["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
        said = [a["value"] for r in records for a in r["attributes"] if a["key"] == "success"]
        assert said == [{"boolValue": True}] * 6 or said == [{"stringValue": "true"}] * 6
        registry = _read(_fixture(agent, "loop", True))
        assert value(registry, "loopwatch_tool_calls_total", error_class="ok") == 0


def test_the_agents_through_a_real_loopwatch_serve_over_grpc_and_http() -> None:
    toml = "[limits]\nidle_timeout_seconds = 0.2\n[serve]\ngrace_seconds = 0.0\n"
    with ServeProcess(toml, log_level="WARNING") as served:
        # Claude Code over OTLP/gRPC (its default protocol), protobuf
        loop = parse_logs_json(_fixture("claude-code", "loop", False)).SerializeToString()
        with grpc.insecure_channel(served.grpc) as channel:
            export = channel.unary_unary(EXPORT_LOGS)
            assert export(loop, timeout=10) == b""
        # gemini-cli's "http" protocol sends OTLP/JSON
        gemini = _fixture("gemini-cli", "loop", True)
        assert post(served.http, gemini, "application/json", path="/v1/logs")[0] == 200
        # Codex over OTLP/HTTP protobuf, gzipped
        body = parse_logs_json(_fixture("codex", "healthy", True)).SerializeToString()
        assert post(served.http, body, encoding="gzip", path="/v1/logs")[0] == 200

        def turns() -> float:
            return served.samples().get("loopwatch_turns_total", 0.0)

        wait_for(lambda: turns() == 3, 20, "three turns finalized")
        samples = served.samples()
        assert samples["loopwatch_tool_calls_total"] == 18
        assert samples["loopwatch_loops_total"] == 2
        assert samples["loopwatch_agent_loop_detections_total"] == 1
        assert samples["loopwatch_log_records_total"] == 12 + 1 + 7 + 1 + 7
        scrape = served.scrape()
        assert (
            'loopwatch_loops_total{agent="claude-code",error_class="tool_error",kind="repeat",'
            'model="claude-sonnet-4-5-20250929",service="claude-code",tool="Bash"} 1.0'
        ) in scrape


RECORDED = FIXTURES / "recorded"


@pytest.mark.parametrize("details", [False, True])
def test_claude_codes_recorded_loop_is_one_turn_with_one_loop(details: bool) -> None:
    # recorded from Claude Code 2.1.332 itself (python -m testkit.claude_code DIR)
    name = f"claude-code-loop-{'details' if details else 'default'}.json"
    registry = _read((RECORDED / name).read_bytes())
    turn = {"service": "claude-code", "agent": "claude-code"}
    assert value(registry, "loopwatch_turns_total", **turn) == 1
    assert value(registry, "loopwatch_tool_calls_total", tool="Bash", error_class="tool_error") == 6
    assert value(registry, "loopwatch_turn_max_attempts_sum") == 6
    assert value(registry, "loopwatch_loops_total", tool="Bash", kind="repeat") == 1
    assert value(registry, "loopwatch_calls_without_arguments_total") == (0 if details else 6)


def test_claude_codes_recorded_healthy_run_and_second_prompt() -> None:
    healthy = _read((RECORDED / "claude-code-healthy-details.json").read_bytes())
    assert value(healthy, "loopwatch_tool_calls_total", tool="Bash", error_class="ok") == 6
    assert value(healthy, "loopwatch_turn_max_attempts_sum") == 1
    assert value(healthy, "loopwatch_loops_total") == 0
    two = _read((RECORDED / "claude-code-two_prompts-default.json").read_bytes())
    assert value(two, "loopwatch_turns_total") == 2
    assert value(two, "loopwatch_tool_calls_total") == 4
    assert value(two, "loopwatch_loops_total") == 0


def test_codexs_recorded_loop_and_healthy_run() -> None:
    # recorded from Codex CLI 0.171.0 itself (python -m testkit.codex DIR): its records carry no
    # trace id without a traces exporter, so the conversation is the turn
    loop = _read((RECORDED / "codex-loop.json").read_bytes())
    turn = {"service": "codex_exec", "agent": "codex", "model": "gpt-5-codex"}
    assert value(loop, "loopwatch_turns_total", **turn) == 1
    assert (
        value(loop, "loopwatch_tool_calls_total", tool="exec_command", error_class="tool_error")
        == 6
    )
    assert value(loop, "loopwatch_turn_max_attempts_sum") == 6
    assert value(loop, "loopwatch_loops_total", tool="exec_command", kind="repeat") == 1
    healthy = _read((RECORDED / "codex-healthy.json").read_bytes())
    assert value(healthy, "loopwatch_tool_calls_total", tool="exec_command", error_class="ok") == 6
    assert value(healthy, "loopwatch_turn_max_attempts_sum") == 1
    assert value(healthy, "loopwatch_loops_total") == 0
