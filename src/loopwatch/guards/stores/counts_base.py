"""What the loop breaker's shared counts need of a store: one atomic update of a scope's fields.

A scope is a hash of the ``scope`` a turn was given; its fields are short texts the counting
layer (loopwatch.guards.breaker_counts) names and reads. The store only keeps them, atomically,
bounded and expiring with the window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

# a scope holding this many fields starts over: only the fields of the update that would go past
# it are kept (counted in ``evicted``)
MAX_FIELDS_PER_SCOPE = 1024

# ``change(values, now)``: the fields read (absent ones left out) and the store's clock in
# seconds; it returns the writes, ``None`` deleting a field. It may be called again if another
# process changed the scope in between (Redis), so it must not act beyond its return value.
Change = Callable[[dict[str, str], float], dict[str, str | None]]


class CountStore(Protocol):
    """One backend of the breaker's counts."""

    url: str  # the store as configured, without a password

    def update(
        self, scope: str, fields: tuple[str, ...], window_seconds: float, change: Change
    ) -> None:
        """Atomically read ``fields`` of ``scope`` (a scope whose window is over is empty),
        call ``change`` and write what it returns; a write makes the scope expire
        ``window_seconds`` later. Raises StoreError when the store cannot be reached."""
        ...

    @property
    def evicted(self) -> int:
        """Scopes (or a full scope's fields) dropped before their window ended."""
        ...

    def close(self) -> None: ...


def kept_on_overflow(held: int, values: dict[str, str], writes: dict[str, str | None]) -> bool:
    """True when ``writes`` would take a scope holding ``held`` fields past the bound, so it
    must start over with only the fields this update read and wrote."""
    new = sum(1 for f, v in writes.items() if v is not None and f not in values)
    return held + new > MAX_FIELDS_PER_SCOPE


def merged(values: dict[str, str], writes: dict[str, str | None]) -> dict[str, str]:
    """The fields a scope that starts over keeps: those read, with the writes applied."""
    out = dict(values)
    for f, v in writes.items():
        if v is None:
            out.pop(f, None)
        else:
            out[f] = v
    return out
