"""Guard decisions on OpenTelemetry spans, where the processor counts them."""

from __future__ import annotations

from typing import Any, Literal

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, TracerProvider

from loopwatch.conventions.read import is_tool_span
from loopwatch.core.records import GUARD_ATTRIBUTE
from loopwatch.core.span_view import SpanView

SpanMode = Literal["auto", "current", "own"]
_TRACER_NAME = "loopwatch.guards"


def current_tool_span() -> Span | None:
    """The current span if it is a tool execution span (as the processor would classify it)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    name = getattr(span, "name", None)
    attributes = getattr(span, "attributes", None)
    if not isinstance(name, str) or attributes is None:
        return None  # not an SDK span: cannot tell what it is
    view = SpanView(0, 0, None, name, 0, 0, dict(attributes))
    return span if is_tool_span(view) else None


def record_decision(
    tool: str,
    decision: str,
    mode: SpanMode = "auto",
    tracer_provider: TracerProvider | None = None,
) -> None:
    """Mark a call a guard answered without running it.

    ``current``: set ``loopwatch.guard.decision`` on the current span. ``own``: emit a
    zero-length ``execute_tool`` span carrying it. ``auto``: the current span when it is a tool
    span (the framework traced the call), else an own span, so a guarded call is never counted
    twice and never lost.
    """
    target = trace.get_current_span() if mode == "current" else None
    if mode == "auto":
        target = current_tool_span()
    if target is not None:
        target.set_attribute(GUARD_ATTRIBUTE, decision)
        return
    tracer = trace.get_tracer(_TRACER_NAME, tracer_provider=tracer_provider)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        GUARD_ATTRIBUTE: decision,
    }
    with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attributes):
        pass


def record_error_on_tool_span(error: BaseException) -> None:
    """When an adapter hands an exception to the model as text, keep it on the tool span."""
    span = current_tool_span()
    if span is not None:
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
