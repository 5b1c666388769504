"""Tool calls read from a model call's messages, where no span executes the tools.

A hand-rolled loop over a raw model SDK has no tool span: each model call's output holds the
calls it asks for, and the next call's input holds their results. The emitter modules turn their
attributes into ``Message`` lists; this module reads the turn in them: the calls after the last
user message that is not only tool results (Anthropic sends results in ``user`` messages),
joined with their results. A model call that requests no call answered in text: its turn is
complete. core.conversations gathers the model calls of one turn by their calls' stand-in ids.

Call ids are not trusted to be present or unique (the Gemini API has none; instrumentations
write an empty one or make them up as ``{name}_{index}``). Where the turn's user message is in
the history, a call's stand-in id is its turn (a digest of that message's text), its position in
the turn, its tool and a digest of its arguments, and a call id unique in the whole history is
kept beside it as an alias. Where the history lost its start (an attribute limit), a unique
call id is the stand-in, and the alias joins it to the same call read from a fuller history. A
result goes to the call of its id when that id is unique, else to the oldest call still
unanswered (of its id, when it has a repeated one). A history of results alone (the Responses
API's ``previous_response_id``: the calls are in the previous model call's output) hands its
results on as ``dangling``, for core.conversations to join to the calls an open turn awaits.

Linear in the span: every message is read once, and at most ``Config.max_spans_per_turn`` calls
are read from one history."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loopwatch.conventions.calls import keyed_call, read_result
from loopwatch.conventions.error_texts import error_type_in_text
from loopwatch.conventions.payloads import decode_arguments
from loopwatch.core.config import Config
from loopwatch.core.records import (
    CALL_WITHOUT_ID,
    CALLS_OVER_LIMIT,
    RESULT_WITHOUT_CALL,
    Conversation,
    ToolCall,
)

_ROLES_OF_RESULTS = frozenset({"tool", "function", "ipython"})


@dataclass(slots=True)
class Message:
    """One message as the emitters normalize it: its role, the calls it requests ``(call id,
    tool, arguments)`` and the results it carries ``(call id, content, is_error)`` (``is_error``
    None where the format has no such flag). Only a user message's text is kept."""

    role: str
    calls: list[tuple[str | None, str, Any]] = field(default_factory=list)
    results: list[tuple[str | None, Any, bool | None]] = field(default_factory=list)
    text: str = ""  # a user message's text (a reference, not a copy): it names the turn
    # an assistant message recorded without its calls (LiteLLM's callback: ``"parts": []``)
    lost: bool = False


def _starts_turn(message: Message) -> bool:
    return message.role == "user" and not message.results


def call_span_id(call_id: str) -> int:
    """A call's stand-in span id: the same call id in every history gives the same id."""
    digest = hashlib.blake2b(call_id.encode("utf-8", "replace"), digest_size=8).digest()
    return int.from_bytes(digest, "big") or 1


def conversation(
    start: int,
    end: int,
    config: Config,
    inputs: list[Message],
    outputs: list[Message] | None,
    agent: str | None = None,
) -> Conversation | None:
    """The turn ``inputs`` (the history sent) and ``outputs`` (the answer, None when not
    recorded) show; None for an empty history. The turn starts after the last user message
    that is not only tool results; with none (the SDK's attribute limit dropped a long
    history's start), the whole history left is the turn's."""
    if not inputs:
        return None
    first = -1
    for index in range(len(inputs) - 1, -1, -1):
        if _starts_turn(inputs[index]):
            first = index
            break
    limit = config.max_spans_per_turn
    keys = _Keys(
        _turn_digest(inputs[first]) if first >= 0 else None, _id_counts(inputs, outputs or ())
    )
    asked, answers, position, unmatched = _history(inputs[first + 1 :], limit, keys)
    dangling: tuple[tuple[int | None, Any, bool | None], ...] = ()
    if position == 0:  # results whose calls are in the previous call's output
        sent = _results_alone(inputs[first + 1 :], first < 0)
        if sent is not None:
            position, results = sent
            dangling = tuple((call_span_id(r[0]) if r[0] else None, r[1], r[2]) for r in results)
            unmatched = 0  # core.conversations joins them, and counts those it cannot
    requested, without_id, over_limit = _requested(outputs or (), asked, limit, position, keys)

    asked_ids = {c: call_span_id(c) for c in asked}

    def calls(known: Container[int] = ()) -> tuple[ToolCall, ...]:
        return (
            *(
                _call(c, t, a, answers.get(c), start, config)
                for c, (t, a) in asked.items()
                if asked_ids[c] not in known
            ),
            *(_call(c, t, a, None, end, config) for c, (t, a) in requested.items()),
        )

    requested_ids = frozenset(call_span_id(c) for c in requested)

    def answer(stand_in: int, content: Any, is_error: bool | None) -> ToolCall | None:
        for c, (t, a) in requested.items():
            if call_span_id(c) == stand_in:
                return _call(c, t, a, (content, is_error), end, config)
        return None

    return Conversation(
        outputs is not None and bool(outputs) and not requested,
        calls,
        len(asked) + len(requested),
        frozenset(asked_ids.values()) | requested_ids,
        requested_ids,
        frozenset(asked_ids[c] for c in answers if c in asked_ids),
        agent,
        tuple(
            (reason, n)
            for reason, n in (
                (RESULT_WITHOUT_CALL, unmatched),
                (CALL_WITHOUT_ID, without_id),
                (CALLS_OVER_LIMIT, over_limit),
            )
            if n
        ),
        tuple((call_span_id(a), call_span_id(k)) for k, a in keys.aliases.items()),
        dangling,
        answer if requested else None,
    )


def _results_alone(
    messages: list[Message], chained: bool
) -> tuple[int, list[tuple[str | None, Any, bool | None]]] | None:
    """A turn's history that holds results and no call: ``(calls before the next request,
    the results the previous model call's requests are answered by)``; None for another.
    ``chained``: the history starts after the turn's user message (the Responses API's
    ``previous_response_id``): every result is new. Else the calls were lost from assistant
    messages (LiteLLM's callback): each result stands for one call in the position count, and
    the results after the last such message are the new ones."""
    if chained:
        return 0, [r for m in messages for r in m.results]
    last = -1
    stood = 0
    for index, message in enumerate(messages):
        if message.lost:
            last = index
        stood += len(message.results)
    if last < 0:
        return None
    new = [r for m in messages[last + 1 :] for r in m.results]
    return stood - len(new), new


def _id_counts(inputs: Sequence[Message], outputs: Sequence[Message]) -> dict[str, int]:
    """How many calls of the whole history and of the answer carry each call id."""
    seen: dict[str, int] = {}
    for messages in (inputs, outputs):
        for message in messages:
            for call_id, _tool, _arguments in message.calls:
                if call_id:
                    seen[call_id] = seen.get(call_id, 0) + 1
    return seen


def _turn_digest(message: Message) -> str:
    """What names a turn: a digest of its user message's text."""
    return hashlib.blake2b(message.text.encode("utf-8", "replace"), digest_size=8).hexdigest()


class _Keys:
    """The stand-in ids of one history's calls (see the module's docstring)."""

    def __init__(self, turn: str | None, seen: dict[str, int]) -> None:
        self.turn = turn
        self.seen = seen
        self.aliases: dict[str, str] = {}  # stand-in -> its call id, unique in the history

    def unique(self, call_id: str | None) -> bool:
        return call_id is not None and call_id != "" and self.seen.get(call_id, 0) == 1

    def key(self, call_id: str | None, tool: str, arguments: Any, position: int) -> str:
        unique = self.unique(call_id)
        if self.turn is None:
            return call_id if unique and call_id is not None else f"{call_id or ''}#{position}"
        key = f"{self.turn}/{position}/{tool}/{_arguments_digest(arguments)}"
        if unique and call_id is not None:
            self.aliases[key] = call_id
        return key


def _arguments_digest(raw: Any) -> str:
    """The same arguments, as a JSON text or a mapping, give the same digest."""
    known, value = decode_arguments(raw)
    try:
        text = json.dumps(value if known else raw, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        text = repr(raw)
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8).hexdigest()


def _history(
    messages: list[Message], limit: int, keys: _Keys
) -> tuple[dict[str, tuple[str, Any]], dict[str, tuple[Any, bool | None]], int, int]:
    """The turn's calls so far ``{stand-in: (tool, arguments)}`` in history order, their
    answers ``{stand-in: (content, is_error)}``, the number of calls read (kept or not), and
    how many results sent since the last call request answer no call (counted once: the next
    model call carries them again, behind a later request)."""
    asked: dict[str, tuple[str, Any]] = {}
    answers: dict[str, tuple[Any, bool | None]] = {}
    order: list[str] = []  # the calls in history order: what results without an id answer
    by_unique: dict[str, str] = {}  # a unique call id -> its call
    by_id: dict[str, list[str]] = {}  # a repeated call id -> its calls, oldest first
    oldest = 0  # the oldest call that may still be unanswered (each call passed once)
    position = 0
    unmatched = 0
    for message in messages:
        if message.calls:
            unmatched = 0  # results before a request were counted by an earlier model call
        for call_id, tool, arguments in message.calls:
            if len(asked) < limit:
                key = keys.key(call_id, tool, arguments, position)
                asked[key] = (tool, arguments)
                order.append(key)
                if call_id:
                    if keys.unique(call_id):
                        by_unique[call_id] = key
                    else:
                        by_id.setdefault(call_id, []).append(key)
            position += 1
        for result in message.results:
            answer = _answered(result[0], by_unique, by_id, answers)
            if answer is None:  # it answers the oldest call still unanswered
                while oldest < len(order) and order[oldest] in answers:
                    oldest += 1
                answer = order[oldest] if oldest < len(order) else None
            if answer is None or answer not in asked:
                unmatched += 1
            elif answer not in answers:
                answers[answer] = (result[1], result[2])
    return asked, answers, position, unmatched


def _answered(
    call_id: str | None,
    by_unique: dict[str, str],
    by_id: dict[str, list[str]],
    answers: Container[str],
) -> str | None:
    """The call a result with ``call_id`` answers: the call of a unique id, else the oldest
    unanswered call of a repeated one; None to answer by order."""
    if not call_id:
        return None
    found = by_unique.get(call_id)
    if found is not None:
        return found
    for key in by_id.get(call_id, ()):
        if key not in answers:
            return key
    return None


def _requested(
    outputs: Sequence[Message],
    asked: dict[str, tuple[str, Any]],
    limit: int,
    position: int,
    keys: _Keys,
) -> tuple[dict[str, tuple[str, Any]], int, int]:
    """The calls the model asks for in its answer ``{stand-in: (tool, arguments)}``, how many
    had no id or one not unique in the history, and how many fell past ``limit``."""
    requested: dict[str, tuple[str, Any]] = {}
    without_id = over_limit = 0
    for message in outputs:
        for call_id, tool, arguments in message.calls:
            if len(asked) + len(requested) < limit:
                key = keys.key(call_id, tool, arguments, position)
                without_id += not keys.unique(call_id)
                requested[key] = (tool, arguments)
            else:
                over_limit += 1
            position += 1
    return requested, without_id, over_limit


def _call(
    call_id: str,
    tool: str,
    raw_arguments: Any,
    answer: tuple[Any, bool | None] | None,
    at_ns: int,
    config: Config,
) -> ToolCall:
    arguments_read = decode_arguments(raw_arguments)
    if answer is None:
        result_read: tuple[bool, Any] = (False, None)
        errors: tuple[bool, list[str], list[str]] = (False, [], [])
    else:
        content, is_error = answer
        known, result, error_text, types, text = read_result(content)
        result_read = (known, result)
        messages: list[str] = []
        if error_text is not None:
            messages.append(error_text)
        elif is_error and text:
            messages.append(text[:500])
        types.extend(t for t in map(error_type_in_text, messages) if t)
        errors = (bool(is_error) or error_text is not None, types, messages)
    return keyed_call(
        (call_span_id(call_id), None, at_ns, at_ns),
        tool or "unknown",
        config,
        arguments_read,
        result_read,
        errors,
    )


def result_role(role: str) -> bool:
    """Roles whose messages carry tool results (OpenAI ``tool``, older ``function``)."""
    return role in _ROLES_OF_RESULTS


# A history is one attribute: parsed whole up to this size (a JSON scan is linear), past it the
# model call is read as if its messages were not recorded.
MAX_HISTORY_CHARS = 8 * 1024 * 1024


def parse_messages(raw: Any) -> list[Message] | None:
    """A JSON list of messages (a text, or already structured) as Messages; None when it is
    not one. Reads the GenAI conventions' ``parts``, and the OpenAI and Anthropic request
    shapes (``tool_calls``, ``tool_call_id``; ``tool_use`` / ``tool_result`` blocks) that
    instrumentations copy as they are."""
    value = raw
    if isinstance(raw, str):
        if len(raw) > MAX_HISTORY_CHARS:
            return None
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            return None
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list | tuple):
        return None
    return [message_from(m) for m in value if isinstance(m, Mapping)]


def message_from(m: Mapping[str, Any]) -> Message:
    """One message mapping, in any of the shapes parse_messages reads."""
    message = Message(str(m.get("role") or ""))
    parts = m.get("parts")
    if isinstance(parts, list):
        for part in parts:
            if isinstance(part, Mapping):
                _part(message, part)
    content = m.get("content")
    if isinstance(content, str):
        if result_role(message.role):
            message.results.append((_text_or_none(m.get("tool_call_id")), content, None))
        elif message.role == "user":
            message.text = content
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, Mapping):
                _part(message, block)
    elif isinstance(parts, list) and result_role(message.role) and not message.results:
        # LiteLLM's callback: a tool message's text in GenAI parts, its call id OpenAI's
        text = _parts_text(parts)
        if text is not None:
            message.results.append((_text_or_none(m.get("tool_call_id")), text, None))
    calls = m.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            if isinstance(call, Mapping):
                function = call.get("function")
                fn = function if isinstance(function, Mapping) else call
                message.calls.append(
                    (
                        _text_or_none(call.get("id")),
                        str(fn.get("name") or ""),
                        fn.get("arguments", fn.get("input")),
                    )
                )
    if message.role == "assistant" and parts == [] and content is None and not message.calls:
        message.lost = True
    return message


def _parts_text(parts: list[Any]) -> str | None:
    texts: list[str] = []
    for part in parts:
        if isinstance(part, Mapping) and part.get("type") == "text":
            text = part.get("content")
            if isinstance(text, str):
                texts.append(text)
    return "\n".join(texts) if texts else None


def _part(message: Message, part: Mapping[str, Any]) -> None:
    kind = part.get("type")
    if kind == "text":
        if message.role == "user":  # (GenAI parts hold it in content, Anthropic blocks in text)
            text = part.get("content", part.get("text"))
            if isinstance(text, str):
                message.text = message.text + "\n" + text if message.text else text
    elif kind in ("tool_call", "tool_use", "function_call"):
        message.calls.append(
            (
                _text_or_none(part.get("id") or part.get("call_id")),
                str(part.get("name") or ""),
                part.get("arguments", part.get("input")),
            )
        )
    elif kind in ("tool_call_response", "tool_result", "function_call_output"):
        is_error = part.get("is_error")
        message.results.append(
            (
                _text_or_none(part.get("id") or part.get("tool_use_id") or part.get("call_id")),
                part.get("response", part.get("content", part.get("output"))),
                is_error if isinstance(is_error, bool) else None,
            )
        )


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
