"""``loopwatch replay`` of stored OTLP logs (the Collector's file exporter writes them as JSON
lines of ``resourceLogs``, as it writes traces): the coding agents' events read into the turns
``loopwatch serve`` gives."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from loopwatch.cli import main
from testkit import coding_agents

# each scenario of an agent in sessions of their own (the fixtures share their ids)
RENAMES = {
    "healthy": (("5c6f8a0e", "5c6f8a0f"), ("b1946ac9", "b1946aca"), ("5eed000", "5eee000")),
    "two_prompts": (("5c6f8a0e", "5c6f8a1e"), ("b1946ac9", "b1946ab9"), ("5eed000", "5eef000")),
    "loop": (),
}


def _line(agent: str, scenario: str, details: bool) -> str:
    text = (coding_agents.FIXTURES / coding_agents.name(agent, scenario, details)).read_text()
    for old, new in RENAMES[scenario]:
        text = text.replace(old, new)
    return json.dumps(json.loads(text))  # one request a line, as the file exporter writes


def _stored(path: Path, details: bool) -> Path:
    lines = [
        _line(agent, scenario, details)
        for scenario in ("loop", "healthy", "two_prompts")
        for agent in coding_agents.AGENTS
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("details", [False, True])
def test_stored_agent_events_replay_into_their_turns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], details: bool
) -> None:
    path = _stored(tmp_path / "logs.json", details)
    assert main(["replay", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    # per agent (Claude Code, gemini-cli, Codex): the loop, the healthy run, the two prompts
    assert document["input"]["log_records"] == (13 + 8 + 7) + (13 + 7 + 7) + (10 + 6 + 6)
    assert document["input"]["spans"] == 0
    assert document["turns"] == 3 + 3 + 6
    assert document["tool_calls"] == 3 * 6 + 3 * 6 + 3 * 4
    assert sorted(t["max_attempts"] for t in document["worst_turns"])[-3:] == [6, 6, 6]
    assert document["turns_with_a_loop"] == 3
    assert document["turns_with_a_loop_by_kind"]["repeat"] == 3
    assert document["duplicate_calls"] == 3 * 5


def test_compressed_logs_and_a_bad_line_lose_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        _line("gemini-cli", "loop", False),
        '{"resourceLogs": 3}',
        _line("codex", "loop", True),
    ]
    path = tmp_path / "logs.json.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    assert main(["replay", str(path)]) == 0
    captured = capsys.readouterr()
    assert "logs.json.gz:2" in captured.err
    assert "1 of 1 file, 2 requests, 0 spans (1 skipped), 15 log records, 2 turns" in captured.out
    assert "run_shell_command  tool_error         repeat      1 of 1" in captured.out
    assert "exec_command       tool_error         repeat      1 of 1" in captured.out
