"""A Sink that hands every call but ``turn`` on to another sink as it comes: the base of sinks
that hold turns themselves (the replay's OpenMetrics writer, the demo's tally)."""

from __future__ import annotations

from loopwatch.core.sink import Sink


class ForwardingSink:
    """Spans, drops, evictions, late spans, malformed messages and open turns go to
    ``forward``; a subclass implements ``turn``."""

    def __init__(self, forward: Sink) -> None:
        self.forward = forward

    def span(self, kind: str, count: int = 1) -> None:
        self.forward.span(kind, count)

    def dropped(self, reason: str, count: int = 1) -> None:
        self.forward.dropped(reason, count)

    def evicted(self, reason: str) -> None:
        self.forward.evicted(reason)

    def late(self) -> None:
        self.forward.late()

    def malformed(self, reason: str, count: int = 1) -> None:
        self.forward.malformed(reason, count)

    def open_turns(self, count: int) -> None:
        self.forward.open_turns(count)
