"""One WARNING when tool calls keep arriving with nothing around them: no agent span, no model
call, not even a parent. Each such call is a turn of its own, so calls that repeat one another
across them can never show as a loop; the user is told how to group them into turns."""

from __future__ import annotations

import logging
import threading
from typing import Final

from loopwatch.core.records import LlmMark, ToolCall, TurnMark

log = logging.getLogger(__name__)

# One-call turns of bare tool calls seen before the warning (a single one may be a real turn).
BEFORE_WARNING: Final = 3


class _LoneCalls:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seen = 0

    def note(self, turn: TurnMark | None, calls: list[ToolCall], llms: list[LlmMark]) -> None:
        """One finished turn: counted when it is a single bare tool call; the third warns."""
        if turn is not None or llms or len(calls) != 1 or calls[0].parent_id is not None:
            return
        with self._lock:
            self.seen += 1
            if self.seen != BEFORE_WARNING:
                return
        log.warning(
            "tool %r and others arrive each in a trace of their own, with no agent span or "
            "traced model call around them: each is counted as a turn of one call, so calls "
            "that repeat one another never show as a loop. Group each agent turn's calls with "
            "`with loopwatch.turn(agent=...):`, or trace the model calls (docs/attach.md)",
            calls[0].tool[:100],
        )


LONE_CALLS: Final = _LoneCalls()
