"""The worker both entries share: a bounded queue that producer threads fill without waiting,
drained in rounds by one daemon thread; wake, flush, shutdown, fork reset and drops counted.

The owner supplies a round (``drain``): it takes what it wants off the queue (:meth:`Worker.take`,
:meth:`Worker.take_drops`) and returns how many items and drops it took. Rounds run under the
worker's lock, on its thread or, through :meth:`Worker.step`, on the caller's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, Final, Generic, TypeVar

from loopwatch.core.internal_errors import log_internal_error

T = TypeVar("T")

# The worker's one state: open (puts taken), closed (puts refused, what is queued still read),
# stopped (the last round and the owner's stop have run).
OPEN: Final = 0
CLOSED: Final = 1
STOPPED: Final = 2


class Worker(Generic[T]):
    """A bounded queue and the thread that drains it, from :meth:`start` on.

    ``limit``: the bound, in items, or in the weight ``weigh`` gives each item (then one item
    is still taken into an empty queue, however heavy). ``wake_at``: a put that finds this many
    items queued wakes the thread, which otherwise wakes every ``poll`` seconds.
    ``count_drops``: an item refused by the bound while open is counted, for the round to take.
    ``on_stop``: runs once, after the last round. ``on_fork``: in a forked child, after the
    queue is emptied and before the thread restarts (without it, no fork hook).
    ``on_error``: after an error in a round or in :meth:`safe` is logged (as ``where``).
    """

    def __init__(
        self,
        drain: Callable[[], int],
        *,
        limit: int,
        poll: float,
        name: str,
        log: logging.Logger,
        where: str,
        wake_at: int = 0,
        weigh: Callable[[T], int] | None = None,
        count_drops: bool = False,
        on_stop: Callable[[], None] | None = None,
        on_fork: Callable[[], None] | None = None,
        on_error: Callable[[], None] | None = None,
    ) -> None:
        self._drain = drain
        self._limit = limit
        self._poll = poll
        self._name = name
        self._log = log
        self._where = where
        self.wake_at = wake_at
        """A put that finds this many items queued wakes the thread."""
        self._weigh = weigh
        self._count_drops = count_drops
        self._on_stop = on_stop
        self._on_fork = on_fork
        self._on_error = on_error
        self._state = OPEN
        self._queue: deque[T] = deque()
        # bound once: compiled, queue.append looks the method up at every call
        self._append: Callable[[T], None] = self._queue.append
        self._popleft: Callable[[], T] = self._queue.popleft
        # items dropped at the bound and not yet taken: a number, however long a flood lasts
        self._drops = 0
        self._drops_lock = threading.Lock()  # taken only on a drop, never on a put that queues
        self._weight = 0  # with weigh: the queued items' weight, under _room
        self._room = threading.Lock()  # with weigh: held while the weight changes
        self._wake = threading.Event()
        # held while a round runs; reentrant, so a caller holding the worker can step it
        self._lock = threading.RLock()
        self._drained = threading.Condition(self._lock)
        # items and drops taken by finished rounds: with what is queued, everything put so far
        self._processed = 0
        self._runner: threading.Thread | None = None
        if on_fork is not None and hasattr(os, "register_at_fork"):
            # os.register_at_fork keeps a hook for good: it holds only a weak reference to this
            # partial, which only the worker holds, so a worker no one else holds is collected
            self._reset_in_child: Callable[[], None] = partial(_after_fork, self)
            os.register_at_fork(
                after_in_child=partial(_in_child, weakref.ref(self._reset_in_child), log)
            )

    # -- producer threads -----------------------------------------------------------------------
    def put(self, item: T, count: bool = True) -> bool:
        """Queue ``item``; False when the bound or a shutdown refused it (``count``: a refusal
        by the bound is counted as a drop, where the worker counts drops). Never blocks (but
        with ``weigh``, for the weight's lock), never raises."""
        if self._weigh is not None:
            return self._put_weighed(item, self._weigh(item), count)
        queued = len(self._queue)
        if queued < self._limit and self._state == OPEN:
            self._append(item)
            if queued == self.wake_at:
                self._wake.set()
            return True
        if count and self._count_drops and self._state == OPEN:
            self._count_drop()
        return False

    def _count_drop(self) -> None:
        with self._drops_lock:
            self._drops += 1

    def _put_weighed(self, item: T, weight: int, count: bool) -> bool:
        with self._room:
            if not self._fits(weight):
                if count and self._count_drops and self._state == OPEN:
                    self._count_drop()
                return False
            wake = len(self._queue) == self.wake_at
            self._append(item)
            self._weight += weight
        if wake:
            self._wake.set()
        return True

    def _fits(self, weight: int) -> bool:
        return self._state == OPEN and (not self._weight or self._weight + weight <= self._limit)

    def has_room(self, weight: int = 1) -> bool:
        """Whether :meth:`put` would take an item of ``weight`` now."""
        if self._weigh is None:
            return self._state == OPEN and len(self._queue) + weight <= self._limit
        with self._room:
            return self._fits(weight)

    @property
    def queued(self) -> int:
        """What is queued: items, or their weight with ``weigh``."""
        return self._weight if self._weigh is not None else len(self._queue)

    @property
    def dropped(self) -> int:
        """Drops counted and not yet taken by a round."""
        return self._drops

    def pending(self) -> list[T]:
        """A copy of what is queued, oldest first."""
        return list(self._queue)

    @property
    def is_open(self) -> bool:
        """Whether puts are taken (not shut down)."""
        return self._state == OPEN

    @property
    def alive(self) -> bool:
        """Whether the thread runs and puts are taken."""
        return self._runner is not None and self._runner.is_alive() and self._state == OPEN

    @property
    def ident(self) -> int | None:
        """The thread's id (None without a thread): its CPU clock is the worker's cost."""
        return self._runner.ident if self._runner is not None else None

    # -- the round's side ------------------------------------------------------------------------
    def take(self, most: int) -> list[T]:
        """Up to ``most`` items off the queue, oldest first (from the round)."""
        if self._weigh is not None:
            with self._room:
                taken = [self._popleft() for _ in range(min(len(self._queue), most))]
                for item in taken:
                    self._weight -= self._weigh(item)
            return taken
        popleft = self._popleft
        return [popleft() for _ in range(min(len(self._queue), most))]

    def take_drops(self) -> int:
        """The drops counted so far, taken (from the round)."""
        with self._drops_lock:
            taken = self._drops
            self._drops = 0
        return taken

    def safe(self, fn: Callable[..., object], *args: object) -> None:
        """``fn(*args)``; an exception is logged as an internal error and counted (on_error)."""
        try:
            fn(*args)
        except Exception:
            self._failed()

    def _failed(self) -> None:
        log_internal_error(self._log, self._where)
        if self._on_error is not None:
            with contextlib.suppress(Exception):
                self._on_error()

    # -- the thread -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the thread, once the owner holds the worker (its first round may come at
        once, and reads the owner's fields)."""
        self._start()

    def _start(self) -> None:
        self._runner = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._runner.start()

    def _run(self) -> None:
        while self._state == OPEN:
            if not self._queue:  # a round that left items behind is followed at once
                self._wake.wait(self._poll)
            self._wake.clear()
            self.step()
        self._stop()

    def step(self) -> None:
        """Run one round now, on the calling thread (as the worker's thread would)."""
        with self._lock:
            try:
                self._processed += self._drain()
            except Exception:
                self._failed()
            self._drained.notify_all()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the worker between rounds: puts still queue; :meth:`step` runs a round."""
        with self._lock:
            yield

    def _stop(self) -> None:
        with self._lock:
            if self._state == STOPPED:
                return
            self.step()  # what was queued before the close
            self._state = STOPPED
            if self._on_stop is not None:
                self.safe(self._on_stop)
            self._drained.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait until every item put so far has been taken by a round, up to ``timeout``
        seconds; True once stopped."""
        if self._state == STOPPED:
            return True
        deadline = time.monotonic() + timeout
        if not self._lock.acquire(timeout=timeout):  # the thread is inside a long round
            return False
        try:
            mark = self._processed + len(self._queue) + self._drops
            if self._processed >= mark:
                return True
            self._wake.set()
            return self._drained.wait_for(
                lambda: self._processed >= mark or self._state == STOPPED,
                deadline - time.monotonic(),
            )
        finally:
            self._lock.release()

    def shutdown(self, timeout: float) -> bool:
        """Refuse puts, run a last round over what is queued, then ``on_stop``, once; False
        when the thread has not finished within ``timeout`` seconds (it finishes later)."""
        if self._state == STOPPED:
            return True
        self._state = CLOSED
        self._wake.set()
        thread = self._runner
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout)
            return not thread.is_alive()
        self._stop()
        return True

    def _after_fork(self) -> None:
        """In a forked child: what was queued is the parent's, and its thread did not come."""
        # the parent's thread may have held any of these at the fork
        self._room = threading.Lock()
        self._drops_lock = threading.Lock()
        self._wake = threading.Event()
        self._lock = threading.RLock()
        self._drained = threading.Condition(self._lock)
        self._queue.clear()
        self._drops = 0
        self._weight = 0
        self._processed = 0
        self._runner = None
        if self._on_fork is not None:
            self._on_fork()
        if self._state == OPEN:
            self._start()


def _after_fork(worker: Worker[Any]) -> None:
    worker._after_fork()


def _in_child(reset: weakref.ref[Callable[[], None]], log: logging.Logger) -> None:
    """One worker's hook after a fork, in the child (while the worker lives)."""
    after_fork = reset()
    if after_fork is not None:
        try:
            after_fork()
        except Exception:
            log_internal_error(log, "after a fork")
