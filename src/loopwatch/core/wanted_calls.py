"""The calls the open turns asked for that no tool span has stood for yet, by (service, tool),
unanswered and answered apart: a lone tool span finds the call it ran in one lookup, whatever
is open; and how well a span fits a call."""

from __future__ import annotations

from loopwatch.core.open_conversation import OpenConversation
from loopwatch.core.records import ToolCall

# how many calls asked of one tool a tool span's match looks at (the oldest first): the common
# case is the first; a bound keeps a turn of thousands of calls of one tool linear
MATCH_SCAN = 64
BEST_FIT = 3

Wanted = dict[tuple[str, str], dict[int, None]]  # (service, tool) -> call ids, oldest first


class WantedCalls:
    """Not thread-safe: the assembler's caller serialises it."""

    def __init__(self, by_call: dict[int, OpenConversation]) -> None:
        self.by_call = by_call  # the open turns by call id (Conversations' own index)
        self.unanswered: Wanted = {}
        self.answered: Wanted = {}

    def want(self, entry: OpenConversation, call_id: int) -> None:
        """File a requested call under its tool, as answered or not (once answered, moved)."""
        call = entry.calls.get(call_id)
        if call is None or call_id in entry.claimed:
            return  # not kept (over max_calls), or stood for already
        key = (entry.service, call.tool)
        self.unwant(self.unanswered, key, call_id)
        wanted = self.answered if call_id in entry.answered_at else self.unanswered
        wanted.setdefault(key, {})[call_id] = None

    def unwant_all(self, entry: OpenConversation) -> None:
        """Take every call ``entry`` asked for out of the index."""
        for call_id in entry.requested_at:
            call = entry.calls.get(call_id)
            if call is not None:
                key = (entry.service, call.tool)
                self.unwant(self.unanswered, key, call_id)
                self.unwant(self.answered, key, call_id)

    @staticmethod
    def unwant(wanted: Wanted, key: tuple[str, str], call_id: int) -> None:
        """Take one call out of ``wanted``."""
        ids = wanted.get(key)
        if ids is not None:
            ids.pop(call_id, None)
            if not ids:
                del wanted[key]

    def match(
        self, service: str, call: ToolCall
    ) -> tuple[tuple[Wanted, OpenConversation, int], int] | None:
        """The call asked for that ``call`` (a lone tool span) fits best, and how well (fit);
        ids of turns no longer open are dropped on the way."""
        key = (service, call.tool)
        chosen: tuple[Wanted, OpenConversation, int] | None = None
        best = -1
        stale: list[tuple[Wanted, int]] = []
        for wanted in (self.unanswered, self.answered):
            ids = wanted.get(key)
            if not ids:
                continue
            for n, call_id in enumerate(ids):
                if n >= MATCH_SCAN:
                    break
                entry = self.by_call.get(call_id)
                if entry is None:
                    stale.append((wanted, call_id))
                    continue
                score = fit(entry, call_id, call)
                if score > best:
                    chosen, best = (wanted, entry, call_id), score
                    if score == BEST_FIT:
                        break
            if best == BEST_FIT:
                break
        for wanted, call_id in stale:
            self.unwant(wanted, key, call_id)
        return None if chosen is None else (chosen, best)


def fit(entry: OpenConversation, call_id: int, call: ToolCall) -> int:
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
