"""A sink that forwards to the metrics and keeps what the demo's summary prints."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from loopwatch.core.sink import Sink, queue_health
from loopwatch.core.summary import TurnSummary
from loopwatch.metrics.forwarding import ForwardingSink

_WORST_KEPT = 5


@dataclass
class Tally(ForwardingSink):
    forward: Sink
    turns: int = 0
    tool_calls: int = 0
    repeat_calls: int = 0
    over_cap_seconds: float = 0.0
    loops: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    max_attempts: Counter[int] = field(default_factory=Counter)
    worst: list[TurnSummary] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def turn(self, summary: TurnSummary) -> None:
        self.forward.turn(summary)
        with self.lock:
            self.turns += 1
            if summary.max_attempts:
                self.max_attempts[summary.max_attempts] += 1
            for t in summary.tools:
                self.tool_calls += sum(n for _, n in t.calls)
                self.repeat_calls += sum(n for _, n in t.repeats)
                self.over_cap_seconds += t.over_cap_seconds
                for error_class, kind in t.loops:
                    self.loops[(t.tool, error_class, kind)] += 1
            self.worst.append(summary)
            self.worst.sort(key=lambda s: -s.max_attempts)
            del self.worst[_WORST_KEPT:]

    def queued(self, count: int) -> None:
        health = queue_health(self.forward)
        if health is not None:
            health.queued(count)

    def all_starts(self, on: bool) -> None:
        health = queue_health(self.forward)
        if health is not None:
            health.all_starts(on)
