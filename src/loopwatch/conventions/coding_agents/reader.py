"""The interface each coding agent's event reader fills in, and the helpers they share."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from loopwatch.conventions.calls import keyed_call
from loopwatch.conventions.payloads import decode_arguments, parse_text
from loopwatch.core.config import Config
from loopwatch.core.log_view import LogView
from loopwatch.core.records import LlmMark, Record, ToolCall

_MS: Final = 1_000_000
# at most this much of an output text is searched for an exit code: the read stays linear
MAX_SCANNED_CHARS: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class EventRead:
    """What one event gives: the turn it belongs to (``turn``: a trace id; 0 for none), the
    session whose turns follow one another, a record, and an agent's own loop detection."""

    turn: int
    session: str
    record: Record | None
    detection: tuple[str, str] | None = None  # (source, type)


@dataclass(frozen=True)
class EventReader:
    """One agent's events: ``claims`` says whether a record is this agent's, ``read`` reads it
    (None: nothing loopwatch counts)."""

    agent: str  # the agent label of its calls and the source of its detections
    claims: Callable[[LogView], bool]
    read: Callable[[LogView, Config], EventRead | None]


def hashed(*parts: str, size: int = 8) -> int:
    """A stable non-zero id of ``size`` bytes from ``parts`` (turns and calls made up from the
    agents' prompt and call ids)."""
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=size).digest()
    return int.from_bytes(digest) or 1


def text(attrs: Mapping[str, Any], *keys: str) -> str:
    """The first of ``keys`` set, as text ("" when none is)."""
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return value if isinstance(value, str) else str(value)
    return ""


def number(attrs: Mapping[str, Any], *keys: str) -> int:
    """The first of ``keys`` that is a whole number (or its text), else 0."""
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value == value:
            return int(value)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value.strip())
    return 0


def flag(value: Any) -> bool | None:
    """A boolean sent as a boolean or as text ("true"/"false"); None when neither."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
    return None


def mapping(value: Any) -> Mapping[str, Any]:
    """A mapping sent as a key-value list or as JSON text ({} when it is neither)."""
    if isinstance(value, str):
        value = parse_text(value[:MAX_SCANNED_CHARS]) if len(value) <= MAX_SCANNED_CHARS else {}
    return value if isinstance(value, Mapping) else {}


def turn_id(service: str, session: str, prompt: str) -> int:
    """The trace id standing for one prompt's turn: the same for every record of it."""
    return hashed(service, session, prompt, size=16)


def times(log: LogView, attrs: Mapping[str, Any]) -> tuple[int, int]:
    """(start, end) of a call the record reports at its end; where a record has no time, its
    ``event.sequence`` keeps the order."""
    end = log.time_ns or number(attrs, "event.sequence")
    duration = max(number(attrs, "duration_ms"), 0) * _MS
    return max(end - duration, 0), end


def tool_call(
    log: LogView,
    config: Config,
    turn: int,
    call_id: str,
    tool: str,
    arguments: Any,
    result: tuple[bool, Any],
    errors: tuple[bool, list[str], list[str]],
    agent: str,
) -> ToolCall:
    """The ToolCall of one event: under the turn's anchor (a span that never arrives, so every
    call of the turn is one group), keyed by the core's rules on what was read."""
    attrs = log.attributes
    start, end = times(log, attrs)
    span_id = hashed(str(turn), call_id or f"{log.time_ns}:{text(attrs, 'event.sequence')}")
    return keyed_call(
        (span_id, anchor(turn), start, end),
        tool,
        config,
        decode_arguments(None if arguments == "" else arguments),  # "": not captured
        result,
        errors,
        agent=agent,
    )


def anchor(turn: int) -> int:
    """The span id every call of a turn read from events hangs under."""
    return hashed(str(turn), "turn")


def model_call(log: LogView, turn: int, model: str, tokens: tuple[int, int]) -> LlmMark:
    """The LlmMark of a model request event: its model and tokens."""
    start, end = times(log, log.attributes)
    span_id = hashed(str(turn), "llm", str(log.time_ns), text(log.attributes, "event.sequence"))
    return LlmMark(
        span_id,
        anchor(turn),
        start,
        end,
        model or None,
        input_tokens=max(tokens[0], 0),
        output_tokens=max(tokens[1], 0),
    )
