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
from collections.abc import Callable, Container
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Any

from loopwatch.core.layers import executed_outcome
from loopwatch.core.records import Conversation, LlmMark, ToolCall, TurnMark
from loopwatch.core.turns import TurnGroup

# What one open turn costs, estimated as the assembler estimates its buffers.
_TURN_BYTES = 1500
_CALL_BYTES = 700
_ID_BYTES = 150  # a call id in the turn's set, the index by call id and the calls asked for
_UNKNOWN = "unknown"
# how many calls asked of one tool a tool span's match looks at (the oldest first): the common
# case is the first; a bound keeps a turn of thousands of calls of one tool linear
_MATCH_SCAN = 64

Wanted = dict[tuple[str, str], dict[int, None]]  # (service, tool) -> call ids, oldest first
# builds a requested call with the result sent later, and the call's id as its builder knows it
Answerer = tuple[Callable[[int, Any, bool | None], ToolCall | None], int]


@dataclass(slots=True)
class _Open:
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
    size: int = _TURN_BYTES


Ready = tuple[int, str, TurnGroup]
# a lone tool span no open turn asked for yet: (trace id, service, its group, when it came)
Held = tuple[int, str, TurnGroup, float]


class Conversations:
    """Open hand-rolled turns; bounded in turns (``limit``) and in calls per turn
    (``max_calls``). Not thread-safe: the assembler's caller serialises it."""

    def __init__(self, limit: int, max_calls: int) -> None:
        self.limit = limit
        self.max_calls = max_calls
        self._open: OrderedDict[int, _Open] = OrderedDict()  # least recently seen first
        self._by_call: dict[int, _Open] = {}
        # call ids of turns finalized lately: a model call of one arriving late (the service
        # takes spans in any order) is late, not the start of a second turn (at most
        # 16 x limit ids: a fixed bound, ~16 MB at the default limit)
        self._done: OrderedDict[int, None] = OrderedDict()
        self._numbers = count()
        self.buffered_bytes = 0
        # calls asked for that no tool span has stood for yet, unanswered and answered apart:
        # a lone tool span finds its call in one lookup, whatever is open
        self._unanswered: Wanted = {}
        self._answered: Wanted = {}
        # results sent without their call that no open turn asked for (the assembler counts them)
        self.results_without_call = 0
        # lone tool spans waiting for the model call that asked for them, oldest first, and by
        # (service, tool); at most ``limit`` (the oldest is then a turn of its own)
        self._held: OrderedDict[int, Held] = OrderedDict()
        self._held_by_tool: dict[tuple[str, str], dict[int, None]] = {}
        self._held_numbers = count()

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
        found: list[_Open] = []
        for call_id in ids:
            entry = self._by_call.get(call_id)
            if entry is not None and entry not in found:
                found.append(entry)
        for alias, _stand_in in conversation.aliases:
            entry = self._by_call.get(alias)
            if entry is not None and entry not in found:
                found.append(entry)
        if conversation.dangling and not found:
            for answered_id, _content, _is_error in conversation.dangling:
                if answered_id is not None and answered_id in done:
                    return None  # results of a turn finalized already: late
            chained = self._chained(service, conversation.dangling)
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
            entry = _Open(
                next(self._numbers), trace_id, service, now, turn, conversation.agent or agent
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
        self._merge(entry, mark, conversation)
        if conversation.dangling:
            self._answer(entry, mark, conversation.dangling)
        if self._held and conversation.requested:
            self._claim_held(entry, conversation.requested)
        completed: list[Ready] = []
        if conversation.final:
            completed.append(self._pop(entry))
        completed.extend(evicted)
        return completed, len(evicted)

    def _chained(
        self, service: str, dangling: tuple[tuple[int | None, Any, bool | None], ...]
    ) -> _Open | None:
        """The open turn results sent without their calls answer: the turn that asked for
        a call of their id, else the one of ``service`` seen last that awaits results (the
        loop sends a step's results in its next model call)."""
        for call_id, _content, _is_error in dangling:
            if call_id is not None:
                entry = self._by_call.get(call_id)
                if entry is not None:
                    return entry
        for number in reversed(self._open):
            entry = self._open[number]
            if entry.service == service and entry.answerers:
                return entry
        return None

    def _answer(
        self,
        entry: _Open,
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
            self._want(entry, target)

    def claim(self, service: str, call: ToolCall) -> bool:
        """Whether an open turn of ``service`` asked for ``call`` (a lone tool span) and no tool
        span has stood for it yet: the call asked first of its tool (unanswered ones before
        answered), preferring one of the span's arguments' identity asked before the span
        started and answered after it ended. That call then takes the span's outcome."""
        found = self._match(service, call)
        if found is None:
            return False
        wanted, entry, call_id = found[0]
        self._unwant(wanted, (service, call.tool), call_id)
        entry.claimed.add(call_id)
        if call_id in entry.calls:
            entry.executed[call_id] = call
            entry.size += _CALL_BYTES
            self.buffered_bytes += _CALL_BYTES
        return True

    def _match(self, service: str, call: ToolCall) -> tuple[tuple[Wanted, _Open, int], int] | None:
        """The call asked for that ``call`` fits best (claim), and how well (_fit)."""
        key = (service, call.tool)
        chosen: tuple[Wanted, _Open, int] | None = None
        best = -1
        stale: list[tuple[Wanted, int]] = []
        for wanted in (self._unanswered, self._answered):
            ids = wanted.get(key)
            if not ids:
                continue
            for n, call_id in enumerate(ids):
                if n >= _MATCH_SCAN:
                    break
                entry = self._by_call.get(call_id)
                if entry is None:
                    stale.append((wanted, call_id))
                    continue
                score = _fit(entry, call_id, call)
                if score > best:
                    chosen, best = (wanted, entry, call_id), score
                    if score == _BEST_FIT:
                        break
            if best == _BEST_FIT:
                break
        for wanted, call_id in stale:
            self._unwant(wanted, key, call_id)
        return None if chosen is None else (chosen, best)

    def hold(self, trace_id: int, service: str, group: TurnGroup, now: float) -> list[Held]:
        """Keep a lone tool span no open turn asked for until the model call that asked for
        it comes (``add``); the held spans let go to make room, oldest first."""
        released: list[Held] = []
        while len(self._held) >= self.limit:
            released.append(self._let_go(next(iter(self._held))))
        number = next(self._held_numbers)
        self._held[number] = (trace_id, service, group, now)
        self._held_by_tool.setdefault((service, group.calls[0].tool), {})[number] = None
        self.buffered_bytes += _CALL_BYTES
        return released

    def _claim_held(self, entry: _Open, requested: frozenset[int]) -> None:
        """Held tool spans of the tools a model call of ``entry`` asked for, oldest first,
        claimed now."""
        tools: dict[str, None] = {}
        for own in requested:
            call = entry.calls.get(entry.alias_of.get(own, own))
            if call is not None:
                tools[call.tool] = None
        for tool in tools:
            key = (entry.service, tool)
            numbers = self._held_by_tool.get(key)
            if not numbers:
                continue
            # the spans that fit a call best claim first (a stray span of the tool that came
            # earlier does not take the call from the one that ran it), else oldest first
            ranked: list[tuple[int, int]] = []
            for number in list(numbers)[:_MATCH_SCAN]:
                found = self._match(entry.service, self._held[number][2].calls[0])
                if found is None:
                    break  # nothing asked of the tool is left unclaimed
                ranked.append((-found[1], number))
            ranked.sort()
            for _score, number in ranked:
                if not self.claim(entry.service, self._held[number][2].calls[0]):
                    break
                self._let_go(number)

    def _let_go(self, number: int) -> Held:
        held = self._held.pop(number)
        key = (held[1], held[2].calls[0].tool)
        numbers = self._held_by_tool[key]
        del numbers[number]
        if not numbers:
            del self._held_by_tool[key]
        self.buffered_bytes -= _CALL_BYTES
        return held

    def release(self, deadline: float) -> list[Held]:
        """The held tool spans that came at ``deadline`` or before: turns of their own."""
        out: list[Held] = []
        while self._held:
            number, held = next(iter(self._held.items()))
            if held[3] > deadline:
                break
            out.append(self._let_go(number))
        return out

    def held(self) -> int:
        return len(self._held)

    def _want(self, entry: _Open, call_id: int) -> None:
        """File a requested call under its tool, as answered or not (once answered, moved)."""
        call = entry.calls.get(call_id)
        if call is None or call_id in entry.claimed:
            return  # not kept (over max_calls), or stood for already
        key = (entry.service, call.tool)
        self._unwant(self._unanswered, key, call_id)
        wanted = self._answered if call_id in entry.answered_at else self._unanswered
        wanted.setdefault(key, {})[call_id] = None

    def _unwant_all(self, entry: _Open) -> None:
        for call_id in entry.requested_at:
            call = entry.calls.get(call_id)
            if call is not None:
                key = (entry.service, call.tool)
                self._unwant(self._unanswered, key, call_id)
                self._unwant(self._answered, key, call_id)

    @staticmethod
    def _unwant(wanted: Wanted, key: tuple[str, str], call_id: int) -> None:
        ids = wanted.get(key)
        if ids is not None:
            ids.pop(call_id, None)
            if not ids:
                del wanted[key]

    def _merge(self, entry: _Open, mark: LlmMark, conversation: Conversation) -> None:
        calls = entry.calls
        before = len(calls)
        settled = entry.settled
        alias_of = entry.alias_of
        # a history that lost the turn's start names calls by their ids: read as their stand-ins
        aliased = bool(alias_of) and any(i in alias_of for i in conversation.ids)
        known_ids: Container[int] = settled
        if aliased:
            known_ids = settled | {a for a, stand_in in alias_of.items() if stand_in in settled}
        for call in conversation.calls(known_ids):
            if aliased and call.span_id in alias_of:
                call = replace(call, span_id=alias_of[call.span_id])
            known = calls.get(call.span_id)
            # a later history may carry the result an earlier one lacked; never the reverse
            if known is None:
                if len(calls) < self.max_calls:
                    calls[call.span_id] = call
            elif known.result == _UNKNOWN and known.error_class == "ok":
                calls[call.span_id] = call
            else:
                continue
            if call.result != _UNKNOWN or call.error_class != "ok":
                settled.add(call.span_id)
        requested, answered = entry.requested_at, entry.answered_at
        answer = conversation.answer
        for own in conversation.requested:
            call_id = alias_of.get(own, own) if aliased else own
            if call_id not in requested:
                requested[call_id] = mark.end_ns
                self._want(entry, call_id)
                if answer is not None and call_id not in answered:
                    entry.answerers[call_id] = (answer, own)
        for call_id in conversation.answered:
            call_id = alias_of.get(call_id, call_id) if aliased else call_id
            entry.answerers.pop(call_id, None)
            if call_id not in answered:
                answered[call_id] = mark.start_ns
                if call_id in requested:
                    self._want(entry, call_id)
        entry.llms.append(replace(mark, messages=None))
        grown = (len(calls) - before) * _CALL_BYTES + 300
        entry.size += grown
        self.buffered_bytes += grown

    def _absorb(self, entry: _Open, other: _Open) -> None:
        del self._open[other.number]
        self._unwant_all(other)  # filed again below, under this turn's service
        for call_id, call in other.calls.items():
            entry.calls.setdefault(call_id, call)
        for call_id, at in other.requested_at.items():
            entry.requested_at.setdefault(call_id, at)
        for call_id, at in other.answered_at.items():
            entry.answered_at.setdefault(call_id, at)
        entry.ids.update(other.ids)
        entry.settled.update(other.settled)
        entry.claimed.update(other.claimed)
        entry.executed.update(other.executed)
        entry.alias_of.update(other.alias_of)
        for call_id, answerer in other.answerers.items():
            if call_id not in entry.answered_at:
                entry.answerers.setdefault(call_id, answerer)
        for call_id in other.ids:
            self._by_call[call_id] = entry
        entry.llms.extend(other.llms)
        entry.size += other.size
        entry.turn = entry.turn or other.turn
        entry.agent = entry.agent or other.agent
        for call_id in other.requested_at:
            self._want(entry, call_id)

    def _pop(self, entry: _Open) -> Ready:
        del self._open[entry.number]
        self._unwant_all(entry)
        self.buffered_bytes -= entry.size
        for call_id in entry.ids:
            self._by_call.pop(call_id, None)
            self._done[call_id] = None
        while len(self._done) > 16 * self.limit:
            self._done.popitem(last=False)
        return entry.trace_id, entry.service, _group(entry)

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


_BEST_FIT = 3


def _fit(entry: _Open, call_id: int, call: ToolCall) -> int:
    """How well a tool span fits a call asked for: 2 for its arguments' identity, 1 for having
    run between the model call that asked for it and the one that got its result."""
    score = 0
    asked = entry.calls.get(call_id)
    if asked is not None and asked.arguments_known and call.arguments_known:
        identity = call.key.identity
        if identity == asked.key.identity or identity == asked.failed_identity:
            score += 2
    requested = entry.requested_at.get(call_id)
    answered = entry.answered_at.get(call_id)
    if (requested is None or requested <= call.start_ns) and (
        answered is None or call.end_ns <= answered
    ):
        score += 1
    return score


def _group(entry: _Open) -> TurnGroup:
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
    return TurnGroup(0, entry.turn, calls, llms, start_ns, end_ns, entry.agent)
