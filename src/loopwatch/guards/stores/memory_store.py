"""The in-process store (the default): one dict, oldest keys first, bounded."""

from __future__ import annotations

from dataclasses import dataclass

from loopwatch.guards.stores.base import Claim, Outcome
from loopwatch.guards.stores.memory_bound import MemoryBound


@dataclass(slots=True)
class _Entry:
    token: str
    first_at: float
    lease_until: float
    duplicates: int = 0
    outcome: Outcome | None = None  # kept as is: a replay in process is the very object


class MemoryStore(MemoryBound[_Entry]):
    """Keys of this process only; at most ``bound`` (oldest dropped first, counted)."""

    def _expire(self, now: float, window: float) -> None:
        # entries are in claim order, so expired ones are at the front
        while self._held:
            first = next(iter(self._held.values()))
            if now - first.first_at < window:
                break
            self._held.popitem(last=False)

    def claim(self, key: str, token: str, lease_seconds: float, window_seconds: float) -> Claim:
        now = self.clock()
        with self._lock:
            self._expire(now, window_seconds)
            entry = self._held.get(key)
            if entry is not None and entry.outcome is None and entry.lease_until <= now:
                del self._held[key]  # its worker never finished: the lease is over
                entry = None
            if entry is None:
                self._make_room()
                self._held[key] = _Entry(token, now, now + lease_seconds)
                return Claim("claimed", token, now)
            entry.duplicates += 1
            if entry.outcome is None:
                return Claim("running", entry.token, entry.first_at, entry.duplicates)
            return Claim("done", entry.token, entry.first_at, entry.duplicates, entry.outcome)

    def finish(self, key: str, token: str, outcome: Outcome) -> None:
        with self._lock:
            entry = self._held.get(key)
            # a call slower than its lease or the window: the key may belong to a newer call
            if entry is not None and entry.token == token:
                entry.outcome = outcome
