"""pydantic-ai adapter: a capability that runs every tool call through a loop breaker.

``Agent(model, capabilities=[LoopBreakerCapability(LoopBreaker(config))])``: each run is one
turn with its own counts; a stopped call answers the model with the terminal result, and every
later model request of that run is made without function tools, so the model has to answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic_ai import RunContext
from pydantic_ai.capabilities.abstract import AbstractCapability, WrapToolExecuteHandler
from pydantic_ai.exceptions import ToolRetryError
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition

from loopwatch.guards.breaker import BreakerTurn, LoopBreaker
from loopwatch.guards.decision_spans import record_error_on_tool_span
from loopwatch.guards.terminal import TerminalResult


class _RetryError(Exception):
    """A tool retry (``ModelRetry``, a tool timeout) as the breaker classifies it."""


def _retry_error(e: ToolRetryError) -> Exception:
    content = getattr(e.tool_retry, "content", None)
    return _RetryError(content if isinstance(content, str) else str(e))


@dataclass
class LoopBreakerCapability(AbstractCapability[Any]):
    """Wrap tool execution with ``breaker``; after a stop, end the run with tools disabled.

    ``errors="return"`` hands an exception raised by a tool to the model as ``Error: ...`` text
    (recorded on the tool span), as most agent loops do; ``"raise"`` lets it propagate.
    ``scope``: the run's scope from its context (``lambda ctx: ctx.deps.task_id``): runs given
    the same one (a task retried on another worker) share their counts through the breaker's
    store; ``None``, or a scope of ``None``: each run counts alone.
    """

    breaker: LoopBreaker = field(default_factory=LoopBreaker)
    errors: Literal["return", "raise"] = "return"
    turn: BreakerTurn | None = None
    scope: Callable[[RunContext[Any]], str | None] | None = None

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        scope = self.scope(ctx) if self.scope is not None else None
        return replace(self, turn=self.breaker.new_turn(scope))

    def _turn(self) -> BreakerTurn:
        if self.turn is None:  # used outside a run: a turn of its own
            self.turn = self.breaker.new_turn()
        return self.turn

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        return [] if self._turn().tools_disabled else tool_defs

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        turn = self._turn()
        pending = turn.before(call.tool_name, call.args_as_dict())
        if isinstance(pending, TerminalResult):
            return str(pending)
        try:
            result = await handler(args)
        except ToolRetryError as e:
            turn.after(pending, error=_retry_error(e))
            raise
        except Exception as e:
            turn.after(pending, error=e)
            if self.errors == "raise":
                raise
            record_error_on_tool_span(e)
            return f"Error: {type(e).__name__}: {e}"
        turn.after(pending, result)
        return result
