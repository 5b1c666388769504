"""MCP tool annotations tell loopwatch which tools write, with no loopwatch.toml, through the
in-process MCP client and through ``loopwatch mcp-guard`` (a real stdio server,
tests/fixtures/mcp_effects/server.py): ``delete_file`` (destructiveHint) repeated on one path is
a duplicate side effect, stopped at the breaker's cap; ``stat`` and ``set_cursor`` (readOnlyHint;
``set_cursor``'s name alone would make it a write) advance, so they run and never loop."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support.helpers import exposition_sum, run_scenario, venv_python

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "fixtures" / "mcp_effects" / "server.py"
DEADLINE_SECONDS = 30.0


def _value(found: list[Any], name: str, **labels: str) -> float:
    return sum(
        v for n, got, v in found if n == name and all(got.get(k) == w for k, w in labels.items())
    )


def test_the_in_process_client_reads_effects_from_annotations(tmp_path: Path) -> None:
    out = tmp_path / "samples.json"
    found = run_scenario(
        venv_python(".venv"), ["tests.framework_runs.mcp_effects_agent", str(out)], out
    )
    assert _value(found, "loopwatch_turns_total", agent="files") == 1
    assert _value(found, "loopwatch_tool_calls_total", error_class="ok") == 12
    assert _value(found, "loopwatch_tool_max_attempts_sum", tool="delete_file") == 4
    assert _value(found, "loopwatch_tool_max_attempts_sum", tool="stat") == 1
    assert _value(found, "loopwatch_tool_max_attempts_sum", tool="set_cursor") == 1
    loops = {
        (labels["tool"], labels["kind"]): v
        for n, labels, v in found
        if n == "loopwatch_loops_total" and v
    }
    assert loops == {("delete_file", "duplicate"): 1}


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def _wait_for_loops(port: int) -> str:
    """The guard's /metrics once its turn has ended (idle timeout) and been counted."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        text = _metrics(port)
        if exposition_sum(text, "loopwatch_turns_total") >= 1 or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


def test_mcp_guard_reads_effects_from_the_servers_tool_list(
    tmp_path: Path, free_port: Callable[[], int]
) -> None:
    port = free_port()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "loopwatch.cli", "mcp-guard", "--", sys.executable, str(SERVER)],
        env={
            "PATH": os.environ["PATH"],
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
            "LOOPWATCH_METRICS_PORT": str(port),
            "LOOPWATCH_IDLE_TIMEOUT_SECONDS": "1",
            "OTEL_TRACES_EXPORTER": "none",
        },
        cwd=tmp_path,  # no loopwatch.toml
    )

    async def calls(session: ClientSession) -> tuple[dict[str, list[bool]], str]:
        await session.list_tools()
        stopped: dict[str, list[bool]] = {}
        for tool, arguments in (
            ("delete_file", {"path": "/tmp/report.csv"}),
            ("stat", {"path": "/var/log/app.log"}),
            ("set_cursor", {"stream": "orders"}),
        ):
            for _ in range(5):
                result = await session.call_tool(tool, arguments)
                stopped.setdefault(tool, []).append(bool(result.is_error))
        return stopped, _wait_for_loops(port)

    async def session_run() -> tuple[dict[str, list[bool]], str]:
        with open(tmp_path / "stderr.txt", "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await calls(session)

    stopped, text = asyncio.run(session_run())
    # a write's successes are attempts: the cap of 2 lets three deletes run
    assert stopped == {
        "delete_file": [False, False, False, True, True],
        "stat": [False] * 5,
        "set_cursor": [False] * 5,
    }
    assert exposition_sum(text, "loopwatch_tool_calls_total", tool="delete_file") == 3
    assert exposition_sum(text, "loopwatch_loops_total", tool="delete_file", kind="duplicate") == 1
    assert exposition_sum(text, "loopwatch_loops_total", tool="stat") == 0
    assert exposition_sum(text, "loopwatch_loops_total", tool="set_cursor") == 0
    assert exposition_sum(text, "loopwatch_tool_max_attempts_sum", tool="set_cursor") == 1
