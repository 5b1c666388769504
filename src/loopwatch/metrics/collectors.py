"""Metric families held as plain numbers, handed to prometheus_client as families when scraped.

prometheus_client's Counter and Histogram validate labels and exemplars and take a lock on every
observation; a finished turn updates about a dozen series, so loopwatch keeps the numbers itself,
updated under one lock per turn, and prometheus_client only formats them (same samples, same
exposition)."""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Callable

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar, Sample
from prometheus_client.utils import INF, floatToGoString

from loopwatch.metrics import catalog
from loopwatch.metrics.created_lines import created_lines

# a histogram's last exemplar of one bucket: trace id (hex), observed value, clock time
ExemplarRow = tuple[str, float, float]
Labels = tuple[str, ...]


class Series:
    """One series: a counter's or gauge's value; a histogram's count per bucket (not cumulative)
    followed by its sum, and the last exemplar of each bucket."""

    __slots__ = ("created", "exemplars", "values")

    def __init__(self, size: int, created: float, buckets: int) -> None:
        self.values = [0.0] * size
        self.exemplars: list[ExemplarRow | None] = [None] * buckets
        self.created = created


class HeldFamily(Collector):
    """One metric family of the catalog: its series by label values, in the order they were
    first used.

    Callers hold ``lock`` around every update; ``collect`` takes it to copy. A family with a
    span-derived label admits ``budget`` label combinations; a new one past that is recorded in
    the overflow series (those labels ``other``) and reported to ``overflowed(name)``."""

    def __init__(
        self,
        spec: catalog.Metric,
        lock: threading.Lock,
        budget: int = 0,
        overflowed: Callable[[str], None] | None = None,
    ) -> None:
        self.spec = spec
        self.lock = lock
        buckets = spec.buckets
        self._bounds: tuple[float, ...] = (*map(float, buckets), INF) if buckets else ()
        # the "le" values exactly as prometheus_client writes them (untyped upstream)
        self._le = [floatToGoString(b) for b in self._bounds]  # type: ignore[no-untyped-call]
        self._series: dict[Labels, Series] = {}
        self._budget = budget if spec.budgeted else -1  # -1: no budget
        self._admitted = 0
        self._overflowed = overflowed
        self._open = tuple(label in catalog.SPAN_LABELS for label in spec.labels)

    # -- updates (caller holds the lock) ----------------------------------------------------------
    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        """Add to a counter."""
        (self._series.get(labels) or self._new(labels)).values[0] += amount

    def set(self, labels: Labels, value: float) -> None:
        """Set a gauge."""
        (self._series.get(labels) or self._new(labels)).values[0] = value

    def set_once(self, labels: Labels, value: float) -> None:
        """Set a gauge that has not been set (a first-seen time: a clock time is never 0)."""
        series = self._series.get(labels) or self._new(labels)
        if not series.values[0]:
            series.values[0] = value

    def observe(self, labels: Labels, amount: float, trace_id: str, now: float) -> None:
        """A histogram observation with its exemplar."""
        series = self._series.get(labels) or self._new(labels)
        i = bisect_left(self._bounds, amount)  # the first bucket with amount <= bound
        series.values[i] += 1
        series.values[-1] += amount
        series.exemplars[i] = (trace_id, amount, now)

    def zero(self, labels: Labels) -> None:
        """The series of ``labels`` present, at 0 when new."""
        if labels not in self._series:
            self._new(labels)

    def _new(self, labels: Labels) -> Series:
        if self._budget >= 0:
            if self._admitted < self._budget:
                self._admitted += 1
            else:
                # past the budget: the overflow series, whose span-derived labels are all
                # 'other' (closed vocabularies such as error_class stay as they are)
                if self._overflowed is not None:
                    self._overflowed(self.spec.name)
                labels = tuple(
                    catalog.OTHER if is_open else value
                    for is_open, value in zip(self._open, labels, strict=True)
                )
                series = self._series.get(labels)
                if series is not None:
                    return series
        size = len(self._bounds)
        series = self._series[labels] = Series(size + 1 if size else 1, time.time(), size)
        return series

    # -- prometheus_client's side -----------------------------------------------------------------
    def describe(self) -> list[Metric]:
        spec = self.spec
        return [Metric(spec.family, spec.help, spec.type)]

    def collect(self) -> list[Metric]:
        with self.lock:  # copies only: a scrape never sees a series half updated
            rows = [
                (labels, s.values.copy(), s.exemplars.copy(), s.created)
                for labels, s in self._series.items()
            ]
        spec = self.spec
        created = created_lines()
        if spec.type == "counter":
            counter = CounterMetricFamily(spec.family, spec.help, labels=spec.labels)
            for labels, values, _, at in rows:
                counter.add_metric(labels, values[0], at if created else None)
            return [counter]
        if spec.type == "gauge":
            gauge = GaugeMetricFamily(spec.family, spec.help, labels=spec.labels)
            for labels, values, _, _ in rows:
                gauge.add_metric(labels, values[0])
            return [gauge]
        histogram = HistogramMetricFamily(spec.family, spec.help, labels=spec.labels)
        for labels, values, exemplars, at in rows:
            histogram.add_metric(labels, self._buckets(values, exemplars), values[-1])
            if created:
                sample_labels = dict(zip(spec.labels, labels, strict=True))
                histogram.samples.append(Sample(f"{spec.family}_created", sample_labels, at))
        return [histogram]

    def _buckets(
        self, values: list[float], exemplars: list[ExemplarRow | None]
    ) -> list[tuple[str, float] | tuple[str, float, Exemplar]]:
        """Cumulative bucket counts, each with its exemplar when it has one."""
        buckets: list[tuple[str, float] | tuple[str, float, Exemplar]] = []
        total = 0.0
        for le, count, row in zip(self._le, values, exemplars, strict=False):
            total += count
            if row is None:
                buckets.append((le, total))
            else:
                trace_id, value, at = row
                buckets.append((le, total, Exemplar({"trace_id": trace_id}, value, at)))
        return buckets
