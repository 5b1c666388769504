"""Claude Code's events (scope ``com.anthropic.claude_code.events``, the name in ``event.name``):
``tool_result`` is a call, ``api_request`` a model call; a turn is one ``prompt.id``."""

from __future__ import annotations

from typing import Final

from loopwatch.conventions.coding_agents.reader import (
    EventRead,
    EventReader,
    flag,
    model_call,
    number,
    text,
    tool_call,
    turn_id,
)
from loopwatch.core.config import Config
from loopwatch.core.log_view import LogView

AGENT: Final = "claude-code"
SCOPE: Final = "com.anthropic.claude_code.events"
_PREFIX: Final = "claude_code."
# tool_input is the call's input as the model wrote it; tool_parameters Claude Code's summary
# of it (both only with OTEL_LOG_TOOL_DETAILS=1)
_ARGUMENTS: Final = ("tool_input", "tool_parameters")


def _name(log: LogView) -> str:
    return log.event_name.removeprefix(_PREFIX)


def claims(log: LogView) -> bool:
    return log.scope == SCOPE or log.event_name.startswith(_PREFIX)


def read(log: LogView, config: Config) -> EventRead | None:
    attrs = log.attributes
    session = text(attrs, "session.id")
    prompt = text(attrs, "prompt.id")
    turn = turn_id(log.service, session, prompt) if prompt else log.trace_id
    if not turn:
        return None
    name = _name(log)
    if name == "tool_result":
        succeeded = flag(attrs.get("success"))
        error = text(attrs, "error")
        error_type = text(attrs, "error_type")
        errored = succeeded is False or (succeeded is None and bool(error or error_type))
        arguments = next((attrs[k] for k in _ARGUMENTS if attrs.get(k) not in (None, "")), None)
        call = tool_call(
            log,
            config,
            turn,
            text(attrs, "tool_use_id"),
            text(attrs, "tool_name") or "unknown",
            arguments,
            (False, None),  # Claude Code never sends a tool's output
            (errored, [error_type] if errored else [], [error] if errored and error else []),
            AGENT,
        )
        return EventRead(turn, session, call)
    if name == "api_request":
        tokens = (number(attrs, "input_tokens"), number(attrs, "output_tokens"))
        return EventRead(turn, session, model_call(log, turn, text(attrs, "model"), tokens))
    return None  # tool_decision (the call's result follows), api_error, user_prompt, ...


READER: Final = EventReader(AGENT, claims, read)
