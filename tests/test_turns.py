"""Which spans form which turn (the outermost agent spans holding tool calls, else the local
root), on hand-built traces."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.conventions import read_span
from loopwatch.core.config import Config
from loopwatch.core.keys import AttemptKey
from loopwatch.core.records import Link, LlmMark, Record, ToolCall, TurnMark
from loopwatch.core.span_view import SpanView
from loopwatch.core.summary import summarize
from loopwatch.core.turns import TurnGroup, split_turns

AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
OI_AGENT = {"openinference.span.kind": "AGENT"}
CHAIN = {"openinference.span.kind": "CHAIN"}


def tool(name: str = "search", query: str = "q") -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.arguments": f'{{"query": "{query}"}}',
        "gen_ai.tool.call.result": "[]",
    }


def llm(model: str) -> dict[str, Any]:
    return {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}


def records(*spans: tuple[int, int | None, dict[str, Any], int]) -> dict[int, Record]:
    """(span id, parent id, attributes, start) -> records, as read by the conventions."""
    config = Config()
    out = {}
    for span_id, parent, attrs, start in spans:
        view = SpanView(1, span_id, parent, "span", start, start + 1, attrs)
        out[span_id] = read_span(view, config)
    return out


def test_http_request_running_two_agents_is_two_turns() -> None:
    groups = split_turns(
        records(
            (1, None, {}, 0),
            (2, 1, AGENT, 1),
            (3, 2, tool(), 2),
            (4, 1, AGENT, 10),
            (5, 4, tool(), 11),
            (6, 4, tool(query="other"), 12),
        )
    )
    assert sorted((g.anchor, len(g.calls)) for g in groups) == [(2, 1), (4, 2)]


def test_nested_agent_belongs_to_the_outermost_turn() -> None:
    groups = split_turns(
        records((1, None, AGENT, 0), (2, 1, tool(), 1), (3, 2, AGENT, 2), (4, 3, tool(), 3))
    )
    assert [(g.anchor, len(g.calls)) for g in groups] == [(1, 2)]


def test_langgraph_agent_nodes_without_tools_leave_one_turn_at_the_root() -> None:
    # LangGraph under OpenInference: every "agent" step is AGENT, the tools hang under the root.
    groups = split_turns(
        records(
            (1, None, CHAIN, 0),
            (2, 1, OI_AGENT, 1),
            (3, 2, llm("m1"), 2),
            (4, 1, CHAIN, 3),
            (5, 4, tool(), 4),
            (6, 1, OI_AGENT, 5),
            (7, 6, llm("m1"), 6),
            (8, 1, CHAIN, 7),
            (9, 8, tool(query="again"), 8),
        )
    )
    assert len(groups) == 1
    assert groups[0].anchor == 1 and groups[0].turn is None
    assert len(groups[0].calls) == 2 and len(groups[0].llms) == 2


def test_agent_without_tool_calls_is_one_turn_and_plain_traces_are_none() -> None:
    groups = split_turns(records((1, None, AGENT, 0), (2, 1, llm("m"), 1)))
    assert len(groups) == 1 and groups[0].calls == [] and groups[0].turn is not None
    assert split_turns(records((1, None, {"http.method": "GET"}, 0), (2, 1, {}, 1))) == []


def test_parent_cycles_terminate() -> None:
    groups = split_turns(records((1, 2, AGENT, 0), (2, 1, tool(), 1), (3, 3, tool(), 2)))
    assert sum(len(g.calls) for g in groups) == 2


def test_model_is_the_llm_span_before_the_worst_key() -> None:
    config = Config()
    recs = records(
        (1, None, AGENT, 0),
        (2, 1, llm("small"), 1),
        (3, 1, tool(query="a"), 2),
        (4, 1, llm("large"), 3),
        (5, 1, tool(query="b"), 4),
        (6, 1, llm("large"), 5),
        (7, 1, tool(query="b"), 6),
    )
    (group,) = split_turns(recs)
    summary = summarize(1, "svc", group.turn, group.calls, group.llms, config)
    assert summary.max_attempts == 2
    assert summary.model == "large"
    assert summary.agent == "support"
    (search,) = summary.tools
    assert search.no_rows_streak == 3
    assert search.loops == (("ok", "no_rows"),)


def test_turns_under_a_long_lived_root_are_finalized_when_their_agent_ends() -> None:
    from loopwatch.core.declarations import ToolDeclaration
    from loopwatch.demo.emit import emit_turn
    from loopwatch.demo.scenarios import fourteen_tickets
    from tests.support.helpers import Pipeline, S

    p = Pipeline(Config(tools={"create_ticket": ToolDeclaration(identity=("order_id",))}))
    batch = p.tracer.start_span("nightly batch", start_time=S)
    from opentelemetry import trace

    with trace.use_span(batch, end_on_exit=False):
        t = 2 * S
        for n in range(3):
            t = emit_turn(p.tracer, fourteen_tickets(), t)
            # the batch span is still open, yet each agent's turn is already counted
            assert p.value("loopwatch_turns_total") == n + 1
            assert p.value("loopwatch_turn_max_attempts_sum") == 14 * (n + 1)
    batch.end(end_time=t + S)
    assert p.value("loopwatch_turns_total") == 3  # the root adds no empty turn
    assert p.value("loopwatch_open_turns") == 0
    p.close()


@pytest.mark.parametrize("over_http", [False, True])
def test_an_agent_run_inside_a_tool_is_part_of_the_outer_turn(over_http: bool) -> None:
    # over_http: the tool calls the other agent over HTTP in process, and the HTTP client span
    # between them carries no GenAI marker; it started inside the outer turn all the same
    from contextlib import nullcontext

    from opentelemetry import trace

    from tests.support.helpers import Pipeline, S

    p = Pipeline(Config())
    tracer = p.tracer
    outer = tracer.start_span("invoke_agent outer", start_time=S, attributes=AGENT)
    with trace.use_span(outer, end_on_exit=False):
        call = tracer.start_span(
            "execute_tool delegate", start_time=2 * S, attributes=tool("delegate")
        )
        with trace.use_span(call, end_on_exit=False):
            post = tracer.start_span("POST", start_time=2 * S, attributes={"http.method": "POST"})
            with trace.use_span(post, end_on_exit=False) if over_http else nullcontext():
                inner = tracer.start_span("invoke_agent inner", start_time=3 * S, attributes=AGENT)
                with trace.use_span(inner, end_on_exit=False):
                    for i in range(3):
                        tracer.start_span(
                            "execute_tool search", start_time=(4 + i) * S, attributes=tool()
                        ).end(end_time=(5 + i) * S)
                inner.end(end_time=8 * S)
                assert p.value("loopwatch_turns_total") == 0  # the outer agent is running
            post.end(end_time=8 * S)
        call.end(end_time=9 * S)
    assert p.value("loopwatch_turns_total") == 0
    outer.end(end_time=10 * S)
    assert p.value("loopwatch_turns_total") == 1
    assert p.value("loopwatch_turn_max_attempts_sum") == 3
    assert p.value("loopwatch_tool_calls_total") == 4
    p.close()


def test_siblings_under_a_missing_parent_are_one_turn() -> None:
    # the agent span never arrived (another process, or dropped): its tool calls stay together
    groups = split_turns(records((2, 99, tool(), 1), (3, 99, tool(), 2), (4, 99, tool(), 3)))
    assert [(g.anchor, len(g.calls)) for g in groups] == [(99, 3)]


# -- the one-pass shortcut (a children index given) against the walk up from every span -----
def _record(kind: int, span_id: int, parent: int | None) -> Record:
    start = span_id * 10
    if kind == 0:
        key = AttemptKey("search" if span_id % 3 else "fetch", str(span_id % 4), "ok")
        return ToolCall(
            span_id, parent, start, start + 5, key.tool, key, "ok", "rows", True, "", None
        )
    if kind == 1:
        return TurnMark(span_id, parent, start, start + 5, "agent" if span_id % 2 else None, None)
    if kind == 2:
        return LlmMark(span_id, parent, start, start + 5, "m")
    return Link(span_id, parent, start, start + 5)


def _index(records: Mapping[int, Record]) -> dict[int, dict[int, None]]:
    children: dict[int, dict[int, None]] = {}
    for rec in records.values():
        if rec.parent_id is not None:
            children.setdefault(rec.parent_id, {})[rec.span_id] = None
    return children


def _shape(groups: list[TurnGroup]) -> list[tuple[object, ...]]:
    return [
        (
            g.anchor,
            g.turn.span_id if g.turn else None,
            [c.span_id for c in g.calls],
            [m.span_id for m in g.llms],
            g.start_ns,
            g.end_ns,
            g.root_agent,
        )
        for g in groups
    ]


# span id -> (kind, parent): parents among the ids (cycles included), missing (99) or none
spans = st.dictionaries(
    st.integers(1, 12),
    st.tuples(st.integers(0, 3), st.none() | st.integers(1, 12) | st.just(99)),
    max_size=12,
)


@pytest.mark.slow
@given(spans, st.booleans(), st.integers(0, 12), st.booleans(), st.booleans())
@settings(max_examples=500, deadline=None)
def test_the_one_pass_shortcut_splits_like_the_walk(
    shape: dict[int, tuple[int, int | None]], allow_empty: bool, head: int, tree: bool, cycle: bool
) -> None:
    if tree and shape:  # one turn span at the top, each other span under a smaller id
        top = min(shape)
        shape = {s: (kind, p if p in shape and p < s else top) for s, (kind, p) in shape.items()}
        shape[top] = (1, None)
        if cycle and len(shape) > 2:  # the two last spans under each other, beside the tree
            a, b = sorted(shape)[-2:]
            shape[a], shape[b] = (shape[a][0], b), (shape[b][0], a)
    # a trace's records, and (as when a turn under an open root ends) the part under one span
    records = {s: _record(kind, s, parent) for s, (kind, parent) in shape.items()}
    children = _index(records)
    below, stack = {}, [head] if head in records else []
    while stack:
        span_id = stack.pop()
        if span_id not in below:
            below[span_id] = records[span_id]
            stack.extend(children.get(span_id, ()))
    for part in (records, below):
        walked = split_turns(part, allow_empty)
        assert _shape(split_turns(part, allow_empty, children)) == _shape(walked)


def test_the_one_pass_shortcut_takes_the_common_shape_and_leaves_cycles_to_the_walk() -> None:
    turn = {1: _record(1, 1, None), 2: _record(0, 2, 1), 3: _record(2, 3, 1), 4: _record(0, 4, 3)}
    (group,) = split_turns(turn, True, _index(turn))
    assert (group.anchor, [c.span_id for c in group.calls]) == (1, [2, 4])
    assert group.root_agent == "agent"
    # a cycle beside the turn span: one top, yet two spans that hang under nothing
    cyclic = {**turn, 5: _record(0, 5, 6), 6: _record(0, 6, 5)}
    assert _shape(split_turns(cyclic, True, _index(cyclic))) == _shape(split_turns(cyclic))
    assert [len(g.calls) for g in split_turns(cyclic, True, _index(cyclic))] == [2, 2]
