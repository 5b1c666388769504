"""The shape of one instrumentation family: which attributes mark and carry what."""

from __future__ import annotations

from dataclasses import dataclass

ANY = "*"  # a marker that only needs the attribute to be present


@dataclass(frozen=True)
class Family:
    name: str
    # (attribute, value) pairs; a span matching any pair is of that kind
    tool: tuple[tuple[str, str], ...] = ()
    turn: tuple[tuple[str, str], ...] = ()
    llm: tuple[tuple[str, str], ...] = ()
    # attributes to read, best first
    tool_name: tuple[str, ...] = ()
    arguments: tuple[str, ...] = ()
    result: tuple[str, ...] = ()
    description: tuple[str, ...] = ()
    agent: tuple[str, ...] = ()
    model: tuple[str, ...] = ()
    # attributes holding the tool definitions sent to the model (LLM spans)
    tool_definitions: tuple[str, ...] = ()
