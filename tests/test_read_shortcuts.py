"""The shortcuts of the read path give what the long way gives: one marker lookup a key for the
span's kind, the failed identity taken from the call's own key when that key hashed all the
arguments and there is no free text to leave out, the prebuilt canonical encoder, and JSON's
three words without a scan."""

from __future__ import annotations

import json
from typing import Any

import pytest

from loopwatch.conventions import read_span
from loopwatch.conventions.payloads import parse_text
from loopwatch.core.config import Config
from loopwatch.core.identity import canonical_json
from loopwatch.core.keys import attempt_key
from loopwatch.core.records import Link, LlmMark, ToolCall, TurnMark
from tests.support.span_shapes import view

UNDECLARED = Config()


@pytest.mark.parametrize(
    ("name", "attributes", "kind"),
    [
        # a tool marker wins over any other marker, whichever family writes it
        ("chat", {"gen_ai.operation.name": "chat", "openinference.span.kind": "TOOL"}, ToolCall),
        ("x", {"gen_ai.request.model": "m", "traceloop.span.kind": "tool"}, ToolCall),
        # a tool name wins over a turn marker
        ("execute_tool search", {"openinference.span.kind": "AGENT"}, ToolCall),
        # a turn marker wins over an LLM marker, and so does a turn name
        ("x", {"gen_ai.request.model": "m", "traceloop.span.kind": "workflow"}, TurnMark),
        ("invoke_agent support", {"gen_ai.operation.name": "chat"}, TurnMark),
        # "any value" markers take any type; value markers only their text
        ("x", {"gen_ai.request.model": 5}, LlmMark),
        ("x", {"llm.request.type": ""}, LlmMark),
        ("x", {"gen_ai.operation.name": ("execute_tool",)}, Link),
        ("x", {"openinference.span.kind": "CHAIN"}, Link),
    ],
)
def test_the_kind_follows_the_marker_order(
    name: str, attributes: dict[str, Any], kind: type
) -> None:
    assert type(read_span(view(name, attributes), UNDECLARED)) is kind


@pytest.mark.parametrize("tool", ["search_orders", "create_ticket"])  # a read, a write
@pytest.mark.parametrize(
    "arguments",
    [
        {"customer_id": "c_40912", "page": 2},  # no free text: the key's own identity
        {"customer_id": "c_40912", "query": "boots refund"},
        # prose by its name, not free text: a write's success is keyed without it, its failure
        # with it
        {"customer_id": "c_40912", "note": "urgent"},
        {"filters": {"customer_id": "c_40912", "note": "x" * 65}, "ids": [1, "a b", 3]},
        {"nested": [[{"a": "b c"}]], "n": None, "f": 1.5, "t": True},
        {"nan": float("nan"), "big": 10**30},
        [],
        "order 88214",
        "88214",
    ],
)
def test_a_successful_undeclared_call_keeps_the_identity_it_would_fail_with(
    tool: str, arguments: Any
) -> None:
    span = view(
        f"execute_tool {tool}",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": json.dumps(arguments),
            "gen_ai.tool.call.result": "[1]",
        },
    )
    record = read_span(span, UNDECLARED)
    assert isinstance(record, ToolCall)
    parsed = json.loads(json.dumps(arguments))
    failed = attempt_key(tool, parsed, "tool_error", None)
    assert failed.inferred
    assert record.failed_identity == failed.identity
    assert record.key.identity == attempt_key(tool, parsed, "rows", None).identity


def test_canonical_json_is_the_encoder_it_always_was() -> None:
    encoder = json.JSONEncoder(
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
    )
    value = {"b": [1, 2.5, float("nan"), 10**30, "é\u2028", None, True], "a": {"z": {}, "y": ()}}
    assert canonical_json(value) == encoder.encode(value)
    assert canonical_json("text") == encoder.encode("text")
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        canonical_json(cycle)


@pytest.mark.parametrize(
    ("text", "value"),
    [("true", True), (" false\n", False), ("null", None), ("nul", "nul"), ("no rows", "no rows")],
)
def test_json_words_parse_and_plain_texts_stay_texts(text: str, value: Any) -> None:
    assert parse_text(text) == value
    assert type(parse_text(text)) is type(value)
