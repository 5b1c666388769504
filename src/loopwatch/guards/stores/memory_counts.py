"""The breaker's counts in this process: a turn's own (the default), or scopes shared by the
turns of one process."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from loopwatch.guards.stores.counts_base import Change, kept_on_overflow, merged


@dataclass(slots=True)
class _Scope:
    expires_at: float
    fields: dict[str, str] = field(default_factory=dict)


class MemoryCounts:
    """Scopes of this process, at most ``max_scopes`` (least recently written dropped first)."""

    url = "memory"

    def __init__(self, max_scopes: int, clock: Callable[[], float]) -> None:
        self.max_scopes = max_scopes
        self.clock = clock
        # by last write: the front expires first (one window for every scope of a breaker)
        self._scopes: OrderedDict[str, _Scope] = OrderedDict()
        self._lock = threading.Lock()
        self._evicted = 0

    def update(
        self, scope: str, fields: tuple[str, ...], window_seconds: float, change: Change
    ) -> None:
        now = self.clock()
        with self._lock:
            while self._scopes and next(iter(self._scopes.values())).expires_at <= now:
                self._scopes.popitem(last=False)
            entry = self._scopes.get(scope)
            held = entry.fields if entry is not None else {}
            values = {f: held[f] for f in fields if f in held}
            writes = change(values, now)
            if not writes:
                return
            if entry is None:
                while len(self._scopes) >= self.max_scopes:
                    self._scopes.popitem(last=False)
                    self._evicted += 1
                entry = self._scopes[scope] = _Scope(now + window_seconds)
            if kept_on_overflow(len(entry.fields), values, writes):
                entry.fields = merged(values, writes)
                self._evicted += 1
            else:
                for f, v in writes.items():
                    if v is None:
                        entry.fields.pop(f, None)
                    else:
                        entry.fields[f] = v
            entry.expires_at = now + window_seconds
            self._scopes.move_to_end(scope)

    def __len__(self) -> int:
        with self._lock:
            return len(self._scopes)

    @property
    def evicted(self) -> int:
        return self._evicted

    def close(self) -> None:
        pass
