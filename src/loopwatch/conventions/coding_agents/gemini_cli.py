"""gemini-cli's events (scope ``gemini-cli``, the name in ``event.name``): ``gemini_cli.tool_call``
is a call, ``gemini_cli.api_response`` a model call, ``loop_detected`` its own detection; a turn
is one ``prompt_id`` (the session id in headless runs)."""

from __future__ import annotations

from typing import Final

from loopwatch.conventions.coding_agents.reader import (
    EventRead,
    EventReader,
    flag,
    mapping,
    model_call,
    number,
    text,
    tool_call,
    turn_id,
)
from loopwatch.core.config import Config
from loopwatch.core.log_view import LogView

AGENT: Final = "gemini-cli"
SCOPE: Final = "gemini-cli"
_PREFIX: Final = "gemini_cli."
EXIT_FAILURE: Final = "non_zero_exit"  # the error type of a command that exited non-zero


def claims(log: LogView) -> bool:
    return log.scope == SCOPE or log.event_name.startswith(_PREFIX)


def _exit_failed(metadata: object) -> bool:
    """Whether the call's metadata reports a failed command: gemini-cli sets ``success`` true for
    a shell command that exited 7, and only ``exitCode``/``isError`` say otherwise."""
    meta = mapping(metadata)
    code = number(meta, "exitCode", "exit_code")
    return code != 0 or flag(meta.get("isError")) is True


def read(log: LogView, config: Config) -> EventRead | None:
    attrs = log.attributes
    name = log.event_name.removeprefix(_PREFIX)
    session = text(attrs, "session.id")
    if name == "loop_detected":
        return EventRead(0, session, None, (AGENT, text(attrs, "loop_type") or "unknown"))
    prompt = text(attrs, "prompt_id")
    turn = turn_id(log.service, session, prompt) if prompt else log.trace_id
    if not turn:
        return None
    if name == "tool_call":
        error = text(attrs, "error")
        error_type = text(attrs, "error.type", "error_type")
        exited = _exit_failed(attrs.get("metadata"))
        errored = flag(attrs.get("success")) is False or exited or bool(error)
        types = [error_type] if error_type else ([EXIT_FAILURE] if exited else [])
        call = tool_call(
            log,
            config,
            turn,
            text(attrs, "gen_ai.tool.call_id", "call_id", "callId"),
            text(attrs, "function_name") or "unknown",
            attrs.get("function_args"),  # only with prompt logging on
            (False, None),
            (errored, types if errored else [], [error] if error else []),
            AGENT,
        )
        return EventRead(turn, session, call)
    if name == "api_response":
        tokens = (
            number(attrs, "input_token_count", "input_tokens"),
            number(attrs, "output_token_count", "output_tokens"),
        )
        return EventRead(turn, session, model_call(log, turn, text(attrs, "model"), tokens))
    return None


READER: Final = EventReader(AGENT, claims, read)
