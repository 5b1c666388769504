"""The shortcuts of the read path never change what it reads: the service skips attributes by
prefix (conventions.read.UNREAD_PREFIXES) and the processor skips spans by their keys and name
(may_be_genai; at their start, may_be_turn); every convention test's span and every benchmark
span is checked against them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import tests.support.span_shapes as conventions
from loopwatch.conventions.read import (
    UNREAD_PREFIXES,
    is_turn_span,
    may_be_genai,
    may_be_turn,
    read_span,
)
from loopwatch.core.records import Link, TurnMark
from loopwatch.core.span_view import SpanView
from testkit.span_views import span_view
from testkit.streams import STREAMS, record
from tests.support.recording import Recording


def _views_in(value: Any) -> list[SpanView]:
    if isinstance(value, SpanView):
        return [value]
    if isinstance(value, tuple | list):
        return [v for item in value for v in _views_in(item)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [v for f in dataclasses.fields(value) for v in _views_in(getattr(value, f.name))]
    return []


def convention_views() -> list[SpanView]:
    views = []
    for value in vars(conventions).values():
        if isinstance(value, dict):
            for item in value.values():
                views.extend(_views_in(item))
    args = {"customer_id": "c_40912", "order_id": "88214", "summary": "refund not received"}
    views.extend(build(args, step) for build in conventions.BUILDERS.values() for step in (0, 1))
    return views


def benchmark_views() -> list[SpanView]:
    return [span_view(s) for name in sorted(STREAMS) for s in record(STREAMS[name])[:400]]


@pytest.mark.parametrize("source", ["conventions", "benchmarks"])
def test_no_attribute_read_is_skipped_and_no_genai_span_is_taken_for_plain(source: str) -> None:
    views = convention_views() if source == "conventions" else benchmark_views()
    assert len(views) > (60 if source == "conventions" else 1000)
    asked: set[str] = set()
    kinds = set()
    turns = 0
    for view in views:
        attributes = Recording(view.attributes)
        attributes.asked = asked
        record_ = read_span(dataclasses.replace(view, attributes=attributes), conventions.DECLARED)
        kinds.add(type(record_).__name__)
        if not isinstance(record_, Link):
            assert may_be_genai(view.name, view.attributes), view
        if isinstance(record_, TurnMark) or is_turn_span(view.name, view.attributes):
            turns += 1
            assert may_be_turn(view.name, dict(view.attributes)), view
    assert {"ToolCall", "TurnMark"} <= kinds
    assert turns >= 5
    assert source == "conventions" or "LlmMark" in kinds
    skipped = sorted(k for k in asked if k.startswith(UNREAD_PREFIXES))
    assert skipped == []
    assert "gen_ai.tool.call.arguments" in asked


def test_the_spelled_out_key_tests_hold_every_marker_key() -> None:
    from loopwatch.conventions import read

    turn_keys = {key for key, _ in read._TURN_MARKERS}
    assert turn_keys <= read._MARKER_KEYS
    for key in read._MARKER_KEYS:
        assert read._has_marker_key({key: "x"}), key
        assert read._has_turn_key({key: "x"}) == (key in turn_keys), key
    assert not read._has_marker_key({"http.route": "/", "db.system": "postgresql"})
