"""A starter ``loopwatch.toml`` (``check-tools --init``): a suggested identity and the
reviewed parameters of every tool, each marked for review."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from loopwatch.core.declarations import ToolDeclaration, declaration_toml, toml_string
from loopwatch.guards.sources import ToolInfo

# A parameter whose name holds one of these words is taken for free text (left out of the
# suggested identity): a suggestion from names alone, which is why each one is for review.
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
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
REVIEW = "# review:"


def looks_like_free_text(parameter: str) -> bool:
    return any(w.lower() in FREE_TEXT_WORDS for w in _WORD.findall(parameter))


def suggest_identity(parameters: Iterable[str]) -> tuple[str, ...]:
    """The parameters that do not look like free text (empty: key on all arguments)."""
    return tuple(p for p in parameters if not looks_like_free_text(p))


def suggestion_lines(tool: ToolInfo, declaration: ToolDeclaration | None) -> list[str]:
    """The ``[tools.NAME]`` table of one tool with parameters, its review note first."""
    params = tool.parameters
    if declaration is not None and declaration.identity is not None:
        identity = declaration.identity
        note = f"{REVIEW} identity as declared already ({tool.source})"
    else:
        identity = suggest_identity(params)
        left_out = [p for p in params if p not in identity]
        note = f"{REVIEW} suggested from the parameter names" + (
            f"; left out as free text: {', '.join(left_out)}" if left_out else ""
        )
    table, *body = declaration_toml(tool.name, identity, params)
    for name in (
        "result",
        "loop_threshold",
        "no_rows_threshold",
        "same_result_threshold",
        "failing_threshold",
    ):
        value = getattr(declaration, name, None)
        if value is not None:
            body.append(f"{name} = {toml_string(value) if isinstance(value, str) else value}")
    return [table, note, *body]


def starter_toml(
    tools: Sequence[tuple[ToolInfo, ToolDeclaration | None]], sources: Sequence[str]
) -> str:
    lines = [
        f"# loopwatch.toml written by `loopwatch check-tools --init` from {' '.join(sources)}.",
        "# Each identity is a suggestion: the parameters that decide what a call does (which",
        "# customer, which order), never free text the model rewords. Review every table marked",
        '# "review", then run `loopwatch check-tools` in CI. identity = "*" keys a call on all',
        "# its arguments; reviewed_parameters is what the identity was judged against.",
    ]
    for tool, declaration in tools:
        lines.append("")
        if not tool.parameters:
            lines.append(f"# {tool.name}: no parameters, nothing to declare")
            continue
        lines.extend(suggestion_lines(tool, declaration))
    return "\n".join(lines) + "\n"
