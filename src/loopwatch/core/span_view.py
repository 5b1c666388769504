"""The read-only view of a span that both entry points (SDK and OTLP) build."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

STATUS_UNSET: Final = 0
STATUS_OK: Final = 1
STATUS_ERROR: Final = 2


@dataclass(init=False, slots=True)
class EventView:
    name: str
    attributes: Mapping[str, Any]

    # written out: compiled, a generated __init__ is interpreted (benchmarks/README.md)
    def __init__(
        self,
        name: str,
        attributes: Mapping[str, Any],
    ) -> None:
        self.name = name
        self.attributes = attributes


@dataclass(init=False, slots=True)
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

    # written out: compiled, a generated __init__ is interpreted (benchmarks/README.md)
    def __init__(
        self,
        trace_id: int,
        span_id: int,
        parent_id: int | None,
        name: str,
        start_ns: int,
        end_ns: int,
        attributes: Mapping[str, Any],
        events: tuple[EventView, ...] = (),
        status_code: int = STATUS_UNSET,
        status_description: str = "",
        service: str = "unknown",
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id
        self.name = name
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.attributes = attributes
        self.events = events
        self.status_code = status_code
        self.status_description = status_description
        self.service = service
        self.extra = {} if extra is None else extra


def trace_hex(trace_id: int) -> str:
    return format(trace_id, "032x")
