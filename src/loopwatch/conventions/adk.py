"""Google ADK's own tool attributes, written on its GenAI ``execute_tool`` spans (read by the
GenAI emitter): ``gcp.vertex.agent.tool_call_args`` / ``tool_response``.

Seen from Google ADK 2.13, legacy format (``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ARGUMENTS = "gcp.vertex.agent.tool_call_args"
RESULT = "gcp.vertex.agent.tool_response"


def content_off(attrs: Mapping[str, Any]) -> tuple[bool, bool]:
    """(arguments unknown, result unknown). ADK writes '{}' for the arguments (and for the
    response) when content capture is off: unknown, not empty."""
    arguments_off = attrs.get(ARGUMENTS) == "{}" and "input.value" not in attrs
    return arguments_off, arguments_off and attrs.get(RESULT) == "{}"
