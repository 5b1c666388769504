"""The attempt key: one function for the processor, the service and the guards."""

from __future__ import annotations

from typing import Any, Final

from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.effects import READ, effect_of, written_arguments
from loopwatch.core.identity import identity_hash, without_free_text
from loopwatch.core.outcomes import ERROR_CLASSES, OK

UNKNOWN_IDENTITY: Final = "?"
_FAILED: Final = frozenset(ERROR_CLASSES)


class AttemptKey:
    """``(tool, identity, outcome)``: identity is a hash (or ``?`` when arguments were not
    captured); outcome is the error class, or for a successful call the result fingerprint.
    ``inferred``: the identity left free text out because the tool declares none (it takes no
    part in equality or the hash).

    Immutable: never assign to a key's fields (it is a dict key). A plain slots class rather
    than a frozen dataclass: one is built per tool call, and a frozen one builds 3-4x slower.
    """

    __slots__ = ("identity", "inferred", "outcome", "tool")
    __match_args__ = ("tool", "identity", "outcome", "inferred")

    def __init__(self, tool: str, identity: str, outcome: str, inferred: bool = False) -> None:
        self.tool = tool
        self.identity = identity
        self.outcome = outcome
        self.inferred = inferred

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AttemptKey):
            return NotImplemented
        return (
            self.tool == other.tool
            and self.identity == other.identity
            and self.outcome == other.outcome
        )

    def __hash__(self) -> int:
        return hash((self.tool, self.identity, self.outcome))

    def __repr__(self) -> str:
        return (
            f"AttemptKey(tool={self.tool!r}, identity={self.identity!r}, "
            f"outcome={self.outcome!r}, inferred={self.inferred!r})"
        )

    def short(self) -> str:
        """``tool/identity-hash/outcome`` with the hash cut to 8 characters, as log lines and
        reports show a key (``create_ticket/22562c0f/timeout``)."""
        return f"{self.tool}/{self.identity[:8]}/{self.outcome}"


def attempt_key(
    tool: str,
    arguments: Any,
    outcome: str,
    declaration: ToolDeclaration | None,
    *,
    arguments_known: bool = True,
    call: int = 0,
    effect: str | None = None,
) -> AttemptKey:
    """Key one tool call. ``outcome`` comes from :func:`loopwatch.guards.outcome.outcome_of`;
    ``effect`` from :func:`loopwatch.core.effects.effect_of` (None: found here).

    A tool without an identity declaration is keyed, when the call failed, on its arguments
    minus free text (:func:`loopwatch.core.identity.without_free_text`): a call regenerated
    after an error with only its wording changed is the same attempt. A successful read is
    keyed on all its arguments: repeated successful work with different text is usually
    legitimate. A successful write is keyed on what it writes
    (:func:`loopwatch.core.effects.written_arguments`) with outcome ``ok``: its answer (a
    fresh id) is no news. ``identity = "*"`` keys every call on all its arguments.

    Without its arguments (``arguments_known`` False) a failed call is keyed on the tool and
    its error class, so failures of one kind may be one attempt; a successful one on ``call``
    (its span id), so successful calls are never repeats of each other.
    """
    failed = outcome in _FAILED
    if not failed:
        if effect is None:
            effect = effect_of(tool, arguments, declaration.effect if declaration else None)[0]
        if effect != READ:
            outcome = OK
    if not arguments_known:
        return AttemptKey(tool, unknown_identity(outcome, call), outcome)
    fields = declaration.identity if declaration is not None else None
    if fields is None:
        if failed:
            kept = without_free_text(arguments)
            return AttemptKey(tool, identity_hash(kept, None), outcome, True)
        if effect != READ:
            kept = written_arguments(tool, arguments)
            return AttemptKey(tool, identity_hash(kept, None), outcome, kept is not arguments)
    return AttemptKey(tool, identity_hash(arguments, fields), outcome)


def unknown_identity(outcome: str, call: int) -> str:
    """The identity of a call whose arguments are unknown (see attempt_key)."""
    return UNKNOWN_IDENTITY if outcome in _FAILED else f"{UNKNOWN_IDENTITY}{call:x}"


def identities(tool: str, arguments: Any, declaration: ToolDeclaration | None) -> tuple[str, str]:
    """The identity halves of the keys a call will get ``(if it fails, if it succeeds)``, for
    guards that decide before the outcome is known. Equal unless the tool is undeclared and
    its arguments hold free text."""
    failed = attempt_key(tool, arguments, "tool_error", declaration)
    if not failed.inferred:
        return failed.identity, failed.identity
    return failed.identity, attempt_key(tool, arguments, OK, declaration).identity
