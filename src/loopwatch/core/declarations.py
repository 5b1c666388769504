"""Tool declarations: identity fields, result kind and thresholds, from three merged sources.

Order (later wins): ``loopwatch.toml``, the ``x-loopwatch`` JSON-Schema extension on a tool
definition, the ``@loopwatch.tool`` decorator.
"""

from __future__ import annotations

import inspect
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Final, TypeVar, cast, overload

from loopwatch.core.effects import DECLARABLE
from loopwatch.core.identity import WHOLE_ARGUMENTS, WHOLE_ARGUMENTS_FIELDS

F = TypeVar("F", bound=Callable[..., Any])


# What a ``result`` declaration can name besides a dotted path.
ROWS: Final = "rows"  # results are row sets: empty means no rows
WHOLE_RESULT: Final = "*"  # the whole result, a text or JSON, normalized (core.fingerprint)
REGEX_RESULT: Final = "re:"  # then a regular expression: its first match in the result's text


class DeclarationError(ValueError):
    """A declaration that cannot be read; the message names the tool and the field."""


@dataclass(frozen=True, slots=True)
class ToolDeclaration:
    """What is declared of one tool (a ``[tools.NAME]`` table, ``x-loopwatch`` or
    ``@loopwatch.tool``): None where nothing is."""

    # None: not declared. ("*",): the explicit choice of the whole arguments.
    identity: tuple[str, ...] | None = None
    reviewed_parameters: tuple[str, ...] | None = None
    # "rows" (empty result = no rows), "*" (the whole result), "re:" and a regular expression,
    # or a dotted path: what fingerprints a success (core.outcomes.declared_part)
    result: str | None = None
    loop_threshold: int | None = None
    no_rows_threshold: int | None = None
    same_result_threshold: int | None = None
    failing_threshold: int | None = None
    # "read" or "write" (core.effects); None: from MCP annotations or the name
    effect: str | None = None

    @property
    def whole_arguments(self) -> bool:
        """The identity is the whole arguments (``identity = "*"``)."""
        return self.identity == WHOLE_ARGUMENTS_FIELDS


def merge(base: ToolDeclaration | None, over: ToolDeclaration | None) -> ToolDeclaration | None:
    """Fields set in ``over`` win over ``base``."""
    if base is None:
        return over
    if over is None:
        return base
    changes = {
        f.name: getattr(over, f.name) for f in fields(over) if getattr(over, f.name) is not None
    }
    return replace(base, **changes)


def _str_tuple(tool: str, name: str, value: Any) -> tuple[str, ...]:
    if value == WHOLE_ARGUMENTS:
        return (WHOLE_ARGUMENTS,)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise DeclarationError(
            f'tool {tool!r}: {name} must be a list of parameter names (or "*"), got {value!r}'
        )
    return tuple(value)


def _threshold(tool: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise DeclarationError(f"tool {tool!r}: {name} must be an integer >= 2, got {value!r}")
    return value


class _Patterns:
    """Compiled ``re:`` declarations, by declaration (few: one per tool that declares one)."""

    def __init__(self) -> None:
        self.compiled: dict[str, re.Pattern[str]] = {}


_PATTERNS: Final = _Patterns()
_PATTERNS_KEPT: Final = 256


def declared_pattern(part: str) -> re.Pattern[str]:
    """The compiled expression of a ``result = "re:..."`` declaration (raises re.error)."""
    compiled = _PATTERNS.compiled
    found = compiled.get(part)
    if found is None:
        found = re.compile(part[len(REGEX_RESULT) :])  # the user's pattern: their own cost
        if len(compiled) >= _PATTERNS_KEPT:
            compiled.clear()
        compiled[part] = found
    return found


_THRESHOLDS = ("loop_threshold", "no_rows_threshold", "same_result_threshold", "failing_threshold")
_KNOWN = {"identity", "reviewed_parameters", "result", "effect", *_THRESHOLDS}


def _result(tool: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise DeclarationError(
            f'tool {tool!r}: result must be "rows", "*" (the whole result), "re:" and a '
            f"regular expression, or a dotted path; got {value!r}"
        )
    if value.startswith(REGEX_RESULT):
        try:
            declared_pattern(value)
        except re.error as e:
            raise DeclarationError(
                f"tool {tool!r}: result {value!r} is not a regular expression: {e}"
            ) from None
    return value


def _effect(tool: str, value: Any) -> str | None:
    if value is None:
        return None
    if value not in DECLARABLE:
        raise DeclarationError(f'tool {tool!r}: effect must be "read" or "write", got {value!r}')
    return str(value)


def declaration_from_mapping(tool: str, raw: Mapping[str, Any]) -> ToolDeclaration:
    """Read one ``[tools.NAME]`` table or ``x-loopwatch`` object."""
    if not isinstance(raw, Mapping):
        raise DeclarationError(f"tool {tool!r}: declaration must be a table, got {raw!r}")
    unknown = sorted(set(raw) - _KNOWN)
    if unknown:
        raise DeclarationError(
            f"tool {tool!r}: unknown key(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(_KNOWN))}"
        )
    thresholds = {
        name: _threshold(tool, name, raw[name]) if name in raw else None for name in _THRESHOLDS
    }
    return ToolDeclaration(
        identity=_str_tuple(tool, "identity", raw["identity"]) if "identity" in raw else None,
        reviewed_parameters=(
            _str_tuple(tool, "reviewed_parameters", raw["reviewed_parameters"])
            if "reviewed_parameters" in raw
            else None
        ),
        result=_result(tool, raw.get("result")),
        effect=_effect(tool, raw.get("effect")),
        **thresholds,
    )


def declarations_from_tool_definitions(
    definitions: Iterable[Mapping[str, Any]],
) -> dict[str, ToolDeclaration]:
    """``x-loopwatch`` from OpenAI function tools (``{"type":"function","function":{...}}``,
    or flat ``{"name","parameters"}``) and MCP ``tools/list`` entries (``inputSchema``)."""
    out: dict[str, ToolDeclaration] = {}
    for d in definitions:
        if not isinstance(d, Mapping):
            continue
        inner = d.get("function")
        fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else d
        name = fn.get("name")
        schema = fn.get("parameters") or fn.get("inputSchema") or {}
        ext = None
        if isinstance(schema, Mapping):
            ext = schema.get("x-loopwatch")
        ext = ext if ext is not None else fn.get("x-loopwatch")
        if isinstance(name, str) and ext is not None:
            out[name] = declaration_from_mapping(name, ext)
    return out


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def toml_string(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's, DEL aside)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else toml_string(name)


def declaration_toml(
    tool: str, identity: tuple[str, ...] | None, reviewed_parameters: tuple[str, ...]
) -> list[str]:
    """The ``[tools.NAME]`` table declaring ``identity`` (None or empty: ``"*"``), as TOML
    lines."""
    names = identity if identity and identity != (WHOLE_ARGUMENTS,) else None
    return [
        f"[tools.{toml_key(tool)}]",
        "identity = "
        + (f"[{', '.join(map(toml_string, names))}]" if names else toml_string(WHOLE_ARGUMENTS)),
        f"reviewed_parameters = [{', '.join(map(toml_string, reviewed_parameters))}]",
    ]


class _Registry:
    """Declarations made with the decorator; read on every lookup, so late ones apply."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_tool: dict[str, ToolDeclaration] = {}
        self.functions: dict[str, Callable[..., Any]] = {}

    def add(self, name: str, decl: ToolDeclaration, fn: Callable[..., Any]) -> None:
        with self._lock:
            self.by_tool = {**self.by_tool, name: decl}
            self.functions = {**self.functions, name: fn}


REGISTRY = _Registry()

# How a declared function is traced: set by loopwatch.attach.own_spans, since the core imports no
# OpenTelemetry; None returns the function as it is.
_trace_calls: Callable[[Callable[..., Any], str], Callable[..., Any]] | None = None


# A first parameter that is the method's (self, cls) or the framework's run context (pydantic-ai
# RunContext, OpenAI Agents RunContextWrapper / ToolContext, or a ctx/context) is no argument the
# model chose: check-tools does not review it and a traced call does not record it.
_NOT_THE_MODELS = frozenset({"self", "cls", "ctx", "context"})


def framework_parameter(signature: inspect.Signature | None) -> str | None:
    """The name of a tool function's first parameter when the model does not choose it."""
    if signature is None or not signature.parameters:
        return None
    first = next(iter(signature.parameters.values()))
    if first.name in _NOT_THE_MODELS or "Context" in str(first.annotation):
        return first.name
    return None


def trace_calls_with(hook: Callable[[Callable[..., Any], str], Callable[..., Any]] | None) -> None:
    """Set what ``tool`` wraps each declared function with: ``hook(function, tool_name)``."""
    global _trace_calls
    _trace_calls = hook


# what tool() takes beside identity (its second overload's keywords)
_TOOL_OPTIONS: Final = frozenset(
    {
        "name",
        "result",
        "effect",
        "loop_threshold",
        "no_rows_threshold",
        "same_result_threshold",
        "failing_threshold",
    }
)


@overload
def tool(identity: F, /) -> F: ...


@overload
def tool(
    identity: Iterable[str] | str | None = None,
    *,
    name: str | None = None,
    result: str | None = None,
    effect: str | None = None,
    loop_threshold: int | None = None,
    no_rows_threshold: int | None = None,
    same_result_threshold: int | None = None,
    failing_threshold: int | None = None,
) -> Callable[[F], F]: ...


def tool(identity: Any = None, **options: Any) -> Any:
    """Declare a Python tool function's identity fields: ``@loopwatch.tool(identity=["id"])``.
    Bare, ``@loopwatch.tool`` declares nothing but traces the calls (identity then as undeclared).

    ``identity="*"`` is the explicit choice of the whole arguments. ``effect="write"`` (or
    ``"read"``) says whether a call changes something: a write's repeats never make progress,
    and a second success on one identity is a duplicate side effect.

    When an OpenTelemetry SDK tracer provider is set, each call is also traced as an
    ``execute_tool {name}`` span (kind INTERNAL) with the GenAI tool attributes:
    ``gen_ai.tool.name``, ``gen_ai.tool.type="function"``, ``gen_ai.tool.description`` (the
    docstring's first line), ``gen_ai.tool.call.id`` (the framework's, when the function takes
    a context that carries it or runs directly inside the framework's span of the same tool;
    else a fresh one), the arguments by parameter name (defaults included, as frameworks pass
    them) as JSON in ``gen_ai.tool.call.arguments`` and the result (a string as it is, anything
    else as JSON) in ``gen_ai.tool.call.result``. A raised
    exception sets status ERROR and ``error.type`` (its qualified class name), is recorded as
    an event, and propagates unchanged.

    Arguments and results are recorded unless
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says no content on spans (``false``,
    ``no_content`` or ``event_only``). The GenAI instrumentations capture nothing unless asked;
    this decorator captures by default because a call's identity is read from its arguments,
    and a function declared for loopwatch is one whose calls are meant to be keyed.

    The returned function has the original's name, docstring and signature
    (``functools.wraps``), so frameworks that read them see the same tool. With no SDK provider
    set (the API's no-op or proxy provider) a call costs one provider lookup. Generator
    functions are declared but not traced.
    """

    if callable(identity):  # @loopwatch.tool, without parentheses
        if options:
            raise TypeError("loopwatch.tool(function) takes no options: use @loopwatch.tool(...)")
        return tool()(identity)
    unknown = sorted(options.keys() - _TOOL_OPTIONS)
    if unknown:
        raise TypeError(f"loopwatch.tool() got an unexpected keyword argument {unknown[0]!r}")

    def wrap(fn: F) -> F:
        tool_name = options.get("name") or getattr(fn, "__name__", None)
        if not tool_name:
            raise DeclarationError(f"cannot tell the tool name of {fn!r}; pass name=")
        raw = {k: v for k, v in options.items() if k != "name" and v is not None}
        if identity is not None:
            raw["identity"] = identity if isinstance(identity, str) else list(identity)
        declaration = declaration_from_mapping(tool_name, raw)
        traced = fn if _trace_calls is None else _trace_calls(fn, tool_name)
        # the registry keeps what the application holds (check-tools finds it by identity); its
        # signature is the original's
        REGISTRY.add(tool_name, declaration, traced)
        return cast(F, traced)

    return wrap
