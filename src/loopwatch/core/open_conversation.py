"""One open hand-rolled turn, as the model calls' histories show it so far (core.conversations),
and the turn it makes once finalized."""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass, field, replace
from typing import Any

from loopwatch.core.layers import executed_outcome
from loopwatch.core.records import Conversation, LlmMark, ToolCall, TurnMark
from loopwatch.core.turns import TurnGroup

# What one open turn costs, estimated as the assembler estimates its buffers.
TURN_BYTES = 1500
_UNKNOWN = "unknown"
# builds a requested call with the result sent later, and the call's id as its builder knows it
Answerer = tuple[Callable[[int, Any, bool | None], ToolCall | None], int]


@dataclass(slots=True)
class OpenConversation:
    number: int
    trace_id: int
    service: str
    last_seen: float
    turn: TurnMark | None
    agent: str | None
    calls: dict[int, ToolCall] = field(default_factory=dict)  # by call, in history order
    requested_at: dict[int, int] = field(default_factory=dict)  # call -> asking call's end
    answered_at: dict[int, int] = field(default_factory=dict)  # call -> answering call's start
    ids: set[int] = field(default_factory=set)  # every call id seen in the turn
    settled: set[int] = field(default_factory=set)  # calls known with their outcome
    claimed: set[int] = field(default_factory=set)  # calls a tool span of their own stood for
    executed: dict[int, ToolCall] = field(default_factory=dict)  # call -> the span that ran it
    alias_of: dict[int, int] = field(default_factory=dict)  # a call's unique id -> its stand-in
    # requested calls no history has answered yet, oldest first: what a result sent without
    # its call (the Responses API's previous_response_id) answers
    answerers: dict[int, Answerer] = field(default_factory=dict)
    llms: list[LlmMark] = field(default_factory=list)
    size: int = TURN_BYTES

    def take_calls(self, conversation: Conversation, aliased: bool, max_calls: int) -> None:
        """A model call's calls: new ones (``max_calls`` at most), and those that carry the
        result a known one lacked (never the reverse). ``aliased``: its history names calls by
        their ids, read as their stand-ins."""
        calls, settled, alias_of = self.calls, self.settled, self.alias_of
        known_ids: Container[int] = settled
        if aliased:
            known_ids = settled | {a for a, stand_in in alias_of.items() if stand_in in settled}
        for call in conversation.calls(known_ids):
            if aliased and call.span_id in alias_of:
                call = replace(call, span_id=alias_of[call.span_id])
            known = calls.get(call.span_id)
            # a later history may carry the result an earlier one lacked; never the reverse
            if known is None:
                if len(calls) < max_calls:
                    calls[call.span_id] = call
            elif known.result == _UNKNOWN and known.error_class == "ok":
                calls[call.span_id] = call
            else:
                continue
            if call.result != _UNKNOWN or call.error_class != "ok":
                settled.add(call.span_id)

    def absorb(self, other: OpenConversation) -> None:
        """Take what ``other`` (the same turn, seen apart) holds; what this one holds wins."""
        for call_id, call in other.calls.items():
            self.calls.setdefault(call_id, call)
        for call_id, at in other.requested_at.items():
            self.requested_at.setdefault(call_id, at)
        for call_id, at in other.answered_at.items():
            self.answered_at.setdefault(call_id, at)
        self.ids.update(other.ids)
        self.settled.update(other.settled)
        self.claimed.update(other.claimed)
        self.executed.update(other.executed)
        self.alias_of.update(other.alias_of)
        for call_id, answerer in other.answerers.items():
            if call_id not in self.answered_at:
                self.answerers.setdefault(call_id, answerer)
        self.llms.extend(other.llms)
        self.size += other.size
        self.turn = self.turn or other.turn
        self.agent = self.agent or other.agent


def turn_group(entry: OpenConversation) -> TurnGroup:
    """The turn's calls, timed where the model calls around them were seen: a call runs from
    the end of the model call that asked for it to the start of the one that got its result.
    Calls keep their history order (each starts at least 1 ns after the one before)."""
    calls: list[ToolCall] = []
    last = -1
    executed = entry.executed
    for call in entry.calls.values():
        ran = executed.get(call.span_id) if executed else None
        if ran is not None:
            call = executed_outcome(call, ran)
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
    return TurnGroup(
        anchor=0,
        turn=entry.turn,
        calls=calls,
        llms=llms,
        start_ns=start_ns,
        end_ns=end_ns,
        root_agent=entry.agent,
    )
