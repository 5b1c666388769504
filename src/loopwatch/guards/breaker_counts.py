"""The loop breaker's counts: what a call is decided on before it runs, and what it adds after.

Two operations, each atomic in its store: :meth:`TurnCounts.reserve` checks a call against the
counts and, when it may run, reserves it as in flight (with a lease, so a worker that dies
mid-call does not hold it); :meth:`TurnCounts.record` ends the reservation and counts the call's
outcome. A turn without a scope keeps its own counts in memory; turns given one ``scope`` share
the scope's counts in the breaker's store (loopwatch.guards.stores).

A scope's fields: ``k`` per (tool, identity): each outcome's attempts and the result
fingerprint of its last call; ``r`` per (tool, identity a success would have): the calls in
flight and their leases; ``s`` per tool: empty results in a row.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass
from typing import Any, Final

from loopwatch.core.fingerprint import NOT_KNOWN
from loopwatch.core.identity import short_hash
from loopwatch.core.outcomes import ERROR_CLASSES
from loopwatch.guards.stores import CountStore, MemoryCounts

# Verdict.stop: why a call may not run ("" when it may)
REPEAT, IN_FLIGHT, NO_ROWS, BUDGET = "repeat", "in_flight", "no_rows", "budget"
# outcomes kept per identity; past it the least attempted one is dropped (it cannot be the most)
MAX_OUTCOMES: Final = 64
_SEP: Final = "\x1f"
_ERROR_CLASSES: Final = frozenset(ERROR_CLASSES)


@dataclass(frozen=True, slots=True)
class Ask:
    """One call about to run. ``failed``/``succeeded``: its identity if it fails, if it
    succeeds (core.keys.identities). ``budget_spent``: the turn has run its budget."""

    tool: str
    failed: str
    succeeded: str
    allowed: int
    rows_allowed: int
    budget_spent: bool = False


@dataclass(frozen=True, slots=True)
class Verdict:
    """``stop`` empty: run the call, then :meth:`TurnCounts.record` it with ``token``.
    ``repeat``: ``count`` attempts of ``outcome`` used the cap; ``in_flight``: ``count`` calls of
    the identity are running; ``no_rows``: ``count`` empty results in a row; ``budget``."""

    stop: str
    outcome: str = ""
    count: int = 0
    token: str = ""


@dataclass(frozen=True, slots=True)
class Done:
    """A call that ran: its reservation, the identity and outcome of its attempt key, whether
    its result was empty, and its result fingerprint (NOT_KNOWN: not read as progress)."""

    tool: str
    succeeded: str
    token: str
    identity: str
    outcome: str
    empty: bool
    progress: int = NOT_KNOWN


def scope_key(scope: str) -> str:
    """What a store keeps of a scope: a hash (a task or conversation id never leaves)."""
    return "s" + short_hash(scope, 32)


class TurnCounts:
    """The counts one turn decides on, in ``store`` under ``scope`` (a :func:`scope_key`)."""

    def __init__(
        self, store: CountStore, scope: str, lease_seconds: float, window_seconds: float
    ) -> None:
        self.store = store
        self.scope = scope
        self.lease_seconds = lease_seconds
        self.window_seconds = window_seconds

    @classmethod
    def private(cls) -> TurnCounts:
        """A turn's own counts in memory: no lease (the turn's process is the caller's) and no
        window (they last as long as the turn)."""
        return cls(MemoryCounts(1, lambda: 0.0), "", math.inf, math.inf)

    def reserve(self, ask: Ask) -> Verdict:
        """Decide ``ask`` and reserve it when it may run. Raises StoreError."""
        k_failed = _field("k", ask.tool, ask.failed)
        k_succeeded = _field("k", ask.tool, ask.succeeded)
        running_field = _field("r", ask.tool, ask.succeeded)
        streak_field = _field("s", ask.tool)
        token = uuid.uuid4().hex
        verdicts: list[Verdict] = []

        def change(values: dict[str, str], now: float) -> dict[str, str | None]:
            verdicts.clear()  # a retried update decides again on what it read
            failed = _outcomes(values.get(k_failed))
            if k_failed == k_succeeded:
                counts = [(o, c[0]) for o, c in failed.items()]
            else:
                succeeded = _outcomes(values.get(k_succeeded))
                counts = [(o, c[0]) for o, c in failed.items() if o in _ERROR_CLASSES] + [
                    (o, c[0]) for o, c in succeeded.items() if o not in _ERROR_CLASSES
                ]
            running = _running(values.get(running_field), now)
            worst = max(counts, key=lambda item: item[1]) if counts else None
            done = worst[1] if worst is not None else 0
            if done + len(running) >= ask.allowed:
                if worst is None or len(running) > done:
                    verdicts.append(Verdict(IN_FLIGHT, IN_FLIGHT, len(running)))
                else:
                    verdicts.append(Verdict(REPEAT, worst[0], done))
                return {}
            streak = _int(values.get(streak_field))
            if streak >= ask.rows_allowed:
                verdicts.append(Verdict(NO_ROWS, count=streak))
                return {}
            if ask.budget_spent:
                verdicts.append(Verdict(BUDGET))
                return {}
            running[token] = now + self.lease_seconds
            verdicts.append(Verdict("", token=token))
            return {running_field: json.dumps(running)}

        fields = tuple(dict.fromkeys((k_failed, k_succeeded, running_field, streak_field)))
        self.store.update(self.scope, fields, self.window_seconds, change)
        return verdicts[0]

    def record(self, done: Done) -> None:
        """End ``done``'s reservation and count its attempt. Raises StoreError."""
        key_field = _field("k", done.tool, done.identity)
        running_field = _field("r", done.tool, done.succeeded)
        streak_field = _field("s", done.tool)

        def change(values: dict[str, str], now: float) -> dict[str, str | None]:
            running = _running(values.get(running_field), now)
            running.pop(done.token, None)
            outcomes = _outcomes(values.get(key_field))
            n, previous = outcomes.get(done.outcome, (0, NOT_KNOWN))
            # the monitor's rule (core.summary.attempt_runs): a result that changed since the
            # key's last call made progress, and starts the key's attempts anew
            progressed = previous != done.progress and NOT_KNOWN not in (previous, done.progress)
            outcomes[done.outcome] = (1 if progressed else n + 1, done.progress)
            while len(outcomes) > MAX_OUTCOMES:
                least = min((o for o in outcomes if o != done.outcome), key=lambda o: outcomes[o])
                del outcomes[least]
            # as the processor's streak: an empty result extends it, anything else resets it
            streak = _int(values.get(streak_field)) + 1 if done.empty else 0
            return {
                running_field: json.dumps(running) if running else None,
                key_field: json.dumps({o: list(c) for o, c in outcomes.items()}),
                streak_field: str(streak) if streak else None,
            }

        self.store.update(
            self.scope, (key_field, running_field, streak_field), self.window_seconds, change
        )


def _field(kind: str, *parts: str) -> str:
    return _SEP.join((kind, *parts))


def _load(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None  # written by something else: read as nothing rather than fail the call


def _outcomes(text: str | None) -> dict[str, tuple[int, int]]:
    """outcome -> (attempts, result fingerprint of the last call)."""
    doc = _load(text)
    if not isinstance(doc, dict):
        return {}
    out: dict[str, tuple[int, int]] = {}
    for outcome, pair in doc.items():
        if isinstance(pair, list) and len(pair) == 2 and all(type(v) is int for v in pair):
            out[str(outcome)] = (pair[0], pair[1])
    return out


def _running(text: str | None, now: float) -> dict[str, float]:
    """token -> lease end, leases that ended left out (their worker died mid-call)."""
    doc = _load(text)
    if not isinstance(doc, dict):
        return {}
    return {
        str(t): float(u) for t, u in doc.items() if isinstance(u, int | float) and float(u) > now
    }


def _int(text: str | None) -> int:
    try:
        return int(text) if text is not None else 0
    except ValueError:
        return 0
