"""The breaker's counts in Redis, shared by several hosts: each update is a redis-py transaction
(WATCH the scope, read, MULTI, write, EXEC), retried a bounded number of times when another
process wrote the scope in between; the server's clock for leases, a TTL for the window."""

from __future__ import annotations

from typing import Any

from loopwatch.guards.stores.base import StoreError
from loopwatch.guards.stores.counts_base import Change, kept_on_overflow, merged
from loopwatch.guards.stores.redis_store import _text, _without_password, connect

KEY_PREFIX = "loopwatch:breaker:"
# updates of one scope that lost to another process's write, before it is a store error
MAX_TRIES = 16


class RedisCounts:
    """One hash per scope; each expires with its window (TTL), so the store bounds itself."""

    def __init__(self, url: str) -> None:
        self.url = _without_password(url)
        self._client, self._errors = connect(url)
        from redis.exceptions import WatchError

        self._conflict: type[BaseException] = WatchError
        self._evicted = 0

    def update(
        self, scope: str, fields: tuple[str, ...], window_seconds: float, change: Change
    ) -> None:
        key = KEY_PREFIX + scope
        window_ms = max(1, int(window_seconds * 1000))
        try:
            for _ in range(MAX_TRIES):
                with self._client.pipeline(transaction=True) as pipe:
                    try:
                        if self._try(pipe, key, fields, window_ms, change):
                            self._evicted += 1
                        return
                    except self._conflict:
                        continue  # another process wrote the scope: read it again
        except self._errors as e:
            raise StoreError(f"{self.url}: {type(e).__name__}: {e}") from None
        raise StoreError(f"{self.url}: scope still contended after {MAX_TRIES} tries")

    def _try(
        self, pipe: Any, key: str, fields: tuple[str, ...], window_ms: int, change: Change
    ) -> bool:
        """One try; True when the scope was full and started over."""
        pipe.watch(key)  # immediate mode until MULTI: each read below is answered at once
        raw = pipe.hmget(key, list(fields)) if fields else []
        values = {f: _text(v) for f, v in zip(fields, raw, strict=True) if v is not None}
        held = int(pipe.hlen(key))
        seconds, micros = pipe.time()  # the server's clock: one clock for every host
        writes = change(values, int(seconds) + int(micros) / 1e6)
        if not writes:
            pipe.unwatch()
            return False
        pipe.multi()
        full = kept_on_overflow(held, values, writes)
        if full:
            pipe.delete(key)
            kept: dict[str, str | None] = dict(merged(values, writes))
            writes = kept
        deleted = [f for f, v in writes.items() if v is None]
        written = {f: v for f, v in writes.items() if v is not None}
        if deleted:
            pipe.hdel(key, *deleted)
        if written:
            pipe.hset(key, mapping=written)
        pipe.pexpire(key, window_ms)
        pipe.execute()
        return full

    @property
    def evicted(self) -> int:
        # full scopes that started over; scopes leave by their TTL (or the server's maxmemory)
        return self._evicted

    def close(self) -> None:
        self._client.close()
