"""Hand-rolled turns read from model calls' messages (no tool span anywhere).

The spans are written the way the instrumentations write them (GenAI ``gen_ai.input.messages``
JSON, OpenInference's flattened ``llm.input_messages``), through the real SDK and processor, in
the three shapes an application gives them: each model call its own trace, each turn under one
plain span, and every turn under one long-lived plain span. The real SDKs and instrumentations
are driven in tests/test_handrolled.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from typing import Any

import pytest

from loopwatch.conventions.read import read_span
from loopwatch.core.conversations import Conversations
from loopwatch.core.keys import AttemptKey
from loopwatch.core.records import Conversation, LlmMark, ToolCall, UnreadableHistory
from loopwatch.core.span_view import SpanView
from testkit.configs import below_minimums
from tests.support.conversations import (
    TIMEOUT_TEXT,
    Msg,
    _ticket,
    conversation_config,
    conversation_script,
    genai_attributes,
    genai_message,
)
from tests.support.helpers import Pipeline, S, span


def openinference_attributes(history: list[Msg], answer: Msg) -> dict[str, Any]:
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-scripted"}
    for base, messages in (("llm.input_messages", history), ("llm.output_messages", [answer])):
        for n, m in enumerate(messages):
            prefix = f"{base}.{n}.message."
            attrs[prefix + "role"] = m["role"]
            for part in m["parts"]:
                if part["type"] == "text":
                    attrs[prefix + "content"] = part["content"]
                elif part["type"] == "tool_call":
                    k = sum(1 for key in attrs if key.startswith(prefix + "tool_calls.")) // 3
                    call = f"{prefix}tool_calls.{k}.tool_call."
                    attrs[call + "id"] = part["id"]
                    attrs[call + "function.name"] = part["name"]
                    attrs[call + "function.arguments"] = json.dumps(part["arguments"])
                else:
                    attrs[prefix + "tool_call_id"] = part["id"]
                    attrs[prefix + "content"] = json.dumps(part["response"])
    return attrs


def _split_results(history: list[Msg]) -> list[Msg]:
    """OpenAI sends one ``tool`` message per result (as OpenInference records it)."""
    out: list[Msg] = []
    for m in history:
        if m["role"] == "tool" and len(m["parts"]) > 1:
            out += [{"role": "tool", "parts": [p]} for p in m["parts"]]
        else:
            out.append(m)
    return out


def run_conversation(
    pipeline: Pipeline,
    attributes: Callable[[list[Msg], Msg], dict[str, Any]],
    shape: str,
) -> None:
    """The three turns of one conversation, each model call a span of 1 s, each tool 30 s."""
    tracer = pipeline.tracer
    history: list[Msg] = [genai_message("system", "You are a support agent.")]
    clock = [0]

    def model_call(answer: Msg) -> None:
        start = clock[0]
        clock[0] += S
        sent = _split_results(history) if attributes is openinference_attributes else history
        with span(tracer, "chat gpt-scripted", start, clock[0], attributes(sent, answer)):
            pass

    @contextmanager
    def plain(name: str) -> Iterator[None]:
        with span(tracer, name, clock[0], clock[0] + 3600 * S):
            yield

    outer = plain("batch") if shape == "batch" else nullcontext()
    with outer:
        for user_text, responses, results in conversation_script():
            history.append(genai_message("user", user_text))
            inner = plain("POST /chat") if shape == "request" else nullcontext()
            with inner:
                answered = 0
                for calls in responses:
                    answer = genai_message("assistant", calls=calls)
                    model_call(answer)
                    history.append(answer)
                    clock[0] += 30 * S  # the tools run
                    done = results[answered : answered + len(calls)]
                    answered += len(calls)
                    pairs = [(c[0], r) for c, r in zip(calls, done, strict=True)]
                    history.append(genai_message("tool", results=pairs))
                text = genai_message("assistant", "Done.")
                model_call(text)
                history.append(text)


FORMATS = {"genai": genai_attributes, "openinference": openinference_attributes}


@pytest.mark.parametrize("shape", ["own_trace", "request", "batch"])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_hand_rolled_turns_from_messages(fmt: str, shape: str) -> None:
    p = Pipeline(config=conversation_config())
    run_conversation(p, FORMATS[fmt], shape)
    assert p.value("loopwatch_turns_total") == 3  # one per user message, not per model call
    assert p.value("loopwatch_turn_max_attempts_count") == 3
    attempts = p.observations("loopwatch_turn_max_attempts")
    assert attempts[1.0] == 2  # the search turn and the bulk turn
    assert attempts[5.0] == 2 and attempts[6.0] == 3  # the loop: 6 attempts
    assert p.value("loopwatch_loops_total") == 2
    assert (
        p.value("loopwatch_loops_total", tool="create_ticket", error_class="timeout", kind="repeat")
        == 1
    )
    assert p.value("loopwatch_loops_total", tool="search_orders", kind="no_rows") == 1
    streak = p.observations("loopwatch_no_rows_streak", tool="search_orders")
    assert streak[3.0] == 0 and streak[4.0] == 1
    calls = "loopwatch_tool_calls_total"
    assert p.value(calls, tool="create_ticket", error_class="timeout") == 6
    assert p.value(calls, tool="create_ticket", error_class="ok") == 6
    assert p.value(calls, tool="search_orders", error_class="ok") == 4
    assert p.value("loopwatch_repeat_calls_total", tool="create_ticket") == 5
    # attempts past the third (a breaker at cap 2 stops the third): 3, each 30 s between the
    # model calls around it
    assert p.value("loopwatch_over_cap_seconds_total", tool="create_ticket") == 3 * 30
    assert p.value("loopwatch_turn_max_attempts_count", model="gpt-scripted") == 3
    assert p.value("loopwatch_open_turns") == 0
    p.close()


def test_tool_spans_win_over_messages() -> None:
    """Where a span executes each tool, the messages of the same trace are not read again."""
    p = Pipeline(config=conversation_config())
    tracer = p.tracer
    history = [genai_message("user", "Open a ticket")]
    with span(
        tracer, "invoke_agent support", 0, 100 * S, {"gen_ai.operation.name": "invoke_agent"}
    ):
        for i in range(3):
            call = (f"call_{i}", "create_ticket", _ticket(i))
            answer = genai_message("assistant", calls=[call])
            with span(
                tracer, "chat", i * 10 * S, i * 10 * S + S, genai_attributes(history, answer)
            ):
                pass
            history += [answer, genai_message("tool", results=[(call[0], TIMEOUT_TEXT)])]
            tool_attrs = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "create_ticket",
                "gen_ai.tool.call.arguments": json.dumps(call[2]),
            }
            with span(
                tracer,
                "execute_tool create_ticket",
                i * 10 * S + S,
                i * 10 * S + 9 * S,
                tool_attrs,
                error=TimeoutError("timed out"),
            ):
                pass
        final = genai_message("assistant", "Sorry.")
        with span(tracer, "chat", 95 * S, 96 * S, genai_attributes(history, final)):
            pass
    assert p.value("loopwatch_turns_total") == 1
    assert p.value("loopwatch_tool_calls_total") == 3
    assert p.observations("loopwatch_turn_max_attempts")[3.0] == 1
    p.close()


def test_an_unanswered_turn_is_finalized_at_shutdown() -> None:
    """A loop cut off before the model answered in text still counts, once."""
    p = Pipeline(config=conversation_config())
    history = [genai_message("user", "Open a ticket")]
    for i in range(4):
        call = (f"call_{i}", "create_ticket", _ticket(i))
        answer = genai_message("assistant", calls=[call])
        with span(p.tracer, "chat", i * 40 * S, i * 40 * S + S, genai_attributes(history, answer)):
            pass
        history += [answer, genai_message("tool", results=[(call[0], TIMEOUT_TEXT)])]
    assert p.value("loopwatch_turns_total") == 0
    assert p.value("loopwatch_open_turns") == 1
    p.processor.shutdown()
    assert p.value("loopwatch_turns_total") == 1
    # the last call's result never came back: three timeouts and one call without an outcome
    assert p.value("loopwatch_tool_calls_total", error_class="timeout") == 3
    assert p.observations("loopwatch_turn_max_attempts")[3.0] == 1


@pytest.mark.parametrize("shape", ["own_trace", "request"])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_service_counts_what_the_processor_counts(fmt: str, shape: str) -> None:
    """The same spans over OTLP/gRPC to ``loopwatch serve``'s pipeline: every sample equal."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from tests.support.service import running, settle, snapshot

    config = replace(conversation_config(), grace_seconds=0.0)
    with running(config) as service:
        assert service.bound
        p = Pipeline(config=config)
        exporter = OTLPSpanExporter(endpoint=service.bound.grpc, insecure=True)
        p.provider.add_span_processor(SimpleSpanProcessor(exporter))
        run_conversation(p, FORMATS[fmt], shape)
        p.flush()
        settle(service)
        assert p.value("loopwatch_turns_total") == 3
        assert snapshot(service.registry) == snapshot(p.registry)
        p.close()


def _read(history: Any, answer: Any = None) -> Any:
    """The turn a model call's messages show (None when they show none)."""
    from loopwatch.conventions.read import read_span
    from loopwatch.core.span_view import SpanView

    attrs = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": history}
    if answer is not None:
        attrs["gen_ai.output.messages"] = answer
    mark = read_span(SpanView(1, 2, None, "chat", 0, 1, attrs), conversation_config())
    assert isinstance(mark, LlmMark)
    return mark.messages.read() if mark.messages is not None else None


def test_bad_histories_are_harmless() -> None:
    user = genai_message("user", "hi")
    # truncated or not a message list: unreadable (the assembler counts it and goes on)
    for bad in ('[{"role": "user", "parts": [', '"just text"'):
        with pytest.raises(UnreadableHistory):
            _read(bad)
    # no user message (an attribute limit dropped the history's start): nothing to count yet
    nothing = _read(json.dumps([{"role": "tool", "parts": []}]))
    assert not nothing.final and nothing.size == 0 and nothing.ids == frozenset()
    # a result whose call is not in the history: no call, one result without a call
    orphan = genai_message("tool", results=[("nobody", [])])
    turn = _read(json.dumps([user, orphan]), json.dumps([genai_message("assistant", "ok")]))
    assert turn.final and turn.calls() == ()
    assert turn.malformed == (("result_without_call", 1),)
    # calls without ids, and an id used twice: each call counted, results joined in order
    calls = [("", "search_orders", {"query": "a"}), ("", "search_orders", {"query": "b"})]
    twice = [("dup", "search_orders", {"query": "c"}), ("dup", "search_orders", {"query": "d"})]
    history = [
        user,
        genai_message("assistant", calls=calls),
        {"role": "tool", "parts": [{"type": "tool_call_response", "response": []}] * 2},
        genai_message("assistant", calls=twice),
        genai_message("tool", results=[("dup", [])]),
    ]
    read = _read(json.dumps(history))
    built = read.calls()
    assert [c.tool for c in built] == ["search_orders"] * 4
    assert [c.result for c in built] == ["empty", "empty", "empty", "unknown"]
    assert len({c.span_id for c in built}) == 4
    # (the calls in the history were counted by the model calls that requested them)
    assert read.malformed == ()
    requested = _read(
        json.dumps([user]), json.dumps([genai_message("assistant", calls=calls + twice)])
    )
    # "", "" and both "dup": an id two calls carry names neither
    assert requested.malformed == (("call_without_id", 4),)


def test_calls_past_the_limit_are_counted_not_read() -> None:
    config = replace(conversation_config(), max_spans_per_turn=2)
    answer = genai_message(
        "assistant", calls=[(f"c{i}", "search_orders", {"query": "q"}) for i in range(5)]
    )
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([genai_message("user", "hi")]),
        "gen_ai.output.messages": json.dumps([answer]),
    }
    mark = read_span(SpanView(1, 2, None, "chat", 0, 1, attrs), config)
    assert isinstance(mark, LlmMark)
    assert mark.messages is not None
    read = mark.messages.read()
    assert read is not None
    assert read.size == 2 and read.malformed == (("calls_over_limit", 3),)


def test_malformed_messages_are_counted_in_the_self_health_metrics() -> None:
    """Through the real processor: a truncated history, a result answering no call and two calls
    without ids, each counted once though later model calls carry them again."""
    p = Pipeline(conversation_config())
    user = genai_message("user", "find my order")
    ask = genai_message("assistant", calls=[("", "search_orders", {"query": "a"})] * 2)
    orphan = genai_message("tool", results=[("nobody", [])])
    answers = genai_message("tool", results=[(None, []), (None, [])])
    calls = [
        ([user, orphan], ask),
        ([user, orphan, ask, answers], genai_message("assistant", "None found.")),
    ]
    for n, (history, answer) in enumerate(calls):
        with span(
            p.tracer, "chat gpt-scripted", n * S, n * S + 1, genai_attributes(history, answer)
        ):
            pass
    with span(
        p.tracer,
        "chat gpt-scripted",
        5 * S,
        6 * S,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": '[{"role": "user", "parts": [',
        },
    ):
        pass
    p.processor.shutdown()
    assert p.value("loopwatch_messages_malformed_total", reason="unreadable_history") == 1
    assert p.value("loopwatch_messages_malformed_total", reason="result_without_call") == 1
    assert p.value("loopwatch_messages_malformed_total", reason="call_without_id") == 2
    assert p.value("loopwatch_messages_malformed_total", reason="calls_over_limit") == 0
    assert p.value("loopwatch_tool_calls_total", tool="search_orders") == 2
    assert p.value("loopwatch_spans_dropped_total") == 0


def test_anthropic_results_in_user_messages_do_not_start_a_turn() -> None:
    """Anthropic's request shape: ``tool_use`` blocks, results as ``tool_result`` blocks (with
    ``is_error``) inside ``user`` messages."""
    history = [
        {"role": "user", "content": "Open a ticket"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "create_ticket", "input": _ticket(1)}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "ticket service timed out after 30s",
                    "is_error": True,
                }
            ],
        },
    ]
    conversation = _read(
        json.dumps(history), json.dumps([{"role": "assistant", "content": "Sorry"}])
    )
    assert conversation.final
    (call,) = conversation.calls()
    assert (call.tool, call.error_class) == ("create_ticket", "timeout")


def test_open_conversations_count_every_call_id_they_hold() -> None:
    """A model call naming thousands of call ids costs buffer bytes for each: the byte budget
    (config.buffer_bytes) then bounds what open conversations hold."""
    from loopwatch.core.conversations import Conversations
    from loopwatch.core.records import Conversation, LlmMark

    open_turns = Conversations(limit=10, max_calls=100)
    mark = LlmMark(1, None, 0, 1, "m")
    for start in range(0, 20_000, 5_000):
        # each model call shares one id with the turn so far and names 4,999 new ones
        ids = frozenset(range(max(start - 1, 1), start + 5_000))
        turn = Conversation(False, lambda known: (), 0, ids)
        open_turns.add(1, "s", mark, turn, 0.0)
    assert len(open_turns) == 1
    assert open_turns.buffered_bytes >= 20_000 * 150
    open_turns.flush()
    assert open_turns.buffered_bytes == 0


def test_a_trace_evicted_for_memory_mid_turn_loses_no_model_call() -> None:
    """Under a byte budget too small for a request's model calls, the trace is evicted part
    way; its model calls go to the open conversation (none counted as dropped), and the later
    ones join it by call id: the turns still count as they would."""
    config = below_minimums(conversation_config(), buffer_bytes=12_000)
    p = Pipeline(config=config)
    run_conversation(p, genai_attributes, "request")
    assert p.value("loopwatch_spans_dropped_total", reason="memory") == 0
    assert p.value("loopwatch_turns_total") == 3
    assert p.observations("loopwatch_turn_max_attempts")[6.0] == 3
    assert p.value("loopwatch_loops_total", tool="create_ticket", error_class="timeout") == 1
    p.close()


def _asking(
    conversations: Conversations, turn: int, asked: dict[int, str], answered: set[int]
) -> None:
    """A model call of hand-rolled turn ``turn`` (of service svc) that asks for ``asked``
    (call id -> tool), with the results of ``answered`` sent back."""
    calls = tuple(
        ToolCall(i, None, i, i, tool, AttemptKey(tool, "?", "ok"), "ok", "unknown", False, "", None)
        for i, tool in asked.items()
    )
    conversation = Conversation(
        final=False,
        calls=lambda _settled: calls,
        size=len(calls),
        ids=frozenset(asked) | {turn},  # the turn's own id joins its model calls
        requested=frozenset(asked),
        answered=frozenset(answered),
    )
    conversations.add(turn, "svc", LlmMark(turn, None, 0, 1, None), conversation, 0.0)


def test_lone_tool_spans_find_their_call_in_one_lookup_and_nothing_stays_filed() -> None:
    """Calls asked for are filed by (service, tool): a lone tool span takes the one asked
    first, unanswered before answered, whatever else is open; finalized turns leave nothing."""
    conversations = Conversations(limit=10_000, max_calls=100)
    for turn in range(1, 2001):  # 2,000 open turns asking for other tools
        _asking(conversations, 10**6 + turn, {10**7 + turn: "other"}, set())
    _asking(conversations, 1, {11: "search", 12: "search"}, set())
    _asking(conversations, 2, {21: "search"}, set())
    _asking(conversations, 1, {11: "search", 12: "search"}, {11})  # 11's result came back
    taken = []
    for _ in range(4):
        before = conversations.claimed()
        lone = ToolCall(
            99, None, 0, 0, "search", AttemptKey("search", "?", "ok"), "ok", "rows", False, "", None
        )
        ok = conversations.claim("svc", lone)
        after = conversations.claimed()
        taken.append(sorted(after - before) if ok else None)
    assert taken == [[12], [21], [11], None]
    other = replace(lone, tool="other", key=AttemptKey("other", "?", "ok"))
    assert conversations.claim("other-svc", other) is False
    conversations.flush()
    assert conversations.filed_tools() == 0


@pytest.mark.parametrize("result_ids", ["same", "other", "none"])
def test_results_sent_without_their_calls_join_the_calls_of_the_previous_output(
    result_ids: str,
) -> None:
    """The Responses API's ``previous_response_id``: each model call's input only the results,
    the calls in the previous call's output. Results join by their call id (``same``), else by
    order (``other``: OpenLLMetry's calls carry the item id, results the call id; ``none``);
    a result that no open turn awaits is counted, and the turns are not changed by it."""
    p = Pipeline(conversation_config())
    n = 0

    def model_call(history: list[Msg], answer: Msg) -> None:
        nonlocal n
        attrs = genai_attributes(history, answer)
        with span(p.tracer, "chat gpt-scripted", n * S, n * S + 1, attrs):
            pass
        n += 1

    def result_id(call_id: str) -> str | None:
        return {"same": call_id, "other": "item_" + call_id, "none": None}[result_ids]

    for text, steps, results in conversation_script():
        new = [genai_message("user", text)]
        for step in steps:
            model_call(new, genai_message("assistant", calls=step))
            new = [
                genai_message("tool", results=[(result_id(c), r)])
                for (c, _t, _a), r in zip(step, results, strict=False)
            ]
            results = results[len(step) :]
        model_call(new, genai_message("assistant", "Done."))
    model_call(
        [genai_message("tool", results=[("call_late", "ok")])], genai_message("assistant", "Done.")
    )
    p.processor.shutdown()
    assert p.value("loopwatch_turns_total") == 3
    attempts = p.observations("loopwatch_turn_max_attempts")
    assert attempts[1.0] == 2 and attempts[5.0] == 2 and attempts[6.0] == 3
    calls = "loopwatch_tool_calls_total"
    assert p.value(calls, tool="create_ticket", error_class="timeout") == 6
    assert p.value(calls, tool="create_ticket", error_class="ok") == 6
    assert p.value(calls, tool="search_orders", error_class="ok") == 4
    streak = p.observations("loopwatch_no_rows_streak", tool="search_orders")
    assert streak[3.0] == 0 and streak[4.0] == 1
    assert p.value("loopwatch_loops_total") == 2
    assert p.value("loopwatch_messages_malformed_total", reason="result_without_call") == 1
    assert p.value("loopwatch_open_turns") == 0
    p.close()
