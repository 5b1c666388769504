"""Codex CLI's events (the name in ``event.name``): ``codex.tool_result`` is a call,
``codex.sse_event`` with token counts a model call; a turn is the log's trace (one per turn)."""

from __future__ import annotations

import re
from typing import Final

from loopwatch.conventions.coding_agents.reader import (
    MAX_SCANNED_CHARS,
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

AGENT: Final = "codex"
_PREFIX: Final = "codex."
EXIT_FAILURE: Final = "non_zero_exit"
# Codex says a command's exit code only in the output it gives the model
_EXIT: Final = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")


def claims(log: LogView) -> bool:
    return log.event_name.startswith(_PREFIX)


def exit_code(output: str) -> int:
    """The exit code the output text reports (0 when it reports none)."""
    found = _EXIT.search(output, 0, MAX_SCANNED_CHARS)
    return int(found.group(1)) if found else 0


def read(log: LogView, config: Config) -> EventRead | None:
    attrs = log.attributes
    session = text(attrs, "conversation.id", "session.id")
    # one turn is one trace; a record without a span context falls back to its conversation
    turn = log.trace_id or (turn_id(log.service, session, "") if session else 0)
    if not turn:
        return None
    name = log.event_name.removeprefix(_PREFIX)
    if name == "tool_result":
        output = attrs.get("output")
        out_text = output if isinstance(output, str) else ""
        exited = exit_code(out_text) != 0
        errored = flag(attrs.get("success")) is False or exited
        call = tool_call(
            log,
            config,
            turn,
            text(attrs, "call_id"),
            text(attrs, "tool_name") or "unknown",
            attrs.get("arguments"),
            (output is not None, output),
            (errored, [EXIT_FAILURE] if errored else [], [out_text[:512]] if errored else []),
            AGENT,
        )
        return EventRead(turn, session, call)
    tokens = (number(attrs, "input_token_count"), number(attrs, "output_token_count"))
    if name in ("sse_event", "api_request", "response") and (tokens[0] or tokens[1]):
        return EventRead(turn, session, model_call(log, turn, text(attrs, "model"), tokens))
    return None


READER: Final = EventReader(AGENT, claims, read)
