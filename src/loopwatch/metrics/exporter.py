"""The Prometheus side: turn summaries and self-health into ``prometheus_client`` metrics."""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable

from prometheus_client import REGISTRY, CollectorRegistry, Info

from loopwatch.core.config import Config
from loopwatch.core.identity import short_hash
from loopwatch.core.log_view import DETECTION_TYPES
from loopwatch.core.span_view import trace_hex
from loopwatch.core.summary import NO_ROWS, ToolSummary, TurnSummary
from loopwatch.metrics import catalog
from loopwatch.metrics.catalog import ATTEMPT_BUCKETS, OTHER, SPAN_LABELS, STREAK_BUCKETS
from loopwatch.metrics.collectors import HeldFamily
from loopwatch.metrics.exposition_bound import exposition_bound_bytes
from loopwatch.version import VERSION

BOUNDED_LABELS = SPAN_LABELS
# the defaults, read on an instance (compiled, Config's class holds no field defaults)
SERIES_LIMIT = Config().series_limit  # per family: /metrics stays under ~58 MB (exposition_bound)
LABEL_CHARS = Config().label_chars  # per label value
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

    def bounded(self, label: str, value: str) -> str:
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
    """Implements the core's Sink. One instance per registry; ``serve`` adds the families only
    ``loopwatch serve`` exports."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        label_limit: int = 200,
        series_limit: int = SERIES_LIMIT,
        label_chars: int = LABEL_CHARS,
        serve: bool = False,
    ) -> None:
        r = REGISTRY if registry is None else registry
        # One lock for every family: a turn's updates take it once, a scrape once per family.
        self._lock = threading.Lock()
        self._pid = os.getpid()  # the process the lock was made in (after_fork)
        self.series_limit = series_limit
        self.label_chars = label_chars
        self._catalog = tuple(m for m in catalog.FAMILIES if serve or not m.serve_only)
        self._families: dict[str, HeldFamily] = {}
        for spec in self._catalog:
            if spec.type == "info":
                Info(spec.family, spec.help, registry=r).info({"version": VERSION})
                continue
            family = HeldFamily(spec, self._lock, series_limit, self._series_overflowed)
            r.register(family)
            self._families[spec.name] = family
        self._bound = _LabelBound(label_limit, self._label_overflowed, label_chars)
        self._name_families()
        with self._lock:
            self._at_zero()

    def _name_families(self) -> None:
        """The families a turn or a pipeline event updates, by attribute (read once per call)."""
        f = self._families
        self.turn_max_attempts = f[catalog.TURN_MAX_ATTEMPTS.name]
        self.tool_max_attempts = f[catalog.TOOL_MAX_ATTEMPTS.name]
        self.no_rows_streak = f[catalog.NO_ROWS_STREAK.name]
        self.same_result_streak = f[catalog.SAME_RESULT_STREAK.name]
        self.failing_streak = f[catalog.FAILING_STREAK.name]
        self.turns = f[catalog.TURNS.name]
        self.loops = f[catalog.LOOPS.name]
        self.tool_calls = f[catalog.TOOL_CALLS.name]
        self.repeat_calls = f[catalog.REPEAT_CALLS.name]
        self.over_cap_seconds = f[catalog.OVER_CAP_SECONDS.name]
        self.loop_tokens = f[catalog.LOOP_TOKENS.name]
        self.guard_decisions = f[catalog.GUARD_DECISIONS_TOTAL.name]
        self.model_first_seen = f[catalog.MODEL_FIRST_SEEN.name]
        self.tool_version_first_seen = f[catalog.TOOL_VERSION_FIRST_SEEN.name]
        self.spans = f[catalog.SPANS.name]
        self.agent_detections = f[catalog.AGENT_LOOP_DETECTIONS.name]
        self.log_records_read = f[catalog.LOG_RECORDS.name]
        self.spans_dropped = f[catalog.SPANS_DROPPED.name]
        self.queue_gauge = f[catalog.QUEUE_SPANS.name]
        self.all_starts_gauge = f[catalog.ALL_STARTS_QUEUED.name]
        self.open_turns_gauge = f[catalog.OPEN_TURNS.name]
        self.turns_evicted = f[catalog.TURNS_EVICTED.name]
        self.late_spans = f[catalog.LATE_SPANS.name]
        self.label_overflow = f[catalog.LABEL_OVERFLOW.name]
        self.calls_without_arguments = f[catalog.CALLS_WITHOUT_ARGUMENTS.name]
        self.calls_keyed_by_inference = f[catalog.CALLS_KEYED_BY_INFERENCE.name]
        self.series_overflow = f[catalog.SERIES_OVERFLOW.name]

    def _at_zero(self) -> None:
        """Every self-health series at 0 from the start: "nothing arrived" is not "not wired"
        (caller holds the lock)."""
        for spec in self._catalog:
            if not spec.at_zero:
                continue
            family = self._families[spec.name]
            if not spec.labels:
                family.zero(())
            for label in spec.labels:  # one at most
                for value in spec.values[label]:
                    family.zero((value,))

    def _series_overflowed(self, name: str) -> None:
        self.series_overflow.inc((name,))

    def _label_overflowed(self, label: str) -> None:
        self.label_overflow.inc((label,))

    def exposition_bound_bytes(self) -> int:
        """An upper bound on the size of this registry's text exposition (Prometheus text or
        OpenMetrics, with exemplars) at this instance's series budget and label length
        (loopwatch.metrics.exposition_bound)."""
        return exposition_bound_bytes(self._catalog, self.series_limit, self.label_chars)

    # -- Sink ---------------------------------------------------------------------------------
    def turn(self, s: TurnSummary, first_seen: float | None = None) -> None:
        """Record a finished turn. ``first_seen``: the time first-seen gauges take for what
        this turn shows first (default: now)."""
        trace_id = trace_hex(s.trace_id)  # the exemplars' one label
        now = time.time()
        seen = now if first_seen is None else first_seen
        with self._lock:  # once per turn: a scrape sees every series of a turn whole
            # (called on the instance, not bound to a local first: compiled, a C call, and through
            # a bound method a Python call)
            bound = self._bound
            turn = (
                bound.bounded("service", s.service),
                bound.bounded("agent", s.agent),
                bound.bounded("model", s.model),
            )
            self.turns.inc(turn)
            self.model_first_seen.set_once(turn, seen)
            if s.max_attempts:
                self.turn_max_attempts.observe(turn, s.max_attempts, trace_id, now)
            for t in s.tools:
                self._tool(t, turn, bound, trace_id, now, seen)

    def _tool(
        self,
        t: ToolSummary,
        turn: tuple[str, str, str],
        bound: _LabelBound,
        trace_id: str,
        now: float,
        seen: float,
    ) -> None:
        """One tool's numbers of a turn (caller holds the lock)."""
        # the label tuples written out: compiled, a starred one is built through a list
        service, agent, model = turn
        tool = bound.bounded("tool", t.tool)
        version = bound.bounded("tool_version", t.tool_version)
        self.tool_version_first_seen.set_once((service, tool, version), seen)
        for decision, n in t.guard_decisions:
            self.guard_decisions.inc((service, agent, tool, decision), n)
        if not t.max_attempts:
            return  # every call of this tool was answered by a guard
        self.tool_max_attempts.observe(
            (service, agent, model, tool, version), t.max_attempts, trace_id, now
        )
        turn_tool = (service, agent, model, tool)
        if t.no_rows_streak is not None:
            self.no_rows_streak.observe(turn_tool, t.no_rows_streak, trace_id, now)
        if t.same_result_streak is not None:
            self.same_result_streak.observe(turn_tool, t.same_result_streak, trace_id, now)
        self.failing_streak.observe(turn_tool, t.failing_streak, trace_id, now)
        for error_class, n in t.calls:
            self.tool_calls.inc((service, agent, model, tool, error_class), n)
        for error_class, n in t.repeats:
            self.repeat_calls.inc((service, agent, model, tool, error_class), n)
        for error_class, kind in t.loops:
            self.loops.inc((service, agent, model, tool, error_class, kind))
        if t.over_cap_seconds:
            self.over_cap_seconds.inc(turn_tool, t.over_cap_seconds)
        for error_class, kind, _, input_tokens, output_tokens, unsplit in t.loop_tokens:
            cell = (*turn_tool, error_class, kind)
            # every token type of a charged loop, 0 included: "no usage reported" reads as 0
            self.loop_tokens.inc((*cell, "input"), input_tokens)
            self.loop_tokens.inc((*cell, "output"), output_tokens)
            if unsplit:
                self.loop_tokens.inc((*cell, "unsplit"), unsplit)
        if t.calls_without_arguments:
            self.calls_without_arguments.inc((service, tool), t.calls_without_arguments)
        if t.calls_keyed_by_inference:
            self.calls_keyed_by_inference.inc((service, tool), t.calls_keyed_by_inference)

    def span(self, kind: str, count: int = 1) -> None:
        with self._lock:
            self.spans.inc((kind,), count)

    def log_records(self, kind: str, count: int = 1) -> None:
        with self._lock:
            self.log_records_read.inc((kind,), count)

    def agent_detection(self, service: str, source: str, kind: str) -> None:
        """One loop an agent reported itself; a type outside the known ones counts as other."""
        if kind not in DETECTION_TYPES:
            kind = catalog.OTHER
        with self._lock:
            labels = (self._bound.bounded("service", service), source, kind)
            self.agent_detections.inc(labels)

    def dropped(self, reason: str, count: int = 1) -> None:
        with self._lock:
            self.spans_dropped.inc((reason,), count)

    def evicted(self, reason: str) -> None:
        with self._lock:
            self.turns_evicted.inc((reason,))

    def late(self) -> None:
        with self._lock:
            self.late_spans.inc(())

    def loop_spans_dropped(self, reason: str, count: int = 1) -> None:
        with self._lock:
            self._families[catalog.LOOP_SPANS_DROPPED.name].inc((reason,), count)

    def malformed(self, reason: str, count: int = 1) -> None:
        with self._lock:
            self._families[catalog.MESSAGES_MALFORMED.name].inc((reason,), count)

    def open_turns(self, count: int) -> None:
        with self._lock:
            self.open_turns_gauge.set((), float(count))

    # -- QueueHealth ---------------------------------------------------------------------------
    def queued(self, count: int) -> None:
        with self._lock:
            self.queue_gauge.set((), float(count))

    def all_starts(self, on: bool) -> None:
        with self._lock:
            self.all_starts_gauge.set((), 1.0 if on else 0.0)

    def after_fork(self) -> None:
        """In a forked child (each processor on these metrics calls it; the first one acts): a
        new lock, as a thread of the parent may have held this one at the fork."""
        pid = os.getpid()
        if pid == self._pid:
            return
        self._pid = pid
        self._lock = threading.Lock()
        for family in self._families.values():
            family.lock = self._lock

    def refused(self, endpoint: str) -> None:
        """A connection to ``endpoint`` refused at its cap (``serve=True`` only)."""
        with self._lock:
            self._families[catalog.HTTP_CONNECTIONS_REFUSED.name].inc((endpoint,))


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


__all__ = [
    "ATTEMPT_BUCKETS",
    "NO_ROWS",
    "OTHER",
    "STREAK_BUCKETS",
    "LoopwatchMetrics",
    "metrics_for",
]
