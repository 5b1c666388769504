"""``loopwatch replay --openmetrics FILE``: the series ``/metrics`` would have shown while the
stored traces happened, as OpenMetrics with the spans' own times, for
``promtool tsdb create-blocks-from openmetrics``.

Turns go into a ``LoopwatchMetrics`` registry of their own (the same code, names, labels and
bounds as a live replica) in the order they ended, and every ``interval`` seconds of span time
the whole registry is written as one scrape: each sample with that timestamp and the ``job``
and ``instance`` labels a scrape would add. A scrape at time T holds every turn that ended by
T. Turns are held until no turn ending before the next scrape can still come (the replay says
when: it feeds whole traces in time order, and only a hand-rolled turn stays open, for at most
the idle timeout of span time), so memory holds a few minutes of turns, not the input."""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from itertools import count
from typing import Any, TextIO

from prometheus_client import CollectorRegistry
from prometheus_client.utils import floatToGoString

from loopwatch.core.config import Config
from loopwatch.core.summary import TurnSummary
from loopwatch.metrics.exporter import LoopwatchMetrics
from loopwatch.metrics.forwarding import ForwardingSink

_GAP_SECONDS = 86_400.0  # no turn for this long: jump to the next one (the series go stale)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _timestamp(at: float) -> str:
    return str(int(at)) if at == int(at) else repr(at)


class OpenMetricsWriter(ForwardingSink):
    """The core's Sink; call ``advance(settled)`` after each batch and ``close()`` at the end."""

    def __init__(
        self, out: TextIO, config: Config, interval: float, labels: Mapping[str, str]
    ) -> None:
        self.out = out
        self.interval = interval
        self.registry = CollectorRegistry()
        self.metrics = LoopwatchMetrics(
            self.registry, config.label_limit, config.series_limit, config.label_chars
        )
        super().__init__(self.metrics)
        self.extra = "".join(f',{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
        self._pending: list[tuple[int, int, TurnSummary]] = []  # (end_ns, order, summary)
        self._order = count()
        self._next: float | None = None  # the next scrape's time (seconds)
        self._prefixes: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
        self.scrapes = 0
        self.samples = 0
        self.late_turns = 0  # turns that ended before a scrape already written

    @classmethod
    def open(
        cls, path: str, config: Config, interval: float, labels: Mapping[str, str]
    ) -> OpenMetricsWriter:
        for name in labels:
            if not name.isidentifier():
                raise ValueError(f"not a label name: {name!r}")
        return cls(open(path, "w", encoding="utf-8"), config, interval, labels)

    # -- Sink -----------------------------------------------------------------------------------
    def turn(self, summary: TurnSummary) -> None:
        heapq.heappush(self._pending, (summary.end_ns, next(self._order), summary))

    # -- scrapes --------------------------------------------------------------------------------
    def advance(self, settled: float) -> None:
        """Write every scrape that no turn still to come can change: those up to ``settled``,
        the span time by which every turn that ended has been handed over
        (``Replayer.settled``)."""
        self._write_until(settled)

    def close(self) -> None:
        try:
            self._write_until(math.inf)
            self.out.write("# EOF\n")
        finally:
            self.out.close()

    def summary(self) -> dict[str, Any]:
        return {"scrapes": self.scrapes, "samples": self.samples, "late_turns": self.late_turns}

    def _scrape_time(self, end_ns: int) -> float:
        return math.ceil(end_ns / 1e9 / self.interval) * self.interval

    def _write_until(self, horizon: float) -> None:
        pending = self._pending
        while True:
            if self._next is None:
                if not pending:
                    return
                self._next = self._scrape_time(pending[0][0])
            at = self._next
            if at > horizon:
                return
            while pending and pending[0][0] <= at * 1e9:
                _, _, summary = heapq.heappop(pending)
                if summary.end_ns <= (at - self.interval) * 1e9 and self.scrapes:
                    self.late_turns += 1
                self._apply(summary)
            self._write(at)
            if horizon == math.inf and not pending:
                self._next = at + self.interval
                return
            following = at + self.interval
            if pending and pending[0][0] / 1e9 > following + _GAP_SECONDS:
                following = self._scrape_time(pending[0][0])  # a long gap: jump over it
            self._next = following

    def _apply(self, summary: TurnSummary) -> None:
        # first-seen gauges hold when the turn ended, not when it was replayed
        self.metrics.turn(summary, first_seen=summary.end_ns / 1e9)

    def _write(self, at: float) -> None:
        stamp = " " + _timestamp(at) + "\n"
        lines = []
        prefixes = self._prefixes
        for family in self.registry.collect():
            for s in family.samples:
                if s.name.endswith("_created"):
                    continue
                key = (s.name, tuple(s.labels.items()))
                prefix = prefixes.get(key)
                if prefix is None:
                    pairs = "".join(f',{k}="{_escape(v)}"' for k, v in s.labels.items())
                    prefix = prefixes[key] = f"{s.name}{{{(pairs + self.extra)[1:]}}} "
                lines.append(prefix + floatToGoString(s.value) + stamp)  # type: ignore[no-untyped-call]
        self.out.writelines(lines)
        self.scrapes += 1
        self.samples += len(lines)
