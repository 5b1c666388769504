"""What a guard store is: an atomic claim per key, the first outcome, a lease and a window."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

ClaimState = Literal["claimed", "running", "done"]


class StoreError(Exception):
    """The store could not be reached or answered wrongly; the arbiter applies its policy."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The first call's outcome. ``shared`` is False when it could not be stored as JSON (only
    its error class is known): a duplicate then gets a terminal answer, not a replay."""

    error_class: str
    result: Any = None
    error: BaseException | None = None
    shared: bool = True


@dataclass(frozen=True, slots=True)
class Claim:
    """The store's answer to one call of a key.

    ``claimed``: this call is the first (or the previous claim's lease ran out): run it and
    :meth:`GuardStore.finish` with ``token``. ``running``: another call holds the key.
    ``done``: ``outcome`` is the first call's. ``duplicates``: calls of the key answered
    without running, this one included. ``first_at``: when the key was claimed, in the
    store's clock (seconds).
    """

    state: ClaimState
    token: str
    first_at: float
    duplicates: int = 0
    outcome: Outcome | None = None


class GuardStore(Protocol):
    """One backend. Keys are already hashes; nothing else about a call is given to a store."""

    url: str  # the store as configured, without a password

    def claim(self, key: str, token: str, lease_seconds: float, window_seconds: float) -> Claim:
        """Atomically claim ``key`` for ``token`` if free, else count a duplicate."""
        ...

    def finish(self, key: str, token: str, outcome: Outcome) -> None:
        """Store the outcome of the claim ``token`` (ignored if the key belongs to another)."""
        ...

    def __len__(self) -> int:
        """Keys held (expired ones included until swept)."""
        ...

    @property
    def evicted(self) -> int:
        """Keys dropped before their window ended, to stay within the bound."""
        ...

    def close(self) -> None: ...
