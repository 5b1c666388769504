"""The in-process entry: an OpenTelemetry SDK SpanProcessor.

``on_end`` runs on the agent's thread, so it only appends the span to a bounded queue; a
daemon worker reads, assembles and exports. Nothing here raises into the host.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, Final

from mypy_extensions import mypyc_attr
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from prometheus_client import CollectorRegistry

from loopwatch.attach.read_api import service_of
from loopwatch.attach.read_fields import (
    FAST,
    StartFields,
    direct,
    end_fields,
    kept_start,
    read_start,
    resource_field,
    span_reader,
    start_fields,
    start_may_be_turn,
    start_trace,
    view_fields,
)
from loopwatch.conventions.read import is_turn_span, may_be_genai, read_span
from loopwatch.core.assembler import DROP_ERROR, DROP_QUEUE_FULL, TurnAssembler
from loopwatch.core.config import Config, load_config
from loopwatch.core.internal_errors import log_internal_error
from loopwatch.core.records import KIND_OTHER, Link, Record, kind_of
from loopwatch.core.sink import QueueGauges, Sink
from loopwatch.core.span_view import SpanView
from loopwatch.loopspans.in_process import LoopSpans
from loopwatch.metrics.catalog import LOOP_SPANS_PER_TURN_BOUND
from loopwatch.metrics.exporter import LoopwatchMetrics, metrics_for

log = logging.getLogger(__name__)

# The worker wakes once a second, or as soon as the queue holds a batch: few wakes, each on
# caches the agent has since filled, yet no span held long enough to reach the garbage
# collector's older generations (sizes measured: benchmarks/README.md, "The worker's wake").
_POLL_SECONDS = 1.0
_BATCH: Final = 512  # queued starts and ends: 512 plain spans, or about 256 spans of turns
# The worker reads a chunk of the queue into records, then hands them to the assembler, then
# publishes the turns they completed: each stage runs over many spans with its code warm, and a
# chunk's stages fit in one GIL switch interval (5 ms) most of the time.
_CHUNK: Final = 256
_SWEEP_SECONDS = 1.0
TURN_TRACES: Final = 65_536  # traces on_start follows (see _turn_traces), 5.5 MB at most


# The worker's queue holds three kinds of item, each told by its class: a finished span as
# on_end got it (ReadableSpan), a started span's fields (StartFields) and a started span of
# any other class (SpanStart). Reading a chunk of the queue turns each finished span into an
# EndRecord or a PlainEnd, which the assembler takes in queue order with the starts.
class SpanStart:
    """A started span of a class other than the one on_start reads into StartFields."""

    __slots__ = ("span",)

    def __init__(self, span: Span) -> None:
        self.span = span


class EndRecord:
    """A finished span with a GenAI marker, read into its record."""

    __slots__ = ("record", "service", "trace_id")

    def __init__(self, trace_id: int, service: str, record: Record) -> None:
        self.trace_id = trace_id
        self.service = service
        self.record = record


class PlainEnd:
    """A finished span without a GenAI marker: only its place in its trace matters."""

    __slots__ = ("parent_id", "resource", "span", "span_id", "trace_id")

    def __init__(
        self,
        trace_id: int,
        span_id: int,
        parent_id: int | None,
        resource: Resource | None,
        span: ReadableSpan,
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id
        self.resource = resource  # None when not read yet
        self.span = span


Queued = ReadableSpan | StartFields | SpanStart
Read = EndRecord | PlainEnd | StartFields | SpanStart


def span_view(span: ReadableSpan, service: str | None = None) -> SpanView:
    """An SDK span as the core reads it (``service``: its resource's, when already known)."""
    read = span_reader()
    *_, attributes, resource = read.end(span)
    return read.view(span, attributes, service_of(resource) if service is None else service)


# public: applications and tests subclass it in Python
@mypyc_attr(allow_interpreted_subclasses=True)
class LoopwatchSpanProcessor(SpanProcessor):
    """Rebuilds attempt keys from finished spans and exports loopwatch's metrics.

    ``config`` defaults to :func:`loopwatch.load_config`; metrics go to ``registry`` (default:
    prometheus_client's global registry) unless ``sink`` is given. ``max_turn_traces``: how
    many traces with an agent span ``on_start`` follows before it queues every start.
    Loop spans go through ``tracer_provider`` (default: the global one), their log events (when
    switched on) through ``logger_provider`` (default: the global one).
    """

    def __init__(
        self,
        config: Config | None = None,
        registry: CollectorRegistry | None = None,
        sink: Sink | None = None,
        *,
        max_turn_traces: int = TURN_TRACES,
        tracer_provider: Any = None,
        logger_provider: Any = None,
    ) -> None:
        self.config = config if config is not None else load_config()
        self.sink: Sink = (
            sink
            if sink is not None
            else metrics_for(
                registry,
                label_limit=self.config.label_limit,
                series_limit=self.config.series_limit,
                label_chars=self.config.label_chars,
            )
        )
        self._assembler = TurnAssembler(self.config, self.sink)
        # the loop spans, held by the assembler (which calls them) and not here: run as Python,
        # past 30 attributes every read of one on self costs more
        if self.config.loop_spans_per_turn:
            self._assembler.loop_spans = LoopSpans(
                tracer_provider,
                self._unmarked,
                events=bool(self.config.loop_events),
                logger_provider=logger_provider,
            )
        # the queue's gauges, where the sink has them (LoopwatchMetrics does). (One attribute
        # for them: run as Python, past 30 attributes every read of one on self costs more.)
        self._gauges = QueueGauges(self.sink)
        # the SDK's span fields where they are as expected (checked once a process), else the
        # public API (read_fields); each read one attribute away, as the worker calls them per span
        read = span_reader()
        self._span_start, self._span_end, self._span_times, self._span_view = read
        # the field reader called directly: compiled, a C call (through the attributes, a call
        # of a Python object, with its arguments parsed)
        self._fields = read is FAST
        # the class whose starts on_start reads into StartFields, where the field reader is
        # used: the first started span's, the SDK's in an agent (an identity test per start,
        # not a lookup); any other class's start is queued as a SpanStart
        self._start_class: type | None = None
        self._end_class: type | None = None  # the same for ends (_ended)
        self._queue: deque[Queued] = deque()
        # bound once: compiled, queue.append looks the method up at every call
        self._append: Callable[[Queued], None] = self._queue.append
        # Ids of the traces in which a span that may be a turn span has started, until the
        # worker takes their local root's end: on_start queues every start in them, and in no
        # other trace (the worker would only test such a start, as on_start just did; a plain
        # web span's start and end cost the worker as much as BatchSpanProcessor's whole
        # export). A trace id, not the spans': one lookup a start, none at the end, on the
        # agent's thread. A dict as an ordered set, oldest first. Once a second the worker
        # drops those the assembler no longer holds (roots that never end, or whose end was
        # dropped, are evicted there) and adds those it holds with a turn span started while
        # every start was queued. At max_turn_traces on_start queues every start, until the
        # worker finds the set below its bound again. (The assembler's open traces cannot serve:
        # they are the worker's, and a trace is followed before the worker has taken its start.)
        self._turn_traces: dict[int, None] = {}
        self._trace_bound = max_turn_traces
        self._every_start = False
        self._limit = self.config.queue_spans  # 0 once shut down: nothing more is queued
        self._open = True  # False once shut down: a span the queue cannot take is not counted
        self._batch = min(_BATCH, self._limit // 2)
        # one entry per span dropped at the queue bound; deque.append is atomic under the GIL
        self._queue_drops: deque[None] = deque()
        self._wake = threading.Event()
        self._stopped = False
        self._lock = threading.Lock()  # held while the worker processes a batch
        # Starts, ends and drops taken off their queues by finished drains. Under the lock none
        # is being taken, so this plus what is queued counts everything handed over so far: the
        # mark force_flush waits for. Counted per chunk by the worker, never in on_end.
        self._processed = 0
        self._drained = threading.Condition(self._lock)
        self._worker: threading.Thread | None = None
        # the last resource and its service (_service_of): spans of one provider share it
        self._resource: tuple[Resource | None, str] | None = None
        # os.register_at_fork keeps a hook for good: it holds only a weak reference to this
        # partial, which only the processor holds, so a processor no one else holds is
        # collected (a weak reference to the processor itself is unsafe compiled: mypyc's
        # classes do not clear theirs when freed)
        self._reset_in_child: Callable[[], None] = partial(_after_fork, self)
        self._start_worker()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(
                after_in_child=partial(_in_child, weakref.ref(self._reset_in_child))
            )

    # -- the agent's thread -------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Called by the SDK as a span starts, on the agent's thread: queues the start's fields
        in a trace that may hold a turn. Never blocks, never raises."""
        # Starts only tell an outermost agent span when it ends (the worker decides). On a full
        # queue one is skipped uncounted: its span is counted at its end, read or dropped, and
        # its turn is still finalized when the root ends.
        queued = len(self._queue)
        if queued < self._limit:  # never once shut down
            cls = type(span)
            if self._start_class is None and self._fields and direct(cls):
                self._start_class = cls  # learned at the first start: the SDK's span class
            start: StartFields | SpanStart
            follow: int | None = None
            if cls is self._start_class:
                # its fields, not the span: a started Span held until the worker runs outlives
                # its end, and the garbage collector meets it
                try:
                    start = kept_start(span)
                    trace_id = start_trace(start)
                    if not self._every_start and trace_id not in self._turn_traces:
                        if not start_may_be_turn(start):
                            return  # in a trace without turn spans so far: it tells nothing
                        follow = trace_id
                except Exception:  # a subclass that lacks a field, or an odd one
                    start = SpanStart(span)
            else:
                start = SpanStart(span)
            self._append(start)
            if follow is not None:
                # after the append: a trace the worker finds followed has its start queued
                self._follow(follow)
            if queued == self._batch:
                self._wake.set()

    def _follow(self, trace_id: int) -> None:
        """on_start's: a trace that may hold a turn, followed from now on if the set has room."""
        traces = self._turn_traces
        if len(traces) < self._trace_bound:
            traces[trace_id] = None
        else:
            self._every_start = True

    def on_end(self, span: ReadableSpan) -> None:
        """Called by the SDK as a span ends: queues it for the worker (a full queue drops it
        and counts it). Never blocks, never raises."""
        queued = len(self._queue)
        if queued < self._limit:  # never once shut down
            self._append(span)
            if queued == self._batch:
                self._wake.set()
        elif self._open:
            self._queue_drops.append(None)

    def shutdown(self) -> None:
        """Reads what is queued, finalizes the open turns, logs the summary line and stops the
        worker; nothing is queued after it."""
        if self._stopped:
            return
        # as BatchSpanProcessor: from now on on_start and on_end return at once
        self._limit = 0
        self._open = False
        self.force_flush()
        self._stopped = True
        self._wake.set()
        if self._worker is not None:
            self._worker.join(timeout=5)
        with self._lock:
            self._safe(self._assembler.finalize_all)
            _own_spans(self._assembler).clear()  # the queue took none of the last loop spans
            self._safe(self.sink.open_turns, self._assembler.open_turns)
            self._turn_traces.clear()
            self._every_start = False
            self._show_queue(len(self._queue))
            self._show_every_start()
            # what a program that has exited leaves to read: its /metrics are gone with it
            self._safe(_log_tally, self._assembler)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait until every span handed to ``on_end`` so far has been processed."""
        if self._stopped:
            return True
        timeout = timeout_millis / 1000
        deadline = time.monotonic() + timeout
        if not self._lock.acquire(timeout=timeout):  # the worker is inside a long batch
            return False
        try:
            mark = self._processed + len(self._queue) + len(self._queue_drops)
            if self._processed >= mark:
                return True
            self._wake.set()
            return self._drained.wait_for(
                lambda: self._processed >= mark, deadline - time.monotonic()
            )
        finally:
            self._lock.release()

    # -- the worker -----------------------------------------------------------------------------
    def _start_worker(self) -> None:
        self._worker = threading.Thread(target=self._run, name="loopwatch", daemon=True)
        self._worker.start()

    def _after_fork(self) -> None:
        """In a forked child: what was queued, followed and open is the parent's (its turns
        are the parent's to count), and the parent's worker did not come along."""
        # the parent's worker may have held any of these at the fork (on_end sets _wake)
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._wake = threading.Event()
        if isinstance(self.sink, LoopwatchMetrics):
            self.sink.after_fork()
        self._queue.clear()
        self._queue_drops.clear()
        self._processed = 0
        self._turn_traces.clear()
        self._every_start = False
        loop_spans = self._assembler.loop_spans
        self._assembler = TurnAssembler(self.config, self.sink, self._assembler.clock)
        self._assembler.loop_spans = loop_spans
        _own_spans(self._assembler).clear()
        if self._stopped or not self._open:
            return
        self._safe(self.sink.open_turns, 0)
        self._show_queue(0)
        self._show_every_start()
        self._start_worker()

    def _unmarked(self, count: int) -> None:
        """Loops of one turn past its loop spans' bound, counted where the sink counts them."""
        dropped = getattr(self.sink, "loop_spans_dropped", None)
        if dropped is not None:
            dropped(LOOP_SPANS_PER_TURN_BOUND, count)

    def _safe(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log_internal_error(log, "worker")
            with contextlib.suppress(Exception):
                self.sink.dropped(DROP_ERROR)

    def _run(self) -> None:
        next_sweep = 0.0
        clock = self._assembler.clock
        while not self._stopped:
            self._wake.wait(_POLL_SECONDS)
            self._wake.clear()
            with self._lock:
                sweep = clock() >= next_sweep
                # the traces followed before this drain (their starts are queued: on_start
                # follows a trace after queueing its start), for _refollow once it has run
                followed = list(self._turn_traces) if sweep and self._turn_traces else []
                self._drain()
                self._drained.notify_all()
                if sweep:
                    self._safe(self._assembler.sweep)
                    self._safe(self.sink.open_turns, self._assembler.open_turns)
                    self._safe(self._refollow, followed)
                    next_sweep = clock() + _SWEEP_SECONDS
        with self._lock:
            self._drain()
            self._drained.notify_all()

    def _refollow(self, followed: list[int]) -> None:
        """The set of followed traces back to what on_start needs (see _turn_traces): of
        ``followed``, whose starts the worker has taken, those the assembler no longer holds
        leave; the turns it holds that are not followed (started while every start was queued)
        join; every start is queued only while that fills the set."""
        traces = self._turn_traces
        assembler = self._assembler
        for trace_id in followed:
            if not assembler.holds(trace_id):
                traces.pop(trace_id, None)
        bound = self._trace_bound
        for trace_id in assembler.turn_traces():
            if len(traces) >= bound:
                break
            if trace_id not in traces:
                traces[trace_id] = None
        if self._every_start and len(traces) < bound:
            self._every_start = False
        self._show_every_start()

    def _show_queue(self, queued: int) -> None:
        self._safe(self._gauges.show_queued, queued)

    def _show_every_start(self) -> None:
        self._safe(self._gauges.show_all_starts, self._every_start)

    def _started(self, item: StartFields | SpanStart) -> None:
        if isinstance(item, StartFields):
            trace_id, span_id, parent_id, name, attributes = start_fields(item)
        elif self._fields:
            trace_id, span_id, parent_id, name, attributes = read_start(item.span)
        else:
            trace_id, span_id, parent_id, name, attributes = self._span_start(item.span)
        if not (trace_id or span_id):
            return  # not a span of a trace
        # inside a turn already: whether it is a turn span itself does not matter (most starts);
        # a local root is inside none
        if parent_id is not None and self._assembler.started_inside(trace_id, span_id, parent_id):
            return
        if may_be_genai(name, attributes, ended=False) and is_turn_span(name, attributes):
            self._assembler.span_started(trace_id, span_id, parent_id, True)

    def _service_of(self, resource: Resource | None) -> str:
        last = self._resource
        if last is None or last[0] is not resource:
            last = self._resource = (resource, service_of(resource))
        return last[1]

    def _ended(self, span: ReadableSpan) -> EndRecord | PlainEnd:
        """One finished span, read in two steps, each followed by the conventions: its ids,
        name and attributes, which tell a GenAI span from a plain one; then, for a GenAI span
        only, the whole span, read into its record."""
        cls = type(span)
        # the SDK's class, checked once, is read with no test per span, and its resource only
        # when needed (most plain spans need nothing); any other class, or the public API,
        # through the reader, which checks each span
        known = cls is self._end_class
        resource: Resource | None
        if known:
            trace_id, span_id, parent_id, name, attributes = end_fields(span)
            resource = None
        else:
            if self._end_class is None and self._fields and direct(cls):
                self._end_class = cls  # learned at the first end: the SDK's ReadableSpan
            trace_id, span_id, parent_id, name, attributes, resource = self._span_end(span)
        if not may_be_genai(name, attributes):
            return PlainEnd(trace_id, span_id, parent_id, resource, span)
        if known:
            resource = resource_field(span)
        service = self._service_of(resource)
        if known:
            view = view_fields(span, attributes, service)
        else:
            view = self._span_view(span, attributes, service)
        return EndRecord(trace_id, service, read_span(view, self.config))

    def _plain(self, item: PlainEnd) -> None:
        """Only a plain span's place in the trace matters, and only when a kept span hangs under
        it or it ends a trace. Most plain spans (a web app's) are neither, and get no record."""
        trace_id, span_id, parent_id = item.trace_id, item.span_id, item.parent_id
        if self._assembler.needs_link(trace_id, span_id, parent_id):
            span = item.span
            start, end = self._span_times(span)
            link = Link(span_id, parent_id, start, end)
            resource = item.resource
            if resource is None:
                resource = span.resource
            self._assembler.add(trace_id, self._service_of(resource), link)

    def _drain(self) -> None:
        queue = self._queue
        self._show_queue(len(queue))
        if not queue and not self._queue_drops:
            return
        counts: dict[str, int] = {}
        taken = 0
        while queue:
            taken += self._drain_chunk(queue, counts)
        # counted once per batch: a metric update per span costs as much as reading it
        for kind, count in counts.items():
            self._safe(self.sink.span, kind, count)
        self._safe(self.sink.open_turns, self._assembler.open_turns)
        drops = self._queue_drops
        while drops:
            drops.popleft()
            taken += 1
            self._safe(self.sink.dropped, DROP_QUEUE_FULL)
        self._show_every_start()  # on_start may have turned it on
        self._processed += taken
        own = _own_spans(self._assembler)
        if own:  # own spans the queue never took (full, or shut down): not coming
            own.clear()

    def _drain_chunk(self, queue: deque[Queued], counts: dict[str, int]) -> int:
        """Process up to a chunk of the queue; how many items it took."""
        # 1. ends read into records (starts stay as they are, in their place)
        # (methods called on self, not bound to locals first: compiled, a bound method is a
        # Python object and each call through it a Python call; deque's popleft is the
        # other way round: bound once, each call skips looking the method up)
        items: list[Read] = []
        taken = min(len(queue), _CHUNK)
        popleft = queue.popleft
        own = _own_spans(self._assembler)  # empty unless a loop span ended since the last chunk
        for _ in range(taken):
            item = popleft()
            if isinstance(item, (StartFields, SpanStart)):
                items.append(item)
                continue
            if own and item.context.span_id in own:  # loopwatch's own loop span: never read
                own.discard(item.context.span_id)
                continue
            try:
                items.append(self._ended(item))
            except Exception:
                log_internal_error(log, "reading a span")
                self._safe(self.sink.dropped, DROP_ERROR)
        # 2. starts and records to the assembler, in the order they happened
        assembler = self._assembler
        turn_traces = self._turn_traces  # a local root's end lets its trace go (on_start)
        plain = 0  # counted here, not in counts: most spans of a web app are plain
        for read in items:
            try:
                if isinstance(read, PlainEnd):
                    if read.parent_id is None and turn_traces:
                        turn_traces.pop(read.trace_id, None)
                    self._plain(read)
                    plain += 1
                elif isinstance(read, EndRecord):
                    record = read.record
                    if record.parent_id is None and turn_traces:
                        turn_traces.pop(read.trace_id, None)
                    assembler.add(read.trace_id, read.service, record)
                    kind = kind_of(record)
                    counts[kind] = counts.get(kind, 0) + 1
                else:
                    self._started(read)
            except Exception:
                log_internal_error(log, "reading a span")
                self._safe(self.sink.dropped, DROP_ERROR)
        if plain:
            counts[KIND_OTHER] = counts.get(KIND_OTHER, 0) + plain
        # 3. the turns they completed to the sink
        self._safe(self._assembler.publish)
        return taken


_NO_SPANS: Final[set[int]] = set()  # never added to


def _own_spans(assembler: TurnAssembler) -> set[int]:
    """The ids of loopwatch's own loop spans ended and not yet taken off the queue (the worker
    leaves them unread, so they change no number); an empty set without loop spans."""
    loop_spans = assembler.loop_spans
    return loop_spans.own if isinstance(loop_spans, LoopSpans) else _NO_SPANS


def _log_tally(assembler: TurnAssembler) -> None:
    log.info("shut down: %s", assembler.tally.line())


def _after_fork(processor: LoopwatchSpanProcessor) -> None:
    processor._after_fork()


def _in_child(reset: weakref.ref[Callable[[], None]]) -> None:
    """One processor's hook after a fork, in the child (while the processor lives)."""
    after_fork = reset()
    if after_fork is not None:
        try:
            after_fork()
        except Exception:
            log_internal_error(log, "after a fork")
