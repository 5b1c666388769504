"""The coding agents' own spans: Claude Code's span beta (``claude_code.interaction`` →
``claude_code.tool`` → ``claude_code.tool.execution``) and gemini-cli's ``tool_call`` spans.

Claude Code writes the command on ``claude_code.tool`` (``full_command``) and the outcome on
its child ``claude_code.tool.execution`` (status ERROR, ``error.type``): the child is read as an
inner layer of the call (core.layers), so the call has both. gemini-cli marks its tool spans
``gen_ai.operation.name = tool_call`` rather than ``execute_tool``, and makes each tool call and
each model call a trace of its own, without the prompt they answer: its turns are read from
its events (``prompt_id``), which it always sends with them, so its own spans are links only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from loopwatch.conventions.emitter import TOOL, TURN, UNMARKED, Emitter
from loopwatch.conventions.family import Family
from loopwatch.core.layers import INNER_LAYER
from loopwatch.core.span_view import SpanView

OPERATION: Final = "gen_ai.operation.name"
INTERACTION: Final = "claude_code.interaction"
TOOL_SPAN: Final = "claude_code.tool"
EXECUTION: Final = INNER_LAYER  # claude_code.tool.execution

CODING_AGENTS: Final = Family(
    name="coding_agents",
    tool=((OPERATION, "tool_call"),),
    tool_name=("gen_ai.tool.name", "tool_name", "tool.name"),
    # Claude Code's command (its span beta); gemini-cli's arguments where written
    arguments=("full_command", "function_args", "tool_input"),
    agent=("gen_ai.agent.name",),
)


GEMINI_CLI: Final = "gemini-cli"  # gen_ai.agent.name on every span gemini-cli writes


def read_from_events(attrs: Mapping[str, Any]) -> bool:
    """A span whose agent's calls and turns are read from its log events instead."""
    return attrs.get("gen_ai.agent.name") == GEMINI_CLI


def _kind_by_name(name: str, attrs: Mapping[str, Any]) -> int:
    if name in (EXECUTION, TOOL_SPAN):
        return TOOL
    if name == INTERACTION:
        return TURN
    return UNMARKED


def _tool_name(span: SpanView) -> str | None:
    # the execution span names no tool: it is the inner layer of its claude_code.tool parent
    return INNER_LAYER if span.name == EXECUTION else None


def _turn_agent(span: SpanView) -> str | None:
    return "claude-code" if span.name == INTERACTION else None


EMITTER: Final = Emitter(
    CODING_AGENTS,
    kind_by_name=_kind_by_name,
    name_hints=(INTERACTION, TOOL_SPAN),
    tool_name=_tool_name,
    turn_agent=_turn_agent,
)
