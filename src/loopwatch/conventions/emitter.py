"""The one interface every emitter family's module fills in.

An ``Emitter`` says what kind of span it wrote (its markers, and its span names where no
attribute marks one) and where each field is: attribute tables (``Family``) read best first,
and hooks for what is not an attribute (a tool name in the span name, payloads in span events,
errors in a family's own fields, a turn's agent in its span name, a model call's messages).
conventions.read chooses one emitter per span and applies the generic rules below them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from loopwatch.conventions.family import Family
from loopwatch.conventions.messages import Message
from loopwatch.core.span_view import SpanView

# What a span is, in the order read_span tests them: tool call, turn, LLM call, none of these.
TOOL: Final = 0
TURN: Final = 1
LLM: Final = 2
UNMARKED: Final = 3

# A model call's messages: the attributes that hold them, kept apart with their size in bytes,
# then read into (history, answer) only when the trace needs them.
Held = tuple[Mapping[str, Any], int]
ReadMessages = Callable[[Mapping[str, Any]], tuple[list[Message], list[Message] | None] | None]


def _no_name(span: SpanView) -> str | None:
    return None


def no_kind(name: str, attrs: Mapping[str, Any]) -> int:
    return UNMARKED


def _no_payloads(span: SpanView) -> tuple[Any, Any]:
    return None, None


def _no_errors(span: SpanView) -> tuple[bool, list[str]]:
    return False, []


def _content_on(attrs: Mapping[str, Any]) -> tuple[bool, bool]:
    return False, False


def no_messages(attrs: Mapping[str, Any]) -> Held | None:
    return None


def _unread(attrs: Mapping[str, Any]) -> None:
    return None


@dataclass(frozen=True)
class Emitter:
    """One emitter family: its attribute table and the hooks for the rest (each a no-op by
    default)."""

    family: Family
    # the kind a span's name (and shape) gives it where no marker attribute does; asked only of
    # a span whose name starts with one of name_hints or that has one of attribute_hints
    kind_by_name: Callable[[str, Mapping[str, Any]], int] = no_kind
    name_hints: tuple[str, ...] = ()
    attribute_hints: tuple[str, ...] = ()
    # a tool's name where no attribute holds it (in the span name)
    tool_name: Callable[[SpanView], str | None] = _no_name
    # (arguments, result) where no attribute holds them (span events, other fields)
    payloads: Callable[[SpanView], tuple[Any, Any]] = _no_payloads
    # (errored, error texts) from the family's own fields, beyond status and exception events
    errors: Callable[[SpanView], tuple[bool, list[str]]] = _no_errors
    # (arguments unknown, result unknown): content capture off, written as placeholders
    content_off: Callable[[Mapping[str, Any]], tuple[bool, bool]] = _content_on
    # a turn's agent where no attribute names it (the span name)
    turn_agent: Callable[[SpanView], str | None] = _no_name
    # a model call's messages, kept unread; and the reader for them
    held_messages: Callable[[Mapping[str, Any]], Held | None] = no_messages
    read_messages: ReadMessages = _unread

    @property
    def name(self) -> str:
        return self.family.name


def first(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    """The first value set (not None, not empty text) among ``keys``."""
    if type(attrs) is dict:  # every span view's: compiled, its lookups are C calls
        for key in keys:
            value = attrs.get(key)
            if value is not None and value != "":
                return value
        return None
    for key in keys:  # another mapping's own get
        value = attrs.get(key)
        if value is not None and value != "":
            return value
    return None


def first_text(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first value set, when it is a text (None when it is another type)."""
    if type(attrs) is dict:  # as in first
        for key in keys:
            value = attrs.get(key)
            if value is not None and value != "":
                return value if isinstance(value, str) else None
        return None
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return value if isinstance(value, str) else None
    return None
