"""One message per undeclared tool, judged from its first call (core.suggest): field names and
reasons, never values. A tool with no identity declaration gets a WARNING with the declaration
to add to loopwatch.toml (its effect included); a tool whose identity is declared but not its
effect gets one INFO line saying which way it was read and the line to paste."""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Any

from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.effects import ACTION_PARAMETER, READ, effect_of, sends_text
from loopwatch.core.identity import short_hash
from loopwatch.core.suggest import (
    FieldChoice,
    choices_from_call,
    effect_toml,
    result_of_value,
    suggestion_toml,
)

log = logging.getLogger(__name__)

# Tools warned about, per process; past this many no more warnings (memory stays bounded).
MAX_TOOLS = 1000
# A warning lists at most this many parameters, names and tool name cut at _MAX_NAME_CHARS.
_MAX_PARAMETERS = 20
_MAX_NAME_CHARS = 100


class _Warned:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tools: set[str] = set()

    def first(self, tool: str) -> bool:
        """True the first time ``tool`` is seen (and while fewer than MAX_TOOLS were)."""
        key = tool if len(tool) <= _MAX_NAME_CHARS else short_hash(tool)
        if key in self._tools:  # the common case, without the lock
            return False
        with self._lock:
            if key in self._tools or len(self._tools) >= MAX_TOOLS:
                return False
            self._tools.add(key)
            return True


_WARNED = _Warned()


def suggestion(
    tool: str, arguments: dict[str, Any], result: Any = None, effect: tuple[str, str] | None = None
) -> list[str]:
    """The declaration to review: identity = the parameters that were not free text in this
    call, or were text the tool sends (``"*"`` when none is kept), each with why it is in or out;
    reviewed_parameters = all of them; a ``result`` path when ``result`` is a JSON object."""
    listed = list(itertools.islice(arguments, _MAX_PARAMETERS))
    choices = [
        FieldChoice(c.name[:_MAX_NAME_CHARS], c.kept, c.reason)
        for c in choices_from_call(tool, {k: arguments[k] for k in listed})
    ]
    lines = suggestion_toml(tool[:_MAX_NAME_CHARS], choices, result_of_value(result), effect=effect)
    if len(arguments) > _MAX_PARAMETERS:
        lines.append(f"# and {len(arguments) - _MAX_PARAMETERS} more parameters")
    return lines


def warn_undeclared(
    tool: str, arguments: Any, declaration: ToolDeclaration | None, result: Any = None
) -> None:
    """Tell once per process how a tool called with named arguments was read where it is not
    declared; ``result`` is the call's decoded result when it succeeded. Parameter and result
    field names only: values never reach a log line."""
    identity_declared = declaration is not None and declaration.identity is not None
    if identity_declared and declaration is not None and declaration.effect is not None:
        return
    if not isinstance(arguments, dict) or not arguments or not _WARNED.first(tool):
        return
    effect = effect_of(tool, arguments, None)
    name = tool[:_MAX_NAME_CHARS]
    if identity_declared:
        log.info(
            "tool %r is taken for a %s (%s); to make it exact, add to its [tools] table in "
            "loopwatch.toml: %s",
            name,
            effect[0].replace("_", " "),
            effect[1],
            effect_toml(*effect),
        )
        return
    # a multi-action tool's effect is its call's action: no line declares it for the tool
    by_tool = effect_of(tool, None, None)
    line = by_tool if by_tool == effect else None
    if effect[0] == READ or sends_text(tool, (arguments.get(ACTION_PARAMETER),)):
        success = "all arguments"
    else:
        success = "their arguments minus prose"
    log.warning(
        "tool %r has no identity declaration, so its failed calls are keyed on their arguments "
        "minus free text (a guess) and its successful calls on %s; it is taken for a %s (%s). "
        "Review and add to loopwatch.toml to be exact (each field says why it is in or out):\n%s",
        name,
        success,
        effect[0].replace("_", " "),
        effect[1],
        "\n".join(suggestion(tool, arguments, result, line)),
    )
