"""Buffers spans per trace until their turn can be finalized; bounds every buffer."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from loopwatch.core.config import Config
from loopwatch.core.conversations import Conversations, Held, Ready
from loopwatch.core.internal_errors import log_internal_error
from loopwatch.core.lone_calls import LONE_CALLS
from loopwatch.core.loop_log import log_loops
from loopwatch.core.records import (
    RESULT_WITHOUT_CALL,
    UNREADABLE_HISTORY,
    Conversation,
    Link,
    LlmMark,
    Record,
    ToolCall,
    TurnMark,
    UnreadableHistory,
)
from loopwatch.core.requested import complete, needs_completing
from loopwatch.core.run_tally import RunTally
from loopwatch.core.sink import Sink
from loopwatch.core.summary import TurnSummary, summarize
from loopwatch.core.turns import TurnGroup, split_turns

log = logging.getLogger(__name__)

# Drop reasons (loopwatch_spans_dropped_total{reason}) and eviction reasons; all of them here,
# so the metrics can show every one at 0 from the start.
DROP_TURN_FULL: Final = "turn_full"
DROP_ERROR: Final = "error"
DROP_QUEUE_FULL: Final = "queue_full"  # in process: the span queue was full
UNKNOWN_SERVICE: Final = "unknown"
DROP_INVALID_ID: Final = "invalid_id"  # the service: an OTLP span without a valid trace or span id
DROP_MEMORY: Final = "memory"  # held spans of a trace evicted by the byte budget that made no turn
DROP_REASONS: Final = (DROP_QUEUE_FULL, DROP_TURN_FULL, DROP_ERROR, DROP_INVALID_ID, DROP_MEMORY)
EVICT_IDLE: Final = "idle"
EVICT_CAPACITY: Final = "capacity"
EVICT_MEMORY: Final = "memory"
EVICT_SHUTDOWN: Final = "shutdown"
EVICT_REASONS: Final = (EVICT_IDLE, EVICT_CAPACITY, EVICT_MEMORY, EVICT_SHUTDOWN)

# How many finalized trace ids are remembered to recognise late spans.
_FINALIZED_MEMORY_FACTOR: Final = 4

# What the buffers cost, estimated (CPython 3.11, 64-bit ids, measured with tracemalloc): a
# record is a slotted object with its ids, times and names (plus the names' length); a record
# under a parent is also an entry of the children index and of the referenced set; a span id in
# a set; a trace's own objects.
RECORD_BYTES: dict[type, int] = {ToolCall: 610, TurnMark: 300, LlmMark: 300, Link: 280}
CHILD_BYTES: Final = 140
SET_ENTRY_BYTES: Final = 70
TRACE_BYTES: Final = 1000


def record_bytes(record: Record) -> int:
    """The estimated memory one buffered record holds (see RECORD_BYTES)."""
    size = RECORD_BYTES[type(record)]
    if record.parent_id is not None:
        size += CHILD_BYTES
    if isinstance(record, ToolCall):
        size += len(record.tool) + len(record.agent or "") + len(record.tool_version)
    elif isinstance(record, LlmMark):
        size += len(record.model or "")
        if record.messages is not None:
            size += record.messages.size
        versions = record.tool_versions
        if versions:
            # a list, not a generator: a Python call per element less
            size += SET_ENTRY_BYTES * len(versions) + sum([len(name) for name, _ in versions])
    elif isinstance(record, TurnMark):
        size += len(record.agent or "") + len(record.model or "")
    return size


@dataclass(init=False, slots=True)
class _Trace:
    service: str
    last_seen: float
    records: dict[int, Record] = field(default_factory=dict)
    # parent span id -> ids of the records under it: a turn's subtree without walking the trace
    children: dict[int, dict[int, None]] = field(default_factory=dict)
    # in process, from span starts: agent/workflow spans and every span started inside one, so
    # an agent span that ends can tell whether it is outermost (its parent is not in here)
    in_turn: set[int] = field(default_factory=set)
    # parents of the records kept; in process a plain span is kept only if one of them
    referenced: set[int] = field(default_factory=set)
    turns_emitted: int = 0
    # model calls whose messages show their turn (a hand-rolled loop), and whether any span
    # of the trace executed a tool: its tool spans then win over the messages
    conversing: bool = False
    tool_spans: bool = False
    size: int = TRACE_BYTES  # estimated bytes held, counted in TurnAssembler.buffered_bytes

    # written out (init=False): compiled, dataclass's generated __init__ is Python code that
    # sets each field through its descriptor; this one is C
    def __init__(
        self,
        service: str,
        last_seen: float,
        records: dict[int, Record] | None = None,
        children: dict[int, dict[int, None]] | None = None,
        in_turn: set[int] | None = None,
        referenced: set[int] | None = None,
        turns_emitted: int = 0,
        conversing: bool = False,
        tool_spans: bool = False,
        size: int = TRACE_BYTES,
    ) -> None:
        self.service = service
        self.last_seen = last_seen
        self.records = {} if records is None else records
        self.children = {} if children is None else children
        self.in_turn = set() if in_turn is None else in_turn
        self.referenced = set() if referenced is None else referenced
        self.turns_emitted = turns_emitted
        self.conversing = conversing
        self.tool_spans = tool_spans
        self.size = size


class TurnAssembler:
    """Not thread-safe: the caller serialises ``add``/``sweep``/``finalize`` (one worker).

    The caller reads spans into records (``loopwatch.conventions.read_span``), counts them
    (``Sink.span``), and once per batch of ``add`` calls calls ``publish`` (the turns the batch
    completed go to the sink then) and reports ``open_turns`` to the sink."""

    def __init__(
        self, config: Config, sink: Sink, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config
        self.sink = sink
        self.clock = clock
        self._traces: OrderedDict[int, _Trace] = OrderedDict()  # least recently seen first
        self._finalized: OrderedDict[int, None] = OrderedDict()
        # traces whose root has arrived, in order of arrival: those due are found at the front
        self._rooted: OrderedDict[int, float] = OrderedDict()
        # turns completed and not yet summarized: publish() hands them to the sink. Summarizing
        # a batch's turns together, after its spans, runs that code while it is warm in the
        # CPU's caches (see loopwatch.attach.processor's _CHUNK).
        self._ready: list[Ready] = []
        self.buffered_bytes = 0  # estimated, over every open trace (config.buffer_bytes)
        self._conversations = Conversations(config.max_open_turns, config.max_spans_per_turn)
        self._conversation_bytes = 0  # the conversations' part of buffered_bytes
        self.tally = RunTally()  # every turn published: the line logged at shutdown
        # where a turn with loops goes besides the sink: the loop spans (None: nowhere)
        self.loop_spans: Callable[[TurnSummary], None] | None = None

    @property
    def open_turns(self) -> int:
        """Every trace that waits: open traces, open conversations, held lone tool calls."""
        conversations = self._conversations
        return len(self._traces) + len(conversations) + conversations.held()

    def holds(self, trace_id: int) -> bool:
        """Whether the trace is open here (neither finalized nor evicted yet)."""
        return trace_id in self._traces

    def turn_traces(self) -> list[int]:
        """The open traces in which a turn span has started (``span_started``), oldest first."""
        return [trace_id for trace_id, trace in self._traces.items() if trace.in_turn]

    def _charge(self, trace: _Trace, size: int) -> None:
        trace.size += size
        self.buffered_bytes += size

    def _within_budget(self) -> None:
        """Evict the least recently seen traces until the buffers fit the byte budget (the
        callers check first whether they are over it: a call per span costs)."""
        while self.buffered_bytes > self.config.buffer_bytes:
            if self._conversations and 2 * self._conversation_bytes >= self.buffered_bytes:
                self._conversations_done(self._conversations.oldest(), EVICT_MEMORY)
            elif self._traces:
                self._close(next(iter(self._traces)), EVICT_MEMORY)
            else:
                break

    def _trace(self, trace_id: int, service: str) -> _Trace:
        trace = self._traces.get(trace_id)
        if trace is None:
            return self._open(trace_id, service)
        trace.last_seen = self.clock()
        self._traces.move_to_end(trace_id)
        if trace.service == UNKNOWN_SERVICE:  # opened by a span start, before any span ended
            trace.service = service
        return trace

    def _open(self, trace_id: int, service: str) -> _Trace:
        if len(self._traces) >= self.config.max_open_turns:
            oldest = next(iter(self._traces))
            self._close(oldest, EVICT_CAPACITY)
        trace = self._traces[trace_id] = _Trace(service, self.clock())
        self.buffered_bytes += trace.size
        return trace

    def started_inside(self, trace_id: int, span_id: int, parent_id: int) -> bool:
        """span_started for a span whose parent may be inside a turn: whether it was (and the
        span is now too). Most starts are inside one: this answers them in one call, without
        reading their name or attributes."""
        trace = self._traces.get(trace_id)  # a finalized trace is no longer here
        if trace is None or parent_id not in trace.in_turn:
            return False
        if len(trace.in_turn) < self.config.max_spans_per_turn:
            trace.in_turn.add(span_id)
            trace.size += SET_ENTRY_BYTES  # _charge, inlined: once per span
            self.buffered_bytes += SET_ENTRY_BYTES
            if self.buffered_bytes > self.config.buffer_bytes:
                self._within_budget()
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
        if len(trace.in_turn) < self.config.max_spans_per_turn:
            trace.in_turn.add(span_id)
            trace.size += SET_ENTRY_BYTES  # _charge, inlined here and in add: once per span
            self.buffered_bytes += SET_ENTRY_BYTES
            if self.buffered_bytes > self.config.buffer_bytes:
                self._within_budget()

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
        if trace is None:
            trace = self._open(trace_id, service)
        else:  # _trace, inlined (its lookup done above): once per span
            trace.last_seen = self.clock()
            self._traces.move_to_end(trace_id)
            if trace.service == UNKNOWN_SERVICE:
                trace.service = service
        if len(trace.records) >= self.config.max_spans_per_turn:
            self.sink.dropped(DROP_TURN_FULL)
            return
        records = trace.records
        size = record_bytes(record)
        if span_id in records:  # the same span id again: it replaces the first (as before)
            self._unlink(trace, records[span_id])
            size -= record_bytes(records[span_id])
        records[span_id] = record
        trace.size += size
        self.buffered_bytes += size
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
                self._finalize_subtree(trace_id, trace, span_id)
        if self.buffered_bytes > self.config.buffer_bytes:
            self._within_budget()

    @staticmethod
    def _unlink(trace: _Trace, record: Record) -> None:
        if record.parent_id is not None:
            siblings = trace.children.get(record.parent_id)
            if siblings is not None:
                siblings.pop(record.span_id, None)

    def _subtree(self, trace: _Trace, anchor: int) -> list[int]:
        """The spans whose outermost turn span is ``anchor`` (``anchor`` included): its
        descendants among the records, unless a turn span above it holds them all."""
        records = trace.records
        seen = {anchor}
        node = records[anchor].parent_id
        while node is not None and node in records and node not in seen:
            if type(records[node]) is TurnMark:
                return [anchor]
            seen.add(node)
            node = records[node].parent_id
        inside = [anchor]
        seen = {anchor}
        stack = [anchor]
        children = trace.children
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in seen and child in records:
                    seen.add(child)
                    inside.append(child)
                    stack.append(child)
        return inside

    def _finalize_subtree(self, trace_id: int, trace: _Trace, anchor: int) -> None:
        """An outermost agent span ended under a root that is still open (a batch job's span,
        a long request): its turn is complete, so finalize it now rather than at the root."""
        inside = self._subtree(trace, anchor)
        records = {span_id: trace.records[span_id] for span_id in inside}
        if not any(type(r) is ToolCall for r in records.values()):
            return  # not a turn by itself: it stays with the rest of the trace
        for span_id, record in records.items():
            del trace.records[span_id]
            self._charge(trace, -record_bytes(record))
        try:
            self._split(trace_id, trace, records)
        finally:  # after the split, which reads the children index
            for span_id, record in records.items():
                self._unlink(trace, record)
                trace.children.pop(span_id, None)

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
        self.buffered_bytes -= trace.size
        handed = self._split(trace_id, trace, trace.records, evicted)
        if evicted == EVICT_MEMORY and not (trace.turns_emitted or handed):
            for _ in trace.records:
                self.sink.dropped(DROP_MEMORY)
        if trace.turns_emitted:
            # only GenAI traces are remembered: their stragglers are late spans worth counting
            self._finalized[trace_id] = None
            limit = self.config.max_open_turns * _FINALIZED_MEMORY_FACTOR
            while len(self._finalized) > limit:
                self._finalized.popitem(last=False)

    def _split(
        self,
        trace_id: int,
        trace: _Trace,
        records: dict[int, Record],
        evicted: str | None = None,
    ) -> bool:
        """Hand the turns of ``records`` on; whether model calls went to the open
        conversations."""
        conversing = trace.conversing and not trace.tool_spans
        handed = False  # model calls handed to the open conversations
        emitted_before = trace.turns_emitted
        allow_empty = emitted_before == 0 or conversing
        for group in split_turns(records, allow_empty, trace.children):
            if conversing and not group.calls:
                if self._converse(trace_id, trace.service, group):
                    handed = True
                    continue
                if emitted_before:
                    continue  # (allow_empty was only for the model calls' turns)
            if self._stood_for(trace_id, trace.service, group, evicted is None):
                handed = True
                continue
            if group.calls and needs_completing(group):
                complete(group, self.sink)
            trace.turns_emitted += 1
            if evicted is not None:
                self.sink.evicted(evicted)
            self._ready.append((trace_id, trace.service, group))
        return handed

    def _stood_for(self, trace_id: int, service: str, group: TurnGroup, may_wait: bool) -> bool:
        """A lone tool call (no turn span, no model call: a trace of its own, as in a
        hand-rolled loop) that an open conversation asked for: counted there, its outcome
        deciding the call's, not as a turn of its own. One no open conversation asked for
        waits (``may_wait``: its trace was not evicted) for the model call that asks for it,
        ``grace_seconds`` at most (core.conversations)."""
        if len(group.calls) != 1 or group.turn is not None or group.llms:
            return False
        conversations = self._conversations
        if len(conversations) > 0 and conversations.claim(service, group.calls[0]):
            return True
        # a guard's answer is written where the guard stands, never ahead of the model call
        if not may_wait or group.calls[0].guard is not None:
            return False
        for released in conversations.hold(trace_id, service, group, self.clock()):
            self._let_go(released)
        self._sync_conversation_bytes()
        return True

    def _let_go(self, held: Held) -> None:
        """A held lone tool call no model call asked for: a turn of its own after all."""
        trace_id, service, group, _seen = held
        if needs_completing(group):
            complete(group, self.sink)
        self._ready.append((trace_id, service, group))

    def _converse(self, trace_id: int, service: str, group: TurnGroup) -> bool:
        """Hand the group's model calls that show their turn to the open conversations; False
        when none does (the group is then a turn of its own, as before)."""
        read: list[tuple[LlmMark, Conversation]] = []
        for mark in group.llms:
            if mark.messages is not None:
                try:
                    conversation = mark.messages.read()
                except UnreadableHistory:
                    self.sink.malformed(UNREADABLE_HISTORY)
                    continue
                except Exception:  # a bad history loses its model call, nothing else
                    log_internal_error(log, "reading messages")
                    self.sink.dropped(DROP_ERROR)
                    continue
                if conversation is not None:
                    read.append((mark, conversation))
                    for reason, count in conversation.malformed:
                        self.sink.malformed(reason, count)
        if not read:
            return False
        read.sort(key=lambda item: item[0].start_ns)
        now = self.clock()
        for mark, conversation in read:
            added = self._conversations.add(
                trace_id, service, mark, conversation, now, group.turn, group.root_agent
            )
            if added is None:
                self.sink.late()
                continue
            done, evicted = added
            self._ready.extend(done)
            for _ in range(evicted):
                self.sink.evicted(EVICT_CAPACITY)
        unjoined = self._conversations.results_without_call
        if unjoined:
            self._conversations.results_without_call = 0
            self.sink.malformed(RESULT_WITHOUT_CALL, unjoined)
        self._sync_conversation_bytes()
        return True

    def _sync_conversation_bytes(self) -> None:
        held = self._conversations.buffered_bytes
        self.buffered_bytes += held - self._conversation_bytes
        self._conversation_bytes = held

    def publish(self) -> None:
        """Summarize the turns completed since the last call and hand them to the sink."""
        if not self._ready:
            return
        ready, self._ready = self._ready, []
        config, sink = self.config, self.sink
        summaries = []
        for trace_id, service, group in ready:
            try:
                LONE_CALLS.note(group.turn, group.calls, group.llms)
                summaries.append(
                    summarize(
                        trace_id,
                        service,
                        group.turn,
                        group.calls,
                        group.llms,
                        config,
                        group.start_ns,
                        group.end_ns,
                        group.root_agent,
                        group.anchor,
                    )
                )
            except Exception:  # one bad turn loses itself, not the batch
                log_internal_error(log, "summarizing a turn")
                sink.dropped(DROP_ERROR)
        # logged before they are counted: a reader of the counts (the service's activity line)
        # then never reports a loop before its line is out
        for summary in summaries:
            self._each(log_loops, summary)
        loop_spans = self.loop_spans
        for summary in summaries:
            self._each(sink.turn, summary)
            self._each(self.tally.add, summary)
            if loop_spans is not None and (summary.loop_marks or summary.loops_unmarked):
                self._each(loop_spans, summary)  # (rare) after its numbers, as the log line

    def _each(self, step: Callable[[TurnSummary], None], summary: TurnSummary) -> None:
        """One turn's step of publish: a failure loses that step of that turn only."""
        try:
            step(summary)
        except Exception:
            log_internal_error(log, "publishing turns")
            self.sink.dropped(DROP_ERROR)

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
        if self._conversations:
            self._conversations_done(self._conversations.sweep(deadline), EVICT_IDLE)
        if self._conversations.held():
            # the grace a root span gets in serve: a model call that asked for the tool comes
            # well within it, in process (it ended first) as from another exporter's batch
            for held in self._conversations.release(now - self.config.grace_seconds):
                self._let_go(held)
            self._sync_conversation_bytes()
        self.publish()

    def finalize_all(self, reason: str = EVICT_SHUTDOWN) -> None:
        for trace_id in list(self._traces):
            self._close(trace_id, reason)
        if self._conversations:
            self._conversations_done(self._conversations.flush(), reason)
        if self._conversations.held():
            for held in self._conversations.release(float("inf")):
                self._let_go(held)
            self._sync_conversation_bytes()
        self.publish()

    def _conversations_done(self, done: list[Ready], reason: str) -> None:
        """Open hand-rolled turns finalized before their answer came."""
        for ready in done:
            self.sink.evicted(reason)
            self._ready.append(ready)
        self._sync_conversation_bytes()

    def pending_roots(self) -> list[tuple[int, float]]:
        """(trace id, when its root arrived) for traces whose root has been seen."""
        return list(self._rooted.items())

    def finalize_rooted(self, deadline: float) -> None:
        """Finalize the traces whose root arrived at ``deadline`` or before (oldest first)."""
        rooted = self._rooted
        while rooted:
            trace_id, seen_at = next(iter(rooted.items()))
            if seen_at > deadline:
                break
            self._close(trace_id)  # removes it from _rooted
        self.publish()
