"""The in-process entry: an OpenTelemetry SDK SpanProcessor, a facade over the shared worker
(``loopwatch.core.worker``).

``on_end`` runs on the agent's thread, so it only puts the span on the worker's bounded queue;
the worker's round reads, assembles and exports. Nothing here raises into the host.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Final

from mypy_extensions import mypyc_attr
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from prometheus_client import CollectorRegistry

from loopwatch.attach.followed import FollowedTraces
from loopwatch.attach.queued import EndRecord, PlainEnd, Queued, QueuedReader, ReadItem, SpanStart
from loopwatch.attach.read_api import SpanReader
from loopwatch.attach.read_fields import StartFields, kept_start, start_may_be_turn, start_trace
from loopwatch.conventions.read import is_turn_span, may_be_genai
from loopwatch.core.assembler import DROP_ERROR, DROP_QUEUE_FULL, TurnAssembler
from loopwatch.core.config import Config, load_config
from loopwatch.core.internal_errors import log_internal_error
from loopwatch.core.records import KIND_OTHER, Link, kind_of
from loopwatch.core.sink import QueueGauges, Sink
from loopwatch.core.worker import Worker
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
# ids of loopwatch's own loop spans kept while the queue never empties (a flood): past it they
# are forgotten, and one still queued is read as a plain span
_OWN_SPANS_KEPT: Final = 4096
TURN_TRACES: Final = 65_536  # traces on_start follows (see _turn_traces), 5.5 MB at most


# public: applications and tests subclass it in Python
@mypyc_attr(allow_interpreted_subclasses=True)
class LoopwatchSpanProcessor(SpanProcessor):
    """Rebuilds attempt keys from finished spans and exports loopwatch's metrics.

    ``config`` defaults to :func:`loopwatch.load_config`; metrics go to ``registry`` (default:
    prometheus_client's global registry) unless ``sink`` is given. ``max_turn_traces``: how
    many traces with an agent span ``on_start`` follows before it queues every start.
    Loop spans go through ``tracer_provider`` (default: the global one), their log events (when
    switched on) through ``logger_provider`` (default: the global one). ``span_reader``: how
    spans are read (default: from the SDK's fields where a check of the installed SDK passes,
    else ``loopwatch.attach.read_api.PUBLIC``, the public API, which tests pass to compare).
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
        span_reader: SpanReader | None = None,
    ) -> None:
        self.config = config = config if config is not None else load_config()
        self.sink: Sink = sink if sink is not None else _metrics(config, registry)
        self._assembler = TurnAssembler(config, self.sink)
        # the loop spans, held by the assembler (which calls them) and not here: run as Python,
        # past 30 attributes every read of one on self costs more
        if config.loop_spans_per_turn:
            self._assembler.loop_spans = LoopSpans(
                tracer_provider,
                self._unmarked,
                events=bool(config.loop_events),
                logger_provider=logger_provider,
            )
        # the queue's gauges, where the sink has them (LoopwatchMetrics does)
        self._gauges = QueueGauges(self.sink)
        self._reader = QueuedReader(config, span_reader)
        # the traces on_start follows (attach/followed.py); their dict one attribute away
        self._followed = FollowedTraces(max_turn_traces)
        self._turn_traces = self._followed.traces
        self._next_sweep = 0.0
        # the shared worker: its queue holds starts and ends, its state is the shutdown's
        self.worker: Worker[Queued] = Worker(
            self._round,
            limit=config.queue_spans,
            wake_at=min(_BATCH, config.queue_spans // 2),
            poll=_POLL_SECONDS,
            name="loopwatch",
            log=log,
            where="worker",
            count_drops=True,
            on_stop=self._stopped,
            on_fork=self._after_fork,
            on_error=partial(self.sink.dropped, DROP_ERROR),
        )
        """The worker that drains the queue: tests hold it (``held``) and step it (``step``)."""
        self.worker.start()

    # -- the agent's thread -------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Called by the SDK as a span starts, on the agent's thread: queues the start's fields
        in a trace that may hold a turn. Never blocks, never raises."""
        # Starts only tell an outermost agent span when it ends (the worker decides). On a full
        # queue, or once shut down, put refuses one uncounted: its span is counted at its end,
        # read or dropped, and its turn is still finalized when the root ends.
        start: StartFields | SpanStart
        follow: int | None = None
        cls, reader = type(span), self._reader
        if reader.start_class is None:
            reader.reads_starts_of(cls)  # learned at the first start
        if cls is reader.start_class:
            # its fields, not the span: a started Span held until the worker runs outlives
            # its end, and the garbage collector meets it
            try:
                start = kept_start(span)
                trace_id = start_trace(start)
                if not self._followed.every and trace_id not in self._turn_traces:
                    if not start_may_be_turn(start):
                        return  # in a trace without turn spans so far: it tells nothing
                    follow = trace_id
            except Exception:  # a subclass that lacks a field, or an odd one
                start = SpanStart(span)
        else:
            start = SpanStart(span)
        # after the put: a trace the worker finds followed has its start queued
        if self.worker.put(start, False) and follow is not None:
            self._followed.follow(follow)

    def on_end(self, span: ReadableSpan) -> None:
        """Called by the SDK as a span ends: queues it for the worker (a full queue drops it
        and counts it). Never blocks, never raises."""
        # through the typed attribute: compiled, a native call (a bound method kept on self
        # would be a Python object, each call through it a Python call)
        self.worker.put(span)

    def shutdown(self) -> None:
        """Reads what is queued, finalizes the open turns, logs the summary line and stops the
        worker; nothing is queued after it."""
        # as BatchSpanProcessor: from now on on_start and on_end queue nothing
        self.worker.shutdown(timeout=35.0)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait until every span handed to ``on_end`` so far has been processed."""
        return self.worker.flush(timeout_millis / 1000)

    @property
    def span_reader(self) -> SpanReader:
        """How this processor reads spans (see the class's ``span_reader``)."""
        return self._reader.read

    @property
    def followed_traces(self) -> list[int]:
        """The ids of the traces on_start follows now, oldest first (``max_turn_traces`` at
        most): it queues every start in them, and only in them while it is not full."""
        return list(self._turn_traces)

    @property
    def queues_every_start(self) -> bool:
        """Whether on_start queues every start (its set of traces was full)."""
        return self._followed.every

    @property
    def open_turns(self) -> int:
        """Turns the worker holds open (as the worker last left them)."""
        return self._assembler.open_turns

    # -- the worker's side ----------------------------------------------------------------------
    def _stopped(self) -> None:
        """After the last round: the open turns finalized, the summary line logged."""
        safe, assembler = self.worker.safe, self._assembler
        safe(assembler.finalize_all)
        _own_spans(assembler).clear()  # the queue took none of the last loop spans
        safe(self.sink.open_turns, assembler.open_turns)
        self._followed.clear()
        self._show_queue(self.worker.queued)
        self._show_every_start()
        # what a program that has exited leaves to read: its /metrics are gone with it
        safe(_log_tally, assembler)

    def _after_fork(self) -> None:
        """In a forked child: what was followed and open is the parent's (its turns are the
        parent's to count); the worker has emptied its queue."""
        if isinstance(self.sink, LoopwatchMetrics):
            self.sink.after_fork()
        self._followed.clear()
        loop_spans = self._assembler.loop_spans
        self._assembler = TurnAssembler(self.config, self.sink, self._assembler.clock)
        self._assembler.loop_spans = loop_spans
        _own_spans(self._assembler).clear()
        if self.worker.is_open:
            self.worker.safe(self.sink.open_turns, 0)
            self._show_queue(0)
            self._show_every_start()

    def _unmarked(self, count: int) -> None:
        """Loops of one turn past its loop spans' bound, counted where the sink counts them."""
        dropped = getattr(self.sink, "loop_spans_dropped", None)
        if dropped is not None:
            dropped(LOOP_SPANS_PER_TURN_BOUND, count)

    def _round(self) -> int:
        """One round of the worker: what is queued, then, once a second, the sweep."""
        clock = self._assembler.clock
        sweep = clock() >= self._next_sweep
        # the traces followed before this drain (their starts are queued: on_start follows a
        # trace after queueing its start), for _refollow once it has run
        followed = list(self._turn_traces) if sweep and self._turn_traces else []
        taken = self._drain()
        if sweep:
            safe = self.worker.safe
            safe(self._assembler.sweep)
            safe(self.sink.open_turns, self._assembler.open_turns)
            safe(self._refollow, followed)
            self._next_sweep = clock() + _SWEEP_SECONDS
        return taken

    def _refollow(self, followed: list[int]) -> None:
        self._followed.refollow(followed, self._assembler)
        self._show_every_start()

    def _show_queue(self, queued: int) -> None:
        self.worker.safe(self._gauges.show_queued, queued)

    def _show_every_start(self) -> None:
        self.worker.safe(self._gauges.show_all_starts, self._followed.every)

    def _started(self, item: StartFields | SpanStart) -> None:
        trace_id, span_id, parent_id, name, attributes = self._reader.started(item)
        if not (trace_id or span_id):
            return  # not a span of a trace
        # inside a turn already: whether it is a turn span itself does not matter (most starts);
        # a local root is inside none
        if parent_id is not None and self._assembler.started_inside(trace_id, span_id, parent_id):
            return
        if may_be_genai(name, attributes, ended=False) and is_turn_span(name, attributes):
            self._assembler.span_started(trace_id, span_id, parent_id, True)

    def _plain(self, item: PlainEnd) -> None:
        """Only a plain span's place in the trace matters, and only when a kept span hangs under
        it or it ends a trace. Most plain spans (a web app's) are neither, and get no record."""
        trace_id, span_id, parent_id = item.trace_id, item.span_id, item.parent_id
        if self._assembler.needs_link(trace_id, span_id, parent_id):
            start, end = self._reader.span_times(item.span)
            link = Link(span_id, parent_id, start, end)
            self._assembler.add(trace_id, self._reader.plain_service(item), link)

    def _drain(self) -> int:
        """What is queued, chunk by chunk, up to a full queue's worth; how many items and drops
        it took. Not a flood's every span: while one keeps the queue full, the counts and the
        sweep still come every round (the worker starts the next round at once)."""
        worker = self.worker
        self._show_queue(worker.queued)
        most = self.config.queue_spans
        counts: dict[str, int] = {}
        taken = 0
        while taken < most and (chunk := worker.take(min(_CHUNK, most - taken))):
            self._drain_chunk(chunk, counts)
            taken += len(chunk)
        drops = worker.take_drops()
        if not (taken or drops):
            return 0
        safe = worker.safe
        # counted once per batch: a metric update per span costs as much as reading it
        for kind, count in counts.items():
            safe(self.sink.span, kind, count)
        safe(self.sink.open_turns, self._assembler.open_turns)
        if drops:
            safe(self.sink.dropped, DROP_QUEUE_FULL, drops)
        self._show_every_start()  # on_start may have turned it on
        own = _own_spans(self._assembler)
        # own spans not taken by the time the queue is empty never entered it (full, or shut
        # down): not coming; while it holds items they may be among them (up to a bound)
        if own and (not worker.queued or len(own) > _OWN_SPANS_KEPT):
            own.clear()
        return taken + drops

    def _drain_chunk(self, chunk: list[Queued], counts: dict[str, int]) -> None:
        """One chunk of the queue: 1. ends read into records (starts stay as they are, in their
        place); 2. starts and records to the assembler, in the order they happened; 3. the turns
        they completed to the sink."""
        # (methods called on self, not bound to locals first: compiled, a bound method is a
        # Python object and each call through it a Python call)
        items: list[ReadItem] = []
        own = _own_spans(self._assembler)  # empty unless a loop span ended since the last chunk
        for item in chunk:
            if isinstance(item, (StartFields, SpanStart)):
                items.append(item)
                continue
            if own and item.context.span_id in own:  # loopwatch's own loop span: never read
                own.discard(item.context.span_id)
                continue
            try:
                items.append(self._reader.ended(item))
            except Exception:
                self._read_failed()
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
                self._read_failed()
        if plain:
            counts[KIND_OTHER] = counts.get(KIND_OTHER, 0) + plain
        self.worker.safe(self._assembler.publish)

    def _read_failed(self) -> None:
        log_internal_error(log, "reading a span")
        self.worker.safe(self.sink.dropped, DROP_ERROR)


_NO_SPANS: Final[set[int]] = set()  # never added to


def _metrics(config: Config, registry: CollectorRegistry | None) -> LoopwatchMetrics:
    return metrics_for(
        registry,
        label_limit=config.label_limit,
        series_limit=config.series_limit,
        label_chars=config.label_chars,
    )


def _own_spans(assembler: TurnAssembler) -> set[int]:
    """The ids of loopwatch's own loop spans ended and not yet taken off the queue (the worker
    leaves them unread, so they change no number); an empty set without loop spans."""
    loop_spans = assembler.loop_spans
    return loop_spans.own if isinstance(loop_spans, LoopSpans) else _NO_SPANS


def _log_tally(assembler: TurnAssembler) -> None:
    log.info("shut down: %s", assembler.tally.line())
