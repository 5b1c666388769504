"""What one pipeline counted since it started, for the line it logs when it shuts down (a
program's exit): turns, loops and the worst key, hashed like every INFO line."""

from __future__ import annotations

from loopwatch.core.keys import AttemptKey
from loopwatch.core.span_view import trace_hex
from loopwatch.core.summary import TurnSummary


class RunTally:
    """Not thread-safe: updated where the turns are published (one worker)."""

    def __init__(self) -> None:
        self.turns = 0
        self.loops = 0
        self.worst_attempts = 0
        self.worst_key: AttemptKey | None = None
        self.worst_turn: TurnSummary | None = None

    def add(self, summary: TurnSummary) -> None:
        self.turns += 1
        for tool in summary.tools:
            self.loops += len(tool.loops)
        if summary.worst_key is not None and summary.max_attempts > self.worst_attempts:
            self.worst_attempts = summary.max_attempts
            self.worst_key = summary.worst_key
            self.worst_turn = summary

    def line(self) -> str:
        """``3 turns, 2 loops; worst key create_ticket/22562c0f/timeout at 6 attempts
        (service=... agent=... trace_id=...)``"""
        out = f"{_count(self.turns, 'turn')}, {_count(self.loops, 'loop')}"
        key, turn = self.worst_key, self.worst_turn
        if key is None or turn is None:
            return out
        return (
            f"{out}; worst key {key.short()} at {_count(self.worst_attempts, 'attempt')} "
            f"(service={turn.service} agent={turn.agent} trace_id={trace_hex(turn.trace_id)})"
        )


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
