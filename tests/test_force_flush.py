"""``force_flush`` returns True only once every span handed over before the call is processed,
whatever the worker was doing when the span came. Here the span and the flush come right after
the worker looked at the queue and found it empty, with the worker's lock held (inside a round
of its loop) or not (between its batch and going back to sleep): hooks on the processor's queue
and wake event force that interleaving."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext
from prometheus_client import CollectorRegistry

from loopwatch import LoopwatchSpanProcessor
from loopwatch.attach import processor
from loopwatch.core.config import Config

WAIT = 30.0  # bounds a hang only: every wait here is for a state another thread reaches
SPAN = ReadableSpan(name="x", context=SpanContext(1, 2, is_remote=False), end_time=1)


class _Hooked(LoopwatchSpanProcessor):
    """A processor whose worker, at its next look at an empty queue made with its lock held
    (``armed`` True) or not (False), gets a span and a flush from another thread, and goes on
    with what it saw: an empty queue."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.armed: bool | None = None
        self.injecting = False
        self.asked = threading.Event()  # the flush has woken the worker
        self.round_over = threading.Event()  # injected, or the worker is back to waiting
        self.hold = False  # keeps the worker from its next round until the flush has returned
        self.flush: dict[str, Any] = {}
        self.flushed = threading.Event()
        super().__init__(config=Config(), registry=self.registry)

    def _start_worker(self) -> None:
        self._queue = _Queue(self)
        self._append = self._queue.append
        self._wake = _Wake(self)
        super()._start_worker()

    def on_worker(self) -> bool:
        return threading.current_thread() is self._worker

    def inject(self) -> None:
        """The span and the flush (on its own thread, as from another agent thread)."""
        self.injecting = True
        self.on_end(SPAN)
        threading.Thread(target=self._flush, daemon=True).start()

    def _flush(self) -> None:
        self.flush["returned"] = self.force_flush(int(WAIT * 1000))
        self.flush["processed"] = sum(
            s.value
            for metric in self.registry.collect()
            for s in metric.samples
            if s.name == "loopwatch_spans_total"
        )
        self.flushed.set()


class _Queue(deque[Any]):
    def __init__(self, processor: _Hooked) -> None:
        super().__init__()
        self.p = processor

    def __len__(self) -> int:
        n = super().__len__()
        p = self.p
        if n == 0 and p.armed is not None and p.on_worker() and p._lock.locked() is p.armed:
            under_lock, p.armed = p.armed, None
            p.inject()
            if not under_lock:
                # nothing the flush does needs the lock the worker holds inside a round, so the
                # worker waits until the flush has asked it for work; after that it goes on
                # from its stale look, and is kept from its next round until the flush returned
                # (a flush that waits for it gives up after WAIT and returns False)
                p.asked.wait(WAIT)
                p.hold = True
            p.round_over.set()
        return n


class _Wake(threading.Event):
    def __init__(self, processor: _Hooked) -> None:
        super().__init__()
        self.p = processor

    def set(self) -> None:
        if self.p.injecting and not self.p.on_worker():
            self.p.asked.set()
        super().set()

    def wait(self, timeout: float | None = None) -> bool:
        p = self.p
        if p.on_worker():
            p.round_over.set()
            if p.hold:
                p.hold = False
                p.flushed.wait(WAIT)
        return super().wait(timeout)


@pytest.mark.parametrize("under_lock", [False, True], ids=["after its batch", "inside its round"])
def test_a_span_handed_over_as_the_worker_finds_the_queue_empty_is_flushed(
    under_lock: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the worker runs a round only when woken: none starts on its own while the hooks are set
    monkeypatch.setattr(processor, "_POLL_SECONDS", 3600.0)
    p = _Hooked()
    try:
        assert p.round_over.wait(WAIT)  # the worker waits for its first batch
        p.round_over.clear()
        p.armed = under_lock
        p._wake.set()  # a round of the worker's loop, on an empty queue
        assert p.round_over.wait(WAIT)
        if not p.injecting:
            # this worker never looked at the queue in that state: the span comes after the round
            p.armed = None
            p.inject()
        assert p.flushed.wait(WAIT)
        assert p.flush == {"returned": True, "processed": 1.0}
    finally:
        p.shutdown()
