"""A suggested declaration for a tool, safe to paste: which fields its identity keeps, why (one
line each), and a ``result`` path when its result is structured. It names fields, never values.

The rule: free text (reworded on retries) stays out of the identity, except on a tool whose text
is its effect, one that sends, posts or writes it: there distinct texts are distinct effects, so
leaving them out would merge twenty distinct messages into one key and a loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from loopwatch.core.declarations import toml_key, toml_string
from loopwatch.core.effects import ACTION_PARAMETER, DECLARABLE, sends_text
from loopwatch.core.identity import WHOLE_ARGUMENTS, is_free_text

# Why a field is in or out (the trailing comment of its line).
IN_VALUE: Final = "in: a short value (an id, a name, a choice): decides what the call does"
IN_STRUCTURED: Final = "in: a structured value, kept whole"
IN_NAMED: Final = "in: not named like free text: decides what the call does"
IN_SENT: Final = "in: text this tool sends or writes: distinct texts are distinct effects"
OUT_FREE_TEXT: Final = "out: free text, reworded on retries"
OUT_NAMED: Final = "out: named like free text, reworded on retries"
ALL_FREE_TEXT: Final = "in: all fields, since only free text tells its calls apart"

# Result paths suggested, by what they hold (names from these lists only: a result's own keys
# may be data, and the suggestion reaches a log line).
ROWS_WORDS: Final = (
    "results",
    "items",
    "data",
    "documents",
    "records",
    "rows",
    "hits",
    "matches",
    "entries",
    "ids",
)
# An object a result wraps the rest in: {"data": {"items": [...]}}.
_WRAPPERS: Final = ("data", "result", "response")
ROWS_REASON: Final = "the rows it returns: the same rows again is no progress"

# isinstance's type tuple, built once (``dict | list`` builds a new union on every call)
_CONTAINERS: Final = (dict, list)


@dataclass(frozen=True, slots=True)
class FieldChoice:
    """One parameter of a suggestion: whether the identity keeps it, and why in one line."""

    name: str
    kept: bool
    reason: str


def choices_from_call(tool: str, arguments: Mapping[str, Any]) -> list[FieldChoice]:
    """The fields of one observed call, judged by their values: free text out (in when the tool
    sends it), every other value in."""
    sends = sends_text(tool, (arguments.get(ACTION_PARAMETER),))
    out: list[FieldChoice] = []
    for name, value in arguments.items():
        if is_free_text(value):
            out.append(FieldChoice(str(name), sends, IN_SENT if sends else OUT_FREE_TEXT))
        elif isinstance(value, _CONTAINERS):
            out.append(FieldChoice(str(name), True, IN_STRUCTURED))
        else:
            out.append(FieldChoice(str(name), True, IN_VALUE))
    return out


def identity_of(choices: Iterable[FieldChoice]) -> tuple[str, ...]:
    """The identity the choices suggest (empty: key on all arguments, ``"*"``)."""
    return tuple(c.name for c in choices if c.kept)


def effect_toml(effect: str, why: str) -> str:
    """The ``effect`` line of a suggestion, with why; an effect no declaration can say (an
    idempotent write, from MCP annotations) as a comment."""
    if effect in DECLARABLE:
        return f"effect = {toml_string(effect)}  # {why}"
    return f"# effect: {effect.replace('_', ' ')} ({why}), from the tool list"


def suggestion_toml(
    tool: str,
    choices: Sequence[FieldChoice],
    result: tuple[str, str] | None = None,
    notes: Sequence[str] = (),
    effect: tuple[str, str] | None = None,
) -> list[str]:
    """The ``[tools.NAME]`` table of a suggestion as TOML lines: ``notes`` (comment lines),
    ``effect`` (``(effect, why)``), the identity one field a line, each with why it is in or out
    (an out field as a commented-out entry, to put back by removing the ``#``), then
    reviewed_parameters and ``result`` (``(path, why)``)."""
    lines = [f"[tools.{toml_key(tool)}]", *notes]
    if effect is not None:
        lines.append(effect_toml(*effect))
    if any(c.kept for c in choices):
        entries = [(f"{'' if c.kept else '# '}{toml_string(c.name)},", c.reason) for c in choices]
        width = max(len(e) for e, _ in entries)
        lines.append("identity = [")
        lines.extend(f"    {e.ljust(width)}  # {why}" for e, why in entries)
        lines.append("]")
    else:
        lines.append(f"identity = {toml_string(WHOLE_ARGUMENTS)}  # {ALL_FREE_TEXT}")
    names = ", ".join(toml_string(c.name) for c in choices)
    lines.append(f"reviewed_parameters = [{names}]")
    if result is not None:
        lines.append(f"result = {toml_string(result[0])}  # {result[1]}")
    return lines


def result_of_value(result: Any) -> tuple[str, str] | None:
    """``(path, why)`` for an observed result that is a JSON object holding a list of rows;
    None for any other result."""
    if not isinstance(result, dict):
        return None
    return _pick(result, _value_kind)


def result_of_schema(schema: Any) -> tuple[str, str] | None:
    """The same for a JSON Schema of the result (an MCP tool's ``outputSchema``)."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return None
    return _pick(props, _schema_kind)


# What a field holds: a list of rows, an object (its fields), or a single value.
_LIST: Final = "list"
_OBJECT: Final = "object"
_SCALAR: Final = "scalar"
_Kind = Callable[[Any], tuple[str, Mapping[str, Any]]]


def _value_kind(value: Any) -> tuple[str, Mapping[str, Any]]:
    if isinstance(value, list):
        return _LIST, {}
    if isinstance(value, dict):
        return _OBJECT, value
    return _SCALAR, {}


def _schema_kind(schema: Any) -> tuple[str, Mapping[str, Any]]:
    if not isinstance(schema, Mapping):
        return _SCALAR, {}
    types = schema.get("type")
    kinds = types if isinstance(types, list) else [types]
    if "array" in kinds:
        return _LIST, {}
    props = schema.get("properties")
    if "object" in kinds or isinstance(props, Mapping):
        return _OBJECT, props if isinstance(props, Mapping) else {}
    return _SCALAR, {}


def _pick(
    fields: Mapping[str, Any], kind: _Kind, prefix: str = "", depth: int = 0
) -> tuple[str, str] | None:
    """A rows list, at the top or inside one wrapper object. Nothing else is suggested: the
    default, the whole result with what changes on every answer left out, reads a poll's
    progress, where a status or id path would read an advancing poll as a loop."""
    for word in ROWS_WORDS:
        if word in fields and kind(fields[word])[0] == _LIST:
            return prefix + word, ROWS_REASON
    if depth == 0:
        for word in _WRAPPERS:
            if word in fields:
                found, inner = kind(fields[word])
                if found == _OBJECT:
                    picked = _pick(inner, kind, f"{word}.", 1)
                    if picked is not None:
                        return picked
    return None
