"""General rules for what frameworks put where a tool's own span and result should be.

- A tool span that only aggregates others is not a call: its tool name is a placeholder in
  parentheses. Google ADK (2.13) writes ``execute_tool (merged)`` with ``gen_ai.tool.name =
  "(merged tools)"`` after the parallel calls' own spans (arguments absent, or ``"N/A"`` in its
  legacy format).
- A result that is a framework's output wrapper is unwrapped to the tool's own value, and the
  wrapper's error flag is an error: LlamaIndex (0.14, under OpenInference llama-index 4.6)
  writes its ``ToolOutput`` (``blocks``, ``tool_name``, ``raw_input``, ``raw_output``,
  ``is_error``).
- An error described in a result is an error, classified like one in a status: a mapping that
  names an ``error_type`` (ADK 2.13 ``ReflectAndRetryToolPlugin``: ``{"response_type":
  "ERROR_HANDLED_BY_REFLECT_AND_RETRY_PLUGIN", "error_type": "TimeoutError", "error_details":
  ..., "reflection_guidance": ...}``).
"""

from __future__ import annotations

from typing import Any

# Field names of a result mapping that describe a failure, and of the text that goes with it.
_ERROR_TYPE_FIELDS = ("error_type", "exception_type")
_ERROR_TEXT_FIELDS = ("error_details", "error_message", "error", "message")
_MAX_TEXT = 500


def is_aggregate_tool(tool_name: str) -> bool:
    """A placeholder in parentheses names no tool: the span stands for several calls."""
    return len(tool_name) > 2 and tool_name[0] == "(" and tool_name[-1] == ")"


def _wrapper_error_text(wrapper: dict[str, Any], value: Any) -> str:
    blocks = wrapper.get("blocks")
    texts = [
        b["text"]
        for b in (blocks if isinstance(blocks, list) else [])
        if isinstance(b, dict) and isinstance(b.get("text"), str)
    ]
    text = "\n".join(texts) if texts else (value if isinstance(value, str) else str(value))
    return text[:_MAX_TEXT]


def unwrap_output(value: Any) -> tuple[bool, Any, str | None]:
    """``(unwrapped, value, error_text)``: the tool's own value out of a framework's output
    wrapper, with the error text when the wrapper flags the call as failed."""
    if not isinstance(value, dict):
        return False, value, None
    if "raw_output" not in value or "tool_name" not in value:  # LlamaIndex ToolOutput
        return False, value, None
    inner = value["raw_output"]
    error = _wrapper_error_text(value, inner) if value.get("is_error") is True else None
    return True, inner, error


def error_in_result(value: Any) -> tuple[str, str] | None:
    """``(error type, message)`` when a result mapping names the error it stands for."""
    if not isinstance(value, dict):
        return None
    for field in _ERROR_TYPE_FIELDS:
        error_type = value.get(field)
        if isinstance(error_type, str) and error_type:
            message = next(
                (value[f] for f in _ERROR_TEXT_FIELDS if isinstance(value.get(f), str)), ""
            )
            return error_type[:_MAX_TEXT], message[:_MAX_TEXT]
    return None
