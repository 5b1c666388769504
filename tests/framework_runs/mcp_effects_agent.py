"""An agent calling a real MCP server whose tools say their effect in MCP annotations
(tests/fixtures/mcp_effects/server.py), with ``loopwatch.instrument()`` and no loopwatch.toml:
it lists the tools, then in one turn deletes one file four times, reads its size four times
(it grows) and reads a cursor four times (it advances). Writes the metric samples as JSON.

``python -m tests.framework_runs.mcp_effects_agent OUT``"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import REGISTRY

import loopwatch
from tests.framework_runs.common import samples

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_effects" / "server.py"
CALLS = [
    *[("delete_file", {"path": "/tmp/report.csv"})] * 4,
    *[("stat", {"path": "/var/log/app.log"})] * 4,
    *[("set_cursor", {"stream": "orders"})] * 4,
]


async def drive() -> None:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        async with loopwatch.turn(agent="files"):
            for name, arguments in CALLS:
                await session.call_tool(name, arguments)


def main(out: str) -> None:
    provider = TracerProvider()
    trace.set_tracer_provider(provider)
    processor = loopwatch.instrument(provider, serve=False)
    asyncio.run(drive())
    processor.force_flush()
    processor.shutdown()
    Path(out).write_text(json.dumps(samples(REGISTRY)), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
