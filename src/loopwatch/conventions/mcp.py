"""MCP tool calls: the MCP semantic conventions' client and server spans (``tools/call {tool}``,
``mcp.method.name``, ``gen_ai.tool.name``, ``error.type=tool_error`` for an ``isError``
result, ``mcp.session.id``) and the MCP SDK's own spans, which carry only the method and the
JSON-RPC id and put the tool's name in the span name (``MCP send tools/call create_ticket``).

Seen from mcp 2.3 (its own client spans), mcp 1.30 under OpenLLMetry 0.62's MCP instrumentor
(an OpenLLMetry ``{tool}.tool`` span, read by conventions.openllmetry; its arguments envelope
is unwrapped in conventions.payloads) and loopwatch's own ``call_tool`` spans
(attach.mcp_client)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loopwatch.conventions.emitter import TOOL, UNMARKED, Emitter
from loopwatch.conventions.family import Family
from loopwatch.core.span_view import SpanView

METHOD = "mcp.method.name"
TOOLS_CALL = "tools/call"

MCP = Family(
    name="mcp",
    tool=((METHOD, TOOLS_CALL),),
    tool_name=("gen_ai.tool.name",),
    arguments=("gen_ai.tool.call.arguments",),
    result=("gen_ai.tool.call.result",),
)

# The conventions name a call ``tools/call {tool}``; the SDK prefixes its own verb
# (``MCP send tools/call {tool}``, ``MCP handle tools/call {tool}``).
NAME_PREFIX = TOOLS_CALL + " "
_SDK_NAME_PREFIX = "MCP "


def _after_method(name: str) -> str | None:
    """The target after ``tools/call `` in a span name, else None."""
    if name.startswith(NAME_PREFIX):
        start = len(NAME_PREFIX)
    elif name.startswith(_SDK_NAME_PREFIX):
        found = name.find(" " + NAME_PREFIX, 0, 64)
        if found < 0:
            return None
        start = found + 1 + len(NAME_PREFIX)
    else:
        return None
    return name[start:].strip()


def _kind_by_name(name: str, attrs: Mapping[str, Any]) -> int:
    return TOOL if _after_method(name) is not None else UNMARKED


def _tool_name(span: SpanView) -> str:
    # never the span name: a call whose target is not named is of an unknown tool
    return _after_method(span.name) or "unknown"


EMITTER = Emitter(
    MCP,
    kind_by_name=_kind_by_name,
    name_hints=(NAME_PREFIX, _SDK_NAME_PREFIX),
    tool_name=_tool_name,
)
