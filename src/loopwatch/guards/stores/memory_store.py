"""The in-process store (the default): one dict, oldest keys first, bounded."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from loopwatch.guards.stores.base import Claim, Outcome


@dataclass(slots=True)
class _Entry:
    token: str
    first_at: float
    lease_until: float
    duplicates: int = 0
    outcome: Outcome | None = None  # kept as is: a replay in process is the very object


class MemoryStore:
    """Keys of this process only; at most ``max_keys`` (oldest dropped first, counted)."""

    url = "memory"

    def __init__(self, max_keys: int, clock: Callable[[], float]) -> None:
        self.max_keys = max_keys
        self.clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._evicted = 0

    def _expire(self, now: float, window: float) -> None:
        # entries are in claim order, so expired ones are at the front
        while self._entries:
            first = next(iter(self._entries.values()))
            if now - first.first_at < window:
                break
            self._entries.popitem(last=False)

    def claim(self, key: str, token: str, lease_seconds: float, window_seconds: float) -> Claim:
        now = self.clock()
        with self._lock:
            self._expire(now, window_seconds)
            entry = self._entries.get(key)
            if entry is not None and entry.outcome is None and entry.lease_until <= now:
                del self._entries[key]  # its worker never finished: the lease is over
                entry = None
            if entry is None:
                while len(self._entries) >= self.max_keys:
                    self._entries.popitem(last=False)
                    self._evicted += 1
                self._entries[key] = _Entry(token, now, now + lease_seconds)
                return Claim("claimed", token, now)
            entry.duplicates += 1
            if entry.outcome is None:
                return Claim("running", entry.token, entry.first_at, entry.duplicates)
            return Claim("done", entry.token, entry.first_at, entry.duplicates, entry.outcome)

    def finish(self, key: str, token: str, outcome: Outcome) -> None:
        with self._lock:
            entry = self._entries.get(key)
            # a call slower than its lease or the window: the key may belong to a newer call
            if entry is not None and entry.token == token:
                entry.outcome = outcome

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def evicted(self) -> int:
        return self._evicted

    def close(self) -> None:
        pass
