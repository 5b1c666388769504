"""loopwatch: catch LLM-agent tool-call loops from OpenTelemetry spans."""

# first: with LOOPWATCH_PURE_PYTHON set, it makes the imports below find the sources only
from loopwatch import compiled as _compiled  # noqa: F401
from loopwatch.attach.instrument import instrument
from loopwatch.attach.own_spans import Turn, turn
from loopwatch.attach.processor import LoopwatchSpanProcessor
from loopwatch.core.config import Config, ConfigError, load_config
from loopwatch.core.declarations import ToolDeclaration, tool
from loopwatch.core.keys import AttemptKey, attempt_key
from loopwatch.guards.idempotency import UndeclaredToolError, idempotency_key
from loopwatch.version import VERSION

__version__ = VERSION

__all__ = [
    "AttemptKey",
    "Config",
    "ConfigError",
    "LoopwatchSpanProcessor",
    "ToolDeclaration",
    "Turn",
    "UndeclaredToolError",
    "attempt_key",
    "idempotency_key",
    "instrument",
    "load_config",
    "tool",
    "turn",
]
