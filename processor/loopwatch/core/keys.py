"""The attempt key: one function for the processor, the service and the guards."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.identity import identity_hash, without_free_text
from loopwatch.core.outcomes import ERROR_CLASSES, OK

UNKNOWN_IDENTITY = "?"
_FAILED = frozenset(ERROR_CLASSES)


@dataclass(frozen=True, slots=True)
class AttemptKey:
    """``(tool, identity, outcome)``: identity is a hash (or ``?`` when arguments were not
    captured); outcome is the error class, or for a successful call the result fingerprint.
    ``inferred``: the identity left free text out because the tool declares none."""

    tool: str
    identity: str
    outcome: str
    inferred: bool = field(default=False, compare=False)

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
    """Key one tool call. ``outcome`` comes from :func:`loopwatch.guards.outcome.outcome_of`.

    A tool without an identity declaration is keyed, when the call failed, on its arguments
    minus free text (:func:`loopwatch.core.identity.without_free_text`): a call regenerated
    after an error with only its wording changed is the same attempt. A successful call is
    keyed on all its arguments: repeated successful work with different text is usually
    legitimate. ``identity = "*"`` keys every call on all its arguments.
    """
    if not arguments_known:
        return AttemptKey(tool, UNKNOWN_IDENTITY, outcome)
    fields = declaration.identity if declaration is not None else None
    if fields is None and outcome in _FAILED:
        return AttemptKey(tool, identity_hash(without_free_text(arguments), None), outcome, True)
    return AttemptKey(tool, identity_hash(arguments, fields), outcome)


def identities(tool: str, arguments: Any, declaration: ToolDeclaration | None) -> tuple[str, str]:
    """The identity halves of the keys a call will get ``(if it fails, if it succeeds)``, for
    guards that decide before the outcome is known. Equal unless the tool is undeclared and
    its arguments hold free text."""
    failed = attempt_key(tool, arguments, "tool_error", declaration)
    if not failed.inferred:
        return failed.identity, failed.identity
    return failed.identity, attempt_key(tool, arguments, OK, declaration).identity
