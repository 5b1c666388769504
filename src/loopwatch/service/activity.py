"""The periodic one-line summary of ``loopwatch serve``: spans, turns and loops since the
last line, read from the metrics; nothing when nothing changed (an idle service is quiet)."""

from __future__ import annotations

from typing import Any

from loopwatch.core.words import counted
from loopwatch.metrics.exporter import LoopwatchMetrics


def _total(counter: Any) -> float:
    return sum(
        float(sample.value)
        for family in counter.collect()
        for sample in family.samples
        if sample.name.endswith("_total")
    )


class Activity:
    def __init__(self, metrics: LoopwatchMetrics) -> None:
        self.metrics = metrics
        self.last = self._totals()

    def _totals(self) -> tuple[float, float, float]:
        m = self.metrics
        return _total(m.spans), _total(m.turns), _total(m.loops)

    def line(self) -> str | None:
        """What arrived since the previous call, or None when nothing did. A turn is counted
        after its spans (at its end, or after the grace), so a line may hold only turns."""
        now = self._totals()
        spans, turns, loops = (int(a - b) for a, b in zip(now, self.last, strict=True))
        self.last = now
        if not (spans or turns or loops):
            return None
        counts = (counted(spans, "span"), counted(turns, "turn"), counted(loops, "loop"))
        return f"{', '.join(counts)} since the last summary"
