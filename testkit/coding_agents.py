"""OTLP/JSON log requests as the coding-agent CLIs write them (attribute names from
docs/coding-agents.md and the agents' sources; Claude Code's as its 2.1.332 wrote them in
tests/fixtures/coding_agents/recorded/), for the fixtures under tests/fixtures/coding_agents/
(``python -m testkit.coding_agents`` writes them) and the benchmark.

Each scenario is one session: ``loop`` (six identical failing ``curl`` commands, each described
in other words), ``healthy`` (six different commands that succeed), ``two_prompts`` (two prompts
of one session, two calls each); ``details`` says whether arguments are captured."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "coding_agents"
START_NS = 1_796_000_000_000_000_000  # 2026-12-01
COMMAND = "curl -sS http://127.0.0.1:9/health"
CURL_ERROR = (
    "curl: (7) Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server"
)
DESCRIPTIONS = (
    "Check the service health endpoint",
    "Retry the health check on the service",
    "Query health status of the local service again",
    "Check whether the service is up now",
    "Probe the health endpoint once more",
    "Verify the service health endpoint responds",
)
HEALTHY = ("ls", "pwd", "date -u", "whoami", "uname -a", "git status --short")
AGENTS = ("claude-code", "gemini-cli", "codex")
# what each sends by default: gemini-cli's logPrompts is on unless set off, Codex always sends
# its arguments; Claude Code only with OTEL_LOG_TOOL_DETAILS=1
ARGUMENTS_BY_DEFAULT = {"claude-code": False, "gemini-cli": True, "codex": True}
SCENARIOS = ("loop", "healthy", "two_prompts")


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": _attributes(v)}}
    return {"stringValue": str(v)}


def _attributes(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in attrs.items()]


def _request(
    service: str, version: str, scope: str, records: list[dict[str, Any]]
) -> dict[str, Any]:
    resource = {"service.name": service, "service.version": version}
    return {
        "resourceLogs": [
            {
                "resource": {"attributes": _attributes(resource)},
                "scopeLogs": [
                    {"scope": {"name": scope, "version": version}, "logRecords": records}
                ],
            }
        ]
    }


def _record(
    time_ns: int, body: str, attrs: dict[str, Any], trace: str = "", span: str = ""
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "timeUnixNano": str(time_ns),
        "observedTimeUnixNano": str(time_ns),
        "severityNumber": 9,
        "severityText": "INFO",
        "body": {"stringValue": body},
        "attributes": _attributes(attrs),
    }
    if trace:
        record["traceId"], record["spanId"] = trace, span
    return record


def _commands(scenario: str) -> list[tuple[int, str, str, bool]]:
    """(prompt number, command, description, failed) of each call."""
    if scenario == "loop":
        return [(1, COMMAND, d, True) for d in DESCRIPTIONS]
    if scenario == "healthy":
        return [(1, c, f"Run {c}", False) for c in HEALTHY]
    return [(p, c, f"Run {c}", False) for p, c in ((1, "ls"), (1, "pwd"), (2, "ls"), (2, "pwd"))]


def claude_code(scenario: str, details: bool) -> dict[str, Any]:
    session = "5c6f8a0e-3b1d-4c2e-9f10-6a7b8c9d0e1f"
    common = {"session.id": session, "terminal.type": "non-interactive", "user.id": "e3b0c442"}
    records = []
    sequence = 0
    t = START_NS
    prompts: set[int] = set()
    for n, (prompt, command, description, failed) in enumerate(_commands(scenario)):
        prompt_id = f"c0ffee00-0000-4000-8000-00000000000{prompt}"
        base = {**common, "prompt.id": prompt_id}
        if prompt not in prompts:
            prompts.add(prompt)
            sequence += 1
            t += 1_000_000
            records.append(
                _record(
                    t,
                    "claude_code.api_request",
                    {
                        **base,
                        "event.name": "api_request",
                        "event.timestamp": "2026-12-01T00:00:00.000Z",
                        "event.sequence": sequence,
                        "model": "claude-sonnet-4-5-20250929",
                        "input_tokens": "1843",
                        "output_tokens": "96",
                        "cache_read_tokens": "0",
                        "cost_usd": "0.0069",
                        "duration_ms": "812",
                    },
                )
            )
        tool_use = f"toolu_01A{n:02d}xYz"
        decision = {
            **base,
            "event.name": "tool_decision",
            "event.sequence": sequence + 1,
            "tool_name": "Bash",
            "tool_use_id": tool_use,
            "decision": "accept",
            "source": "config",
        }
        sequence += 2
        t += 50_000_000
        result = {
            **base,
            "event.name": "tool_result",
            "event.timestamp": "2026-12-01T00:00:01.000Z",
            "event.sequence": sequence,
            "tool_name": "Bash",
            "tool_use_id": tool_use,
            "success": "false" if failed else "true",
            "duration_ms": "41",
            "decision_type": "accept",
            "decision_source": "config",
            "tool_input_size_bytes": "87",
            "tool_result_size_bytes": "102",
        }
        if failed:  # as Claude Code 2.1.332 writes them (tests/fixtures/coding_agents/recorded/)
            result["error_type"] = "ShellError"
            result["error"] = "Shell command failed"
        if details:
            result["tool_parameters"] = json.dumps(
                {
                    "bash_command": command.split()[0],
                    "full_command": command,
                    "description": description,
                }
            )
            result["tool_input"] = json.dumps({"command": command, "description": description})
        records.append(_record(t - 41_000_000, "claude_code.tool_decision", decision))
        records.append(_record(t, "claude_code.tool_result", result))
    return _request("claude-code", "2.1.332", "com.anthropic.claude_code.events", records)


def gemini_cli(scenario: str, details: bool) -> dict[str, Any]:
    session = "b1946ac9-2d3e-4f50-8a6b-7c8d9e0f1a2b"
    common = {"session.id": session, "installation.id": "9f86d081", "interactive": False}
    records = []
    t = START_NS
    prompts: set[int] = set()
    for n, (prompt, command, description, failed) in enumerate(_commands(scenario)):
        prompt_id = f"{session}########{prompt}"
        if prompt not in prompts:
            prompts.add(prompt)
            t += 1_000_000
            response = {
                **common,
                "event.name": "gemini_cli.api_response",
                "event.timestamp": "2026-12-01T00:00:00.000Z",
                "model": "gemini-2.5-pro",
                "status_code": 200,
                "duration_ms": 640,
                "input_token_count": 2210,
                "output_token_count": 58,
                "prompt_id": prompt_id,
                "auth_type": "gemini-api-key",
            }
            records.append(_record(t, "API response from gemini-2.5-pro.", response))
        t += 50_000_000
        call = {
            **common,
            "event.name": "gemini_cli.tool_call",
            "event.timestamp": "2026-12-01T00:00:01.000Z",
            "function_name": "run_shell_command",
            "duration_ms": 40,
            "success": True,  # true for a command that exited 7: the exit code is in metadata
            "decision": "auto_accept",
            "prompt_id": prompt_id,
            "tool_type": "native",
            "content_length": 120,
        }
        if details:  # logPrompts: the arguments, and the metadata's exit code (gemini-cli 0.61)
            call["function_args"] = json.dumps(
                {"command": command, "description": description}, indent=2
            )
            if failed:
                call["metadata"] = json.dumps({"exitCode": 7, "isError": True}, indent=2)
        records.append(_record(t, f"Tool call: run_shell_command{n}", call))
        if scenario == "loop" and n == 4:  # its own guard trips at the fifth identical call
            detection = {
                **common,
                "event.name": "gemini_cli.loop_detected",
                "event.timestamp": "2026-12-01T00:00:02.000Z",
                "loop_type": "consecutive_identical_tool_calls",
                "prompt_id": "",
                "count": 1,
            }
            records.append(_record(t + 1, "Loop detected.", detection))
    return _request("gemini-cli", "0.21.0", "gemini-cli", records)


def codex(scenario: str, details: bool) -> dict[str, Any]:  # (always sends its arguments)
    conversation = "0199a6f4-7b2c-7d30-9e41-5f6a7b8c9d0e"
    common = {
        "conversation.id": conversation,
        "app.version": "0.63.0",
        "auth_mode": "ApiKey",
        "model": "gpt-5-codex",
        "slug": "gpt-5-codex",
        "terminal.type": "unknown",
    }
    records = []
    t = START_NS
    for n, (prompt, command, _description, failed) in enumerate(_commands(scenario)):
        trace = f"{0x5EED0000 + prompt:032x}"
        span = f"{0xC0DE0000 + prompt:016x}"
        t += 50_000_000
        said = CURL_ERROR if failed else f"{command} ok {n}"
        output = (
            f"Process exited with code {7 if failed else 0}\nWall time: 0.0{n} seconds\n"
            f"Output:\n{said}\n"
        )
        result = {
            **common,
            "event.name": "codex.tool_result",
            "event.timestamp": "2026-12-01T00:00:01.000Z",
            "tool_name": "exec_command",
            "call_id": f"call_{n:02d}Qx",
            "duration_ms": 12,
            "success": "true",  # true for a command that exited 7: the code is in the output
            "output": output,
            "mcp_server": "",
        }
        result["arguments"] = json.dumps(
            {"cmd": command, "workdir": "/work/project", "yield_time_ms": 10000}
        )
        records.append(_record(t, "codex.tool_result", result, trace, span))
        if n == 0 or (scenario == "two_prompts" and n == 2):
            sse = {
                **common,
                "event.name": "codex.sse_event",
                "event.kind": "response.completed",
                "input_token_count": 3012,
                "output_token_count": 77,
            }
            records.append(_record(t - 20_000_000, "codex.sse_event", sse, trace, span))
    return _request("codex_exec", "0.63.0", "codex_otel", records)


BUILDERS = {"claude-code": claude_code, "gemini-cli": gemini_cli, "codex": codex}


def name(agent: str, scenario: str, details: bool) -> str:
    return f"{agent}-{scenario}-{'details' if details else 'default'}.json"


PROMPTS_OFF = "gemini-cli-loop-prompts_off.json"  # gemini-cli with logPrompts set to false


def write(directory: Path = FIXTURES) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for agent, build in BUILDERS.items():
        for scenario in SCENARIOS:
            for details in (False, True):
                path = directory / name(agent, scenario, details)
                document = build(scenario, details or ARGUMENTS_BY_DEFAULT[agent])
                path.write_text(json.dumps(document, indent=1) + "\n")
                written.append(path)
    path = directory / PROMPTS_OFF
    path.write_text(json.dumps(gemini_cli("loop", False), indent=1) + "\n")
    written.append(path)
    return written


if __name__ == "__main__":
    for path in write(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES):
        print(path)
