"""Span streams the benchmarks and the golden-metrics test share: real SDK spans, seeded ids.

- ``mix``: the realistic stream. Turns in three conventions (incidents, retries, healthy
  traffic), a third of them under an HTTP server span with a database span beside the agent,
  and plain HTTP traffic (health checks with a database span) that no GenAI span hangs under.
  Every span carries the 15-30 attributes its instrumentation writes (usage, request
  parameters, messages, tool definitions, code location, HTTP/DB semantic conventions).
- ``long_root``: many turns under one batch job's span, half of them without tool calls.
- ``wide_turn``: one turn with thousands of tool calls over many tools and keys.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Tracer

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.emit import CONVENTIONS, emit_turn
from loopwatch.demo.scenarios import (
    Call,
    Turn,
    eleven_empty_searches,
    flaky,
    fourteen_tickets,
    healthy,
)

MS = 1_000_000
START_NS = 1_700_000_000 * 10**9
SERVICE = "bench-agent"
CONFIG = Config(
    tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))},
    queue_spans=10**7,
)

_TOOL_DEFINITIONS = json.dumps(
    [
        {
            "type": "function",
            "name": name,
            "description": f"{name.replace('_', ' ')}: look it up in the order system.",
            "parameters": {
                "type": "object",
                "properties": {"customer_id": {"type": "string"}, "query": {"type": "string"}},
            },
        }
        for name in ("search_orders", "get_order", "create_ticket", "lookup_customer")
    ]
)
_MESSAGES = json.dumps(
    [
        {"role": "system", "parts": [{"type": "text", "content": "You are a support agent."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Where is my refund for boots?"}]},
    ]
)
_OUTPUT = json.dumps(
    [{"role": "assistant", "parts": [{"type": "tool_call", "name": "search_orders"}]}]
)


class SeededIds(IdGenerator):
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self.rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self.rng.getrandbits(128) or 1


def _llm_extra(attrs: Any) -> dict[str, Any]:
    if "openinference.span.kind" in attrs:
        return {
            "llm.provider": "openai",
            "llm.system": "openai",
            "llm.invocation_parameters": '{"temperature": 0.2, "max_tokens": 1024}',
            "llm.token_count.prompt": 812,
            "llm.token_count.completion": 64,
            "llm.token_count.total": 876,
            "input.value": _MESSAGES,
            "input.mime_type": "application/json",
            "output.value": _OUTPUT,
            "output.mime_type": "application/json",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "You are a support agent.",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": "Where is my refund for boots?",
            "llm.output_messages.0.message.role": "assistant",
            "session.id": "s-1",
        }
    if "llm.request.type" in attrs:
        return {
            "gen_ai.system": "openai",
            "gen_ai.response.model": attrs.get("gen_ai.request.model", ""),
            "llm.usage.total_tokens": 876,
            "gen_ai.usage.prompt_tokens": 812,
            "gen_ai.usage.completion_tokens": 64,
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "You are a support agent.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "Where is my refund for boots?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.finish_reason": "tool_calls",
            "llm.is_streaming": False,
            "gen_ai.openai.api_base": "https://api.openai.com/v1/",
            "llm.request.functions.0.name": "search_orders",
            "llm.request.functions.0.description": "Search orders.",
            "traceloop.association.properties.session_id": "s-1",
        }
    return {
        "gen_ai.provider.name": "openai",
        "gen_ai.response.model": attrs.get("gen_ai.request.model", ""),
        "gen_ai.response.id": "chatcmpl-AbCdEf0123456789",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 812,
        "gen_ai.usage.output_tokens": 64,
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 1024,
        "gen_ai.request.top_p": 1.0,
        "gen_ai.output.type": "text",
        "gen_ai.conversation.id": "conv-1",
        "server.address": "api.openai.com",
        "server.port": 443,
        "gen_ai.input.messages": _MESSAGES,
        "gen_ai.output.messages": _OUTPUT,
        "gen_ai.tool.definitions": _TOOL_DEFINITIONS,
    }


def _common_extra() -> dict[str, Any]:
    return {
        "thread.id": 140234,
        "thread.name": "MainThread",
        "code.function.name": "run",
        "code.file.path": "/srv/app/agent.py",
        "code.line.number": 88,
        "logfire.span_type": "span",
        "logfire.msg_template": "{name}",
        "logfire.msg": "agent step",
        "deployment.environment": "production",
        "service.instance.id": "pod-7f9c",
        "session.user_hash": "u-1b2c",
        "request.id": "req-88214",
        "app.tenant": "acme",
    }


class Dress(SpanProcessor):
    """Adds, at start, the attributes real instrumentations write besides the ones loopwatch
    reads, so spans carry 15-30 attributes like real ones do."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        attrs = span.attributes or {}
        if not any(
            k.startswith(("gen_ai.", "openinference.", "traceloop.", "llm.")) for k in attrs
        ):
            return  # plain spans are written fully by their emitter
        extra = _common_extra()
        kind = attrs.get("gen_ai.operation.name") or attrs.get(
            "openinference.span.kind",
            attrs.get("traceloop.span.kind", attrs.get("llm.request.type")),
        )
        if kind in ("chat", "LLM") or "llm.request.type" in attrs:
            extra.update(_llm_extra(attrs))
        elif kind in ("execute_tool", "TOOL", "tool"):
            extra.update({"gen_ai.tool.type": "function", "gen_ai.conversation.id": "conv-1"})
        else:
            extra.update(
                {
                    "gen_ai.agent.id": "agent-1",
                    "gen_ai.agent.description": "Answers support questions.",
                    "gen_ai.conversation.id": "conv-1",
                    "final_result": "Your refund was issued.",
                }
            )
        for key in ("gen_ai.input.messages", "gen_ai.output.messages"):
            if key in attrs:  # a hand-rolled turn's own history
                extra.pop(key, None)
        span.set_attributes(extra)


def _http(tracer: Tracer, name: str, route: str, t: int) -> Any:
    return tracer.start_span(
        name,
        start_time=t,
        kind=trace.SpanKind.SERVER,
        attributes={
            "http.request.method": name.split()[0],
            "url.path": route,
            "url.scheme": "https",
            "http.route": route,
            "server.address": "support.example.com",
            "server.port": 443,
            "network.protocol.version": "1.1",
            "user_agent.original": "Mozilla/5.0 (X11; Linux x86_64)",
            "client.address": "10.1.2.3",
            "http.response.status_code": 200,
        },
    )


def _db(tracer: Tracer, t: int) -> int:
    span = tracer.start_span(
        "SELECT orders",
        start_time=t,
        kind=trace.SpanKind.CLIENT,
        attributes={
            "db.system.name": "postgresql",
            "db.namespace": "shop",
            "db.operation.name": "SELECT",
            "db.collection.name": "orders",
            "db.query.text": "SELECT id, status FROM orders WHERE customer_id = $1",
            "server.address": "db.internal",
            "server.port": 5432,
        },
    )
    span.end(end_time=t + 2 * MS)
    return t + 3 * MS


def mixed_turn(rng: random.Random, i: int) -> Turn:
    """Mostly healthy traffic, some retries, now and then one of the two incidents."""
    if i % 50 == 0:
        return fourteen_tickets()
    if i % 50 == 1:
        return eleven_empty_searches()
    if i % 5 == 0:
        return flaky(rng, "gpt-4.1", attempts=rng.randint(2, 4))
    return healthy(rng, rng.choice(["gpt-4.1", "claude-sonnet-4"]))


def emit_mix(
    tracer: Tracer,
    turns: int,
    seed: int,
    plain_per_turn: int = 1,
    http_roots: bool = True,
    first: int = 0,
) -> None:
    """``turns`` turns (``first`` is the index of the first, for the mix); a third under an
    HTTP span (``http_roots``), each followed by ``plain_per_turn`` health checks."""
    rng = random.Random(seed)
    t = START_NS
    for i in range(first, first + turns):
        turn, convention = mixed_turn(rng, i), CONVENTIONS[i % 3]
        if http_roots and i % 3 == 1:
            root = _http(tracer, "POST /chat", "/chat", t)
            with trace.use_span(root, end_on_exit=False):
                t = _db(tracer, t + MS)
                t = emit_turn(tracer, turn, t, convention)
            root.end(end_time=t + MS)
        else:
            t = emit_turn(tracer, turn, t, convention)
        for _ in range(plain_per_turn):
            health = _http(tracer, "GET /health", "/health", t)
            with trace.use_span(health, end_on_exit=False):
                t = _db(tracer, t + MS)
            health.end(end_time=t + MS)
        t += 10 * MS


def emit_plain(tracer: Tracer, requests: int) -> None:
    """Web traffic only: an HTTP span with a database span under it, no GenAI at all."""
    t = START_NS
    for _ in range(requests):
        health = _http(tracer, "GET /health", "/health", t)
        with trace.use_span(health, end_on_exit=False):
            t = _db(tracer, t + MS)
        health.end(end_time=t + MS)
        t += MS


def _llm_only(rng: random.Random) -> Turn:
    return Turn("summarizer", rng.choice(["gpt-4.1", "claude-sonnet-4"]), ())


def emit_long_root(tracer: Tracer, turns: int, seed: int) -> None:
    """``turns`` turns under one batch job span, every other one without tool calls."""
    rng = random.Random(seed)
    t = START_NS
    root = tracer.start_span("batch nightly-refunds", start_time=t)
    with trace.use_span(root, end_on_exit=False):
        for i in range(turns):
            turn = _llm_only(rng) if i % 2 else mixed_turn(rng, i + 2)
            t = emit_turn(tracer, turn, t + MS, CONVENTIONS[i % 3])
    root.end(end_time=t + MS)


AGENT_ATTRIBUTES = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}


def wide(calls: int, tools: int = 20) -> Turn:
    """One turn of ``calls`` tool calls over ``tools`` tools, keys repeating now and then."""
    return Turn(
        "bulk-agent",
        "gpt-4.1",
        tuple(
            Call(f"tool_{i % tools}", {"customer_id": f"c_{i % 97}", "page": i % 7}, 5, [i])
            for i in range(calls)
        ),
    )


def emit_wide_turn(tracer: Tracer, calls: int, seed: int) -> None:
    for i, convention in enumerate(CONVENTIONS):
        emit_turn(tracer, wide(calls // 3), START_NS + i * 10**12, convention)


STREAMS: dict[str, Callable[[Tracer], None]] = {
    "mix": lambda tracer: emit_mix(tracer, 150, seed=1),
    "long_root": lambda tracer: emit_long_root(tracer, 120, seed=2),
    "wide_turn": lambda tracer: emit_wide_turn(tracer, 1500, seed=3),
}


def provider(seed: int, *processors: SpanProcessor) -> TracerProvider:
    """A provider with seeded ids that dresses spans, then hands them to ``processors``."""
    p = TracerProvider(
        resource=Resource.create({"service.name": SERVICE}), id_generator=SeededIds(seed)
    )
    p.add_span_processor(Dress())
    for processor in processors:
        p.add_span_processor(processor)
    return p


def record(emit: Callable[[Tracer], None], seed: int = 11) -> list[ReadableSpan]:
    """The finished spans of ``emit``, in end order."""
    memory = InMemorySpanExporter()
    emit(provider(seed, SimpleSpanProcessor(memory)).get_tracer("bench"))
    return list(memory.get_finished_spans())


def _message(role: str, text: str = "", calls: Any = (), results: Any = ()) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
    parts += [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
    parts += [{"type": "tool_call_response", "id": i, "response": r} for i, r in results]
    return {"role": role, "parts": parts}


def emit_handrolled(tracer: Tracer, turns: int, seed: int) -> None:
    """A hand-rolled loop over a model SDK (no tool span): each model call its own trace, its
    history in ``gen_ai.input.messages`` (Dress adds the rest). One turn in five loops: five
    reworded ``create_ticket`` calls that time out; the others make one to three calls that
    return rows, then answer."""
    rng = random.Random(seed)
    t = START_NS
    history: list[dict[str, Any]] = [_message("system", "You are a support agent.")]
    for i in range(turns):
        history.append(_message("user", f"Question {i} about my order"))
        looping = i % 5 == 0
        for n in range(5 if looping else rng.randint(1, 3)):
            call_id = f"call_{seed}_{i}_{n}"
            if looping:
                args = {"customer_id": "c_40912", "order_id": "88214", "summary": f"try {n}"}
                call, result = (call_id, "create_ticket", args), "Error: TimeoutError: timed out"
            else:
                call = (call_id, "search_orders", {"query": f"order {i} {n}"})
                result = json.dumps([{"order_id": str(rng.randint(1, 10**5))}])
            answer = _message("assistant", calls=[call])
            t = _model_call(tracer, history, answer, t)
            history += [answer, _message("tool", results=[(call_id, result)])]
        answer = _message("assistant", "Done.")
        t = _model_call(tracer, history, answer, t)
        history.append(answer)
        del history[1:-8]  # the application keeps a window of the conversation


def _model_call(tracer: Tracer, history: Any, answer: Any, t: int) -> int:
    span = tracer.start_span(
        "chat gpt-4.1",
        start_time=t,
        kind=trace.SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4.1",
            "gen_ai.input.messages": json.dumps(history),
            "gen_ai.output.messages": json.dumps([answer]),
        },
    )
    span.end(end_time=t + 400 * MS)
    return t + 450 * MS


def realistic_requests(turns: int, seed: int) -> list[bytes]:
    """The mixed stream of ``turns`` turns as serialized OTLP requests of 512 spans each (a
    BatchSpanProcessor's default export batch)."""
    spans = record(lambda t: emit_mix(t, turns, seed=seed))
    return [
        encode_spans(spans[i : i + 512]).SerializePartialToString()
        for i in range(0, len(spans), 512)
    ]
