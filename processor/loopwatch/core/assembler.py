"""Buffers spans per trace until their turn can be finalized; bounds every buffer."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from loopwatch.conventions import read_span
from loopwatch.core.config import Config
from loopwatch.core.records import (
    KIND_LLM,
    KIND_OTHER,
    KIND_TOOL,
    KIND_TURN,
    LlmMark,
    Record,
    ToolCall,
    TurnMark,
)
from loopwatch.core.sink import Sink
from loopwatch.core.spans import SpanView
from loopwatch.core.summary import summarize
from loopwatch.core.turns import split_turns

# Drop reasons (loopwatch_spans_dropped_total{reason}) and eviction reasons.
DROP_TURN_FULL = "turn_full"
DROP_ERROR = "error"
EVICT_IDLE = "idle"
EVICT_CAPACITY = "capacity"
EVICT_SHUTDOWN = "shutdown"
# How many finalized trace ids are remembered to recognise late spans.
_FINALIZED_MEMORY_FACTOR = 4


def _kind(record: Record) -> str:
    if isinstance(record, ToolCall):
        return KIND_TOOL
    if isinstance(record, TurnMark):
        return KIND_TURN
    if isinstance(record, LlmMark):
        return KIND_LLM
    return KIND_OTHER


@dataclass
class _Trace:
    service: str
    last_seen: float
    records: dict[int, Record] = field(default_factory=dict)
    root_seen_at: float | None = None


class TurnAssembler:
    """Not thread-safe: the caller serialises ``add``/``sweep``/``finalize`` (one worker)."""

    def __init__(
        self, config: Config, sink: Sink, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config
        self.sink = sink
        self.clock = clock
        self._traces: OrderedDict[int, _Trace] = OrderedDict()  # least recently seen first
        self._finalized: OrderedDict[int, None] = OrderedDict()

    @property
    def open_turns(self) -> int:
        return len(self._traces)

    def add(self, span: SpanView, *, root_finalizes: bool = True) -> None:
        """Read one finished span. With ``root_finalizes`` (in process) a local root's end
        finalizes its trace at once; the service passes False and finalizes after a grace."""
        record = read_span(span, self.config)
        self.sink.span(_kind(record))
        trace_id = span.trace_id
        if trace_id in self._finalized:
            self.sink.late()
            return
        now = self.clock()
        trace = self._traces.get(trace_id)
        if trace is None:
            if len(self._traces) >= self.config.max_open_turns:
                oldest = next(iter(self._traces))
                self.finalize(oldest, EVICT_CAPACITY)
            trace = self._traces[trace_id] = _Trace(span.service, now)
        else:
            trace.last_seen = now
            self._traces.move_to_end(trace_id)
        if len(trace.records) >= self.config.max_spans_per_turn:
            self.sink.dropped(DROP_TURN_FULL)
            return
        trace.records[span.span_id] = record
        if span.parent_id is None:
            trace.service = span.service
            trace.root_seen_at = now
            if root_finalizes:
                self.finalize(trace_id)
                return
        self.sink.open_turns(len(self._traces))

    def finalize(self, trace_id: int, evicted: str | None = None) -> None:
        """Summarize every turn of the trace and forget its spans."""
        trace = self._traces.pop(trace_id, None)
        if trace is None:
            return
        self._finalized[trace_id] = None
        limit = self.config.max_open_turns * _FINALIZED_MEMORY_FACTOR
        while len(self._finalized) > limit:
            self._finalized.popitem(last=False)
        if evicted is not None:
            self.sink.evicted(evicted)
        for group in split_turns(trace.records):
            self.sink.turn(
                summarize(
                    trace_id,
                    trace.service,
                    group.turn,
                    group.calls,
                    group.llms,
                    self.config,
                    group.start_ns,
                    group.end_ns,
                )
            )
        self.sink.open_turns(len(self._traces))

    def sweep(self) -> None:
        """Finalize traces idle for longer than the idle timeout."""
        deadline = self.clock() - self.config.idle_timeout_seconds
        while self._traces:
            trace_id, trace = next(iter(self._traces.items()))
            if trace.last_seen > deadline:
                break
            self.finalize(trace_id, EVICT_IDLE)

    def finalize_all(self, reason: str = EVICT_SHUTDOWN) -> None:
        for trace_id in list(self._traces):
            self.finalize(trace_id, reason)

    def pending_roots(self) -> list[tuple[int, float]]:
        """(trace id, when its root arrived) for traces whose root has been seen."""
        return [(t, tr.root_seen_at) for t, tr in self._traces.items() if tr.root_seen_at]
