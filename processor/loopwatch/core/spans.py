"""The read-only view of a span that both entry points (SDK and OTLP) build."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

STATUS_UNSET = 0
STATUS_OK = 1
STATUS_ERROR = 2


@dataclass(slots=True)
class EventView:
    name: str
    attributes: Mapping[str, Any]


@dataclass(slots=True)
class SpanView:
    """One finished span, as the core reads it.

    ``parent_id`` is None for a local root: no parent, or a parent in another process.
    """

    trace_id: int
    span_id: int
    parent_id: int | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    events: tuple[EventView, ...] = ()
    status_code: int = STATUS_UNSET
    status_description: str = ""
    service: str = "unknown"
    extra: Mapping[str, Any] = field(default_factory=dict)


def trace_hex(trace_id: int) -> str:
    return format(trace_id, "032x")
