"""Claude Code, Codex CLI and gemini-cli themselves (pinned, from npm), run offline against a
scripted model on loopback with their telemetry set as docs/coding-agents.md says, into a real
``loopwatch serve``: identical failing commands are one turn with its loop (Claude Code with
default telemetry and with arguments on; gemini-cli's own detections beside it); six different
commands are none; a second prompt of a session is a second turn."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit import claude_code, codex, gemini_cli
from testkit.scripted_anthropic import Script, scripted_anthropic
from testkit.scripted_gemini import scripted_gemini
from testkit.scripted_openai import scripted_openai
from testkit.serve_process import ServeProcess, wait_for

pytestmark = pytest.mark.slow
FAILING = "curl -sS --max-time 2 http://127.0.0.1:9/health"
HEALTHY = ["echo one", "pwd", "date -u +%Y", "uname -s", "true", "echo six"]
TOML = "[limits]\nidle_timeout_seconds = 0.5\n[serve]\ngrace_seconds = 0.0\n"


def _installed(found: Path | None, name: str, version: str) -> Path:
    """A CLI's binary; one npm could not install fails under CI and skips elsewhere."""
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} {version} did not install from npm")
        pytest.skip(f"{name} {version} not installed (npm absent or offline)")
    return found


@pytest.fixture(scope="module")
def binary() -> Path:
    return _installed(claude_code.install(), "Claude Code", claude_code.VERSION)


@pytest.fixture
def served() -> Iterator[ServeProcess]:
    with ServeProcess(TOML, log_level="WARNING") as process:
        yield process


def _run(
    binary: Path, served: ServeProcess, commands: list[str], home: Path, protocol: str, **kw: bool
) -> None:
    endpoint = f"http://{served.grpc if protocol == 'grpc' else served.http}"
    with scripted_anthropic(Script(commands)) as base:
        done = claude_code.run(binary, base, endpoint, protocol, "Is the service up?", home, **kw)
    assert done.returncode == 0, done.stderr[-2000:]


def _turns(served: ServeProcess, count: int) -> dict[str, float]:
    wait_for(lambda: served.samples().get("loopwatch_turns_total", 0) >= count, 60, "turns")
    return served.samples()


@pytest.mark.parametrize(
    ("protocol", "details"),
    [("grpc", False), ("grpc", True), ("http/protobuf", False), ("http/json", True)],
)
def test_six_identical_failing_commands_are_one_turn_with_its_loop(
    binary: Path, served: ServeProcess, tmp_path: Path, protocol: str, details: bool
) -> None:
    _run(binary, served, [FAILING] * 6, tmp_path, protocol, details=details)
    samples = _turns(served, 1)
    assert samples["loopwatch_turns_total"] == 1
    assert samples["loopwatch_tool_calls_total"] == 6
    assert samples["loopwatch_turn_max_attempts_sum"] == 6
    assert samples["loopwatch_loops_total"] == 1
    assert samples.get("loopwatch_calls_without_arguments_total", 0) == (0 if details else 6)
    scrape = served.scrape()
    assert 'kind="repeat"' in scrape and 'service="claude-code",tool="Bash"} 1.0' in scrape


def test_six_different_commands_are_no_loop(
    binary: Path, served: ServeProcess, tmp_path: Path
) -> None:
    _run(binary, served, HEALTHY, tmp_path, "grpc", details=True)
    samples = _turns(served, 1)
    assert samples["loopwatch_tool_calls_total"] == 6
    assert samples["loopwatch_turn_max_attempts_sum"] == 1
    assert samples.get("loopwatch_loops_total", 0) == 0


def test_a_second_prompt_of_the_session_is_a_second_turn(
    binary: Path, served: ServeProcess, tmp_path: Path
) -> None:
    _run(binary, served, HEALTHY[:2], tmp_path, "grpc")
    # the script reads its step from the tool results in the history: the first prompt's two
    # are there, so the second prompt calls the next two
    _run(binary, served, HEALTHY[:4], tmp_path, "grpc", resume=True)
    samples = _turns(served, 2)
    assert samples["loopwatch_turns_total"] == 2
    assert samples["loopwatch_tool_calls_total"] == 4


@pytest.fixture(scope="module")
def codex_binary() -> Path:
    return _installed(codex.install(), "Codex CLI", codex.VERSION)


@pytest.mark.parametrize("exporter", ["grpc", "http/json", "http/binary"])
def test_codex_six_identical_failing_commands_are_one_turn_with_its_loop(
    codex_binary: Path, served: ServeProcess, tmp_path: Path, exporter: str
) -> None:
    if exporter == "grpc":
        otel = codex.grpc_exporter(served.grpc)
    else:
        otel = codex.http_exporter(served.http, exporter.split("/")[1])
    with scripted_openai([FAILING] * 6) as base:
        done = codex.run(codex_binary, tmp_path, codex.config(base, otel), "Is the service up?")
    assert done.returncode == 0, done.stderr[-2000:]
    samples = _turns(served, 1)
    assert samples["loopwatch_turns_total"] == 1
    assert samples["loopwatch_tool_calls_total"] == 6
    assert samples["loopwatch_turn_max_attempts_sum"] == 6
    assert samples["loopwatch_loops_total"] == 1
    scrape = served.scrape()
    assert 'service="codex_exec",tool="exec_command"} 1.0' in scrape


def test_codex_six_different_commands_are_no_loop(
    codex_binary: Path, served: ServeProcess, tmp_path: Path
) -> None:
    with scripted_openai(HEALTHY) as base:
        toml = codex.config(base, codex.grpc_exporter(served.grpc))
        done = codex.run(codex_binary, tmp_path, toml, "Is the service up?")
    assert done.returncode == 0, done.stderr[-2000:]
    samples = _turns(served, 1)
    assert samples["loopwatch_tool_calls_total"] == 6
    assert samples["loopwatch_turn_max_attempts_sum"] == 1
    assert samples.get("loopwatch_loops_total", 0) == 0


@pytest.fixture(scope="module")
def gemini_binary() -> Path:
    return _installed(gemini_cli.install(), "gemini-cli", gemini_cli.VERSION)


def _gemini(
    gemini_binary: Path,
    served: ServeProcess,
    tmp_path: Path,
    protocol: str,
    commands: list[str],
    log_prompts: bool = True,
) -> None:
    endpoint = f"http://{served.grpc if protocol == 'grpc' else served.http}"
    with scripted_gemini(commands) as base:
        done = gemini_cli.run(
            gemini_binary, base, endpoint, protocol, tmp_path, log_prompts=log_prompts
        )
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_gemini_cli_identical_failing_commands_are_one_turn_with_its_loop_and_its_own(
    gemini_binary: Path, served: ServeProcess, tmp_path: Path, protocol: str
) -> None:
    _gemini(gemini_binary, served, tmp_path, protocol, [FAILING] * 6)
    samples = _turns(served, 1)
    # its own guard ends the prompt after the fourth identical call: two strikes
    assert samples["loopwatch_turns_total"] == 1
    assert samples["loopwatch_tool_calls_total"] == 4
    assert samples["loopwatch_turn_max_attempts_sum"] == 4
    assert samples["loopwatch_loops_total"] == 1
    assert samples["loopwatch_agent_loop_detections_total"] == 2
    assert samples.get("loopwatch_spans_total", 0) > 0  # its spans came, read as links
    scrape = served.scrape()
    assert 'service="gemini-cli",tool="run_shell_command"} 1.0' in scrape
    assert 'type="consecutive_identical_tool_calls"} 2.0' in scrape


def test_gemini_cli_without_prompt_logging_shows_only_its_own_detection(
    gemini_binary: Path, served: ServeProcess, tmp_path: Path
) -> None:
    _gemini(gemini_binary, served, tmp_path, "grpc", [FAILING] * 6, log_prompts=False)
    samples = _turns(served, 1)
    assert samples["loopwatch_tool_calls_total"] == 4  # read as successes: no exit code sent
    assert samples.get("loopwatch_loops_total", 0) == 0
    assert samples["loopwatch_agent_loop_detections_total"] == 2


def test_gemini_cli_six_different_commands_are_no_loop(
    gemini_binary: Path, served: ServeProcess, tmp_path: Path
) -> None:
    _gemini(gemini_binary, served, tmp_path, "grpc", HEALTHY)
    samples = _turns(served, 1)
    assert samples["loopwatch_tool_calls_total"] == 6
    assert samples["loopwatch_turn_max_attempts_sum"] == 1
    assert samples.get("loopwatch_loops_total", 0) == 0
