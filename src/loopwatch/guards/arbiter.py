"""The idempotency arbiter: a duplicate of a side-effecting call within a window is not run.

Keyed on :func:`idempotency_key` (identity fields), never on a hash of all arguments: a model
regenerating a failed ``create_ticket`` rewords ``summary`` every time, so a whole-arguments
hash would let every duplicate through.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar

from opentelemetry.trace import TracerProvider

from loopwatch.core.config import Config
from loopwatch.guards.decision_spans import SpanMode, record_decision
from loopwatch.guards.idempotency import _default_config, idempotency_key
from loopwatch.guards.outcome import outcome_of, reported
from loopwatch.guards.store_errors import ALLOWED, DENIED, NOT_STORED, StoreErrors, store_settings
from loopwatch.guards.stores import GuardStore, Outcome, StoreError, open_store
from loopwatch.guards.terminal import (
    STORE_UNCHECKED,
    SUPPRESSED,
    TerminalResult,
    already_done,
    circuit_open,
    in_progress,
    store_unavailable,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Admitted:
    """The first call of its key in the window: run it and report with :meth:`Arbiter.done`.
    ``token`` names the claim in the store; empty when the store could not be reached and the
    call was let through (``on_store_error="allow"``)."""

    tool: str
    key: str
    first_at: float
    token: str = ""


@dataclass(frozen=True, slots=True)
class Replay:
    """A duplicate: the first call's outcome, to be given instead of running again."""

    tool: str
    key: str
    result: Any
    error: BaseException | None


def _answer(verdict: Replay | TerminalResult) -> Any:
    """What a call not run gets: the first call's result, its exception raised again, or the
    terminal result."""
    if isinstance(verdict, Replay):
        if verdict.error is not None:
            raise verdict.error
        return verdict.result
    return verdict


@dataclass(eq=False)
class IdempotencyArbiter:
    """Suppress duplicates of an identity key within ``window_seconds``.

    ``replay``: a duplicate gets the first call's outcome (its result, or its exception raised
    again); otherwise a terminal result. ``circuit_after``: after that many suppressed
    duplicates of one key, further ones get a ``circuit_open`` terminal result telling the model
    to stop (``None``: never). ``store``: ``"memory"`` (this process), ``"sqlite:///file.db"``
    (the processes of one host) or ``"redis://host:port/db"`` (several hosts), or a store
    object; ``None`` takes ``[guards] store`` (default memory). A claim not finished within
    ``lease_seconds`` is free again (a worker that died mid-call). ``on_store_error``:
    ``"allow"`` runs a call the store cannot check, ``"deny"`` answers it with a terminal
    result. At most ``max_keys`` keys are held (oldest dropped first); ``clock`` is injectable
    (seconds; memory: monotonic, SQLite: wall clock; Redis uses the server's).
    """

    config: Config | None = None
    window_seconds: float = 600.0
    replay: bool = True
    circuit_after: int | None = 3
    max_keys: int = 10_000
    clock: Callable[[], float] | None = None
    span_mode: SpanMode = "auto"
    tracer_provider: TracerProvider | None = None
    store: str | GuardStore | None = None
    lease_seconds: float | None = None
    on_store_error: Literal["allow", "deny"] | None = None
    _store: GuardStore = field(init=False)
    _lease: float = field(init=False)
    _errors: StoreErrors = field(init=False)

    def __post_init__(self) -> None:
        settings = self.config if self.config is not None else _default_config()
        self._lease, policy = store_settings(
            settings, self.window_seconds, self.lease_seconds, self.on_store_error
        )
        if self.max_keys < 1:
            raise ValueError(f"max_keys must be >= 1, got {self.max_keys!r}")
        if self.circuit_after is not None and self.circuit_after < 0:
            raise ValueError(f"circuit_after must be >= 0 or None, got {self.circuit_after!r}")
        self._errors = StoreErrors(policy, "guard", "calls", "refused")
        store = self.store if self.store is not None else settings.guards_store
        self._store = (
            open_store(store, self.max_keys, self.clock) if isinstance(store, str) else store
        )

    def __len__(self) -> int:
        return len(self._store)

    @property
    def store_errors(self) -> Counter[str]:
        """Calls that met an unreachable store, by ALLOWED / DENIED / NOT_STORED."""
        return self._errors.counts

    @property
    def evicted(self) -> int:
        """Keys dropped before their window ended, to stay within ``max_keys``."""
        return self._store.evicted

    def close(self) -> None:
        """Close the store's connections (a later call opens them again)."""
        self._store.close()

    def admit(self, tool: str, arguments: Any) -> Admitted | Replay | TerminalResult:
        """Decide one call: run it, replay the first outcome, or a terminal result."""
        key = idempotency_key(tool, arguments, self.config)
        token = uuid.uuid4().hex
        try:
            claim = self._store.claim(key, token, self._lease, self.window_seconds)
        except StoreError as e:
            if self._errors.policy == "allow":
                self._errors.met(ALLOWED, e)
                # on the call's own span when traced: it runs, so it is an attempt as well
                record_decision(tool, STORE_UNCHECKED, self.span_mode, self.tracer_provider)
                return Admitted(tool, key, 0.0)
            self._errors.met(DENIED, e)
            refused = store_unavailable(tool)
            record_decision(tool, refused.decision, self.span_mode, self.tracer_provider)
            return refused
        if claim.state == "claimed":
            return Admitted(tool, key, claim.first_at, token)
        outcome = claim.outcome
        error_class = outcome.error_class if outcome is not None else "ok"
        duplicates = claim.duplicates
        decision: TerminalResult | Replay
        if self.circuit_after is not None and duplicates > self.circuit_after:
            decision = circuit_open(tool, error_class, self.circuit_after)
        elif outcome is None:
            decision = in_progress(tool)
        elif self.replay and outcome.shared:
            decision = Replay(tool, key, outcome.result, outcome.error)
        else:
            decision = already_done(tool, error_class, duplicates)
        name = decision.decision if isinstance(decision, TerminalResult) else SUPPRESSED
        record_decision(tool, name, self.span_mode, self.tracer_provider)
        return decision

    def done(
        self, admitted: Admitted, result: Any = None, error: BaseException | None = None
    ) -> None:
        """Store the first call's outcome for replay."""
        if not admitted.token:
            return  # let through unchecked: there is no claim to finish
        error_class, _ = outcome_of(result, error, None)
        try:
            self._store.finish(admitted.key, admitted.token, Outcome(error_class, result, error))
        except StoreError as e:
            # the duplicates of this key get in-progress answers until its lease ends
            self._errors.met(NOT_STORED, e)

    def call(self, tool: str, arguments: Any, fn: Callable[[], T]) -> T | TerminalResult | Any:
        """Run ``fn`` once per identity key within the window."""
        verdict = self.admit(tool, arguments)
        if not isinstance(verdict, Admitted):
            return _answer(verdict)
        with reported(partial(self.done, verdict)) as ran:
            ran.result = fn()
        return ran.result

    async def acall(
        self, tool: str, arguments: Any, fn: Callable[[], Awaitable[T]]
    ) -> T | TerminalResult | Any:
        """:meth:`call` for coroutines."""
        verdict = self.admit(tool, arguments)
        if not isinstance(verdict, Admitted):
            return _answer(verdict)
        with reported(partial(self.done, verdict)) as ran:
            ran.result = await fn()
        return ran.result
