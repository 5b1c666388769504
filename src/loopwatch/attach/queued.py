"""What the in-process worker's queue holds, and how its round reads each item.

The queue holds three kinds of item, each told by its class: a finished span as on_end got it
(ReadableSpan), a started span's fields (StartFields) and a started span of any other class
(SpanStart). Reading a chunk of the queue turns each finished span into an EndRecord or a
PlainEnd, which the assembler takes in queue order with the starts.
"""

from __future__ import annotations

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span

from loopwatch.attach.read_api import SpanReader, Start, service_of
from loopwatch.attach.read_fields import (
    FAST,
    StartFields,
    direct,
    end_fields,
    read_start,
    resource_field,
    span_reader,
    start_fields,
    view_fields,
)
from loopwatch.conventions.read import may_be_genai, read_span
from loopwatch.core.config import Config
from loopwatch.core.records import Record


class SpanStart:
    """A started span of a class other than the one on_start reads into StartFields."""

    __slots__ = ("span",)

    def __init__(self, span: Span) -> None:
        self.span = span


class EndRecord:
    """A finished span with a GenAI marker, read into its record."""

    __slots__ = ("record", "service", "trace_id")

    def __init__(self, trace_id: int, service: str, record: Record) -> None:
        self.trace_id = trace_id
        self.service = service
        self.record = record


class PlainEnd:
    """A finished span without a GenAI marker: only its place in its trace matters."""

    __slots__ = ("parent_id", "resource", "span", "span_id", "trace_id")

    def __init__(
        self,
        trace_id: int,
        span_id: int,
        parent_id: int | None,
        resource: Resource | None,
        span: ReadableSpan,
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id
        self.resource = resource  # None when not read yet
        self.span = span


# what on_start and on_end queue, and what the worker's round makes of each
Queued = ReadableSpan | StartFields | SpanStart
ReadItem = EndRecord | PlainEnd | StartFields | SpanStart


class QueuedReader:
    """Reads queued starts and ends: the SDK's span fields where they are as expected (checked
    once a process), else the public API (read_fields)."""

    def __init__(self, config: Config, read: SpanReader | None = None) -> None:
        self.config = config
        # each reader one attribute away, as the round calls them per span
        read = read if read is not None else span_reader()
        self.read = read
        self.span_start, self.span_end, self.span_times, self.span_view = read
        # the field reader called directly: compiled, a C call (through the attributes, a call
        # of a Python object, with its arguments parsed)
        self.fields = read is FAST
        # the class whose starts on_start reads into StartFields, where the field reader is
        # used: the first started span's, the SDK's in an agent (an identity test per start,
        # not a lookup); any other class's start is queued as a SpanStart
        self.start_class: type | None = None
        self.end_class: type | None = None  # the same for ends (ended)
        # the last resource and its service (service_of): spans of one provider share it
        self._resource: tuple[Resource | None, str] | None = None

    def reads_starts_of(self, cls: type) -> bool:
        """Whether on_start reads a span of ``cls`` into StartFields (learned at the first)."""
        if self.start_class is None and self.fields and direct(cls):
            self.start_class = cls  # learned at the first start: the SDK's span class
        return cls is self.start_class

    def started(self, item: StartFields | SpanStart) -> Start:
        """A queued start's ids, name and attributes."""
        if isinstance(item, StartFields):
            return start_fields(item)
        if self.fields:
            return read_start(item.span)
        return self.span_start(item.span)

    def service_of(self, resource: Resource | None) -> str:
        last = self._resource
        if last is None or last[0] is not resource:
            last = self._resource = (resource, service_of(resource))
        return last[1]

    def ended(self, span: ReadableSpan) -> EndRecord | PlainEnd:
        """One finished span, read in two steps, each followed by the conventions: its ids,
        name and attributes, which tell a GenAI span from a plain one; then, for a GenAI span
        only, the whole span, read into its record."""
        cls = type(span)
        # the SDK's class, checked once, is read with no test per span, and its resource only
        # when needed (most plain spans need nothing); any other class, or the public API,
        # through the reader, which checks each span
        known = cls is self.end_class
        resource: Resource | None
        if known:
            trace_id, span_id, parent_id, name, attributes = end_fields(span)
            resource = None
        else:
            if self.end_class is None and self.fields and direct(cls):
                self.end_class = cls  # learned at the first end: the SDK's ReadableSpan
            trace_id, span_id, parent_id, name, attributes, resource = self.span_end(span)
        if not may_be_genai(name, attributes):
            return PlainEnd(trace_id, span_id, parent_id, resource, span)
        if known:
            resource = resource_field(span)
        service = self.service_of(resource)
        if known:
            view = view_fields(span, attributes, service)
        else:
            view = self.span_view(span, attributes, service)
        return EndRecord(trace_id, service, read_span(view, self.config))

    def plain_service(self, item: PlainEnd) -> str:
        """A plain end's service (its resource read now when on_end's read left it)."""
        resource = item.resource
        if resource is None:
            resource = item.span.resource
        return self.service_of(resource)
