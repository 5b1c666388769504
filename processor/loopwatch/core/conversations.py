"""Turns rebuilt from model calls' message histories (design.md, "Words: turn").

In a hand-rolled loop no span executes a tool: each model call's input holds the conversation so
far and its output the calls it asks for. Every model call of a turn carries the same history up
to the turn's user message (its ``Conversation.key``), so the calls are gathered by that key,
whatever traces the model calls sit in, and the turn is complete when the model answers in text.
A turn whose answer never comes (the loop was cut off) is finalized when idle."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace

from loopwatch.core.records import Conversation, LlmMark, ToolCall, TurnMark
from loopwatch.core.turns import TurnGroup

# What one open turn costs, estimated as the assembler estimates its buffers.
_TURN_BYTES = 1500
_CALL_BYTES = 700


@dataclass(slots=True)
class _Open:
    trace_id: int
    service: str
    last_seen: float
    turn: TurnMark | None
    agent: str | None
    calls: dict[int, ToolCall] = field(default_factory=dict)  # by call, in history order
    requested_at: dict[int, int] = field(default_factory=dict)  # call -> asking call's end
    answered_at: dict[int, int] = field(default_factory=dict)  # call -> answering call's start
    llms: list[LlmMark] = field(default_factory=list)
    size: int = _TURN_BYTES


Ready = tuple[int, str, TurnGroup]


class Conversations:
    """Open hand-rolled turns by key; bounded in turns (``limit``) and in calls per turn
    (``max_calls``). Not thread-safe: the assembler's caller serialises it."""

    def __init__(self, limit: int, max_calls: int) -> None:
        self.limit = limit
        self.max_calls = max_calls
        self._open: OrderedDict[str, _Open] = OrderedDict()  # least recently seen first
        # turns finalized lately: a model call of one arriving late (the service takes spans
        # in any order) is late, not the start of a second turn
        self._done: OrderedDict[str, None] = OrderedDict()
        self.buffered_bytes = 0

    def __len__(self) -> int:
        return len(self._open)

    def add(
        self,
        trace_id: int,
        service: str,
        mark: LlmMark,
        conversation: Conversation,
        now: float,
        turn: TurnMark | None = None,
        agent: str | None = None,
    ) -> tuple[list[Ready], int] | None:
        """Take one model call and the turn its messages show: ``(turns completed, turns
        evicted)``; None for a model call of a turn already finalized."""
        if conversation.key in self._done:
            return None
        evicted: list[Ready] = []
        entry = self._open.get(conversation.key)
        if entry is None:
            while len(self._open) >= self.limit:
                evicted.append(self._pop(next(iter(self._open))))
            entry = self._open[conversation.key] = _Open(
                trace_id, service, now, turn, conversation.agent or agent
            )
            self.buffered_bytes += entry.size
        else:
            self._open.move_to_end(conversation.key)
            entry.last_seen = now
            entry.trace_id = trace_id  # the exemplar links to the latest model call's trace
            entry.turn = entry.turn or turn
            entry.agent = entry.agent or conversation.agent or agent
        self._merge(entry, mark, conversation)
        done: list[Ready] = []
        if conversation.final:
            done.append(self._pop(conversation.key))
        done.extend(evicted)
        return done, len(evicted)

    def _merge(self, entry: _Open, mark: LlmMark, conversation: Conversation) -> None:
        calls = entry.calls
        before = len(calls)
        for call in conversation.calls():
            known = calls.get(call.span_id)
            # a later history may carry the result an earlier one lacked; never the reverse
            if known is None:
                if len(calls) < self.max_calls:
                    calls[call.span_id] = call
            elif known.result == "unknown" and known.error_class == "ok":
                calls[call.span_id] = call
        for call_id in conversation.requested:
            entry.requested_at.setdefault(call_id, mark.end_ns)
        for call_id in conversation.answered:
            entry.answered_at.setdefault(call_id, mark.start_ns)
        entry.llms.append(replace(mark, messages=None))
        grown = (len(calls) - before) * _CALL_BYTES + 300
        entry.size += grown
        self.buffered_bytes += grown

    def _pop(self, key: str) -> Ready:
        entry = self._open.pop(key)
        self.buffered_bytes -= entry.size
        self._done[key] = None
        while len(self._done) > 4 * self.limit:
            self._done.popitem(last=False)
        return entry.trace_id, entry.service, _group(entry)

    def sweep(self, deadline: float) -> list[Ready]:
        """The open turns last seen at ``deadline`` or before (their answer never came)."""
        done: list[Ready] = []
        while self._open:
            key, entry = next(iter(self._open.items()))
            if entry.last_seen > deadline:
                break
            done.append(self._pop(key))
        return done

    def oldest(self) -> list[Ready]:
        return [self._pop(next(iter(self._open)))] if self._open else []

    def flush(self) -> list[Ready]:
        return [self._pop(key) for key in list(self._open)]


def _group(entry: _Open) -> TurnGroup:
    """The turn's calls, timed where the model calls around them were seen: a call runs from
    the end of the model call that asked for it to the start of the one that got its result.
    Calls keep their history order (each starts at least 1 ns after the one before)."""
    calls: list[ToolCall] = []
    last = -1
    for call in entry.calls.values():
        start = entry.requested_at.get(call.span_id, call.start_ns)
        end = entry.answered_at.get(call.span_id, start)
        start = max(start, last + 1)
        end = max(end, start)
        last = start
        if start != call.start_ns or end != call.end_ns:
            call = replace(call, start_ns=start, end_ns=end)
        calls.append(call)
    llms = entry.llms
    start_ns = min((m.start_ns for m in llms), default=0)
    end_ns = max((m.end_ns for m in llms), default=0)
    return TurnGroup(0, entry.turn, calls, llms, start_ns, end_ns, entry.agent)
