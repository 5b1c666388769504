"""One WARNING per undeclared tool: its name and the declaration to add to loopwatch.toml,
judged from its first call (core.suggest): field names and reasons, never values."""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Any

from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.identity import short_hash
from loopwatch.core.suggest import FieldChoice, choices_from_call, result_of_value, suggestion_toml

log = logging.getLogger("loopwatch")

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


def suggestion(tool: str, arguments: dict[str, Any], result: Any = None) -> list[str]:
    """The declaration to review: identity = the parameters that were not free text in this
    call, or were text the tool sends (``"*"`` when none is kept), each with why it is in or out;
    reviewed_parameters = all of them; a ``result`` path when ``result`` is a JSON object."""
    listed = list(itertools.islice(arguments, _MAX_PARAMETERS))
    choices = [
        FieldChoice(c.name[:_MAX_NAME_CHARS], c.kept, c.reason)
        for c in choices_from_call(tool, {k: arguments[k] for k in listed})
    ]
    lines = suggestion_toml(tool[:_MAX_NAME_CHARS], choices, result_of_value(result))
    if len(arguments) > _MAX_PARAMETERS:
        lines.append(f"# and {len(arguments) - _MAX_PARAMETERS} more parameters")
    return lines


def warn_undeclared(
    tool: str, arguments: Any, declaration: ToolDeclaration | None, result: Any = None
) -> None:
    """Warn once per process about a tool called with named arguments and no identity
    declaration; ``result`` is the call's decoded result when it succeeded. Parameter and
    result field names only: values never reach a log line."""
    if declaration is not None and declaration.identity is not None:
        return
    if not isinstance(arguments, dict) or not arguments or not _WARNED.first(tool):
        return
    log.warning(
        "tool %r has no identity declaration, so its failed calls are keyed on their "
        "arguments minus free text (a guess) and its successful calls on all arguments. "
        "Review and add to loopwatch.toml to be exact (each field says why it is in or out):\n%s",
        tool[:_MAX_NAME_CHARS],
        "\n".join(suggestion(tool, arguments, result)),
    )
