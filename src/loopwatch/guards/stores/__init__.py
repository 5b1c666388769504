"""Where the guards keep their keys: ``memory`` (one process), ``sqlite:///path`` (the
processes of one host), ``redis://host:port/db`` (several hosts)."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import Any, cast

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
    return cast(GuardStore, _open(url, max_keys, clock, _GUARD_STORES))


def open_counts(
    url: str, max_scopes: int = 10_000, clock: Callable[[], float] | None = None
) -> CountStore:
    """The loop breaker's counts in the store ``url`` names (clocks as in :func:`open_store`)."""
    return cast(CountStore, _open(url, max_scopes, clock, _COUNT_STORES))


# (module, class) of each backend, memory, SQLite and Redis, of the guard stores and of the
# breaker's counts: a backend's module is imported only when a URL names it (the Redis client
# is needed only where Redis is)
_GUARD_STORES = (
    ("memory_store", "MemoryStore"),
    ("sqlite_store", "SqliteStore"),
    ("redis_store", "RedisStore"),
)
_COUNT_STORES = (
    ("memory_counts", "MemoryCounts"),
    ("sqlite_counts", "SqliteCounts"),
    ("redis_counts", "RedisCounts"),
)
_SQLITE = "sqlite:///"


def _open(
    url: str,
    bound: int,
    clock: Callable[[], float] | None,
    backends: tuple[tuple[str, str], ...],
) -> object:
    check_store_url(url)
    if url == "memory":
        return _backend(backends[0])(bound, clock or time.monotonic)
    if url.startswith(_SQLITE):
        return _backend(backends[1])(url[len(_SQLITE) :], bound, clock or time.time)
    return _backend(backends[2])(url)


def _backend(named: tuple[str, str]) -> Any:
    module, name = named
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
