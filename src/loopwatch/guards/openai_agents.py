"""OpenAI Agents SDK adapter: function tools that run through a loop breaker.

``agent = guard_agent(agent)`` wraps every ``FunctionTool``; run it inside a turn
(``await run(agent, input, breaker)`` or ``with breaker.turn(): await Runner.run(...)``). A
stopped call answers the model with the terminal result, and from then on the tools report
themselves disabled (``is_enabled``), so the next model call is made with no tools and the
model has to answer.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from typing import Any, Literal

from agents import Agent, FunctionTool, RunContextWrapper, Runner, RunResult
from agents.tool_context import ToolContext
from agents.tracing import get_current_span

from loopwatch.guards.breaker import BreakerTurn, LoopBreaker, current_turn
from loopwatch.guards.decision_spans import record_error_on_tool_span
from loopwatch.guards.terminal import TerminalResult


class _ReportedError(Exception):
    """An error the SDK's failure handler already turned into text for the model."""


def _turn() -> BreakerTurn:
    turn = current_turn()
    if turn is None:
        raise RuntimeError(
            "a loopwatch-guarded tool ran outside a turn: run the agent with "
            "loopwatch.guards.openai_agents.run(...) or inside `with breaker.turn():`"
        )
    return turn


def _arguments(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except json.JSONDecodeError:
        return text


def guard_tool(tool: FunctionTool, errors: Literal["return", "raise"] = "return") -> FunctionTool:
    """A copy of ``tool`` whose calls go through the current turn's breaker.

    An exception the tool raises (``failure_error_function=None``) is counted with its error
    class; ``errors="return"`` then hands it to the model as ``Error: ...`` text.
    """
    invoke_original = tool.on_invoke_tool
    enabled_original = tool.is_enabled

    async def on_invoke_tool(ctx: ToolContext[Any], input: str) -> Any:
        turn = _turn()
        pending = turn.before(tool.name, _arguments(input))
        if isinstance(pending, TerminalResult):
            return str(pending)
        sdk_span = get_current_span()
        try:
            result = await invoke_original(ctx, input)
        except Exception as e:
            turn.after(pending, error=e)
            if errors == "raise":
                raise
            record_error_on_tool_span(e)
            return f"Error: {type(e).__name__}: {e}"
        handled = getattr(sdk_span, "error", None) if sdk_span is not None else None
        if handled:  # the SDK's failure handler caught an exception and answered with text
            turn.after(pending, error=_ReportedError(f"{result} {handled.get('data') or ''}"))
        else:
            turn.after(pending, result)
        return result

    async def is_enabled(ctx: RunContextWrapper[Any], agent: Any) -> bool:
        turn = current_turn()
        if turn is not None and turn.tools_disabled:
            return False
        if callable(enabled_original):
            value = enabled_original(ctx, agent)
            return bool(await value) if inspect.isawaitable(value) else bool(value)
        return bool(enabled_original)

    guarded: FunctionTool = dataclasses.replace(
        tool, on_invoke_tool=on_invoke_tool, is_enabled=is_enabled
    )
    return guarded


def guard_agent(agent: Agent[Any], errors: Literal["return", "raise"] = "return") -> Agent[Any]:
    """A clone of ``agent`` with every function tool guarded (other tools unchanged)."""
    tools = [guard_tool(t, errors) if isinstance(t, FunctionTool) else t for t in agent.tools]
    return agent.clone(tools=tools)


async def run(
    agent: Agent[Any], input: Any, breaker: LoopBreaker, scope: str | None = None, **kwargs: Any
) -> tuple[RunResult, BreakerTurn]:
    """``Runner.run`` as one breaker turn; returns the result and the turn's counts. ``scope``:
    runs given the same one (a task retried on another worker) share their counts through the
    breaker's store."""
    with breaker.turn(scope) as turn:
        result = await Runner.run(agent, input, **kwargs)
    return result, turn
