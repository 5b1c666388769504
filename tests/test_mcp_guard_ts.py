"""``loopwatch mcp-guard`` driven by the TypeScript MCP SDK's client (tests/ts-client, its
package-lock.json pinning @modelcontextprotocol/sdk), in front of the same real stdio server as
tests/test_mcp_guard.py: one ticket, the circuit open at the fifth call, tools/list as the
server's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.helpers import require_tool
from tests.support.mcp_guard import CONFIG, ROOT, SERVER

CLIENT = ROOT / "tests" / "ts-client"


def _node_client(tmp_path: Path, port: int, *command: str) -> dict[str, Any]:
    node = require_tool("node")
    if not (CLIENT / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        npm = require_tool("npm")
        installed = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=CLIENT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert installed.returncode == 0, installed.stderr[-4000:]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "TICKETS_FILE": str(tmp_path / "tickets.txt"),
        "LOOPWATCH_METRICS_PORT": str(port),
        "OTEL_TRACES_EXPORTER": "none",
    }
    done = subprocess.run(
        [node, str(CLIENT / "client.mjs"), *command],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _text(result: dict[str, Any]) -> str:
    return "\n".join(block["text"] for block in result["content"])


def test_typescript_client_through_the_guard(tmp_path: Path, free_port: Callable[[], int]) -> None:
    (tmp_path / "loopwatch.toml").write_text(CONFIG)
    server = [sys.executable, str(SERVER)]
    guard = [sys.executable, "-m", "loopwatch.cli", "mcp-guard", "--", *server]
    guarded = _node_client(tmp_path, free_port(), *guard)

    assert (tmp_path / "tickets.txt").read_text().count("\n") == 1
    calls = guarded["calls"]
    assert [c.get("isError", False) for c in calls] == [False, False, False, False, True, True]
    assert calls[1:4] == [calls[0]] * 3 and _text(calls[0]) == "T-1"
    assert _text(calls[4]).startswith(
        "STOPPED by loopwatch: create_ticket was not run. The same request was already made "
        "and 3 duplicates of it were refused."
    )

    (tmp_path / "tickets.txt").unlink()
    direct = _node_client(tmp_path, free_port(), *server)
    assert guarded["tools"] == direct["tools"]
    assert [t["name"] for t in direct["tools"]["tools"]] == ["create_ticket", "search_orders"]
    # the server alone makes six tickets
    assert (tmp_path / "tickets.txt").read_text().count("\n") == 6
