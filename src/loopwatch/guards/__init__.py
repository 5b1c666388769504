"""Guards that stop loops, keyed by the same attempt key the dashboards count."""

from loopwatch.guards.arbiter import IdempotencyArbiter
from loopwatch.guards.breaker import BreakerTurn, LoopBreaker, current_turn
from loopwatch.guards.idempotency import UndeclaredToolError, idempotency_key
from loopwatch.guards.terminal import TerminalResult

__all__ = [
    "BreakerTurn",
    "IdempotencyArbiter",
    "LoopBreaker",
    "TerminalResult",
    "UndeclaredToolError",
    "current_turn",
    "idempotency_key",
]
