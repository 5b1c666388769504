"""Errors that frameworks describe in text rather than in a status: the exception class a
result or message names, the OpenAI Agents SDK's error texts, and the results a framework
writes in place of a failed tool's answer. Shared by every emitter family's reading.

Seen from LangGraph 1.2 (``Error: TimeoutError('...')``), Strands Agents 1.62 (``Error:
TimeoutError - ...``) and the OpenAI Agents SDK 0.24 under OpenInference 2.6 and Logfire."""

from __future__ import annotations

import re
from typing import Any

from loopwatch.conventions.payloads import parse_text
from loopwatch.core.outcomes import MAX_EXAMINED_CHARS

# The OpenAI Agents SDK (0.24) reports a handled tool error as the span error
# ``{"message": "Error running tool (non-fatal)", "data": {"tool_name": ..., "error": str(e)}}``;
# the OpenInference bridge writes it as the status description ``"{message}: {data!r}"``. Only
# the ``error`` text says what failed (the tool name could read as a class: ``check_timeout``).
# The atomic group keeps it linear: retrying each earlier "tool" made "tool tool ..." quadratic.
_OPENAI_AGENTS_SPAN_ERROR = re.compile(r"^(Error running (?>[\w ]*tool)[^:]*+): (\{.*\})\s*$", re.S)
# What the SDK itself hands the model as the tool's output when it answers for the tool: its
# per-tool timeout (``error_as_result``, span status left OK) and its default error function.
_OPENAI_AGENTS_ERROR_RESULTS = (
    re.compile(r"^Tool '[^']*' timed out after [\d.]+ seconds\.$"),
    re.compile(r"^An error occurred while (?:running|parsing) the tool"),
)


def openai_agents_error_text(description: str) -> str | None:
    """The ``error`` text inside an OpenAI Agents "Error running tool (non-fatal): {...}"
    status description; None when the description has another shape."""
    if not description.startswith("Error running "):  # what the pattern starts with: cheaper
        return None
    match = _OPENAI_AGENTS_SPAN_ERROR.match(description, 0, MAX_EXAMINED_CHARS)
    if match is None:
        return None
    data = parse_text(match.group(2))
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, str) else match.group(1)


# Frameworks that hand a tool's exception to the model as text name its class there:
# LangGraph's ToolNode ``Error: TimeoutError('...')``, Strands ``Error: TimeoutError - ...``.
_ERROR_TEXT_TYPE = re.compile(r"^\s*Error: ([A-Za-z_][\w.]*)(?:\(| - )")


def error_type_in_text(text: str) -> str | None:
    match = _ERROR_TEXT_TYPE.match(text, 0, MAX_EXAMINED_CHARS)
    return match.group(1) if match else None


def framework_error_result(result: Any) -> str | None:
    """A result text a framework wrote in place of the tool's answer, reporting its failure."""
    if not isinstance(result, str) or len(result) > 500:
        return None
    text = result.strip()
    return text if any(p.match(text) for p in _OPENAI_AGENTS_ERROR_RESULTS) else None
