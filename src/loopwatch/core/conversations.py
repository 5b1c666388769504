"""Turns rebuilt from model calls' message histories: what follows one user message up to the
model's answer in text.

In a hand-rolled loop no span executes a tool: each model call's input holds the conversation so
far and its output the calls it asks for. Consecutive model calls of one turn share calls (the
calls one asks for are in the next one's history, with their results), so the model calls are
gathered by their calls' stand-in ids (conventions.messages: the turn, position, tool and
arguments of a call, never a call id alone), whatever traces they sit in, and the turn is
complete when the model answers in text. A call id unique in its history is an alias of its
call: the SDK's attribute limit drops a long history's first messages, and with them the turn's
user message, and such a model call names its calls by their ids. A model call sent only results
(the Responses API's ``previous_response_id``) joins the turn that asked for their calls: by
call id, else the turn of its service seen last that awaits results, in the order asked. A turn
whose answer never comes (the loop was cut off) is finalized when idle.

A tool span that executed a call (``@loopwatch.tool``, a framework's ``execute_tool`` span, each
in a trace of its own) stands for the call it executed: its status, error type and result decide
the call's outcome (core.layers.executed_outcome). It is matched to the call asked first of its
tool that no span stood for yet, preferring the one with its arguments' identity that was asked
before it started and answered after it ended. One that arrives before the model call that asked
for it (a logging thread, a batch exporter, two services' batches) waits for that call, at most
the grace (``grace_seconds``); unclaimed, it is a turn of its own, as it would have been at
once."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from itertools import count
from typing import Any

from loopwatch.core.held_calls import Held, HeldCalls
from loopwatch.core.open_conversation import OpenConversation, turn_group
from loopwatch.core.records import Conversation, LlmMark, ToolCall, TurnMark
from loopwatch.core.turns import TurnGroup
from loopwatch.core.wanted_calls import MATCH_SCAN, WantedCalls

_CALL_BYTES = 700
_ID_BYTES = 150  # a call id in the turn's set, the index by call id and the calls asked for

Ready = tuple[int, str, TurnGroup]
__all__ = ["Conversations", "Held", "Ready"]


class Conversations:
    """Open hand-rolled turns; bounded in turns (``limit``) and in calls per turn
    (``max_calls``). Not thread-safe: the assembler's caller serialises it."""

    def __init__(self, limit: int, max_calls: int) -> None:
        self.limit = limit
        self.max_calls = max_calls
        # least recently seen first
        self._open: OrderedDict[int, OpenConversation] = OrderedDict()
        self._by_call: dict[int, OpenConversation] = {}
        # call ids of turns finalized lately: a model call of one arriving late (the service
        # takes spans in any order) is late, not the start of a second turn (at most
        # 16 x limit ids: a fixed bound, ~16 MB at the default limit)
        self._done: OrderedDict[int, None] = OrderedDict()
        self._numbers = count()
        self.buffered_bytes = 0
        # calls asked for that no tool span has stood for yet, unanswered and answered apart:
        # a lone tool span finds its call in one lookup, whatever is open
        self._wanted = WantedCalls(self._by_call)
        # results sent without their call that no open turn asked for (the assembler counts them)
        self.results_without_call = 0
        # lone tool spans waiting for the model call that asked for them; at most ``limit``
        # (the oldest is then a turn of its own)
        self._held = HeldCalls(limit)

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
        ids = conversation.ids
        done = self._done
        for call_id in ids:
            if call_id in done:
                return None
        found = self._turns_naming(conversation)
        if conversation.dangling and not found:
            for answered_id, _content, _is_error in conversation.dangling:
                if answered_id is not None and answered_id in done:
                    return None  # results of a turn finalized already: late
            chained = _chained(self._open, self._by_call, service, conversation.dangling)
            if chained is not None:
                found.append(chained)
            elif not ids:  # the end of a turn not seen (or finalized when idle): no turn
                self.results_without_call += len(conversation.dangling)
                return [], 0
        evicted: list[Ready] = []
        if not found:
            if not ids and not conversation.final:
                return [], 0  # nothing to gather it by, and nothing to count yet
            while len(self._open) >= self.limit:
                evicted.append(self._pop(next(iter(self._open.values()))))
            entry = OpenConversation(
                number=next(self._numbers),
                trace_id=trace_id,
                service=service,
                last_seen=now,
                turn=turn,
                agent=conversation.agent or agent,
            )
            self._open[entry.number] = entry
            self.buffered_bytes += entry.size
        else:
            entry = found[0]
            for other in found[1:]:  # model calls seen apart, now joined by this one
                self._absorb(entry, other)
            self._open.move_to_end(entry.number)
            entry.last_seen = now
            entry.trace_id = trace_id  # the exemplar links to the latest model call's trace
            entry.turn = entry.turn or turn
            entry.agent = entry.agent or conversation.agent or agent
        self._index(entry, conversation)
        self._merge(entry, mark, conversation)
        if conversation.dangling:
            self._answer(entry, mark, conversation.dangling)
        if len(self._held) and conversation.requested:
            self._claim_held(entry, conversation.requested)
        completed: list[Ready] = []
        if conversation.final:
            completed.append(self._pop(entry))
        completed.extend(evicted)
        return completed, len(evicted)

    def _turns_naming(self, conversation: Conversation) -> list[OpenConversation]:
        """The open turns that hold a call id (or an alias) the model call names, in the
        order named."""
        found: list[OpenConversation] = []
        by_call = self._by_call
        for call_id in conversation.ids:
            entry = by_call.get(call_id)
            if entry is not None and entry not in found:
                found.append(entry)
        for alias, _stand_in in conversation.aliases:
            entry = by_call.get(alias)
            if entry is not None and entry not in found:
                found.append(entry)
        return found

    def _index(self, entry: OpenConversation, conversation: Conversation) -> None:
        """File the model call's call ids and aliases under ``entry``, and charge the new ones."""
        ids = conversation.ids
        known_ids = len(entry.ids)
        for call_id in ids:
            self._by_call[call_id] = entry
        entry.ids.update(ids)
        for alias, stand_in in conversation.aliases:
            entry.alias_of[alias] = stand_in
            self._by_call[alias] = entry
            entry.ids.add(alias)
        grown = (len(entry.ids) - known_ids) * _ID_BYTES
        entry.size += grown
        self.buffered_bytes += grown

    def _answer(
        self,
        entry: OpenConversation,
        mark: LlmMark,
        dangling: tuple[tuple[int | None, Any, bool | None], ...],
    ) -> None:
        """Join each result sent without its call to the call of its id, else to the oldest
        call still unanswered (results come back in the order the calls were asked)."""
        answerers = entry.answerers
        for call_id, content, is_error in dangling:
            target = None
            if call_id is not None:
                mapped = entry.alias_of.get(call_id, call_id)
                if mapped in answerers:
                    target = mapped
            if target is None:
                target = next(iter(answerers), None)
            if target is None:
                self.results_without_call += 1
                continue
            build, own = answerers.pop(target)
            call = build(own, content, is_error)
            if call is None or target not in entry.calls:
                continue  # (not kept: over max_calls)
            entry.calls[target] = replace(call, span_id=target) if call.span_id != target else call
            entry.settled.add(target)
            entry.answered_at.setdefault(target, mark.start_ns)
            self._wanted.want(entry, target)

    def claim(self, service: str, call: ToolCall) -> bool:
        """Whether an open turn of ``service`` asked for ``call`` (a lone tool span) and no tool
        span has stood for it yet: the call asked first of its tool (unanswered ones before
        answered), preferring one of the span's arguments' identity asked before the span
        started and answered after it ended. That call then takes the span's outcome."""
        found = self._wanted.match(service, call)
        if found is None:
            return False
        wanted, entry, call_id = found[0]
        self._wanted.unwant(wanted, (service, call.tool), call_id)
        entry.claimed.add(call_id)
        if call_id in entry.calls:
            entry.executed[call_id] = call
            entry.size += _CALL_BYTES
            self.buffered_bytes += _CALL_BYTES
        return True

    def hold(self, trace_id: int, service: str, group: TurnGroup, now: float) -> list[Held]:
        """Keep a lone tool span no open turn asked for until the model call that asked for
        it comes (``add``); the held spans let go to make room, oldest first."""
        released = self._held.hold(trace_id, service, group, now)
        self.buffered_bytes += _CALL_BYTES * (1 - len(released))
        return released

    def _claim_held(self, entry: OpenConversation, requested: frozenset[int]) -> None:
        """Held tool spans of the tools a model call of ``entry`` asked for, oldest first,
        claimed now."""
        tools: dict[str, None] = {}
        for own in requested:
            call = entry.calls.get(entry.alias_of.get(own, own))
            if call is not None:
                tools[call.tool] = None
        for tool in tools:
            numbers = self._held.of_tool(entry.service, tool)
            if not numbers:
                continue
            # the spans that fit a call best claim first (a stray span of the tool that came
            # earlier does not take the call from the one that ran it), else oldest first
            ranked: list[tuple[int, int]] = []
            for number in list(numbers)[:MATCH_SCAN]:
                found = self._wanted.match(entry.service, self._held.call(number))
                if found is None:
                    break  # nothing asked of the tool is left unclaimed
                ranked.append((-found[1], number))
            ranked.sort()
            for _score, number in ranked:
                if not self.claim(entry.service, self._held.call(number)):
                    break
                self._held.remove(number)
                self.buffered_bytes -= _CALL_BYTES

    def release(self, deadline: float) -> list[Held]:
        """The held tool spans that came at ``deadline`` or before: turns of their own."""
        out = self._held.release(deadline)
        self.buffered_bytes -= _CALL_BYTES * len(out)
        return out

    def filed_tools(self) -> int:
        """How many (service, tool) have calls filed for a tool span to stand for."""
        return len(self._wanted.unanswered) + len(self._wanted.answered)

    def held(self) -> int:
        """How many lone tool spans are held."""
        return len(self._held)

    def claimed(self) -> set[int]:
        """The call ids that lone tool spans have stood for, in the open conversations."""
        return {call for entry in self._open.values() for call in entry.claimed}

    def _merge(self, entry: OpenConversation, mark: LlmMark, conversation: Conversation) -> None:
        """Take one model call's calls, the calls it asked for and those it got results of."""
        calls = entry.calls
        before = len(calls)
        alias_of = entry.alias_of
        # a history that lost the turn's start names calls by their ids: read as their stand-ins
        aliased = bool(alias_of) and any(i in alias_of for i in conversation.ids)
        entry.take_calls(conversation, aliased, self.max_calls)
        requested, answered = entry.requested_at, entry.answered_at
        answer = conversation.answer
        for own in conversation.requested:
            call_id = alias_of.get(own, own) if aliased else own
            if call_id not in requested:
                requested[call_id] = mark.end_ns
                self._wanted.want(entry, call_id)
                if answer is not None and call_id not in answered:
                    entry.answerers[call_id] = (answer, own)
        for call_id in conversation.answered:
            call_id = alias_of.get(call_id, call_id) if aliased else call_id
            entry.answerers.pop(call_id, None)
            if call_id not in answered:
                answered[call_id] = mark.start_ns
                if call_id in requested:
                    self._wanted.want(entry, call_id)
        entry.llms.append(replace(mark, messages=None))
        grown = (len(calls) - before) * _CALL_BYTES + 300
        entry.size += grown
        self.buffered_bytes += grown

    def _absorb(self, entry: OpenConversation, other: OpenConversation) -> None:
        del self._open[other.number]
        """Join ``other`` (model calls seen apart) into ``entry``."""
        self._wanted.unwant_all(other)  # filed again below, under this turn's service
        entry.absorb(other)
        for call_id in other.ids:
            self._by_call[call_id] = entry
        for call_id in other.requested_at:
            self._wanted.want(entry, call_id)

    def _pop(self, entry: OpenConversation) -> Ready:
        del self._open[entry.number]
        self._wanted.unwant_all(entry)
        self.buffered_bytes -= entry.size
        for call_id in entry.ids:
            self._by_call.pop(call_id, None)
            self._done[call_id] = None
        while len(self._done) > 16 * self.limit:
            self._done.popitem(last=False)
        return entry.trace_id, entry.service, turn_group(entry)

    def sweep(self, deadline: float) -> list[Ready]:
        """The open turns last seen at ``deadline`` or before (their answer never came)."""
        done: list[Ready] = []
        while self._open:
            entry = next(iter(self._open.values()))
            if entry.last_seen > deadline:
                break
            done.append(self._pop(entry))
        return done

    def oldest(self) -> list[Ready]:
        return [self._pop(next(iter(self._open.values())))] if self._open else []

    def flush(self) -> list[Ready]:
        return [self._pop(entry) for entry in list(self._open.values())]


def _chained(
    open_turns: OrderedDict[int, OpenConversation],
    by_call: dict[int, OpenConversation],
    service: str,
    dangling: tuple[tuple[int | None, Any, bool | None], ...],
) -> OpenConversation | None:
    """The open turn results sent without their calls answer: the turn that asked for a call
    of their id, else the one of ``service`` seen last that awaits results (the loop sends a
    step's results in its next model call)."""
    for call_id, _content, _is_error in dangling:
        if call_id is not None:
            entry = by_call.get(call_id)
            if entry is not None:
                return entry
    for number in reversed(open_turns):
        entry = open_turns[number]
        if entry.service == service and entry.answerers:
            return entry
    return None
