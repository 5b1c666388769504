"""The Prometheus side: turn summaries and self-health into ``prometheus_client`` metrics."""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.metrics import MetricWrapperBase

from loopwatch.core.assembler import DROP_REASONS, EVICT_REASONS
from loopwatch.core.config import Config
from loopwatch.core.identity import short_hash
from loopwatch.core.outcomes import ERROR_CLASSES
from loopwatch.core.records import GUARD_DECISIONS, SPAN_KINDS
from loopwatch.core.spans import trace_hex
from loopwatch.core.summary import NO_ROWS, TurnSummary
from loopwatch.version import VERSION

ATTEMPT_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 64)
STREAK_BUCKETS = (0, 1, 2, 3, 4, 6, 8, 12, 16)
OTHER = "other"
BOUNDED_LABELS = ("service", "agent", "model", "tool", "tool_version")
SERIES_LIMIT = Config.series_limit  # per family: /metrics stays under ~40 MB (see below)
LABEL_CHARS = Config.label_chars  # per label value
# Labels whose values come from the spans; a family with one is held to the series budget. The
# others hold loopwatch's own closed vocabularies (their sizes, for the exposition's bound).
OPEN_LABELS = frozenset(BOUNDED_LABELS)
_CLOSED_VALUES = {
    "error_class": len(ERROR_CLASSES) + 1,  # and ok
    "kind": 2,  # repeat, no_rows
    "decision": len(GUARD_DECISIONS) + 1,  # and other
}
_HASH_CHARS = 8


def bounded_value(value: str, max_chars: int = LABEL_CHARS) -> str:
    """``value`` if it fits in ``max_chars``, else its head, ``~`` and 8 hex digits of its
    SHA-256: distinct long values stay distinct."""
    if len(value) <= max_chars:
        return value
    return value[: max_chars - _HASH_CHARS - 1] + "~" + short_hash(value, _HASH_CHARS)


class _LabelBound:
    """At most ``limit`` distinct values per label, each cut to ``max_chars``; later ones
    become ``other`` (counted)."""

    def __init__(self, limit: int, overflow: Counter, max_chars: int = LABEL_CHARS) -> None:
        self.limit = limit
        self.overflow = overflow
        self.max_chars = max_chars
        self.seen: dict[str, set[str]] = {}
        self.lock = threading.Lock()

    def __call__(self, label: str, value: str) -> str:
        value = bounded_value(value, self.max_chars)
        with self.lock:
            values = self.seen.setdefault(label, set())
            if value in values:
                return value
            if len(values) < self.limit:
                values.add(value)
                return value
        self.overflow.labels(label).inc()
        return OTHER


class LoopwatchMetrics:
    """Implements the core's Sink. One instance per registry."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        label_limit: int = 200,
        series_limit: int = SERIES_LIMIT,
        label_chars: int = LABEL_CHARS,
    ) -> None:
        r = REGISTRY if registry is None else registry
        turn = ["service", "agent", "model"]
        self.turn_max_attempts = Histogram(
            "loopwatch_turn_max_attempts",
            "Max attempts over all attempt keys of one turn (one observation per turn).",
            turn,
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.tool_max_attempts = Histogram(
            "loopwatch_tool_max_attempts",
            "Per tool used in a turn: max attempts over that tool's attempt keys.",
            [*turn, "tool", "tool_version"],
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.no_rows_streak = Histogram(
            "loopwatch_no_rows_streak",
            "Per tool with readable results in a turn: longest run of consecutive empty results.",
            [*turn, "tool"],
            buckets=STREAK_BUCKETS,
            registry=r,
        )
        self.turns = Counter(
            "loopwatch_turns", "Finished turns, with or without tool calls.", turn, registry=r
        )
        self.loops = Counter(
            "loopwatch_loops",
            "Turns in which a key of this tool and error class looped (kind repeat or no_rows).",
            [*turn, "tool", "error_class", "kind"],
            registry=r,
        )
        self.tool_calls = Counter(
            "loopwatch_tool_calls",
            "Tool calls (error_class ok on success).",
            [*turn, "tool", "error_class"],
            registry=r,
        )
        self.repeat_calls = Counter(
            "loopwatch_repeat_calls",
            "Tool calls past the first of their attempt key: the duplicates.",
            [*turn, "tool", "error_class"],
            registry=r,
        )
        self.over_cap_seconds = Counter(
            "loopwatch_over_cap_seconds",
            "Wall time of calls past the loop threshold: what a loop breaker would have saved.",
            [*turn, "tool"],
            registry=r,
        )
        self.guard_decisions = Counter(
            "loopwatch_guard_decisions",
            "Tool calls a loopwatch guard answered without executing, by decision.",
            ["service", "agent", "tool", "decision"],
            registry=r,
        )
        self.model_first_seen = Gauge(
            "loopwatch_model_first_seen_timestamp_seconds",
            "When this process first saw a turn of this model.",
            turn,
            registry=r,
        )
        self.tool_version_first_seen = Gauge(
            "loopwatch_tool_version_first_seen_timestamp_seconds",
            "When this process first saw this tool version (hash of its description).",
            ["service", "tool", "tool_version"],
            registry=r,
        )
        self.spans = Counter(
            "loopwatch_spans",
            "Spans read, by kind (tool, agent, llm, other).",
            ["kind"],
            registry=r,
        )
        self.spans_dropped = Counter(
            "loopwatch_spans_dropped", "Spans not used, by reason.", ["reason"], registry=r
        )
        self.open_turns_gauge = Gauge(
            "loopwatch_open_turns", "Traces buffered, waiting for their turn to end.", registry=r
        )
        self.turns_evicted = Counter(
            "loopwatch_turns_evicted",
            "Turns finalized before their root span ended, by reason (idle, capacity, shutdown).",
            ["reason"],
            registry=r,
        )
        self.late_spans = Counter(
            "loopwatch_late_spans",
            "Spans that arrived for a turn already finalized.",
            registry=r,
        )
        self.label_overflow = Counter(
            "loopwatch_label_overflow",
            "Label values replaced by 'other' because the label reached its bound.",
            ["label"],
            registry=r,
        )
        self.calls_without_arguments = Counter(
            "loopwatch_calls_without_arguments",
            "Tool calls whose arguments were not captured (keyed by tool and error class only).",
            ["service", "tool"],
            registry=r,
        )
        self.calls_keyed_by_inference = Counter(
            "loopwatch_calls_keyed_by_inference",
            "Failed calls of tools with no identity declaration, keyed on their arguments minus "
            "free text.",
            ["service", "tool"],
            registry=r,
        )
        self.series_overflow = Counter(
            "loopwatch_series_overflow",
            "Observations recorded in a family's overflow series (span-derived labels 'other') "
            "because the family reached its series budget.",
            ["metric"],
            registry=r,
        )
        Info("loopwatch_build", "loopwatch version.", registry=r).info({"version": VERSION})
        self._bound = _LabelBound(label_limit, self.label_overflow, label_chars)
        self.series_limit = series_limit
        self.label_chars = label_chars
        # every self-health series at 0 from the start: "nothing arrived" is not "not wired"
        for metric, values in (
            (self.spans, SPAN_KINDS),
            (self.spans_dropped, DROP_REASONS),
            (self.turns_evicted, EVICT_REASONS),
            (self.label_overflow, BOUNDED_LABELS),
        ):
            for value in values:
                metric.labels(value)
        # labels() validates and locks on every call; the children it returns never change
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._series: dict[int, int] = {}  # family -> series admitted under the budget
        self._first_seen: set[int] = set()  # ids of the gauge children already set
        self._lock = threading.Lock()
        for family in self._families():
            if _budgeted(family):
                self.series_overflow.labels(_family_name(family))  # present from the start, at 0

    def _families(self) -> list[MetricWrapperBase]:
        return [m for m in vars(self).values() if isinstance(m, MetricWrapperBase)]

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is not None:
            return child
        if _budgeted(metric):
            with self._lock:
                admitted = self._series.get(id(metric), 0) < self.series_limit
                if admitted:
                    self._series[id(metric)] = self._series.get(id(metric), 0) + 1
            if not admitted:
                # past the budget: the overflow series, whose span-derived labels are all
                # 'other' (closed vocabularies such as error_class stay as they are)
                self._child(self.series_overflow, _family_name(metric)).inc()
                key = (id(metric), _overflow_labels(metric, labels))
                child = self._children.get(key)
                if child is not None:
                    return child
                labels = key[1]
        child = self._children[key] = metric.labels(*labels)
        return child

    def _set_once(self, gauge: Gauge, labels: tuple[str, ...], value: float) -> None:
        """Set a first-seen gauge the first time its series is used."""
        child = self._child(gauge, *labels)
        with self._lock:
            if id(child) in self._first_seen:
                return
            self._first_seen.add(id(child))
        child.set(value)

    def exposition_bound_bytes(self) -> int:
        """An upper bound on the size of this registry's text exposition (Prometheus text or
        OpenMetrics, with exemplars) at this instance's series budget and label length.

        Per family: budget + overflow series, times lines per series (a histogram's buckets,
        +Inf, sum, count and created; a counter's total and created; a gauge's one line),
        times the longest line (every span-derived label at 4 bytes per character, the most
        UTF-8 takes; an exemplar's trace id and timestamp). A family with closed labels only
        (self-health) is counted at _CLOSED_SERIES series."""
        total = 0
        for family in self._families():
            name = _family_name(family)
            names = family._labelnames
            buckets = getattr(family, "_upper_bounds", ())
            lines = {"counter": 2, "gauge": 1, "histogram": len(buckets) + 3, "info": 1}
            per_series = lines.get(str(family._type), 1)
            series = _CLOSED_SERIES
            if _budgeted(family):
                overflow = 1
                for label in names:
                    overflow *= _CLOSED_VALUES.get(label, 1)
                series = self.series_limit + overflow
            label_bytes = sum(
                len(label)
                + 4
                + (4 * self.label_chars if label in OPEN_LABELS else _CLOSED_CHARS.get(label, 32))
                for label in [*names, "le"]
            )
            line = len(name) + len("_created{}") + label_bytes + _VALUE_BYTES + _EXEMPLAR_BYTES
            total += _HEADER_BYTES + series * per_series * line
        return total

    # -- Sink ---------------------------------------------------------------------------------
    def turn(self, s: TurnSummary) -> None:
        b = self._bound
        service, agent, model = b("service", s.service), b("agent", s.agent), b("model", s.model)
        turn = (service, agent, model)
        exemplar = {"trace_id": trace_hex(s.trace_id)}
        self._child(self.turns, *turn).inc()
        now = time.time()
        self._set_once(self.model_first_seen, turn, now)
        if s.max_attempts:
            self._child(self.turn_max_attempts, *turn).observe(s.max_attempts, exemplar)
        for t in s.tools:
            tool = b("tool", t.tool)
            version = b("tool_version", t.tool_version)
            self._set_once(self.tool_version_first_seen, (service, tool, version), now)
            for decision, n in t.guard_decisions:
                self._child(self.guard_decisions, service, agent, tool, decision).inc(n)
            if not t.max_attempts:
                continue  # every call of this tool was answered by a guard
            self._child(self.tool_max_attempts, *turn, tool, version).observe(
                t.max_attempts, exemplar
            )
            if t.no_rows_streak is not None:
                self._child(self.no_rows_streak, *turn, tool).observe(t.no_rows_streak, exemplar)
            for error_class, n in t.calls:
                self._child(self.tool_calls, *turn, tool, error_class).inc(n)
            for error_class, n in t.repeats:
                self._child(self.repeat_calls, *turn, tool, error_class).inc(n)
            for error_class, kind in t.loops:
                self._child(self.loops, *turn, tool, error_class, kind).inc()
            if t.over_cap_seconds:
                self._child(self.over_cap_seconds, *turn, tool).inc(t.over_cap_seconds)
            if t.calls_without_arguments:
                self._child(self.calls_without_arguments, service, tool).inc(
                    t.calls_without_arguments
                )
            if t.calls_keyed_by_inference:
                self._child(self.calls_keyed_by_inference, service, tool).inc(
                    t.calls_keyed_by_inference
                )

    def span(self, kind: str, count: int = 1) -> None:
        self._child(self.spans, kind).inc(count)

    def dropped(self, reason: str) -> None:
        self._child(self.spans_dropped, reason).inc()

    def evicted(self, reason: str) -> None:
        self._child(self.turns_evicted, reason).inc()

    def late(self) -> None:
        self.late_spans.inc()

    def open_turns(self, count: int) -> None:
        self.open_turns_gauge.set(count)


# For the exposition's bound: a family with closed labels only has at most this many series;
# a closed label value, a sample value and an exemplar at most this many bytes; HELP and TYPE.
_CLOSED_SERIES = 32
_CLOSED_CHARS = {"metric": 64}  # a family name in series_overflow; other closed values: 32
_VALUE_BYTES = 32
_EXEMPLAR_BYTES = 100
_HEADER_BYTES = 600


def _budgeted(family: Any) -> bool:
    return any(label in OPEN_LABELS for label in family._labelnames)


def _family_name(family: Any) -> str:
    """The name as queried: counters with their ``_total``."""
    name: str = family._name
    return f"{name}_total" if family._type == "counter" else name


def _overflow_labels(family: Any, labels: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(
        OTHER if name in OPEN_LABELS else value
        for name, value in zip(family._labelnames, labels, strict=True)
    )


_shared: weakref.WeakKeyDictionary[CollectorRegistry, LoopwatchMetrics] = (
    weakref.WeakKeyDictionary()
)
_shared_lock = threading.Lock()


def metrics_for(
    registry: CollectorRegistry | None = None,
    label_limit: int = 200,
    series_limit: int = SERIES_LIMIT,
    label_chars: int = LABEL_CHARS,
) -> LoopwatchMetrics:
    """The one LoopwatchMetrics of a registry: a second processor on the same registry shares it
    (registering the metrics twice would raise into the host)."""
    r = REGISTRY if registry is None else registry
    with _shared_lock:
        metrics = _shared.get(r)
        if metrics is None:
            metrics = _shared[r] = LoopwatchMetrics(r, label_limit, series_limit, label_chars)
        return metrics


__all__ = ["NO_ROWS", "LoopwatchMetrics", "metrics_for"]
