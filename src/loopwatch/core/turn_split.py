"""A trace's buffered records split into turns (core.turns) as the trace closes, or as an
outermost agent span ends under a root still open; each turn then goes where it belongs: its
model calls to the open conversations, a lone tool call claimed or held, else ready to publish."""

from __future__ import annotations

from loopwatch.core.buffer_budget import BufferBudget, record_bytes
from loopwatch.core.conversation_feed import ConversationFeed
from loopwatch.core.open_trace import OpenTrace
from loopwatch.core.records import Record, ToolCall
from loopwatch.core.requested import complete, needs_completing
from loopwatch.core.sink import Sink
from loopwatch.core.turn_publisher import TurnPublisher
from loopwatch.core.turns import split_turns


class TurnSplitter:
    """Not thread-safe: the assembler's caller serialises it."""

    def __init__(self, feed: ConversationFeed) -> None:
        self.feed = feed
        # the feed's: the turns it readies, the bytes it keeps, the counts it reports
        self.publisher: TurnPublisher = feed.publisher
        self.budget: BufferBudget = feed.budget
        self.sink: Sink = feed.sink

    def split(
        self,
        trace_id: int,
        trace: OpenTrace,
        records: dict[int, Record],
        evicted: str | None = None,
    ) -> bool:
        """Hand the turns of ``records`` on; whether model calls went to the open
        conversations. ``evicted``: why the trace closed before its root ended (counted per
        turn)."""
        feed = self.feed
        conversing = trace.conversing and not trace.tool_spans
        handed = False  # model calls handed to the open conversations
        emitted_before = trace.turns_emitted
        allow_empty = emitted_before == 0 or conversing
        for group in split_turns(records, allow_empty, trace.children):
            if conversing and not group.calls:
                if feed.converse(trace_id, trace.service, group):
                    handed = True
                    continue
                if emitted_before:
                    continue  # (allow_empty was only for the model calls' turns)
            if feed.claim_or_hold(trace_id, trace.service, group, evicted is None):
                handed = True
                continue
            if group.calls and needs_completing(group):
                complete(group, self.sink)
            trace.turns_emitted += 1
            if evicted is not None:
                self.sink.evicted(evicted)
            self.publisher.ready.append((trace_id, trace.service, group))
        return handed

    def split_subtree(self, trace_id: int, trace: OpenTrace, anchor: int) -> None:
        """An outermost agent span ended under a root that is still open (a batch job's span,
        a long request): its turn is complete, so finalize it now rather than at the root."""
        inside = trace.subtree(anchor)
        records = {span_id: trace.records[span_id] for span_id in inside}
        if not any(type(r) is ToolCall for r in records.values()):
            return  # not a turn by itself: it stays with the rest of the trace
        budget = self.budget
        for span_id, record in records.items():
            del trace.records[span_id]
            size = record_bytes(record)
            trace.size -= size
            budget.held -= size
        try:
            self.split(trace_id, trace, records)
        finally:  # after the split, which reads the children index
            for span_id, record in records.items():
                trace.unlink(record)
                trace.children.pop(span_id, None)
