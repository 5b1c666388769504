"""What a guard does when its store cannot be reached: the settings it runs with (lease and
``on_store_error``, its own or ``[guards]``'s), and the calls that met the store down, counted
and warned of once."""

from __future__ import annotations

import logging
import threading
from collections import Counter

from loopwatch.core.config import ON_STORE_ERROR, Config
from loopwatch.guards.stores import StoreError

_log = logging.getLogger(__name__)
# the keys of ``store_errors``: calls run or refused because the store could not be reached,
# and outcomes that could not be written to it
ALLOWED, DENIED, NOT_STORED = "allowed", "denied", "not_stored"


def store_settings(
    config: Config,
    window_seconds: float,
    lease_seconds: float | None,
    on_store_error: str | None,
) -> tuple[float, str]:
    """(lease seconds, policy): the guard's own where given, else ``[guards]``'s; ValueError
    when one is out of range."""
    if window_seconds <= 0:
        raise ValueError(f"window_seconds must be > 0, got {window_seconds!r}")
    lease = lease_seconds if lease_seconds is not None else config.guards_lease_seconds
    if lease <= 0:
        raise ValueError(f"lease_seconds must be > 0, got {lease!r}")
    policy = on_store_error or config.guards_on_store_error
    if policy not in ON_STORE_ERROR:
        raise ValueError(f"on_store_error must be allow or deny, got {policy!r}")
    return lease, policy


class StoreErrors:
    """Calls that met an unreachable store, by ALLOWED / DENIED / NOT_STORED, under ``policy``;
    the first is logged (``guard`` names it, ``calls`` what it checks, ``refused`` what deny
    does to them): a store down for an hour must not flood the log."""

    def __init__(self, policy: str, guard: str, calls: str, refused: str) -> None:
        self.policy = policy
        self.counts: Counter[str] = Counter()
        self._says = (guard, calls, "run unguarded" if policy == "allow" else refused)
        self._warned = False
        self._lock = threading.Lock()

    def met(self, what: str, error: StoreError) -> None:
        with self._lock:
            self.counts[what] += 1
            warned, self._warned = self._warned, True
        if not warned:
            guard, calls, done = self._says
            _log.warning(
                "loopwatch %s store unreachable (%s); on_store_error=%s: %s it cannot check are "
                "%s until it answers again (counted in store_errors)",
                guard,
                error,
                self.policy,
                calls,
                done,
            )
