"""The traces in serve that have shown only plain spans (records of type Link): kept cheaply,
their records without the children index and not counted as open turns, until a GenAI span
comes (then the trace is an agent's, indexed as if it had been one from its first span) or the
request their root came in ends (then they are let go, their root remembered for a grace by
core.let_go). The assembler owns the maps; this holds what only plain traces need."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from loopwatch.core.buffer_budget import CHILD_BYTES, RECORD_BYTES, BufferBudget
from loopwatch.core.config import Config
from loopwatch.core.let_go import LetGo
from loopwatch.core.open_trace import OpenTrace
from loopwatch.core.reasons import DROP_TURN_FULL
from loopwatch.core.records import Link
from loopwatch.core.sink import Sink

# A plain trace's record: a Link, not yet an entry of the children index (CHILD_BYTES)
_PLAIN_BYTES: Final = RECORD_BYTES[Link]


class PlainTraces:
    """Not thread-safe: the assembler's caller serialises it. ``traces`` and ``rooted`` are
    the assembler's (open traces, least recently seen first; roots come, in order)."""

    def __init__(
        self,
        *,
        traces: OrderedDict[int, OpenTrace],
        rooted: OrderedDict[int, float],
        budget: BufferBudget,
        config: Config,
        sink: Sink,
        clock: Callable[[], float],
        remembered: int,
    ) -> None:
        self.count = 0  # of traces, those with only plain spans so far
        self.let_go = LetGo(remembered)
        self._traces = traces
        self._rooted = rooted
        self._budget = budget
        self._config = config
        self._sink = sink
        self._clock = clock
        # plain traces whose root came in this request: let go at its end (``let_rooted_go``)
        self._rooted_now: list[tuple[int, OpenTrace]] = []

    def add(self, trace_id: int, trace: OpenTrace | None, service: str, record: Link) -> None:
        """A plain span in a trace with only plain spans so far: kept, unindexed, until the
        trace's root comes and its request ends, or a GenAI span comes. The caller then checks
        the budget."""
        if trace is None:
            trace = OpenTrace(service, self._clock(), plain=True)
            self._traces[trace_id] = trace
            self._budget.held += trace.size
            self.count += 1
            if self.let_go.came:
                # its root came and was let go: held until a grace after that root, for a GenAI
                # span of another service that may yet hang under it
                self.after_let_go(trace_id, trace)
        else:
            trace.last_seen = self._clock()
            self._traces.move_to_end(trace_id)
        records = trace.records
        if len(records) >= self._config.max_spans_per_turn:
            self._sink.dropped(DROP_TURN_FULL)
            return
        span_id = record.span_id
        if span_id not in records:  # the same span id again replaces the first, same size
            trace.size += _PLAIN_BYTES
            self._budget.held += _PLAIN_BYTES
        records[span_id] = record
        if record.parent_id is None:
            trace.service = service
            self._rooted[trace_id] = trace.last_seen
            self._rooted.move_to_end(trace_id)
            self._rooted_now.append((trace_id, trace))

    def promote(self, trace: OpenTrace) -> None:
        """A plain trace's first GenAI span came: index what it kept, count it as open (the
        caller has made room for one more open turn)."""
        self.count -= 1
        size = CHILD_BYTES * trace.index()
        trace.size += size
        self._budget.held += size  # (checked against the limit as the span is added)

    def after_let_go(self, trace_id: int, trace: OpenTrace) -> None:
        """A span opened a trace whose plain root came and was let go: the trace is finalized
        a grace after that root, and is that root's service's."""
        root = self.let_go.take(trace_id)
        if root is None:
            return
        seen_at, trace.service = root
        rooted = self._rooted
        later: list[tuple[int, float]] = []  # roots that came after it: kept after it
        while rooted:
            last = next(reversed(rooted))
            if rooted[last] <= seen_at:
                break
            later.append((last, rooted.pop(last)))
        rooted[trace_id] = seen_at
        for other, at in reversed(later):
            rooted[other] = at

    def let_rooted_go(self) -> None:
        """Let go the plain traces whose root came in the request just added: no GenAI span
        came with them."""
        if not self._rooted_now:
            return
        traces = self._traces
        for trace_id, trace in self._rooted_now:
            if trace.plain and traces.get(trace_id) is trace:
                del traces[trace_id]
                seen_at = self._rooted.pop(trace_id, trace.last_seen)
                self._budget.held -= trace.size
                self.count -= 1
                self.let_go.add(trace_id, seen_at, trace.service)
        self._rooted_now.clear()
