"""A turn sink that counts turns and evictions, for the assembler's bounds."""

from __future__ import annotations

from loopwatch.core.summary import TurnSummary


class CountingSink:
    def __init__(self) -> None:
        self.turns = 0
        self.evictions: dict[str, int] = {}
        self.late_spans = 0
        self.drop_reasons: list[str] = []

    def turn(self, summary: TurnSummary) -> None:
        self.turns += 1

    def span(self, kind: str, count: int = 1) -> None:
        pass

    def dropped(self, reason: str, count: int = 1) -> None:
        self.drop_reasons.extend([reason] * count)

    def evicted(self, reason: str) -> None:
        self.evictions[reason] = self.evictions.get(reason, 0) + 1

    def late(self) -> None:
        self.late_spans += 1

    def malformed(self, reason: str, count: int = 1) -> None:
        pass

    def open_turns(self, count: int) -> None:
        pass
