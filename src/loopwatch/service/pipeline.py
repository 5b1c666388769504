"""The service's pipeline: the shared worker (``loopwatch.core.worker``) owns the TurnAssembler,
fed by request threads through its queue, bounded in spans; it finalizes a trace a grace period
after its root arrives, or when it has been idle."""

from __future__ import annotations

import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import partial

from loopwatch.conventions.coding_agents.read import read_log
from loopwatch.conventions.read import is_turn_span, read_span
from loopwatch.core.assembler import DROP_ERROR, EVICT_SHUTDOWN, TurnAssembler
from loopwatch.core.config import Config
from loopwatch.core.internal_errors import log_internal_error
from loopwatch.core.log_view import LogView
from loopwatch.core.records import KIND_OTHER, KIND_TOOL, Record, ToolCall, TurnMark, kind_of
from loopwatch.core.sink import QueueGauges, Sink, agent_events
from loopwatch.core.span_view import SpanView
from loopwatch.core.summary import TurnSummary
from loopwatch.core.worker import Worker
from loopwatch.service.otlp import REMOTE_PARENT

log = logging.getLogger(__name__)

# How often the worker looks for roots past their grace, and for idle traces.
_GRACE_CHECK_SECONDS = 0.05
_SWEEP_SECONDS = 1.0
_MAY_WATCH = (TurnMark, ToolCall)


class LogBatch:
    """One request's log records, queued beside span batches (the worker reads them with the
    coding agents' readers, not as spans). A class of its own, not a list's subclass: compiled,
    a native class cannot extend a builtin."""

    __slots__ = ("logs",)

    def __init__(self, logs: list[LogView]) -> None:
        self.logs = logs

    def __len__(self) -> int:
        return len(self.logs)


Batch = Sequence[SpanView] | LogBatch  # one request's spans or log records


class Pipeline:
    """Thread-safe front of a TurnAssembler; every assembler call happens on one worker."""

    def __init__(
        self,
        config: Config,
        sink: Sink,
        clock: Callable[[], float] = time.monotonic,
        *,
        worker: bool = True,
        loop_spans: Callable[[TurnSummary], None] | None = None,
    ) -> None:
        """``worker=False``: no thread; the caller drives it with :meth:`process`,
        :meth:`advance` and :meth:`finish` (``loopwatch replay``, on the spans' own clock).
        ``loop_spans``: where each finished turn with loops goes besides the sink."""
        self.config = config
        self.sink = sink
        self.clock = clock
        self._assembler = TurnAssembler(config, sink, clock)
        self._assembler.loop_spans = loop_spans
        self._gauges = QueueGauges(sink)  # where the sink has them (a replay's has not)
        self._next_grace = self._next_sweep = 0.0
        # Traces that have shown an agent span; and, of those, when a span whose parent is in
        # another process arrived after it: that process (the agent's) is done with the trace,
        # whose true root may never come here (a gateway exporting elsewhere), so the grace
        # starts then, as the in-process processor finalizes at its local root.
        self._with_turn: OrderedDict[int, None] = OrderedDict()
        self._process_roots: OrderedDict[int, float] = OrderedDict()
        # (service, session) -> the turn its events last came for: a session's next prompt ends
        # its previous turn (finalized a grace later), as the idle timeout ends its last one
        self._sessions: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._events = agent_events(sink)
        # services that sent tool spans: an agent sending spans and events (Claude Code's span
        # beta) has its turns read from the spans, once; its events still give detections
        self._span_services: OrderedDict[str, None] = OrderedDict()
        # traces open at shutdown: (finalized as usual, finalized without their root)
        self.finished_at_stop = (0, 0)
        # the shared worker: its queue holds whole requests, bounded in spans; woken by a
        # request into an empty queue, else every grace check
        self._worker: Worker[Batch] = Worker(
            self._round,
            limit=config.queue_spans,
            weigh=len,
            poll=_GRACE_CHECK_SECONDS,
            name="loopwatch-pipeline",
            log=log,
            where="pipeline",
            on_stop=self._finish,
            on_error=partial(sink.dropped, DROP_ERROR),
        )
        if worker:
            self._worker.start()

    # -- request threads ------------------------------------------------------------------------
    def has_room(self, count: int) -> bool:
        """Whether :meth:`submit` would take ``count`` spans now."""
        return self._worker.has_room(count)

    def submit(self, spans: Batch) -> bool:
        """Queue one request's spans; False when the queue is full (the caller answers with a
        retryable error, so the exporter sends them again) or the pipeline is stopping. A
        request larger than the whole queue is still taken when the queue is empty."""
        if not len(spans):
            return self._worker.is_open
        return self._worker.put(spans)

    @property
    def worker(self) -> Worker[Batch]:
        """The worker: its queue (``queued``), whether it runs (``alive``); tests hold it
        (``held``) and step it (``step``)."""
        return self._worker

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every span submitted so far has been added to the assembler."""
        return self._worker.flush(timeout)

    def stop(self, timeout: float = 10.0) -> bool:
        """Refuse new spans, process the queued ones, finalize every open turn (counted as
        evicted by shutdown). Returns False if the worker did not finish within ``timeout``."""
        return self._worker.shutdown(timeout)

    @property
    def assembler(self) -> TurnAssembler:
        """The assembler the worker owns: for reading once the worker is idle (after flush)."""
        return self._assembler

    # -- driven by the caller, without the worker (worker=False) ------------------------------
    def process(self, spans: Batch) -> None:
        """What the worker does with one request's spans, on the caller's thread."""
        self._take(spans)

    def advance(self) -> None:
        """The worker's periodic steps at the clock's time now: traces past their grace, then
        idle ones."""
        self._worker.safe(self._finalize_due)
        self._worker.safe(self._assembler.sweep)
        self._worker.safe(self._report_open)

    def complete(self, trace_id: int, cut: bool = False) -> None:
        """Every span of the trace has been processed (replay, which reads each trace whole,
        in time order): what has been idle until the clock's time is finalized (a hand-rolled
        turn this trace's model calls would otherwise join), then this trace. ``cut``: it has
        no root span, so its turns are counted as cut short, as the open ones at shutdown.
        The traces processed and not yet completed must have been processed at a clock no
        earlier than this one, so none of them is idle."""
        self._with_turn.pop(trace_id, None)
        self._process_roots.pop(trace_id, None)
        self._worker.safe(self._assembler.sweep)
        evicted = EVICT_SHUTDOWN if cut else None
        self._worker.safe(lambda: self._assembler.finalize(trace_id, evicted))

    def finish(self) -> tuple[int, int]:
        """Finalize every open trace, as at shutdown; ``finished_at_stop``."""
        self._worker.safe(self._finish)
        return self.finished_at_stop

    # -- the worker -----------------------------------------------------------------------------
    def _round(self) -> int:
        """One round of the worker: each queued request, with the periodic steps between."""
        # the queue gauge: spans waiting as the worker found them
        self._worker.safe(self._gauges.show_queued, self._worker.queued)
        taken = 0
        while batch := self._worker.take(1):
            self._take(batch[0])
            taken += 1
            self._due()
        self._due()
        return taken

    def _due(self) -> None:
        """The periodic steps that are due: traces past their grace, then idle ones."""
        now = self.clock()
        if now >= self._next_grace:
            self._worker.safe(self._finalize_due)
            self._worker.safe(self._report_open)
            self._next_grace = now + _GRACE_CHECK_SECONDS
        if now >= self._next_sweep:
            self._worker.safe(self._assembler.sweep)
            self._worker.safe(self._report_open)
            self._next_sweep = now + _SWEEP_SECONDS

    def _take(self, batch: Batch) -> None:
        # one type test per request: the spans' path is the same as before
        if isinstance(batch, LogBatch):
            self._add_logs(batch)
        else:
            self._add(batch)

    def _add_logs(self, logs: LogBatch) -> None:
        """One request's log records: each read by its agent's reader, its record added to
        the turn it names, its agent's own loop detection counted."""
        config = self.config
        assembler = self._assembler
        counts: dict[str, int] = {}
        for log_view in logs.logs:
            try:
                read = read_log(log_view, config)
                if read is None:
                    counts[KIND_OTHER] = counts.get(KIND_OTHER, 0) + 1
                    continue
                if read.detection is not None and self._events is not None:
                    self._events.agent_detection(log_view.service, *read.detection)
                if read.record is None or log_view.service in self._span_services:
                    counts[KIND_OTHER] = counts.get(KIND_OTHER, 0) + 1
                    continue
                self._next_prompt(log_view.service, read.session, read.turn)
                assembler.add(read.turn, log_view.service, read.record, root_finalizes=False)
                kind = kind_of(read.record)
                counts[kind] = counts.get(kind, 0) + 1
            except Exception:
                log.debug("log record not read", exc_info=True)
                with contextlib.suppress(Exception):
                    self.sink.dropped(DROP_ERROR)
        self._published(partial(self._count_logs, counts))

    def _count_logs(self, counts: dict[str, int]) -> None:
        if self._events is not None:
            for kind, count in counts.items():
                self._events.log_records(kind, count)

    def _spans_from(self, service: str) -> None:
        self._span_services[service] = None
        if len(self._span_services) > self.config.max_open_turns:
            self._span_services.popitem(last=False)

    def _next_prompt(self, service: str, session: str, turn: int) -> None:
        """A session's records for a new turn: its previous turn is done (a grace from now)."""
        if not session:
            return
        key = (service, session)
        previous = self._sessions.get(key)
        if previous == turn:
            return
        self._sessions[key] = turn
        self._sessions.move_to_end(key)
        if len(self._sessions) > self.config.max_open_turns:
            self._sessions.popitem(last=False)  # the idle timeout still ends its turn
        if previous is not None and previous not in self._process_roots:
            self._process_roots[previous] = self.clock()
            if len(self._process_roots) > self.config.max_open_turns:
                self._process_roots.popitem(last=False)

    def _add(self, spans: Sequence[SpanView]) -> None:
        # in stages, as the in-process worker does (loopwatch.attach.processor): read every span of
        # the request, then hand the records to the assembler, then publish the turns
        config = self.config
        records: list[Record | None] = []
        for span in spans:
            try:
                records.append(read_span(span, config))
            except Exception:
                records.append(None)
                self._read_failed()
        # called on the assembler, not bound to a local: compiled, a call of a bound method is
        # a Python call, its keyword matched at run time
        assembler = self._assembler
        counts: dict[str, int] = {}
        for span, record in zip(spans, records, strict=True):
            if record is None:
                continue
            try:
                assembler.add(span.trace_id, span.service, record, root_finalizes=False)
                kind = kind_of(record)
                counts[kind] = counts.get(kind, 0) + 1
                if kind == KIND_TOOL and span.service not in self._span_services:
                    self._spans_from(span.service)
                # only an agent or tool span, or one with a remote parent, can start the grace
                if span.parent_id is not None and (span.extra or type(record) in _MAY_WATCH):
                    self._watch_process_root(span, record)
            except Exception:
                self._read_failed()
        # counted once per request: a metric update per span costs as much as reading it
        self._published(partial(self._count, counts))

    def _read_failed(self) -> None:
        log_internal_error(log, "reading a span")
        with contextlib.suppress(Exception):
            self.sink.dropped(DROP_ERROR)

    def _published(self, count: Callable[[], None]) -> None:
        """After a request: the turns it completed to the sink, its records counted."""
        self._worker.safe(self._assembler.publish)
        self._worker.safe(count)
        self._worker.safe(self._report_open)

    def _count(self, counts: dict[str, int]) -> None:
        for kind, count in counts.items():
            self.sink.span(kind, count)

    def _report_open(self) -> None:
        self.sink.open_turns(self._assembler.open_turns)

    def _watch_process_root(self, span: SpanView, record: Record) -> None:
        trace_id = span.trace_id
        # read_span tests for a turn span after a tool span, so only tool spans need asking
        turn = type(record) is TurnMark or (
            type(record) is ToolCall and is_turn_span(span.name, span.attributes)
        )
        bound = self.config.max_open_turns
        if turn and trace_id not in self._with_turn:
            self._with_turn[trace_id] = None
            if len(self._with_turn) > bound:
                self._with_turn.popitem(last=False)
        if (
            span.extra.get(REMOTE_PARENT)
            and (turn or trace_id in self._with_turn)
            and trace_id not in self._process_roots
        ):
            self._process_roots[trace_id] = self.clock()
            if len(self._process_roots) > bound:
                self._process_roots.popitem(last=False)  # the idle timeout still ends it

    def _finalize_due(self) -> None:
        due = self.clock() - self.config.grace_seconds
        self._assembler.finalize_rooted(due)
        roots = self._process_roots
        while roots and next(iter(roots.values())) <= due:
            trace_id, _ = roots.popitem(last=False)
            self._with_turn.pop(trace_id, None)
            self._assembler.finalize(trace_id)  # nothing when already finalized

    def _finish(self) -> None:
        # a trace whose root is in ends as usual; the others were cut short by the shutdown
        rooted = self._assembler.pending_roots()
        for trace_id, _ in rooted:
            self._assembler.finalize(trace_id)
        rest = self._assembler.open_turns
        self._assembler.finalize_all(EVICT_SHUTDOWN)
        self._report_open()
        self.finished_at_stop = (len(rooted), rest)
