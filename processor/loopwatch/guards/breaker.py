"""The loop breaker: count attempts per attempt key in one turn and stop past the cap.

Framework-neutral. One :class:`LoopBreaker` holds the policy; each agent turn gets a
:class:`BreakerTurn` (``breaker.turn()``), which the adapters and ``guarded`` calls read from a
context variable, so concurrent turns in one process never share counts.
"""

from __future__ import annotations

import contextvars
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from opentelemetry.trace import TracerProvider

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.fingerprint import NOT_KNOWN
from loopwatch.core.identity import without_free_text
from loopwatch.core.keys import AttemptKey, attempt_key, identities
from loopwatch.core.outcomes import EMPTY, ERROR_CLASSES, OK, progress_fingerprint
from loopwatch.guards.outcome import outcome_of
from loopwatch.guards.spans import SpanMode, record_decision
from loopwatch.guards.terminal import (
    IN_FLIGHT,
    TerminalResult,
    budget_stop,
    no_rows_stop,
    repeat_stop,
)

T = TypeVar("T")


@dataclass(frozen=True)
class LoopBreaker:
    """The stopping policy.

    ``cap``: repeats allowed per attempt key, so ``cap + 1`` attempts run; ``None`` takes each
    tool's loop threshold minus one (default 2: the dashboards' loop threshold of 3 runs, the
    fourth is stopped). ``no_rows``: empty results in a row a tool may return before its next
    call is stopped (empty as the metrics read it: ``[]``, ``{}``, ``""``, ``null``, or the
    declared ``result`` path empty); ``None`` takes the no-rows threshold (default 3).
    ``budget``: tool calls run per turn, an outer bound (``None``: none).
    """

    config: Config = field(default_factory=Config)
    cap: int | None = None
    no_rows: int | None = None
    budget: int | None = None
    span_mode: SpanMode = "auto"
    tracer_provider: TracerProvider | None = None

    def __post_init__(self) -> None:
        for name in ("cap", "no_rows", "budget"):
            value = getattr(self, name)
            low = 0 if name == "cap" else 1
            if value is not None and (isinstance(value, bool) or value < low):
                raise ValueError(f"LoopBreaker {name} must be an integer >= {low}, got {value!r}")

    def attempts_allowed(self, declaration: ToolDeclaration | None) -> int:
        if self.cap is not None:
            return self.cap + 1
        return self.config.loop_threshold_for(declaration)

    def no_rows_allowed(self, declaration: ToolDeclaration | None) -> int:
        if self.no_rows is not None:
            return self.no_rows
        return self.config.no_rows_threshold_for(declaration)

    def new_turn(self) -> BreakerTurn:
        return BreakerTurn(self)

    @contextmanager
    def turn(self) -> Iterator[BreakerTurn]:
        """A new turn, current for the code (and tasks it starts) inside the ``with``."""
        state = BreakerTurn(self)
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


class BreakerTurn:
    """Counts of one turn. Thread-safe; parallel calls of one identity count as in flight."""

    def __init__(self, breaker: LoopBreaker) -> None:
        self.breaker = breaker
        self._lock = threading.Lock()
        self._attempts: Counter[AttemptKey] = Counter()
        # in flight by the identity a success would have (all arguments when undeclared), so
        # parallel calls that differ in their text are never taken for duplicates
        self._in_flight: Counter[tuple[str, str]] = Counter()
        # (tool, identity) -> outcome -> attempts: the keys of one identity, for the check
        self._by_identity: dict[tuple[str, str], Counter[str]] = {}
        self._streaks: Counter[str] = Counter()
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
        with self._lock:
            return dict(self._attempts)

    def before(self, tool: str, arguments: Any) -> Pending | TerminalResult:
        """Let a call through (:class:`Pending`, pass it to :meth:`after`) or stop it."""
        b = self.breaker
        declaration = b.config.declaration(tool)
        failed, succeeded = identities(tool, arguments, declaration)
        pending = Pending(tool, arguments, declaration, (tool, failed), (tool, succeeded))
        with self._lock:
            stop = self._stop(pending)
            if stop is None:
                self._in_flight[pending.succeeded] += 1
                self._ran += 1
                return pending
            self._decisions.append(stop)
            self._tools_disabled = True
        record_decision(tool, stop.decision, b.span_mode, b.tracer_provider)
        return stop

    def _outcomes(self, pending: Pending) -> list[tuple[str, int]]:
        """Attempts so far of each key this call could land in."""
        failed = self._by_identity.get(pending.failed, Counter())
        if pending.failed == pending.succeeded:
            return list(failed.items())
        succeeded = self._by_identity.get(pending.succeeded, Counter())
        return [(o, n) for o, n in failed.items() if o in _ERROR_CLASSES] + [
            (o, n) for o, n in succeeded.items() if o not in _ERROR_CLASSES
        ]

    def _stop(self, pending: Pending) -> TerminalResult | None:
        b = self.breaker
        tool, declaration = pending.tool, pending.declaration
        allowed = b.attempts_allowed(declaration)
        outcomes = self._outcomes(pending)
        worst = max(outcomes, key=lambda item: item[1]) if outcomes else None
        done = worst[1] if worst is not None else 0
        running = self._in_flight[pending.succeeded]
        if done + running >= allowed:
            fields = declaration.identity if declaration is not None else None
            if worst is None or running > done:
                return repeat_stop(tool, IN_FLIGHT, IN_FLIGHT, running, fields)
            outcome = worst[0]
            error_class = outcome if outcome in _ERROR_CLASSES else OK
            if fields is None and error_class != OK:
                fields = _kept_parameters(pending.arguments)
            return repeat_stop(tool, error_class, outcome, done, fields)
        rows_allowed = b.no_rows_allowed(declaration)
        if self._streaks[tool] >= rows_allowed:
            return no_rows_stop(tool, self._streaks[tool])
        if b.budget is not None and self._ran >= b.budget:
            return budget_stop(tool, b.budget)
        return None

    def after(
        self, pending: Pending, result: Any = None, error: BaseException | None = None
    ) -> AttemptKey:
        """Count a call that ran, with its result or the exception it raised. A success whose
        result fingerprint changed since its key's last call is progress: its key's attempts
        start again at 1 (core.summary.attempt_runs, the monitor's rule)."""
        error_class, outcome = outcome_of(result, error, pending.declaration)
        key = attempt_key(pending.tool, pending.arguments, outcome, pending.declaration)
        progress = NOT_KNOWN
        if error_class == OK:
            progress = progress_fingerprint(result, pending.declaration, outcome)[0]
        with self._lock:
            self._in_flight[pending.succeeded] -= 1
            by_outcome = self._by_identity.setdefault((key.tool, key.identity), Counter())
            previous = self._fingerprints.get(key, NOT_KNOWN)
            self._fingerprints[key] = progress
            if previous != progress and NOT_KNOWN not in (previous, progress):
                # the monitor's rule (core.summary.attempt_runs): a success whose result changed
                # since the key's last call made progress, and starts the key's attempts anew
                self._attempts[key] = 1
                by_outcome[outcome] = 1
            else:
                self._attempts[key] += 1
                by_outcome[outcome] += 1
            # as the processor's streak: an empty result extends it, anything else resets it
            empty = error_class == OK and outcome == EMPTY
            self._streaks[pending.tool] = self._streaks[pending.tool] + 1 if empty else 0
        return key

    def call(self, tool: str, arguments: Any, fn: Callable[[], T]) -> T | TerminalResult:
        """Run ``fn`` unless the breaker stops it; exceptions are counted and re-raised."""
        pending = self.before(tool, arguments)
        if isinstance(pending, TerminalResult):
            return pending
        try:
            result = fn()
        except Exception as e:
            self.after(pending, error=e)
            raise
        self.after(pending, result)
        return result

    async def acall(
        self, tool: str, arguments: Any, fn: Callable[[], Awaitable[T]]
    ) -> T | TerminalResult:
        """:meth:`call` for coroutines."""
        pending = self.before(tool, arguments)
        if isinstance(pending, TerminalResult):
            return pending
        try:
            result = await fn()
        except Exception as e:
            self.after(pending, error=e)
            raise
        self.after(pending, result)
        return result


_ERROR_CLASSES = frozenset(ERROR_CLASSES)


def _kept_parameters(arguments: Any) -> tuple[str, ...]:
    """The parameter names an inferred key kept (free text left out), for the stop message."""
    kept = without_free_text(arguments)
    return tuple(sorted(map(str, kept))) if isinstance(kept, dict) else ()


_CURRENT: contextvars.ContextVar[BreakerTurn | None] = contextvars.ContextVar(
    "loopwatch_breaker_turn", default=None
)


def current_turn() -> BreakerTurn | None:
    """The turn opened by the innermost ``with breaker.turn()``, if any."""
    return _CURRENT.get()
