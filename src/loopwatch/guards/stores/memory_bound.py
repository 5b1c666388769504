"""What both in-process stores are: one ordered dict of this process under a lock, bounded
(the front dropped first, counted as evicted)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class MemoryBound(Generic[V]):
    """At most ``bound`` entries; ``clock`` in seconds (monotonic: one process)."""

    url = "memory"

    def __init__(self, bound: int, clock: Callable[[], float]) -> None:
        self.bound = bound
        self.clock = clock
        self._held: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()
        self._evicted = 0

    def _make_room(self) -> None:
        """Drop entries from the front until one more fits (called under the lock)."""
        while len(self._held) >= self.bound:
            self._held.popitem(last=False)
            self._evicted += 1

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    @property
    def evicted(self) -> int:
        return self._evicted

    def close(self) -> None:
        pass
