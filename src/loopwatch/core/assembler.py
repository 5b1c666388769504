"""Buffers spans per trace until their turn can be finalized; bounds every buffer. The
coordinator: the buffers' costs and budget are core.buffer_budget's, a trace's buffers
core.open_trace's, splitting a trace into turns core.turn_split's, the hand-rolled turns and
held lone tool calls core.conversation_feed's, publishing core.turn_publisher's, the plain
traces let go at their root core.let_go's.

In serve, a trace that has shown only plain spans (records of type Link) is kept cheaply: its
records without their index, not counted as an open turn; a GenAI span that comes indexes them
and the trace is then an agent's, as if it had been one from its first span. A plain trace
whose root has come is let go at the end of that request, not held for the grace."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from loopwatch.core.buffer_budget import (
    RECORD_BYTES,
    SET_ENTRY_BYTES,
    BufferBudget,
    record_bytes,
)
from loopwatch.core.config import Config
from loopwatch.core.conversation_feed import ConversationFeed
from loopwatch.core.conversations import Conversations
from loopwatch.core.let_go import first_due
from loopwatch.core.open_trace import OpenTrace
from loopwatch.core.plain_traces import PlainTraces
from loopwatch.core.reasons import (
    DROP_ERROR,
    DROP_INVALID_ID,
    DROP_MEMORY,
    DROP_QUEUE_FULL,
    DROP_REASONS,
    DROP_TURN_FULL,
    EVICT_CAPACITY,
    EVICT_IDLE,
    EVICT_MEMORY,
    EVICT_REASONS,
    EVICT_SHUTDOWN,
)
from loopwatch.core.records import Link, LlmMark, Record, ToolCall, TurnMark
from loopwatch.core.run_tally import RunTally
from loopwatch.core.sink import Sink
from loopwatch.core.summary import TurnSummary
from loopwatch.core.turn_publisher import TurnPublisher
from loopwatch.core.turn_split import TurnSplitter

# the reasons and the record sizes, where the processor, the service and the metrics read them
__all__ = [
    "DROP_ERROR",
    "DROP_INVALID_ID",
    "DROP_MEMORY",
    "DROP_QUEUE_FULL",
    "DROP_REASONS",
    "DROP_TURN_FULL",
    "EVICT_CAPACITY",
    "EVICT_IDLE",
    "EVICT_MEMORY",
    "EVICT_REASONS",
    "EVICT_SHUTDOWN",
    "RECORD_BYTES",
    "UNKNOWN_SERVICE",
    "TurnAssembler",
    "record_bytes",
]

UNKNOWN_SERVICE: Final = "unknown"

# How many finalized trace ids are remembered to recognise late spans.
_FINALIZED_MEMORY_FACTOR: Final = 4


class TurnAssembler:
    """Not thread-safe: the caller serialises ``add``/``sweep``/``finalize`` (one worker), reads
    spans into records (``conventions.read_span``), counts them (``Sink.span``), calls ``publish``
    once a batch of ``add``s (its completed turns go to the sink) and reports ``open_turns``."""

    def __init__(
        self, config: Config, sink: Sink, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config
        self.sink = sink
        self.clock = clock
        self._traces: OrderedDict[int, OpenTrace] = OrderedDict()  # least recently seen first
        self._finalized: OrderedDict[int, None] = OrderedDict()
        # traces whose root has arrived, in order of arrival: those due are found at the front
        self._rooted: OrderedDict[int, float] = OrderedDict()
        self._budget = BufferBudget(config.buffer_bytes)
        self._plains = PlainTraces(
            traces=self._traces,
            rooted=self._rooted,
            budget=self._budget,
            config=config,
            sink=sink,
            clock=clock,
            remembered=config.max_open_turns * _FINALIZED_MEMORY_FACTOR,
        )
        self._publisher = TurnPublisher(config, sink)
        self._feed = ConversationFeed(
            Conversations(config.max_open_turns, config.max_spans_per_turn),
            self._budget,
            self._publisher,
            clock,
        )
        self._splitter = TurnSplitter(self._feed)
        self.tally: RunTally = self._publisher.tally  # every turn published: logged at shutdown
        # where a turn with loops goes besides the sink: the loop spans (None: nowhere)
        self.loop_spans: Callable[[TurnSummary], None] | None = None

    @property
    def buffered_bytes(self) -> int:
        """Estimated, over every open trace and conversation (``config.buffer_bytes``)."""
        return self._budget.held

    @property
    def open_turns(self) -> int:
        """Every trace that waits: open traces (not the plain ones), open conversations, held
        lone tool calls."""
        return len(self._traces) - self._plains.count + self._feed.waiting()

    @property
    def held_spans(self) -> int:
        """The span records held in open traces (plain ones included)."""
        return sum(len(trace.records) for trace in self._traces.values())

    def holds(self, trace_id: int) -> bool:
        """Whether the trace is open here (neither finalized nor evicted yet)."""
        return trace_id in self._traces

    def turn_traces(self) -> list[int]:
        """The open traces in which a turn span has started (``span_started``), oldest first."""
        return [trace_id for trace_id, trace in self._traces.items() if trace.in_turn]

    def _within_budget(self) -> None:
        """Evict the least recently seen traces until the buffers fit the byte budget (the
        callers check first whether they are over it: a call per span costs)."""
        budget, feed = self._budget, self._feed
        while budget.held > budget.limit:
            if feed.conversations and budget.conversations_first():
                feed.finalized(feed.conversations.oldest(), EVICT_MEMORY)
            elif self._traces:
                self._close(next(iter(self._traces)), EVICT_MEMORY)
            else:
                break

    def _trace(self, trace_id: int, service: str) -> OpenTrace:
        trace = self._traces.get(trace_id)
        if trace is None:
            return self._open(trace_id, service)
        trace.last_seen = self.clock()
        self._traces.move_to_end(trace_id)
        if trace.service == UNKNOWN_SERVICE:  # opened by a span start, before any span ended
            trace.service = service
        return trace

    def _open(self, trace_id: int, service: str) -> OpenTrace:
        if len(self._traces) - self._plains.count >= self.config.max_open_turns:
            self._evict_oldest()
        trace = self._traces[trace_id] = OpenTrace(service, self.clock())
        self._budget.held += trace.size
        return trace

    def _evict_oldest(self) -> None:
        """Finalize the least recently seen open turn, for capacity; the plain traces seen
        before it are let go on the way (they count nothing)."""
        traces = self._traces
        while traces:
            trace_id, trace = next(iter(traces.items()))
            plain = trace.plain
            self._close(trace_id, EVICT_CAPACITY)
            if not plain:
                return

    def _enter_turn(self, trace: OpenTrace, span_id: int) -> None:
        """Note a span started inside a turn (bounded as the turn's spans are), and charge it."""
        if len(trace.in_turn) < self.config.max_spans_per_turn:
            trace.in_turn.add(span_id)
            trace.size += SET_ENTRY_BYTES
            budget = self._budget
            budget.held += SET_ENTRY_BYTES
            if budget.held > budget.limit:
                self._within_budget()

    def started_inside(self, trace_id: int, span_id: int, parent_id: int) -> bool:
        """span_started for a span whose parent may be inside a turn: whether it was (and the
        span is now too). Most starts are inside one: this answers them in one call, without
        reading their name or attributes."""
        trace = self._traces.get(trace_id)  # a finalized trace is no longer here
        if trace is None or parent_id not in trace.in_turn:
            return False
        self._enter_turn(trace, span_id)
        return True

    def span_started(
        self, trace_id: int, span_id: int, parent_id: int | None, is_turn: bool
    ) -> None:
        """A span started (in process, from ``on_start``). Parents start before their children,
        so knowing whether the parent is inside a turn is enough."""
        if trace_id in self._finalized:
            return
        trace = self._traces.get(trace_id)
        inside = trace is not None and parent_id in trace.in_turn
        if not (is_turn or inside):
            return  # plain traffic: nothing is kept for it
        trace = trace if trace is not None else self._trace(trace_id, UNKNOWN_SERVICE)
        self._enter_turn(trace, span_id)

    def needs_link(self, trace_id: int, span_id: int, parent_id: int | None) -> bool:
        """Whether ``add`` (in process) would do anything with a plain span's Link: a late span
        of a finalized trace, a span a kept span hangs under, or a local root that ends an open
        trace. The caller then builds no Link for the others."""
        if trace_id in self._finalized:
            return True
        trace = self._traces.get(trace_id)
        return trace is not None and (parent_id is None or span_id in trace.referenced)

    def add(
        self, trace_id: int, service: str, record: Record, *, root_finalizes: bool = True
    ) -> None:
        """Take one finished span's record. With ``root_finalizes`` (in process) a local root's
        end finalizes its trace at once; the service passes False and finalizes after a grace.
        The turns it completes reach the sink at the next ``publish``."""
        # (one long function on purpose: it runs once a span, and each call it would make
        # instead costs a few per cent of the worker's time)
        if trace_id in self._finalized:
            self.sink.late()
            return
        span_id, parent_id = record.span_id, record.parent_id
        trace = self._traces.get(trace_id)
        # In process spans end children first, so a plain span that no kept span hangs under
        # is not needed for any turn: a web app's other spans cost no memory.
        if (
            root_finalizes
            and type(record) is Link
            and (trace is None or span_id not in trace.referenced)
        ):
            if trace is not None and parent_id is None:
                self._close(trace_id)
            return
        if type(record) is Link and (trace is None or trace.plain):
            self._plains.add(trace_id, trace, service, record)
            if self._budget.held > self._budget.limit:
                self._within_budget()
            return
        if trace is None:
            trace = self._open(trace_id, service)
            if self._plains.let_go.came:
                self._plains.after_let_go(trace_id, trace)
        else:  # _trace, inlined (its lookup done above): once per span
            trace.last_seen = self.clock()
            self._traces.move_to_end(trace_id)
            if trace.service == UNKNOWN_SERVICE:
                trace.service = service
            if trace.plain:  # its first GenAI span: an open turn from now
                if len(self._traces) - self._plains.count >= self.config.max_open_turns:
                    self._evict_oldest()  # (the trace, just seen, is the last it would reach)
                self._plains.promote(trace)
        if len(trace.records) >= self.config.max_spans_per_turn:
            self.sink.dropped(DROP_TURN_FULL)
            return
        records = trace.records
        size = record_bytes(record)
        if span_id in records:  # the same span id again: it replaces the first (as before)
            trace.unlink(records[span_id])
            size -= record_bytes(records[span_id])
        records[span_id] = record
        trace.size += size
        budget = self._budget
        budget.held += size
        if type(record) is ToolCall:
            trace.tool_spans = True
        elif type(record) is LlmMark and record.messages is not None:
            trace.conversing = True
        if parent_id is None:
            trace.service = service
            if root_finalizes:
                self._close(trace_id)
            else:
                self._rooted[trace_id] = trace.last_seen
                self._rooted.move_to_end(trace_id)
        else:
            trace.referenced.add(parent_id)
            siblings = trace.children.get(parent_id)
            if siblings is None:
                trace.children[parent_id] = {span_id: None}
            else:
                siblings[span_id] = None
            outermost_turn = (
                type(record) is TurnMark
                and span_id in trace.in_turn
                and parent_id not in trace.in_turn
            )
            if root_finalizes and outermost_turn:
                self._splitter.split_subtree(trace_id, trace, span_id)
        if budget.held > budget.limit:
            self._within_budget()

    def finalize(self, trace_id: int, evicted: str | None = None) -> None:
        """Summarize every turn of the trace and forget its spans. ``evicted`` says why a
        trace is finalized before its root ended (counted per turn)."""
        self._close(trace_id, evicted)
        self.publish()

    def _close(self, trace_id: int, evicted: str | None = None) -> None:
        """finalize, with its turns left for the next publish."""
        self._rooted.pop(trace_id, None)
        trace = self._traces.pop(trace_id, None)
        if trace is None:
            return
        self._budget.held -= trace.size
        if trace.plain:  # no turn in it: only its spans count, when evicted for memory
            self._plains.count -= 1
            if evicted == EVICT_MEMORY and trace.records:
                self.sink.dropped(DROP_MEMORY, len(trace.records))
            return
        handed = self._splitter.split(trace_id, trace, trace.records, evicted)
        if evicted == EVICT_MEMORY and trace.records and not (trace.turns_emitted or handed):
            self.sink.dropped(DROP_MEMORY, len(trace.records))
        if trace.turns_emitted:
            # only GenAI traces are remembered: their stragglers are late spans worth counting
            self._finalized[trace_id] = None
            limit = self.config.max_open_turns * _FINALIZED_MEMORY_FACTOR
            while len(self._finalized) > limit:
                self._finalized.popitem(last=False)

    def publish(self) -> None:
        """Summarize the turns completed since the last call and hand them to the sink; let
        go the plain traces whose root came since."""
        self._plains.let_rooted_go()
        self._publisher.publish(self.loop_spans)

    def sweep(self) -> None:
        """Finalize traces idle for longer than the idle timeout, and count the lone tool calls
        no model call asked for within the grace as turns of their own."""
        now = self.clock()
        deadline = now - self.config.idle_timeout_seconds
        while self._traces:
            trace_id, trace = next(iter(self._traces.items()))
            if trace.last_seen > deadline:
                break
            self._close(trace_id, EVICT_IDLE)
        feed = self._feed
        if feed.conversations:
            feed.finalized(feed.conversations.sweep(deadline), EVICT_IDLE)
        # the grace a root span gets in serve: a model call that asked for the tool comes
        # well within it, in process (it ended first) as from another exporter's batch
        feed.release_held(now - self.config.grace_seconds)
        self.publish()

    def finalize_all(self, reason: str = EVICT_SHUTDOWN) -> None:
        """Finalize every open trace and conversation, and let every held lone tool call go as
        a turn of its own (at shutdown)."""
        for trace_id in list(self._traces):
            self._close(trace_id, reason)
        feed = self._feed
        if feed.conversations:
            feed.finalized(feed.conversations.flush(), reason)
        feed.release_held(float("inf"))
        self.publish()

    def pending_roots(self) -> list[tuple[int, float]]:
        """(trace id, when its root arrived) for traces whose root has been seen."""
        return list(self._rooted.items())

    def finalize_rooted(self, deadline: float) -> None:
        """Finalize the traces whose root arrived at ``deadline`` or before (oldest first)."""
        while (trace_id := first_due(self._rooted, deadline)) is not None:
            self._close(trace_id)  # removes it from _rooted
        self._plains.let_go.forget_until(deadline)
        self.publish()
