"""The Prometheus side: turn summaries and self-health into ``prometheus_client`` metrics."""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, Info

from loopwatch.core.assembler import DROP_REASONS, EVICT_REASONS
from loopwatch.core.records import SPAN_KINDS
from loopwatch.core.spans import trace_hex
from loopwatch.core.summary import NO_ROWS, TurnSummary
from loopwatch.version import VERSION

ATTEMPT_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 64)
STREAK_BUCKETS = (0, 1, 2, 3, 4, 6, 8, 12, 16)
OTHER = "other"
BOUNDED_LABELS = ("service", "agent", "model", "tool", "tool_version")


class _LabelBound:
    """At most ``limit`` distinct values per label; later ones become ``other`` (counted)."""

    def __init__(self, limit: int, overflow: Counter) -> None:
        self.limit = limit
        self.overflow = overflow
        self.seen: dict[str, set[str]] = {}
        self.lock = threading.Lock()

    def __call__(self, label: str, value: str) -> str:
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

    def __init__(self, registry: CollectorRegistry | None = None, label_limit: int = 200) -> None:
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
        Info("loopwatch_build", "loopwatch version.", registry=r).info({"version": VERSION})
        self._bound = _LabelBound(label_limit, self.label_overflow)
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
        self._first_seen: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def _first(self, key: tuple[str, ...]) -> bool:
        with self._lock:
            if key in self._first_seen:
                return False
            self._first_seen.add(key)
            return True

    # -- Sink ---------------------------------------------------------------------------------
    def turn(self, s: TurnSummary) -> None:
        b = self._bound
        service, agent, model = b("service", s.service), b("agent", s.agent), b("model", s.model)
        turn = (service, agent, model)
        exemplar = {"trace_id": trace_hex(s.trace_id)}
        self._child(self.turns, *turn).inc()
        now = time.time()
        if self._first(("model", *turn)):
            self._child(self.model_first_seen, *turn).set(now)
        if s.max_attempts:
            self._child(self.turn_max_attempts, *turn).observe(s.max_attempts, exemplar)
        for t in s.tools:
            tool = b("tool", t.tool)
            version = b("tool_version", t.tool_version)
            if self._first(("tool", service, tool, version)):
                self._child(self.tool_version_first_seen, service, tool, version).set(now)
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


_shared: weakref.WeakKeyDictionary[CollectorRegistry, LoopwatchMetrics] = (
    weakref.WeakKeyDictionary()
)
_shared_lock = threading.Lock()


def metrics_for(
    registry: CollectorRegistry | None = None, label_limit: int = 200
) -> LoopwatchMetrics:
    """The one LoopwatchMetrics of a registry: a second processor on the same registry shares it
    (registering the metrics twice would raise into the host)."""
    r = REGISTRY if registry is None else registry
    with _shared_lock:
        metrics = _shared.get(r)
        if metrics is None:
            metrics = _shared[r] = LoopwatchMetrics(r, label_limit)
        return metrics


__all__ = ["NO_ROWS", "LoopwatchMetrics", "metrics_for"]
