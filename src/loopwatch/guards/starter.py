"""A starter ``loopwatch.toml`` (``check-tools --init``): a suggested identity and the
reviewed parameters of every tool, each marked for review."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from loopwatch.core.declarations import ToolDeclaration, declaration_toml, toml_string
from loopwatch.core.effects import (
    ACTION_PARAMETER,
    READ,
    annotated_effect,
    inferred_effect,
    sends_text,
    words,
)
from loopwatch.core.suggest import (
    IN_NAMED,
    IN_SENT,
    OUT_NAMED,
    FieldChoice,
    effect_toml,
    identity_of,
    result_of_schema,
    suggestion_toml,
)
from loopwatch.guards.sources import ToolInfo

# A parameter whose name holds one of these words is taken for free text (left out of the
# suggested identity, unless the tool sends it): a suggestion from names alone, which is why
# each one is for review.
FREE_TEXT_WORDS = frozenset(
    {
        "answer",
        "body",
        "comment",
        "comments",
        "content",
        "description",
        "details",
        "explanation",
        "feedback",
        "instructions",
        "message",
        "note",
        "notes",
        "prompt",
        "query",
        "question",
        "reason",
        "reply",
        "subject",
        "summary",
        "text",
        "title",
    }
)
REVIEW = "# review:"


def looks_like_free_text(parameter: str) -> bool:
    return any(w in FREE_TEXT_WORDS for w in words(parameter))


def choices_from_names(
    parameters: Iterable[str], tool: str = "", actions: Iterable[str] = ()
) -> list[FieldChoice]:
    """Each parameter judged by its name: free-text names out, unless the tool sends its text
    (core.suggest.sends_text: its name or one of its ``action`` values)."""
    sends = sends_text(tool, actions)
    out: list[FieldChoice] = []
    for p in parameters:
        if not looks_like_free_text(p):
            out.append(FieldChoice(p, True, IN_NAMED))
        else:
            out.append(FieldChoice(p, sends, IN_SENT if sends else OUT_NAMED))
    return out


def suggest_identity(
    parameters: Iterable[str], tool: str = "", actions: Iterable[str] = ()
) -> tuple[str, ...]:
    """The parameters that do not look like free text, or are text the tool sends (empty: key on
    all arguments)."""
    return identity_of(choices_from_names(parameters, tool, actions))


def _schema(tool: ToolInfo, *keys: str) -> Mapping[str, Any] | None:
    d = tool.definition
    if d is None:
        return None
    inner = d.get("function")
    fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else d
    for key in keys:
        schema = fn.get(key)
        if isinstance(schema, Mapping):
            return schema
    return None


def action_values(tool: ToolInfo) -> tuple[str, ...]:
    """The values the tool's definition allows its ``action`` parameter (its JSON Schema enum)."""
    schema = _schema(tool, "parameters", "inputSchema", "input_schema")
    props = schema.get("properties") if schema is not None else None
    action = props.get(ACTION_PARAMETER) if isinstance(props, Mapping) else None
    enum = action.get("enum") if isinstance(action, Mapping) else None
    return tuple(v for v in enum if isinstance(v, str)) if isinstance(enum, list) else ()


def tool_effect(tool: ToolInfo) -> tuple[str, str] | None:
    """``(effect, why)`` of a tool from its definition: its MCP annotations, else its name; None
    for a multi-action tool one of whose actions writes (each call is read by its action)."""
    d = tool.definition
    annotations = d.get("annotations") if d is not None else None
    if isinstance(annotations, Mapping):
        found = annotated_effect(annotations)
        if found is not None:
            return found
    if any(inferred_effect(a)[0] != READ for a in action_values(tool)):
        return None
    return inferred_effect(tool.name)


def suggestion_lines(tool: ToolInfo, declaration: ToolDeclaration | None) -> list[str]:
    """The ``[tools.NAME]`` table of one tool with parameters, its review note first."""
    params = tool.parameters
    effect = None if declaration is not None and declaration.effect else tool_effect(tool)
    if declaration is None or declaration.identity is None:
        choices = choices_from_names(params, tool.name, action_values(tool))
        note = f"{REVIEW} suggested from the parameter names"
        result = result_of_schema(_schema(tool, "outputSchema", "output_schema"))
        if declaration is not None and declaration.result is not None:
            result = None  # declared already: written below with the rest of the declaration
        lines = suggestion_toml(tool.name, choices, result, (note,), effect)
    else:
        table, *body = declaration_toml(tool.name, declaration.identity, params)
        lines = [table, f"{REVIEW} identity as declared already ({tool.source})"]
        lines += [effect_toml(*effect)] if effect is not None else []
        lines += body
    for name in (
        "effect",
        "result",
        "loop_threshold",
        "no_rows_threshold",
        "same_result_threshold",
        "failing_threshold",
    ):
        value = getattr(declaration, name, None)
        if value is not None:
            lines.append(f"{name} = {toml_string(value) if isinstance(value, str) else value}")
    return lines


def starter_toml(
    tools: Sequence[tuple[ToolInfo, ToolDeclaration | None]], sources: Sequence[str]
) -> str:
    lines = [
        f"# loopwatch.toml written by `loopwatch check-tools --init` from {' '.join(sources)}.",
        "# Each identity is a suggestion: the parameters that decide what a call does (which",
        "# customer, which order), never free text the model rewords, except the text a tool",
        "# sends, posts or writes (distinct texts are distinct effects). effect says whether a",
        '# call changes something ("write": its repeats never make progress, and a second',
        "# success on one identity is a duplicate side effect) or only reads. Each field's comment",
        "# says why it is in or out; a field left out is a commented-out entry. Review every",
        '# table marked "review", then run `loopwatch check-tools` in CI. identity = "*" keys a',
        "# call on all its arguments; reviewed_parameters is what the identity was judged against.",
    ]
    for tool, declaration in tools:
        lines.append("")
        if not tool.parameters:
            lines.append(f"# {tool.name}: no parameters, nothing to declare")
            continue
        lines.extend(suggestion_lines(tool, declaration))
    return "\n".join(lines) + "\n"
