"""Where the guards keep their keys: ``memory`` (one process), ``sqlite:///path`` (the
processes of one host), ``redis://host:port/db`` (several hosts)."""

from __future__ import annotations

import time
from collections.abc import Callable

from loopwatch.core.config import check_store_url
from loopwatch.guards.stores.base import Claim, GuardStore, Outcome, StoreError
from loopwatch.guards.stores.counts_base import CountStore
from loopwatch.guards.stores.memory_counts import MemoryCounts
from loopwatch.guards.stores.memory_store import MemoryStore
from loopwatch.guards.stores.outcome_json import ReplayedError

__all__ = [
    "Claim",
    "CountStore",
    "GuardStore",
    "MemoryCounts",
    "MemoryStore",
    "Outcome",
    "ReplayedError",
    "StoreError",
    "check_store_url",
    "open_counts",
    "open_store",
]


def open_store(
    url: str, max_keys: int = 10_000, clock: Callable[[], float] | None = None
) -> GuardStore:
    """The store ``url`` names. ``clock``: seconds (memory: monotonic by default; SQLite: wall
    clock by default, shared by the host's processes; Redis uses the server's clock)."""
    check_store_url(url)
    if url == "memory":
        return MemoryStore(max_keys, clock or time.monotonic)
    if url.startswith("sqlite:///"):
        from loopwatch.guards.stores.sqlite_store import SqliteStore

        return SqliteStore(url[len("sqlite:///") :], max_keys, clock or time.time)
    from loopwatch.guards.stores.redis_store import RedisStore

    return RedisStore(url)


def open_counts(
    url: str, max_scopes: int = 10_000, clock: Callable[[], float] | None = None
) -> CountStore:
    """The loop breaker's counts in the store ``url`` names (clocks as in :func:`open_store`)."""
    check_store_url(url)
    if url == "memory":
        return MemoryCounts(max_scopes, clock or time.monotonic)
    if url.startswith("sqlite:///"):
        from loopwatch.guards.stores.sqlite_counts import SqliteCounts

        return SqliteCounts(url[len("sqlite:///") :], max_scopes, clock or time.time)
    from loopwatch.guards.stores.redis_counts import RedisCounts

    return RedisCounts(url)
