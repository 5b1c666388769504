"""Metric families held as plain numbers, handed to prometheus_client as families when scraped.

prometheus_client's Counter and Histogram validate labels and exemplars and take a lock on every
observation; a finished turn updates about a dozen series, so loopwatch keeps the numbers itself,
updated under one lock per turn, and prometheus_client only formats them (same samples, same
exposition)."""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Sequence

from prometheus_client import metrics as client_metrics
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar, Sample
from prometheus_client.utils import INF, floatToGoString

# a histogram's last exemplar of one bucket: trace id (hex), observed value, clock time
ExemplarRow = tuple[str, float, float]


class Series:
    """One series: a counter's or gauge's value; a histogram's count per bucket (not cumulative)
    followed by its sum, and the last exemplar of each bucket."""

    __slots__ = ("created", "exemplars", "values")

    def __init__(self, size: int, created: float, buckets: int) -> None:
        self.values = [0.0] * size
        self.exemplars: list[ExemplarRow | None] = [None] * buckets
        self.created = created


class Family(Collector):
    """One metric family: its series by label values, in the order they were first used.

    Callers hold ``lock`` while they read or change ``series``; ``collect`` takes it to copy."""

    def __init__(
        self,
        name: str,
        documentation: str,
        kind: str,
        labelnames: Sequence[str],
        lock: threading.Lock,
        buckets: Sequence[float] = (),
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.type = kind  # counter, gauge or histogram
        self.labelnames = tuple(labelnames)
        self.upper_bounds: tuple[float, ...] = (*map(float, buckets), INF) if buckets else ()
        # the "le" values exactly as prometheus_client writes them (untyped upstream)
        self._le = [floatToGoString(b) for b in self.upper_bounds]  # type: ignore[no-untyped-call]
        self.series: dict[tuple[str, ...], Series] = {}
        self.lock = lock

    def add(self, labels: tuple[str, ...], created: float) -> Series:
        """A new series at 0 (caller holds the lock)."""
        buckets = len(self.upper_bounds)
        series = self.series[labels] = Series(buckets + 1 if buckets else 1, created, buckets)
        return series

    def observe(self, series: Series, amount: float, trace_id: str, now: float) -> None:
        """A histogram observation with its exemplar (caller holds the lock)."""
        i = bisect_left(self.upper_bounds, amount)  # the first bucket with amount <= bound
        series.values[i] += 1
        series.values[-1] += amount
        series.exemplars[i] = (trace_id, amount, now)

    def describe(self) -> list[Metric]:
        return [Metric(self.name, self.documentation, self.type)]

    def collect(self) -> list[Metric]:
        with self.lock:  # copies only: a scrape never sees a series half updated
            rows = [
                (labels, s.values.copy(), s.exemplars.copy(), s.created)
                for labels, s in self.series.items()
            ]
        created = client_metrics._use_created  # prometheus_client's switch for _created lines
        if self.type == "counter":
            counter = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
            for labels, values, _, at in rows:
                counter.add_metric(labels, values[0], at if created else None)
            return [counter]
        if self.type == "gauge":
            gauge = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
            for labels, values, _, _ in rows:
                gauge.add_metric(labels, values[0])
            return [gauge]
        histogram = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, values, exemplars, at in rows:
            buckets: list[tuple[str, float] | tuple[str, float, Exemplar]] = []
            total = 0.0
            for le, count, row in zip(self._le, values, exemplars, strict=False):
                total += count
                if row is None:
                    buckets.append((le, total))
                else:
                    trace_id, value, time = row
                    buckets.append((le, total, Exemplar({"trace_id": trace_id}, value, time)))
            histogram.add_metric(labels, buckets, values[-1])
            if created:
                sample_labels = dict(zip(self.labelnames, labels, strict=True))
                histogram.samples.append(Sample(f"{self.name}_created", sample_labels, at))
        return [histogram]
