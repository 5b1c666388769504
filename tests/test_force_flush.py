"""``flush`` returns True only once every item put before the call is taken, whatever the worker
was doing when the item came. Here the item and the flush come as a round finds the queue empty,
while the round still runs (the worker's lock held) or right after it (between the round and
going back to sleep): the round, the owner's part of the worker, makes that interleaving. The
in-process processor's force_flush is this flush."""

from __future__ import annotations

import logging
import threading

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext
from prometheus_client import CollectorRegistry

from loopwatch import LoopwatchSpanProcessor
from loopwatch.core.config import Config
from loopwatch.core.worker import Worker

WAIT = 30.0  # bounds a hang only: every wait here is for a state another thread reaches
SPAN = ReadableSpan(name="x", context=SpanContext(1, 2, is_remote=False), end_time=1)


class _Injecting:
    """A worker whose round, once armed, takes what is queued, finds the queue empty and has
    another thread put an item and flush; the round waits for that thread's put (``inside``)
    or returns at once."""

    def __init__(self, inside: bool) -> None:
        self.inside = inside
        self.armed = False
        self.taken: list[int] = []
        self.flush: bool | None = None
        self.flushed = threading.Event()
        self.started = threading.Event()
        # no round on its own: only a wake runs one
        self.worker: Worker[int] = Worker(
            self.round, limit=10, poll=3600.0, name="test", log=logging.getLogger("test"), where="t"
        )
        self.worker.start()

    def round(self) -> int:
        taken = self.worker.take(10)
        if self.armed:
            self.armed = False
            threading.Thread(target=self.inject, daemon=True).start()
            if self.inside:
                self.started.wait(WAIT)  # the flush begins while this round holds the lock
        self.taken += taken
        return len(taken)

    def inject(self) -> None:
        self.worker.put(1)
        self.started.set()
        self.flush = self.worker.flush(WAIT)
        self.flushed.set()


@pytest.mark.parametrize("inside", [False, True], ids=["after its round", "inside its round"])
def test_an_item_put_as_the_worker_finds_the_queue_empty_is_flushed(inside: bool) -> None:
    w = _Injecting(inside)
    try:
        w.armed = True
        w.worker.put(0)
        assert w.worker.flush(WAIT)  # wakes the worker for the armed round
        assert w.flushed.wait(WAIT)
        assert w.flush is True
        assert sorted(w.taken) == [0, 1]
    finally:
        assert w.worker.shutdown(WAIT)


def test_the_processor_flushes_what_on_end_was_handed() -> None:
    registry = CollectorRegistry()
    p = LoopwatchSpanProcessor(config=Config(), registry=registry)
    with p.worker.held():  # the span is queued while the worker waits
        p.on_end(SPAN)
        assert p.worker.queued == 1
    assert p.force_flush(int(WAIT * 1000))
    spans = sum(
        s.value for m in registry.collect() for s in m.samples if s.name == "loopwatch_spans_total"
    )
    assert spans == 1.0
    p.shutdown()
