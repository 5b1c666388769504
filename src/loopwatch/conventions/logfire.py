"""Logfire's OpenAI Agents bridge: a tool call is a span named ``Function: {name}`` (the message
template, literally) whose ``name``, ``input``, ``output`` and ``error`` attributes carry it.
Logfire also writes ``logfire.level_num`` on every span it exports, whatever family wrote it.

Read from Logfire's source (its OpenAI Agents integration); no framework test drives it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loopwatch.conventions.emitter import TOOL, UNMARKED, Emitter, first_text
from loopwatch.conventions.family import Family
from loopwatch.conventions.payloads import parse_text
from loopwatch.core.span_view import SpanView

FUNCTION_SPAN = "Function: {name}"
LEVEL = "logfire.level_num"
ERROR_LEVEL = 17  # logfire.level_num at "error"


def _kind_by_name(name: str, attrs: Mapping[str, Any]) -> int:
    return TOOL if name == FUNCTION_SPAN else UNMARKED


def _tool_name(span: SpanView) -> str | None:
    return first_text(span.attributes, ("name",))


def _payloads(span: SpanView) -> tuple[Any, Any]:
    return span.attributes.get("input"), span.attributes.get("output")


def _errors(span: SpanView) -> tuple[bool, list[str]]:
    error = span.attributes.get("error")
    return (True, [error_text(error)]) if error else (False, [])


def error_text(error: Any) -> str:
    """Logfire's ``error`` attribute is the SDK's SpanError; its ``data.error`` is the text."""
    value = parse_text(error) if isinstance(error, str) else error
    data = value.get("data") if isinstance(value, dict) else None
    inner = data.get("error") if isinstance(data, dict) else None
    return inner if isinstance(inner, str) else str(error)


EMITTER = Emitter(
    Family(name="logfire"),
    kind_by_name=_kind_by_name,
    name_hints=(FUNCTION_SPAN,),
    tool_name=_tool_name,
    payloads=_payloads,
    errors=_errors,
)
