"""The idempotency arbiter: a duplicate of a side-effecting call within a window is not run.

Keyed on :func:`idempotency_key` (identity fields), never on a hash of all arguments: a model
regenerating a failed ``create_ticket`` rewords ``summary`` every time, so a whole-arguments
hash would let every duplicate through.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from opentelemetry.trace import TracerProvider

from loopwatch.core.config import Config
from loopwatch.guards.idempotency import idempotency_key
from loopwatch.guards.outcome import outcome_of
from loopwatch.guards.spans import SpanMode, record_decision
from loopwatch.guards.terminal import SUPPRESSED, TerminalResult, circuit_open, in_progress

T = TypeVar("T")


@dataclass
class _Entry:
    first_at: float
    done: bool = False
    result: Any = None
    error: BaseException | None = None
    error_class: str = "ok"
    suppressed: int = 0


@dataclass(frozen=True, slots=True)
class Admitted:
    """The first call of its key in the window: run it and report with :meth:`Arbiter.done`."""

    tool: str
    key: str
    first_at: float


@dataclass(frozen=True, slots=True)
class Replay:
    """A duplicate: the first call's outcome, to be given instead of running again."""

    tool: str
    key: str
    result: Any
    error: BaseException | None


@dataclass(eq=False)
class IdempotencyArbiter:
    """Suppress duplicates of an identity key within ``window_seconds``.

    ``replay``: a duplicate gets the first call's outcome (its result, or its exception raised
    again); otherwise a terminal result. ``circuit_after``: after that many suppressed
    duplicates of one key, further ones get a ``circuit_open`` terminal result telling the model
    to stop (``None``: never). At most ``max_keys`` keys are held (oldest dropped first);
    ``clock`` is injectable (seconds, monotonic).
    """

    config: Config | None = None
    window_seconds: float = 600.0
    replay: bool = True
    circuit_after: int | None = 3
    max_keys: int = 10_000
    clock: Callable[[], float] = time.monotonic
    span_mode: SpanMode = "auto"
    tracer_provider: TracerProvider | None = None
    _entries: OrderedDict[str, _Entry] = field(default_factory=OrderedDict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    evicted: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.window_seconds <= 0:
            raise ValueError(f"window_seconds must be > 0, got {self.window_seconds!r}")
        if self.max_keys < 1:
            raise ValueError(f"max_keys must be >= 1, got {self.max_keys!r}")
        if self.circuit_after is not None and self.circuit_after < 0:
            raise ValueError(f"circuit_after must be >= 0 or None, got {self.circuit_after!r}")

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _expire(self, now: float) -> None:
        # entries are in first-call order, so expired ones are at the front
        while self._entries:
            first = next(iter(self._entries.values()))
            if now - first.first_at < self.window_seconds:
                break
            self._entries.popitem(last=False)

    def admit(self, tool: str, arguments: Any) -> Admitted | Replay | TerminalResult:
        """Decide one call: run it, replay the first outcome, or a terminal result."""
        key = idempotency_key(tool, arguments, self.config)
        now = self.clock()
        with self._lock:
            self._expire(now)
            entry = self._entries.get(key)
            if entry is None:
                while len(self._entries) >= self.max_keys:
                    self._entries.popitem(last=False)
                    self.evicted += 1
                self._entries[key] = _Entry(first_at=now)
                return Admitted(tool, key, now)
            if self.circuit_after is not None and entry.suppressed >= self.circuit_after:
                decision: TerminalResult | Replay = circuit_open(
                    tool, entry.error_class, entry.suppressed
                )
            else:
                entry.suppressed += 1
                if not entry.done:
                    decision = in_progress(tool)
                elif self.replay:
                    decision = Replay(tool, key, entry.result, entry.error)
                else:
                    decision = TerminalResult(
                        SUPPRESSED,
                        tool,
                        entry.error_class,
                        entry.suppressed,
                        f"SUPPRESSED by loopwatch: {tool} was not run again; the same request was "
                        "already made. Do not retry. Report the first outcome to the user.",
                    )
        name = decision.decision if isinstance(decision, TerminalResult) else SUPPRESSED
        record_decision(tool, name, self.span_mode, self.tracer_provider)
        return decision

    def done(
        self, admitted: Admitted, result: Any = None, error: BaseException | None = None
    ) -> None:
        """Store the first call's outcome for replay."""
        error_class, _ = outcome_of(result, error, None)
        with self._lock:
            entry = self._entries.get(admitted.key)
            # a call slower than the window: its key may since belong to a newer call
            if entry is not None and entry.first_at == admitted.first_at:
                entry.done, entry.result, entry.error = True, result, error
                entry.error_class = error_class

    def call(self, tool: str, arguments: Any, fn: Callable[[], T]) -> T | TerminalResult | Any:
        """Run ``fn`` once per identity key within the window."""
        verdict = self.admit(tool, arguments)
        if isinstance(verdict, Replay):
            if verdict.error is not None:
                raise verdict.error
            return verdict.result
        if isinstance(verdict, TerminalResult):
            return verdict
        try:
            result = fn()
        except Exception as e:
            self.done(verdict, error=e)
            raise
        self.done(verdict, result)
        return result

    async def acall(
        self, tool: str, arguments: Any, fn: Callable[[], Awaitable[T]]
    ) -> T | TerminalResult | Any:
        """:meth:`call` for coroutines."""
        verdict = self.admit(tool, arguments)
        if isinstance(verdict, Replay):
            if verdict.error is not None:
                raise verdict.error
            return verdict.result
        if isinstance(verdict, TerminalResult):
            return verdict
        try:
            result = await fn()
        except Exception as e:
            self.done(verdict, error=e)
            raise
        self.done(verdict, result)
        return result
