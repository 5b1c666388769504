"""What the assembler hands the open conversations (core.conversations): a group's model calls
that show their turn, and lone tool calls, claimed by the turn that asked for them or held until
it comes; and what comes back: turns completed, evicted or let go, counted to the sink, with the
conversations' bytes kept in the buffer budget."""

from __future__ import annotations

import logging
from collections.abc import Callable

from loopwatch.core.buffer_budget import BufferBudget
from loopwatch.core.conversations import Conversations, Held, Ready
from loopwatch.core.internal_errors import log_internal_error
from loopwatch.core.reasons import DROP_ERROR, EVICT_CAPACITY
from loopwatch.core.records import (
    RESULT_WITHOUT_CALL,
    UNREADABLE_HISTORY,
    Conversation,
    LlmMark,
    UnreadableHistory,
)
from loopwatch.core.requested import complete, needs_completing
from loopwatch.core.sink import Sink
from loopwatch.core.turn_publisher import TurnPublisher
from loopwatch.core.turns import TurnGroup

log = logging.getLogger(__name__)


class ConversationFeed:
    """The assembler's side of the open conversations; not thread-safe (its caller's worker)."""

    def __init__(
        self,
        conversations: Conversations,
        budget: BufferBudget,
        publisher: TurnPublisher,
        clock: Callable[[], float],
    ) -> None:
        self.conversations = conversations
        self.budget = budget
        self.publisher = publisher
        self.sink: Sink = publisher.sink  # where the counts go: the sink turns go to
        self.clock = clock

    def waiting(self) -> int:
        """Open conversations and held lone tool calls."""
        conversations = self.conversations
        return len(conversations) + conversations.held()

    def claim_or_hold(self, trace_id: int, service: str, group: TurnGroup, may_wait: bool) -> bool:
        """A lone tool call (no turn span, no model call: a trace of its own, as in a
        hand-rolled loop) that an open conversation asked for: counted there, its outcome
        deciding the call's, not as a turn of its own. One no open conversation asked for
        waits (``may_wait``: its trace was not evicted) for the model call that asks for it,
        ``grace_seconds`` at most (core.conversations). False: the group is a turn as it is."""
        if len(group.calls) != 1 or group.turn is not None or group.llms:
            return False
        conversations = self.conversations
        if len(conversations) > 0 and conversations.claim(service, group.calls[0]):
            return True
        # a guard's answer is written where the guard stands, never ahead of the model call
        if not may_wait or group.calls[0].guard is not None:
            return False
        for released in conversations.hold(trace_id, service, group, self.clock()):
            self._ready_as_own_turn(released)
        self._sync_bytes()
        return True

    def _ready_as_own_turn(self, held: Held) -> None:
        """A held lone tool call no model call asked for: a turn of its own after all."""
        trace_id, service, group, _seen = held
        if needs_completing(group):
            complete(group, self.sink)
        self.publisher.ready.append((trace_id, service, group))

    def release_held(self, deadline: float) -> None:
        """The held lone tool calls that came at ``deadline`` or before: turns of their own."""
        if self.conversations.held():
            for held in self.conversations.release(deadline):
                self._ready_as_own_turn(held)
            self._sync_bytes()

    def converse(self, trace_id: int, service: str, group: TurnGroup) -> bool:
        """Hand the group's model calls that show their turn to the open conversations; False
        when none does (the group is then a turn of its own, as before)."""
        read = self._histories(group)
        if not read:
            return False
        read.sort(key=lambda item: item[0].start_ns)
        now = self.clock()
        conversations, ready = self.conversations, self.publisher.ready
        for mark, conversation in read:
            added = conversations.add(
                trace_id=trace_id,
                service=service,
                mark=mark,
                conversation=conversation,
                now=now,
                turn=group.turn,
                agent=group.root_agent,
            )
            if added is None:
                self.sink.late()
                continue
            done, evicted = added
            ready.extend(done)
            for _ in range(evicted):
                self.sink.evicted(EVICT_CAPACITY)
        unjoined = conversations.results_without_call
        if unjoined:
            conversations.results_without_call = 0
            self.sink.malformed(RESULT_WITHOUT_CALL, unjoined)
        self._sync_bytes()
        return True

    def _histories(self, group: TurnGroup) -> list[tuple[LlmMark, Conversation]]:
        """The group's model calls whose messages read as a turn; what is wrong with the others
        counted."""
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
        return read

    def finalized(self, done: list[Ready], reason: str) -> None:
        """Open hand-rolled turns finalized before their answer came."""
        ready = self.publisher.ready
        for turn in done:
            self.sink.evicted(reason)
            ready.append(turn)
        self._sync_bytes()

    def _sync_bytes(self) -> None:
        self.budget.sync(self.conversations.buffered_bytes)
