"""The Prometheus side: turn summaries and self-health into ``prometheus_client`` metrics."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Sequence

from prometheus_client import REGISTRY, CollectorRegistry, Info

from loopwatch.core.assembler import DROP_REASONS, EVICT_REASONS
from loopwatch.core.config import Config
from loopwatch.core.identity import short_hash
from loopwatch.core.outcomes import ERROR_CLASSES
from loopwatch.core.records import GUARD_DECISIONS, SPAN_KINDS
from loopwatch.core.spans import trace_hex
from loopwatch.core.summary import NO_ROWS, TurnSummary
from loopwatch.families import Family, Series
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
    become ``other``, counted by ``overflow(label)``. Callers hold the metrics' lock."""

    def __init__(self, limit: int, overflow: Callable[[str], None], max_chars: int) -> None:
        self.limit = limit
        self.overflow = overflow
        self.max_chars = max_chars
        self.seen: dict[str, set[str]] = {label: set() for label in BOUNDED_LABELS}

    def __call__(self, label: str, value: str) -> str:
        values = self.seen[label]
        if value in values:  # a value seen before is already cut: skip hashing it again
            return value
        value = bounded_value(value, self.max_chars)
        if value in values:
            return value
        if len(values) < self.limit:
            values.add(value)
            return value
        self.overflow(label)
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
        # One lock for every family: a turn's updates take it once, a scrape once per family.
        self._lock = threading.Lock()
        self._families: list[Family] = []

        def family(
            name: str, doc: str, kind: str, labels: Sequence[str], buckets: Sequence[float] = ()
        ) -> Family:
            f = Family(name, doc, kind, labels, self._lock, buckets)
            r.register(f)
            self._families.append(f)
            return f

        turn = ["service", "agent", "model"]
        self.turn_max_attempts = family(
            "loopwatch_turn_max_attempts",
            "Max attempts over all attempt keys of one turn (one observation per turn).",
            "histogram",
            turn,
            ATTEMPT_BUCKETS,
        )
        self.tool_max_attempts = family(
            "loopwatch_tool_max_attempts",
            "Per tool used in a turn: max attempts over that tool's attempt keys.",
            "histogram",
            [*turn, "tool", "tool_version"],
            ATTEMPT_BUCKETS,
        )
        self.no_rows_streak = family(
            "loopwatch_no_rows_streak",
            "Per tool with readable results in a turn: longest run of consecutive empty results.",
            "histogram",
            [*turn, "tool"],
            STREAK_BUCKETS,
        )
        self.turns = family(
            "loopwatch_turns", "Finished turns, with or without tool calls.", "counter", turn
        )
        self.loops = family(
            "loopwatch_loops",
            "Turns in which a key of this tool and error class looped (kind repeat or no_rows).",
            "counter",
            [*turn, "tool", "error_class", "kind"],
        )
        self.tool_calls = family(
            "loopwatch_tool_calls",
            "Tool calls (error_class ok on success).",
            "counter",
            [*turn, "tool", "error_class"],
        )
        self.repeat_calls = family(
            "loopwatch_repeat_calls",
            "Tool calls past the first of their attempt key: the duplicates.",
            "counter",
            [*turn, "tool", "error_class"],
        )
        self.over_cap_seconds = family(
            "loopwatch_over_cap_seconds",
            "Wall time of calls past the loop threshold: what a loop breaker would have saved.",
            "counter",
            [*turn, "tool"],
        )
        self.guard_decisions = family(
            "loopwatch_guard_decisions",
            "Tool calls a loopwatch guard answered without executing, by decision.",
            "counter",
            ["service", "agent", "tool", "decision"],
        )
        self.model_first_seen = family(
            "loopwatch_model_first_seen_timestamp_seconds",
            "When this process first saw a turn of this model.",
            "gauge",
            turn,
        )
        self.tool_version_first_seen = family(
            "loopwatch_tool_version_first_seen_timestamp_seconds",
            "When this process first saw this tool version (hash of its description).",
            "gauge",
            ["service", "tool", "tool_version"],
        )
        self.spans = family(
            "loopwatch_spans", "Spans read, by kind (tool, agent, llm, other).", "counter", ["kind"]
        )
        self.spans_dropped = family(
            "loopwatch_spans_dropped", "Spans not used, by reason.", "counter", ["reason"]
        )
        self.open_turns_gauge = family(
            "loopwatch_open_turns", "Traces buffered, waiting for their turn to end.", "gauge", []
        )
        self.turns_evicted = family(
            "loopwatch_turns_evicted",
            "Turns finalized before their root span ended, by reason (idle, capacity, shutdown).",
            "counter",
            ["reason"],
        )
        self.late_spans = family(
            "loopwatch_late_spans",
            "Spans that arrived for a turn already finalized.",
            "counter",
            [],
        )
        self.label_overflow = family(
            "loopwatch_label_overflow",
            "Label values replaced by 'other' because the label reached its bound.",
            "counter",
            ["label"],
        )
        self.calls_without_arguments = family(
            "loopwatch_calls_without_arguments",
            "Tool calls whose arguments were not captured (keyed by tool and error class only).",
            "counter",
            ["service", "tool"],
        )
        self.calls_keyed_by_inference = family(
            "loopwatch_calls_keyed_by_inference",
            "Failed calls of tools with no identity declaration, keyed on their arguments minus "
            "free text.",
            "counter",
            ["service", "tool"],
        )
        self.series_overflow = family(
            "loopwatch_series_overflow",
            "Observations recorded in a family's overflow series (span-derived labels 'other') "
            "because the family reached its series budget.",
            "counter",
            ["metric"],
        )
        Info("loopwatch_build", "loopwatch version.", registry=r).info({"version": VERSION})
        self._bound = _LabelBound(label_limit, self._label_overflowed, label_chars)
        self.series_limit = series_limit
        self.label_chars = label_chars
        self._admitted: dict[str, int] = {}  # family -> series admitted under the budget
        # every self-health series at 0 from the start: "nothing arrived" is not "not wired"
        with self._lock:
            for f, values in (
                (self.spans, SPAN_KINDS),
                (self.spans_dropped, DROP_REASONS),
                (self.turns_evicted, EVICT_REASONS),
                (self.label_overflow, BOUNDED_LABELS),
            ):
                for value in values:
                    self._series(f, (value,))
            for f in (self.open_turns_gauge, self.late_spans):
                self._series(f, ())
            for f in self._families:
                if _budgeted(f):
                    self._series(self.series_overflow, (_family_name(f),))  # at 0 from the start

    def _series(self, family: Family, labels: tuple[str, ...]) -> Series:
        """The series of ``labels``, created at 0 when new; past the family's series budget, its
        overflow series (caller holds the lock)."""
        series = family.series.get(labels)
        if series is not None:
            return series
        if _budgeted(family):
            name = _family_name(family)
            admitted = self._admitted.get(name, 0)
            if admitted < self.series_limit:
                self._admitted[name] = admitted + 1
            else:
                # past the budget: the overflow series, whose span-derived labels are all
                # 'other' (closed vocabularies such as error_class stay as they are)
                self._add(self.series_overflow, (name,), 1)
                labels = _overflow_labels(family, labels)
                series = family.series.get(labels)
                if series is not None:
                    return series
        return family.add(labels, time.time())

    def _add(self, counter: Family, labels: tuple[str, ...], amount: float) -> None:
        """Add to a counter (caller holds the lock)."""
        self._series(counter, labels).values[0] += amount

    def _label_overflowed(self, label: str) -> None:
        self._add(self.label_overflow, (label,), 1)

    def exposition_bound_bytes(self) -> int:
        """An upper bound on the size of this registry's text exposition (Prometheus text or
        OpenMetrics, with exemplars) at this instance's series budget and label length.

        Per family: budget + overflow series, times lines per series (a histogram's buckets,
        +Inf, sum, count and created; a counter's total and created; a gauge's one line),
        times the longest line (every span-derived label at 4 bytes per character, the most
        UTF-8 takes; an exemplar's trace id and timestamp). A family with closed labels only
        (self-health) is counted at _CLOSED_SERIES series."""
        total = 0
        for family in self._families:
            name = _family_name(family)
            names = family.labelnames
            lines = {"counter": 2, "gauge": 1, "histogram": len(family.upper_bounds) + 3}
            per_series = lines[family.type]
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
        trace_id = trace_hex(s.trace_id)  # the exemplars' one label
        now = time.time()
        # A turn updates a dozen series, most of them existing already: each is looked up
        # here and created through _series only when new (a Python call less per update).
        new = self._series
        with self._lock:  # once per turn: a scrape sees every series of a turn whole
            b = self._bound.__call__  # a bound method calls faster than the instance
            turn = (b("service", s.service), b("agent", s.agent), b("model", s.model))
            service, agent, _ = turn
            f = self.turns
            (f.series.get(turn) or new(f, turn)).values[0] += 1
            f = self.model_first_seen
            series = f.series.get(turn) or new(f, turn)
            if not series.values[0]:  # first-seen: 0 until set, a clock time is never 0
                series.values[0] = now
            if s.max_attempts:
                f = self.turn_max_attempts
                f.observe(f.series.get(turn) or new(f, turn), s.max_attempts, trace_id, now)
            for t in s.tools:
                tool = b("tool", t.tool)
                version = b("tool_version", t.tool_version)
                f = self.tool_version_first_seen
                labels: tuple[str, ...] = (service, tool, version)
                series = f.series.get(labels) or new(f, labels)
                if not series.values[0]:
                    series.values[0] = now
                for decision, n in t.guard_decisions:
                    f = self.guard_decisions
                    labels = (service, agent, tool, decision)
                    (f.series.get(labels) or new(f, labels)).values[0] += n
                if not t.max_attempts:
                    continue  # every call of this tool was answered by a guard
                f = self.tool_max_attempts
                labels = (*turn, tool, version)
                f.observe(f.series.get(labels) or new(f, labels), t.max_attempts, trace_id, now)
                turn_tool = (*turn, tool)
                if t.no_rows_streak is not None:
                    f = self.no_rows_streak
                    series = f.series.get(turn_tool) or new(f, turn_tool)
                    f.observe(series, t.no_rows_streak, trace_id, now)
                for error_class, n in t.calls:
                    f = self.tool_calls
                    labels = (*turn_tool, error_class)
                    (f.series.get(labels) or new(f, labels)).values[0] += n
                for error_class, n in t.repeats:
                    f = self.repeat_calls
                    labels = (*turn_tool, error_class)
                    (f.series.get(labels) or new(f, labels)).values[0] += n
                for error_class, kind in t.loops:
                    f = self.loops
                    labels = (*turn_tool, error_class, kind)
                    (f.series.get(labels) or new(f, labels)).values[0] += 1
                if t.over_cap_seconds:
                    f = self.over_cap_seconds
                    (f.series.get(turn_tool) or new(f, turn_tool)).values[0] += t.over_cap_seconds
                if t.calls_without_arguments:
                    f = self.calls_without_arguments
                    labels = (service, tool)
                    (f.series.get(labels) or new(f, labels)).values[0] += t.calls_without_arguments
                if t.calls_keyed_by_inference:
                    f = self.calls_keyed_by_inference
                    labels = (service, tool)
                    series = f.series.get(labels) or new(f, labels)
                    series.values[0] += t.calls_keyed_by_inference

    def span(self, kind: str, count: int = 1) -> None:
        with self._lock:
            self._add(self.spans, (kind,), count)

    def dropped(self, reason: str) -> None:
        with self._lock:
            self._add(self.spans_dropped, (reason,), 1)

    def evicted(self, reason: str) -> None:
        with self._lock:
            self._add(self.turns_evicted, (reason,), 1)

    def late(self) -> None:
        with self._lock:
            self._add(self.late_spans, (), 1)

    def open_turns(self, count: int) -> None:
        with self._lock:
            self._series(self.open_turns_gauge, ()).values[0] = float(count)


# For the exposition's bound: a family with closed labels only has at most this many series;
# a closed label value, a sample value and an exemplar at most this many bytes; HELP and TYPE.
_CLOSED_SERIES = 32
_CLOSED_CHARS = {"metric": 64}  # a family name in series_overflow; other closed values: 32
_VALUE_BYTES = 32
_EXEMPLAR_BYTES = 100
_HEADER_BYTES = 600


def _budgeted(family: Family) -> bool:
    return any(label in OPEN_LABELS for label in family.labelnames)


def _family_name(family: Family) -> str:
    """The name as queried: counters with their ``_total``."""
    return f"{family.name}_total" if family.type == "counter" else family.name


def _overflow_labels(family: Family, labels: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(
        OTHER if name in OPEN_LABELS else value
        for name, value in zip(family.labelnames, labels, strict=True)
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
