"""Tool definitions for ``check-tools``: OpenAI/MCP JSON, Python modules, pydantic-ai agents."""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from loopwatch.core.declarations import REGISTRY, framework_parameter


class SourceError(ValueError):
    """A source that cannot be read; the message names it."""


@dataclass(frozen=True, slots=True)
class ToolInfo:
    name: str
    parameters: tuple[str, ...]
    source: str
    # the definition as an OpenAI/MCP tool (carries x-loopwatch), when there is one
    definition: Mapping[str, Any] | None = None


def _schema_parameters(schema: Any) -> tuple[str, ...]:
    if not isinstance(schema, Mapping):
        return ()
    props = schema.get("properties")
    return tuple(props) if isinstance(props, Mapping) else ()


def from_definitions(definitions: Iterable[Any], source: str) -> list[ToolInfo]:
    """OpenAI function tools (nested or flat) and MCP ``tools/list`` entries."""
    out: list[ToolInfo] = []
    for d in definitions:
        if not isinstance(d, Mapping):
            raise SourceError(f"{source}: a tool definition is not an object: {d!r:.80}")
        if d.get("type") not in (None, "function"):
            continue  # hosted tools (web_search, ...) have no parameters of ours
        inner = d.get("function")
        fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else d
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise SourceError(f"{source}: a tool definition has no name: {d!r:.80}")
        schema = fn.get("parameters") or fn.get("inputSchema") or fn.get("input_schema")
        out.append(ToolInfo(name, _schema_parameters(schema), source, d))
    return out


def from_json_file(path: Path) -> list[ToolInfo]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SourceError(f"{path}: cannot read tool definitions: {e}") from None
    # a JSON-RPC response, an MCP tools/list result, {"tools": [...]}, or a bare list
    if isinstance(data, Mapping) and isinstance(data.get("result"), Mapping):
        data = data["result"]
    if isinstance(data, Mapping) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list):
        raise SourceError(
            f'{path}: expected a list of tools, {{"tools": [...]}} or a tools/list result'
        )
    return from_definitions(data, str(path))


def _function_parameters(fn: Callable[..., Any]) -> tuple[str, ...]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return ()
    skipped = framework_parameter(sig)
    return tuple(
        p.name
        for i, p in enumerate(sig.parameters.values())
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and not (i == 0 and p.name == skipped)
    )


def from_function(name: str, fn: Callable[..., Any], source: str) -> ToolInfo:
    return ToolInfo(name, _function_parameters(fn), source)


def from_pydantic_ai_agent(agent: Any, source: str) -> list[ToolInfo]:
    """Function tools of a pydantic-ai ``Agent`` (toolsets that list tools without a run)."""
    out: list[ToolInfo] = []
    for toolset in getattr(agent, "toolsets", ()):
        tools = getattr(toolset, "tools", None)
        if not isinstance(tools, Mapping):
            continue
        for name, t in tools.items():
            tool_def = getattr(t, "tool_def", None)
            schema = getattr(tool_def, "parameters_json_schema", None)
            out.append(ToolInfo(str(name), _schema_parameters(schema), source))
    return out


def _is_pydantic_ai_agent(value: Any) -> bool:
    try:
        from pydantic_ai import Agent
    except ImportError:
        return False
    return isinstance(value, Agent)


def from_object(value: Any, source: str) -> list[ToolInfo]:
    """A pydantic-ai Agent, a function, or a list of definitions/functions/agents."""
    if _is_pydantic_ai_agent(value):
        return from_pydantic_ai_agent(value, source)
    if isinstance(value, Mapping):
        return from_definitions([value], source)
    if isinstance(value, list | tuple):
        out: list[ToolInfo] = []
        for item in value:
            out.extend(from_object(item, source))
        return out
    if callable(value):
        name = _registered_name(value) or getattr(value, "__name__", None)
        if not name:
            raise SourceError(f"{source}: cannot tell the tool name of {value!r:.80}")
        return [from_function(name, value, source)]
    raise SourceError(f"{source}: not a tool, agent or tool list: {value!r:.80}")


def _registered_name(fn: Any) -> str | None:
    for name, registered in REGISTRY.functions.items():
        if registered is fn:
            return name
    return None


def from_import_path(spec: str) -> list[ToolInfo]:
    """``package.module`` (its ``@loopwatch.tool`` functions and pydantic-ai agents) or
    ``package.module:attribute`` (an agent, a function or a list)."""
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # an import error in user code must become one clear line
        raise SourceError(f"{spec}: cannot import {module_name}: {type(e).__name__}: {e}") from None
    return _from_module(module, attribute, spec)


def from_python_file(spec: str) -> list[ToolInfo]:
    """``path/agent.py`` or ``path/agent.py:attribute``: imported as ``python path/agent.py``
    would (its directory on the import path), then read as an import path."""
    file_name, _, attribute = spec.partition(":")
    path = Path(file_name).resolve()
    if not path.is_file():
        raise SourceError(f"{file_name}: no such file")
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module(path.stem)
    except Exception as e:
        raise SourceError(f"{spec}: cannot import {file_name}: {type(e).__name__}: {e}") from None
    origin = getattr(module, "__file__", None)
    if origin is None or Path(origin).resolve() != path:
        raise SourceError(
            f"{spec}: a module named {path.stem} is already imported from {origin}; "
            "rename the file or give an import path"
        )
    return _from_module(module, attribute, spec)


def _from_module(module: ModuleType, attribute: str, spec: str) -> list[ToolInfo]:
    if attribute:
        value: Any = module
        for part in attribute.split("."):
            if not hasattr(value, part):
                raise SourceError(f"{spec}: {module.__name__} has no attribute {attribute}")
            value = getattr(value, part)
        return from_object(value, spec)
    out = [
        from_function(name, fn, spec)
        for name, fn in REGISTRY.functions.items()
        if getattr(fn, "__module__", None) == module.__name__
    ]
    for value in vars(module).values():
        if _is_pydantic_ai_agent(value):
            out.extend(from_pydantic_ai_agent(value, spec))
    return out


def load(source: Any) -> list[ToolInfo]:
    """One source: a JSON file path, a ``.py`` file (``file.py:attribute``), an import path,
    or a Python object."""
    if isinstance(source, Path):
        source = str(source)
    if isinstance(source, str):
        if source.partition(":")[0].endswith(".py"):
            return from_python_file(source)
        if Path(source).is_file():
            return from_json_file(Path(source))
        if source.endswith(".json"):
            raise SourceError(f"{source}: no such file")
        return from_import_path(source)
    return from_object(source, repr(source)[:60])
