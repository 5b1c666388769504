"""The read-only view of one OTLP log record (an agent's event) that the conventions read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True, slots=True)
class LogView:
    """One log record with what its resource and scope say about it.

    ``trace_id``/``span_id`` are 0 where the record carries no span context; ``time_ns`` is the
    record's time, else its observed time (0 when neither is set)."""

    time_ns: int
    event_name: str  # LogRecord.event_name, else the ``event.name`` attribute
    scope: str
    attributes: Mapping[str, Any]
    body: Any
    service: str
    trace_id: int = 0
    span_id: int = 0


# The coding agents whose events are read (the agent label of their calls, the source label of
# their own loop detections), and the detection types they report; any other type is "other".
AGENT_SOURCES: Final = ("claude-code", "gemini-cli", "codex")
DETECTION_TYPES: Final = (
    "consecutive_identical_tool_calls",
    "chanting_identical_sentences",
    "llm_detected_loop",
    "other",
)
