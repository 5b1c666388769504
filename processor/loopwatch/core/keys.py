"""The attempt key: one function for the processor, the service and the guards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.identity import identity_hash

UNKNOWN_IDENTITY = "?"


@dataclass(frozen=True, slots=True)
class AttemptKey:
    """``(tool, identity, outcome)``: identity is a hash (or ``?`` when arguments were not
    captured); outcome is the error class, or for a successful call the result fingerprint."""

    tool: str
    identity: str
    outcome: str

    def short(self) -> str:
        return f"{self.tool}/{self.identity[:8]}/{self.outcome}"


def attempt_key(
    tool: str,
    arguments: Any,
    outcome: str,
    declaration: ToolDeclaration | None,
    *,
    arguments_known: bool = True,
) -> AttemptKey:
    """Key one tool call. ``outcome`` comes from :func:`loopwatch.core.outcomes.outcome_of`."""
    if not arguments_known:
        return AttemptKey(tool, UNKNOWN_IDENTITY, outcome)
    fields = declaration.identity if declaration is not None else None
    return AttemptKey(tool, identity_hash(arguments, fields), outcome)
