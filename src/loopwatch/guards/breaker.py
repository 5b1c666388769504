"""The loop breaker: count attempts per attempt key in one turn and stop past the cap.

Framework-neutral. One :class:`LoopBreaker` holds the policy; each agent turn gets a
:class:`BreakerTurn` (``breaker.turn()``), which the adapters and ``guarded`` calls read from a
context variable, so concurrent turns in one process never share counts. Turns given the same
``scope`` (``breaker.turn(scope=task_id)``) share theirs through the breaker's store, across
processes and hosts (loopwatch.guards.breaker_counts).
"""

from __future__ import annotations

import contextvars
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal, TypeVar, cast

from opentelemetry.trace import TracerProvider

from loopwatch.core.config import Config
from loopwatch.core.declarations import ROWS, ToolDeclaration
from loopwatch.core.effects import READ, effect_of, written_arguments
from loopwatch.core.fingerprint import NOT_KNOWN
from loopwatch.core.identity import without_free_text
from loopwatch.core.keys import AttemptKey, attempt_key, identities
from loopwatch.core.outcomes import EMPTY, ERROR_CLASSES, OK, progress_fingerprint
from loopwatch.guards import breaker_counts
from loopwatch.guards.breaker_counts import Ask, Done, TurnCounts, Verdict, scope_key
from loopwatch.guards.decision_spans import SpanMode, record_decision
from loopwatch.guards.outcome import outcome_of, reported
from loopwatch.guards.store_errors import ALLOWED, DENIED, NOT_STORED, StoreErrors, store_settings
from loopwatch.guards.stores import CountStore, StoreError, open_counts
from loopwatch.guards.terminal import (
    IN_FLIGHT,
    STORE_UNCHECKED,
    TerminalResult,
    budget_stop,
    no_rows_stop,
    repeat_stop,
    store_unavailable,
)

T = TypeVar("T")


@dataclass(eq=False)
class _Shared:
    """The breaker's store and what it met there (a LoopBreaker itself is immutable)."""

    counts: CountStore
    lease_seconds: float
    errors: StoreErrors


@dataclass(frozen=True)
class LoopBreaker:
    """The stopping policy.

    ``cap``: repeats allowed per attempt key, so ``cap + 1`` attempts run; ``None`` takes each
    tool's loop threshold minus one (default 2: the dashboards' loop threshold of 3 runs, the
    fourth is stopped). ``no_rows``: empty results in a row a tool may return before its next
    call is stopped (empty as the metrics read it: ``[]``, ``{}``, ``""``, ``null``, or the
    declared ``result`` path empty); ``None`` takes the no-rows threshold (default 3).
    ``budget``: tool calls run per turn, an outer bound (``None``: none).

    Turns given a ``scope`` share their attempt counts and no-rows streaks (never the budget)
    in ``store`` (``None``: ``[guards] store``; ``"memory"``, ``"sqlite:///file.db"``,
    ``"redis://host:port/db"`` or a store object) for ``window_seconds`` after the scope's last
    counted call. A call that runs is in flight for at most ``lease_seconds`` (``None``:
    ``[guards] lease_seconds``). ``on_store_error`` (``None``: ``[guards] on_store_error``):
    ``"allow"`` runs a call the store cannot check, ``"deny"`` stops it. At most
    ``max_scopes`` scopes are held in memory or SQLite (oldest dropped first); ``clock``
    (seconds) is injectable as the arbiter's.
    """

    config: Config = field(default_factory=Config)
    cap: int | None = None
    no_rows: int | None = None
    budget: int | None = None
    span_mode: SpanMode = "auto"
    tracer_provider: TracerProvider | None = None
    store: str | CountStore | None = None
    window_seconds: float = 600.0
    lease_seconds: float | None = None
    on_store_error: Literal["allow", "deny"] | None = None
    max_scopes: int = 10_000
    clock: Callable[[], float] | None = None
    _shared: _Shared = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("cap", "no_rows", "budget"):
            value = getattr(self, name)
            low = 0 if name == "cap" else 1
            if value is not None and (isinstance(value, bool) or value < low):
                raise ValueError(f"LoopBreaker {name} must be an integer >= {low}, got {value!r}")
        lease, policy = store_settings(
            self.config, self.window_seconds, self.lease_seconds, self.on_store_error
        )
        if self.max_scopes < 1:
            raise ValueError(f"max_scopes must be >= 1, got {self.max_scopes!r}")
        errors = StoreErrors(policy, "breaker", "calls of scoped turns", "stopped")
        store = self.store if self.store is not None else self.config.guards_store
        if isinstance(store, str):
            store = open_counts(store, self.max_scopes, self.clock)
        object.__setattr__(self, "_shared", _Shared(store, lease, errors))

    @property
    def store_errors(self) -> Counter[str]:
        """Calls of scoped turns that met an unreachable store, by ALLOWED / DENIED /
        NOT_STORED (as the arbiter's ``store_errors``)."""
        return self._shared.errors.counts

    @property
    def evicted(self) -> int:
        """Scopes dropped before their window ended (and full scopes that started over)."""
        return self._shared.counts.evicted

    def close(self) -> None:
        """Close the store's connections (a later call opens them again)."""
        self._shared.counts.close()

    def _counts(self, scope: str | None) -> TurnCounts:
        if scope is None:
            return TurnCounts.private()
        shared = self._shared
        return TurnCounts(
            shared.counts, scope_key(scope), shared.lease_seconds, self.window_seconds
        )

    def attempts_allowed(self, declaration: ToolDeclaration | None) -> int:
        if self.cap is not None:
            return self.cap + 1
        return self.config.loop_threshold_for(declaration)

    def no_rows_allowed(self, declaration: ToolDeclaration | None) -> int:
        if self.no_rows is not None:
            return self.no_rows
        return self.config.no_rows_threshold_for(declaration)

    def new_turn(self, scope: str | None = None) -> BreakerTurn:
        return BreakerTurn(self, scope)

    @contextmanager
    def turn(self, scope: str | None = None) -> Iterator[BreakerTurn]:
        """A new turn, current for the code (and tasks it starts) inside the ``with``.
        ``scope``: turns given the same one (a task id that is retried on other workers) share
        their counts through the breaker's store; ``None``: this turn's own counts."""
        state = BreakerTurn(self, scope)
        token = _CURRENT.set(state)
        try:
            yield state
        finally:
            _CURRENT.reset(token)


@dataclass(frozen=True, slots=True)
class Pending:
    """A call let through, waiting for its outcome."""

    tool: str
    arguments: Any
    declaration: ToolDeclaration | None
    # (tool, identity) of the key the call gets if it fails, and if it succeeds: they differ
    # for an undeclared tool whose arguments hold free text (core.keys.attempt_key)
    failed: tuple[str, str]
    succeeded: tuple[str, str]
    effect: str = READ  # core.effects: a write's success never progresses
    # the reservation in the counts; empty when the store could not be reached and the call
    # was let through (on_store_error="allow"): there is nothing to record it against
    token: str = ""


class BreakerTurn:
    """One turn's calls. Thread-safe; parallel calls of one identity count as in flight. The
    counts it decides on are its own, or its scope's (shared with the other turns given it)."""

    def __init__(self, breaker: LoopBreaker, scope: str | None = None) -> None:
        self.breaker = breaker
        self.scope = scope
        self._counts = breaker._counts(scope)
        self._lock = threading.Lock()
        # this turn's attempts (a scope's count more: the other turns' too)
        self._attempts: Counter[AttemptKey] = Counter()
        # key -> the result fingerprint of its last call: a change on success is progress
        self._fingerprints: dict[AttemptKey, int] = {}
        self._ran = 0
        self._decisions: list[TerminalResult] = []
        self._tools_disabled = False

    @property
    def tools_disabled(self) -> bool:
        """True once a call was stopped: the next model call must be made without tools."""
        return self._tools_disabled

    @property
    def decisions(self) -> tuple[TerminalResult, ...]:
        with self._lock:
            return tuple(self._decisions)

    @property
    def calls_run(self) -> int:
        return self._ran

    def attempts(self) -> dict[AttemptKey, int]:
        """The attempts of the calls this turn ran."""
        with self._lock:
            return dict(self._attempts)

    def before(self, tool: str, arguments: Any) -> Pending | TerminalResult:
        """Let a call through (:class:`Pending`, pass it to :meth:`after`) or stop it."""
        b = self.breaker
        declaration = b.config.declaration(tool)
        failed, succeeded = identities(tool, arguments, declaration)
        effect = effect_of(tool, arguments, declaration.effect if declaration else None)[0]
        pending = Pending(tool, arguments, declaration, (tool, failed), (tool, succeeded), effect)
        with self._lock:  # held over the store: the budget is this turn's, checked and spent
            ask = Ask(
                tool,
                failed,
                succeeded,
                b.attempts_allowed(declaration),
                b.no_rows_allowed(declaration),
                b.budget is not None and self._ran >= b.budget,
            )
            try:
                verdict = self._counts.reserve(ask)
                stop, token = self._stop(pending, verdict), verdict.token
            except StoreError as e:
                stop, token = self._unchecked(tool, e), ""
            if stop is None:
                self._ran += 1
                return replace(pending, token=token)
            self._decisions.append(stop)
            self._tools_disabled = True
        record_decision(tool, stop.decision, b.span_mode, b.tracer_provider)
        return stop

    def _unchecked(self, tool: str, error: StoreError) -> TerminalResult | None:
        """The store could not be reached: the breaker's on_store_error decides."""
        b = self.breaker
        errors = b._shared.errors
        if errors.policy == "allow":
            errors.met(ALLOWED, error)
            # on the call's own span when traced: it runs, so it is an attempt as well
            record_decision(tool, STORE_UNCHECKED, b.span_mode, b.tracer_provider)
            return None
        errors.met(DENIED, error)
        return store_unavailable(tool)

    def _stop(self, pending: Pending, verdict: Verdict) -> TerminalResult | None:
        tool, declaration = pending.tool, pending.declaration
        if verdict.stop in (breaker_counts.REPEAT, breaker_counts.IN_FLIGHT):
            fields = declaration.identity if declaration is not None else None
            if verdict.stop == breaker_counts.IN_FLIGHT:
                return repeat_stop(tool, IN_FLIGHT, IN_FLIGHT, verdict.count, fields)
            outcome = verdict.outcome
            error_class = outcome if outcome in _ERROR_CLASSES else OK
            write = pending.effect != READ
            if fields is None and error_class != OK:
                fields = _kept_parameters(without_free_text(pending.arguments))
            elif fields is None and write:
                fields = _kept_parameters(written_arguments(tool, pending.arguments))
            return repeat_stop(tool, error_class, outcome, verdict.count, fields, write)
        if verdict.stop == breaker_counts.NO_ROWS:
            return no_rows_stop(tool, verdict.count)
        if verdict.stop == breaker_counts.BUDGET:
            assert self.breaker.budget is not None
            return budget_stop(tool, self.breaker.budget)
        return None

    def after(
        self, pending: Pending, result: Any = None, error: BaseException | None = None
    ) -> AttemptKey:
        """Count a call that ran, with its result or the exception it raised. A success whose
        result fingerprint changed since its key's last call is progress: its key's attempts
        start again at 1 (core.summary.attempt_runs, the monitor's rule). A write's success
        never is: each is an attempt of its key."""
        error_class, outcome = outcome_of(result, error, pending.declaration)
        key = attempt_key(
            pending.tool, pending.arguments, outcome, pending.declaration, effect=pending.effect
        )
        progress = NOT_KNOWN
        if error_class == OK and pending.effect == READ:
            progress = progress_fingerprint(result, pending.declaration, outcome)[0]
        with self._lock:
            previous = self._fingerprints.get(key, NOT_KNOWN)
            self._fingerprints[key] = progress
            if previous != progress and NOT_KNOWN not in (previous, progress):
                self._attempts[key] = 1  # progress: the key's attempts start anew
            else:
                self._attempts[key] += 1
        if not pending.token:
            return key  # let through unchecked: there is no reservation to record against
        # as the processor's streak: an empty result extends it, anything else resets it
        declared = pending.declaration
        rows = pending.effect == READ or (declared is not None and declared.result == ROWS)
        empty = error_class == OK and outcome == EMPTY and rows
        identity = pending.succeeded[1]
        done = Done(
            pending.tool, identity, pending.token, key.identity, key.outcome, empty, progress
        )
        try:
            self._counts.record(done)
        except StoreError as e:
            # its reservation stays in flight until its lease ends
            self.breaker._shared.errors.met(NOT_STORED, e)
        return key

    def call(self, tool: str, arguments: Any, fn: Callable[[], T]) -> T | TerminalResult:
        """Run ``fn`` unless the breaker stops it; exceptions are counted and re-raised."""
        pending = self.before(tool, arguments)
        if isinstance(pending, TerminalResult):
            return pending
        with reported(partial(self.after, pending)) as ran:
            ran.result = fn()
        return cast(T, ran.result)

    async def acall(
        self, tool: str, arguments: Any, fn: Callable[[], Awaitable[T]]
    ) -> T | TerminalResult:
        """:meth:`call` for coroutines."""
        pending = self.before(tool, arguments)
        if isinstance(pending, TerminalResult):
            return pending
        with reported(partial(self.after, pending)) as ran:
            ran.result = await fn()
        return cast(T, ran.result)


_ERROR_CLASSES = frozenset(ERROR_CLASSES)


def _kept_parameters(kept: Any) -> tuple[str, ...]:
    """The parameter names an inferred key kept (free text or prose left out), for the stop
    message."""
    return tuple(sorted(map(str, kept))) if isinstance(kept, dict) else ()


_CURRENT: contextvars.ContextVar[BreakerTurn | None] = contextvars.ContextVar(
    "loopwatch_breaker_turn", default=None
)


def current_turn() -> BreakerTurn | None:
    """The turn opened by the innermost ``with breaker.turn()``, if any."""
    return _CURRENT.get()
