"""The breaker's counts in this process: a turn's own (the default), or scopes shared by the
turns of one process."""

from __future__ import annotations

from dataclasses import dataclass, field

from loopwatch.guards.stores.counts_base import Change, kept_on_overflow, merged
from loopwatch.guards.stores.memory_bound import MemoryBound


@dataclass(slots=True)
class _Scope:
    expires_at: float
    fields: dict[str, str] = field(default_factory=dict)


class MemoryCounts(MemoryBound[_Scope]):
    """Scopes of this process, at most ``bound`` (least recently written dropped first): held
    by last write, so the front expires first (one window for every scope of a breaker)."""

    def update(
        self, scope: str, fields: tuple[str, ...], window_seconds: float, change: Change
    ) -> None:
        now = self.clock()
        with self._lock:
            while self._held and next(iter(self._held.values())).expires_at <= now:
                self._held.popitem(last=False)
            entry = self._held.get(scope)
            held = entry.fields if entry is not None else {}
            values = {f: held[f] for f in fields if f in held}
            writes = change(values, now)
            if not writes:
                return
            if entry is None:
                self._make_room()
                entry = self._held[scope] = _Scope(now + window_seconds)
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
            self._held.move_to_end(scope)
