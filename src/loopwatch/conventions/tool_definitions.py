"""The tools' versions from the tool definitions a model call carries: tool name -> short hash
of its description (GenAI ``gen_ai.tool.definitions``, pydantic-ai's request parameters,
OpenInference ``llm.tools.N.tool.json_schema``). Definitions that carry MCP ``annotations``
also tell each tool's effect (core.effects)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from loopwatch.conventions.genai import GENAI
from loopwatch.conventions.payloads import parse_text
from loopwatch.core.effects import learn_tool_list, tool_function
from loopwatch.core.identity import short_hash

# An agent sends the same tool definitions with every model call: their hashes are kept, keyed
# by the attribute's text (bounded in entries and in text length).
_DEFINITIONS: Final = GENAI.tool_definitions
_VERSIONS_CACHE: dict[tuple[Any, ...], tuple[tuple[str, str], ...]] = {}
_VERSIONS_CACHE_ENTRIES = 64
_VERSIONS_CACHE_TEXT = 64 * 1024


def tool_versions(attrs: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Tool name -> description hash, from the tool definitions an LLM span carries."""
    if type(attrs) is dict:  # every span view's: compiled, a lookup a key is a C call
        raws = tuple([attrs.get(key) for key in _DEFINITIONS])
    else:
        raws = tuple(map(attrs.get, _DEFINITIONS))
    if "llm.tools.0.tool.json_schema" in attrs:
        return _read_tool_versions(attrs)
    for raw in raws:
        if raw is not None and not (isinstance(raw, str) and len(raw) <= _VERSIONS_CACHE_TEXT):
            return _read_tool_versions(attrs)
    found = _VERSIONS_CACHE.get(raws)
    if found is None:
        found = _read_tool_versions(attrs)
        if len(_VERSIONS_CACHE) >= _VERSIONS_CACHE_ENTRIES:
            _VERSIONS_CACHE.clear()
        _VERSIONS_CACHE[raws] = found
    return found


def _read_tool_versions(attrs: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    definitions: list[Any] = []
    for key in GENAI.tool_definitions:
        raw = attrs.get(key)
        value = parse_text(raw) if isinstance(raw, str) else raw
        if isinstance(value, dict):
            value = value.get("function_tools")
        if isinstance(value, list | tuple):
            definitions.extend(value)
    index = 0
    while True:  # OpenInference: llm.tools.N.tool.json_schema
        raw = attrs.get(f"llm.tools.{index}.tool.json_schema")
        if raw is None:
            break
        definitions.append(parse_text(raw) if isinstance(raw, str) else raw)
        index += 1
    learn_tool_list(definitions)
    for d in definitions:
        fn = tool_function(d)
        if fn is None:
            continue
        name, description = fn.get("name"), fn.get("description")
        if isinstance(name, str) and isinstance(description, str) and description:
            found[name] = short_hash(description, 8)
    return tuple(sorted(found.items()))
