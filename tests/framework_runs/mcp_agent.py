"""An agent whose tools run on an MCP server (tests/fixtures/mcp/server.py, over stdio), its three
turns each marked by ``loopwatch.turn``: six reworded ``create_ticket`` calls for one order that
time out, four reworded ``search_orders`` that find nothing, six tickets for six orders in one
go. The calls are scripted (no model): what is measured is what the MCP client's spans show.

``python -m tests.framework_runs.mcp_agent MODE OUT``, MODE one of
- ``instrument``: ``loopwatch.instrument()`` with whatever is installed (mcp 2.x: loopwatch's
  own ``tools/call`` spans around the SDK's; mcp 1.x with OpenLLMetry's MCP instrumentor: its
  spans, loopwatch's left off);
- ``sdk-only``: loopwatch attached with ``frameworks=False``: the MCP SDK's own spans alone.
Writes the metric samples as JSON to OUT."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import REGISTRY

import loopwatch
from tests.framework_runs.common import BULK_ORDERS, CUSTOMER, ORDER, QUERIES, SUMMARIES

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "server.py"

TURNS = {
    "timeouts": [
        ("create_ticket", {"customer_id": CUSTOMER, "order_id": ORDER, "summary": s})
        for s in SUMMARIES
    ],
    "empty_searches": [("search_orders", {"query": q}) for q in QUERIES[:4]],
    "bulk": [
        ("create_ticket", {"customer_id": CUSTOMER, "order_id": f"9{o}", "summary": "refund"})
        for o in BULK_ORDERS
    ],
}


async def drive() -> None:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for calls in TURNS.values():
            async with loopwatch.turn(agent="support"):
                if calls[0][0] == "create_ticket" and calls[0][1]["order_id"] != ORDER:
                    # the bulk turn: the model asked for all six at once
                    await asyncio.gather(*(session.call_tool(n, a) for n, a in calls))
                else:
                    for name, arguments in calls:
                        await session.call_tool(name, arguments)


def main(mode: str, out: str) -> None:
    provider = TracerProvider()
    trace.set_tracer_provider(provider)
    processor = loopwatch.instrument(provider, serve=False, frameworks=mode == "instrument")
    asyncio.run(drive())
    processor.force_flush()
    processor.shutdown()  # turns still open are counted now
    samples = [
        (s.name, s.labels, s.value)
        for metric in REGISTRY.collect()
        if metric.name.startswith("loopwatch")
        for s in metric.samples
    ]
    Path(out).write_text(json.dumps(samples), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
