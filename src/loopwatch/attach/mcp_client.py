"""Spans for MCP tool calls where no installed instrumentation records them in full.

The MCP SDK's own client spans (mcp 2.x) name the method and the tool but carry no arguments,
no result and no outcome: an ``isError`` result leaves the span's status unset. ``instrument()``
wraps ``mcp.ClientSession.call_tool`` (mcp 1.x and 2.x) in a span of the MCP conventions:
``tools/call {tool}`` with ``gen_ai.operation.name=execute_tool``, ``gen_ai.tool.name``,
``mcp.method.name``, the arguments and result under the same content switch as
``@loopwatch.tool`` (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``), and
``error.type=tool_error`` with status ERROR for an ``isError`` result. The SDK's own span is
then nested in it, and the two are read as one call. ``ClientSession.list_tools`` is wrapped
too: each listed tool's MCP annotations tell loopwatch its effect (core.effects). Nothing here
raises into the application.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable
from typing import Any

from opentelemetry.trace import Status, StatusCode

from loopwatch.attach import own_spans
from loopwatch.core.effects import learn_tool_list

log = logging.getLogger(__name__)

_MARK = "__loopwatch_traced__"
# result texts kept on the span: enough for the error class and the no-rows reading
_MAX_RESULT_CHARS = 4096


def instrument_mcp() -> bool:
    """Wrap ``ClientSession.call_tool`` once; False when mcp is not installed, it is wrapped
    already, or OpenLLMetry's MCP instrumentor records these calls."""
    try:
        from mcp import ClientSession
    except ImportError:
        return False
    listing = ClientSession.list_tools
    if not getattr(listing, _MARK, False):
        ClientSession.list_tools = _learning(listing)  # type: ignore[method-assign]
    original = ClientSession.call_tool
    if getattr(original, _MARK, False) or _openllmetry_records_mcp():
        return False
    ClientSession.call_tool = _traced(original)  # type: ignore[method-assign]
    return True


def _learning(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def list_tools(self: Any, *args: Any, **kw: Any) -> Any:
        result = await original(self, *args, **kw)
        try:
            tools = getattr(result, "tools", None) or []
            learn_tool_list(
                t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools
            )
        except Exception as e:
            log.debug("could not read an MCP tool list: %s", e)
        return result

    setattr(list_tools, _MARK, True)
    return list_tools


def _openllmetry_records_mcp() -> bool:
    try:
        module = importlib.import_module("opentelemetry.instrumentation.mcp")
        return bool(module.McpInstrumentor().is_instrumented_by_opentelemetry)
    except Exception:
        return False


def _traced(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def call_tool(self: Any, name: str, arguments: Any = None, *args: Any, **kw: Any) -> Any:
        call = _start(name, arguments)
        if call is None:
            return await original(self, name, arguments, *args, **kw)
        try:
            result = await original(self, name, arguments, *args, **kw)
        except BaseException as e:
            call.close(e)
            raise
        _finish(call, result)
        return result

    setattr(call_tool, _MARK, True)
    return call_tool


def _start(name: str, arguments: Any) -> own_spans.Open | None:
    tracer = own_spans.current_tracer()
    if tracer is None:
        return None
    try:
        tool = str(name)
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "mcp.method.name": "tools/call",
        }
        if arguments is not None and own_spans.capture_content():
            text = own_spans.as_json(arguments)
            if text is not None:
                attributes["gen_ai.tool.call.arguments"] = text
        return own_spans.start_span(tracer, f"tools/call {tool}", attributes)
    except Exception as e:
        log.debug("could not trace an MCP call: %s", e)
        return None


def _finish(call: own_spans.Open, result: Any) -> None:
    try:
        span = call.span
        if span.is_recording():
            text = _result_text(result)
            if text is not None and own_spans.capture_content():
                span.set_attribute("gen_ai.tool.call.result", text)
            if _field(result, "is_error", "isError") is True:
                span.set_attribute("error.type", "tool_error")
                span.set_status(Status(StatusCode.ERROR, (text or "")[:500]))
    except Exception as e:
        log.debug("could not record an MCP result: %s", e)
    call.close()


def _field(result: Any, name: str, older: str) -> Any:
    """A CallToolResult field by its mcp 2.x name, else its mcp 1.x name."""
    value = getattr(result, name, None)
    return value if value is not None else getattr(result, older, None)


def _result_text(result: Any) -> str | None:
    """The structured result when there is one, else the content's texts joined."""
    structured = _field(result, "structured_content", "structuredContent")
    if structured is not None:
        text = own_spans.as_json(structured)
    else:
        blocks = getattr(result, "content", None) or []
        texts = [b.text for b in blocks if isinstance(getattr(b, "text", None), str)]
        text = "\n".join(texts) if texts else None
    return text[:_MAX_RESULT_CHARS] if text is not None else None
