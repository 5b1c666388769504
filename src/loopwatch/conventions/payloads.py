"""Arguments and results as instrumentations write them: JSON, Python reprs, envelopes.

Seen: JSON texts (most), Python reprs (OpenInference langchain 0.1.80), ``{"args", "kwargs"}``
envelopes (OpenInference smolagents 0.1.43 adds ``sanitize_inputs_outputs``; llama-index 4.6.1
writes ``{"kwargs": {...}}``), ADK 2.13's ``{"result": X}``, Strands 1.62's text blocks, LangChain
ToolMessages, and framework output wrappers (conventions.results)."""

from __future__ import annotations

import ast
import json
import json.scanner
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from loopwatch.conventions.results import unwrap_output

REDACTED: Final = frozenset({"__REDACTED__", "<redacted>", "[REDACTED]", "[redacted]"})
# (a longer text is none of them: tested without hashing the whole payload)
_REDACTED_CHARS: Final = max(map(len, REDACTED))
# Past this a payload is not parsed; its identity is the hash of the raw text (still exact for
# byte-equal repeats, which is all a huge payload can be compared on cheaply).
MAX_PARSE_CHARS: Final = 256 * 1024
# Python literals (LangChain's ``str(dict)``) go through CPython's parser, linear only up to a
# few thousand tokens and ~100 times slower than JSON: past this such a text stays a text.
MAX_LITERAL_CHARS: Final = 4 * 1024
_UNWRAP_DEPTH: Final = 6
# The keys of a {"args", "kwargs"} call envelope (Traceloop decorators, smolagents).
_MCP_ENVELOPE_KEYS: Final = frozenset({"tool_name", "arguments"})
_CALL_ENVELOPE_KEYS: Final = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})
# A result mapping that holds none of these keys is no envelope decode_result unwraps.
_ENVELOPE_KEYS: Final = frozenset({"raw_output", "data", "lc", "output", "result", "content"})
# json.loads' own scanner (C where available), called directly: it is most of a tool span's
# parsing, and loads adds three Python calls and a regex around it
_DECODER: Final = json.decoder.JSONDecoder()
# (typeshed types make_scanner's argument as a scanner, not the decoder it reads)
_Scan = Callable[[str, int], tuple[Any, int]]
_SCAN: _Scan = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]
_JSON_WORDS: dict[str, Any] = {"true": True, "false": False, "null": None}


def parse_text(text: str) -> Any:
    """JSON, else a Python literal (LangChain writes ``str(dict)``), else the text itself."""
    return _parse_stripped(text, text.strip())


def _parse_stripped(text: str, stripped: str) -> Any:
    """parse_text, for callers that already stripped ``text``."""
    if not stripped or len(stripped) > MAX_PARSE_CHARS:
        return text
    first = stripped[0]
    if first in "tfn":
        # JSON's three words are its only texts starting so: plain texts that do ("timed
        # out", "no results") are not scanned (a failed scan raises, which costs)
        return _JSON_WORDS.get(stripped, text)
    if first in '{["-0123456789':
        try:
            value, end = _SCAN(stripped, 0)
        except (StopIteration, ValueError, RecursionError):
            pass
        else:
            # json.loads without its wrappers: the text is stripped and starts with no
            # whitespace or BOM, so it is JSON exactly when the scan reaches its end
            if end == len(stripped):
                return value
    if len(stripped) <= MAX_LITERAL_CHARS and (first in "{[(" or first in "'\""):
        try:
            value = ast.literal_eval(stripped)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return text
        return _jsonable(value)
    return text


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple | list | set | frozenset):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _structured(value: Any) -> Any:
    """Attribute values other than a text (numbers, sequences, mappings on newer SDKs) as
    JSON-like data. Only a top-level text is parsed: inside structured data a string is a value
    (the order id ``"88214"`` stays a string, as it is when the same arguments arrive as a JSON
    text)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _structured(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [_structured(v) for v in value]
    return value


def decode_arguments(value: Any) -> tuple[bool, Any]:
    """``(known, arguments)``; unknown when absent or redacted (never read as empty)."""
    if value is None:
        return False, None
    if isinstance(value, str):  # is_redacted and _plain, stripping once
        stripped = value.strip()
        if len(stripped) <= _REDACTED_CHARS and stripped in REDACTED:
            return False, None
        return True, _unwrap_arguments(_parse_stripped(value, stripped))
    return True, _unwrap_arguments(_structured(value))


def _unwrap_arguments(args: Any) -> Any:
    if not isinstance(args, dict) or (
        "kwargs" not in args and "input_str" not in args and "tool_name" not in args
    ):
        return args  # no envelope below: most arguments (the loop is dearer than this test)
    for _ in range(_UNWRAP_DEPTH):
        if not isinstance(args, dict):
            return args
        keys = args.keys()
        if "input_str" in keys and "inputs" in keys:
            # OpenLLMetry's LangChain envelope: its metadata changes every step, inputs do not.
            inner = args["inputs"]
            args = inner if inner else parse_text(str(args["input_str"]))
        elif "kwargs" in keys and keys <= _CALL_ENVELOPE_KEYS:
            # Traceloop decorators and smolagents: {"args": [...], "kwargs": {...}}.
            positional = args.get("args") or []
            named = args.get("kwargs") or {}
            if not isinstance(positional, list) or not isinstance(named, dict):
                return args
            if not positional:
                args = named
            elif not named and len(positional) == 1:
                args = positional[0]
            else:
                return {"args": positional, **named}
        elif keys == _MCP_ENVELOPE_KEYS and isinstance(args["arguments"], dict):
            # OpenLLMetry's MCP instrumentor: {"tool_name": ..., "arguments": {...}}
            args = args["arguments"]
        else:
            return args
    return args


def decode_result(value: Any) -> tuple[bool, Any, str | None]:
    """``(known, result, error_text)``. error_text is set when the envelope says the call failed
    (LangChain ToolMessage ``status="error"``, MCP ``isError``)."""
    if value is None:
        return False, None, None
    if isinstance(value, str):  # is_redacted and _plain, stripping once
        stripped = value.strip()
        if len(stripped) <= _REDACTED_CHARS and stripped in REDACTED:
            return False, None, None
        result = _parse_stripped(value, stripped)
    else:
        result = _structured(value)
    error_text: str | None = None
    for _ in range(_UNWRAP_DEPTH):
        if isinstance(result, str):
            if result is value:  # the text did not parse just above: it would not again
                break
            parsed = parse_text(result)
            if parsed is result or isinstance(parsed, str):
                break
            result = parsed
            continue
        if isinstance(result, dict):
            if _ENVELOPE_KEYS.isdisjoint(result):  # a plain mapping: none of the shapes below
                break
            unwrapped, result, error_text = _unwrap_mapping(result, error_text)
            if not unwrapped:
                break
        elif (
            isinstance(result, list)
            and result
            and _is_text_block(result[0])  # most lists are not: no generator for them
            and all(_is_text_block(b) for b in result)
        ):
            # Strands / MCP content blocks: [{"text": "..."}] or [{"type": "text", "text": ...}]
            texts = [b["text"] for b in result]
            result = texts[0] if len(texts) == 1 else "\n".join(texts)
        else:
            break
    return True, result, error_text


def _unwrap_mapping(result: dict[str, Any], error_text: str | None) -> tuple[bool, Any, str | None]:
    """``(unwrapped, inner value, error text)`` for one envelope around a result (a framework
    wrapper's error yields to one found outside it; a message's or MCP result's error wins);
    ``(False, result, error_text)`` when the mapping is the result itself."""
    unwrapped, inner, wrapper_error = unwrap_output(result)
    if unwrapped:
        return True, inner, error_text or wrapper_error
    data = result.get("data")
    if result.get("lc") == 1 and result.get("type") == "constructor":
        # LangChain's own serialization (``ToolMessage.to_json()``, OpenLLMetry writes it): the
        # message fields are under ``kwargs``.
        data = result.get("kwargs")
    if (
        isinstance(data, dict)
        and "content" in data
        and "tool" in (result.get("type"), data.get("type"))
    ):
        if data.get("status") == "error":
            error_text = str(data.get("content"))[:500]
        return True, data["content"], error_text
    if "output" in result and set(result) <= {"output", "kwargs"}:
        return True, result["output"], error_text
    if len(result) == 1 and "result" in result:
        return True, result["result"], error_text
    if isinstance(result.get("content"), list) and (
        "isError" in result or "structuredContent" in result
    ):
        if result.get("isError") is True:
            error_text = str(result["content"])[:500]
        return True, result["content"], error_text
    return False, result, error_text


def _is_text_block(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and isinstance(block.get("text"), str)
        and set(block) <= {"text", "type", "annotations"}
    )
