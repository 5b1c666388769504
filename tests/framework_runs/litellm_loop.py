"""A hand-rolled loop over LiteLLM (``litellm.completion``), offline, in the README's quick-start
set-up without ``loopwatch.turn``: tools under ``@loopwatch.tool(identity=[...])``, and the
model calls traced by LiteLLM's own OpenTelemetry callback (``litellm.callbacks = ["otel"]``)
or by an instrumentation of LiteLLM that ``loopwatch.instrument()`` switches on.

The model is a loopback server speaking the OpenAI Chat Completions wire format (``POST
/v1/chat/completions``, JSON or, with ``stream: true``, server-sent chunks), reached as
``openai/gpt-4.1-mini`` with ``api_base`` pointing at it; each request must answer by
``tool_call_id`` every call the previous response asked for (tests/framework_runs/handrolled.py's
ScriptedModel). LiteLLM's callback ends its spans on LiteLLM's logging thread, after the call
has returned: a step's tool span may reach loopwatch before the model call that asked for it.

The three turns of tests/framework_runs/handrolled.py in one conversation, in every order of the
three, ``unary`` and ``stream`` (the chunks put back together with ``litellm.stream_chunk_builder``
as LiteLLM's docs do):

    python -m tests.framework_runs.litellm_loop INSTRUMENTATION OUT.json [--record FILE]

writes, per order and mode, the metric samples of a fresh LoopwatchSpanProcessor (``--record``:
also the spans of two runs, in the order they ended, to FILE: tests/fixtures/litellm/). One
instrumentation per process: instrumentors patch LiteLLM globally; the others installed are
named in ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` as a user with more than one would."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from tests.framework_runs.handrolled import (
    ANSWERS,
    QUESTIONS,
    ScriptedModel,
    TicketService,
    Tools,
    _load,
    openai_tools,
    run_tool,
)
from tests.framework_runs.loopback import (
    Reply,
    global_provider,
    loopback,
    quickstart_tools,
    run_orders,
    sse,
)

MODEL = "gpt-4.1-mini"
# instrumentation -> (how it is switched on, its package, the scope of its model-call spans).
# OpenInference's and OpenLLMetry's register one entry-point name (litellm): instrument()
# switches on OpenInference's where both are installed, so OpenLLMetry's is switched on by its
# class, as an application that prefers it does.
CALLBACK, INSTRUMENT = "callback", "instrument()"
INSTRUMENTATIONS: dict[str, tuple[str, str, str]] = {
    "litellm-otel": (CALLBACK, "litellm", "litellm"),
    "openinference": (
        INSTRUMENT,
        "openinference-instrumentation-litellm",
        "openinference.instrumentation.litellm",
    ),
    "openllmetry": (
        "opentelemetry.instrumentation.litellm:LiteLLMInstrumentor",
        "opentelemetry-instrumentation-litellm",
        "opentelemetry.instrumentation.litellm",
    ),
}
MODES = ("unary", "stream")
# the runs --record keeps (tests/fixtures/litellm/)
RECORDED = (((0, 1, 2), "unary"), ((2, 1, 0), "stream"))
# LiteLLM reads its price list from the package, not the network
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def chunks(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """A Chat Completions response as the API streams it: the text, each call, the finish."""
    choice = payload["choices"][0]
    message = choice["message"]
    base = {k: payload[k] for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = []
    if message.get("content"):
        out.append(chunk({"role": "assistant", "content": message["content"]}))
    for j, call in enumerate(message.get("tool_calls") or []):
        out.append(chunk({"role": "assistant", "tool_calls": [{"index": j, **call}]}))
    out.append(chunk({}, choice["finish_reason"]))
    return out


def answer(model: ScriptedModel, path: str, body: dict[str, Any]) -> Reply:
    if path != "/v1/chat/completions":
        raise AssertionError(f"unexpected path {path}")
    model.requests.append(body)
    model._check(body)
    _turn, step = model.steps[model.i]
    model.i += 1
    payload = model._openai(body, step)
    if body.get("stream"):
        return 200, "text/event-stream", sse(chunks(payload), done=True), {}
    return 200, "application/json", json.dumps(payload), {}


def litellm_turn(
    base_url: str, messages: list[Any], question: str, tools: Tools, stream: bool
) -> str:
    """One turn as LiteLLM's function-calling docs write it."""
    import litellm

    messages.append({"role": "user", "content": question})
    while True:
        kwargs: dict[str, Any] = {
            "model": f"openai/{MODEL}",
            "api_base": base_url,
            "api_key": "sk-offline",
            "messages": messages,
            "tools": openai_tools(),
        }
        if stream:
            parts = list(litellm.completion(stream=True, **kwargs))
            response = litellm.stream_chunk_builder(parts, messages=messages)
        else:
            response = litellm.completion(**kwargs)
        message = response.choices[0].message
        messages.append(message)  # the assistant message, tool calls and all
        if not message.tool_calls:
            return str(message.content)
        for call in message.tool_calls:
            text, _failed = run_tool(tools, call.function.name, json.loads(call.function.arguments))
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "name": call.function.name,
                    "content": text,
                }
            )


class ModelCalls(SpanProcessor):
    """Counts the model-call spans ended (the instrumentation's root spans), to wait for
    LiteLLM's logging thread; keeps the scopes they came from."""

    def __init__(self) -> None:
        self.ended = 0
        self.scopes: set[str] = set()
        self.lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        scope = span.instrumentation_scope.name if span.instrumentation_scope else ""
        if span.parent is None and scope != "loopwatch":
            with self.lock:
                self.ended += 1
                self.scopes.add(scope)

    def wait(self, count: int, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self.lock:
                if self.ended >= count:
                    return
            time.sleep(0.01)
        raise AssertionError(f"{self.ended} of {count} model-call spans ended")


def main(argv: Sequence[str]) -> None:
    instrumentation, out = argv[0], Path(argv[1])
    how, package, _scope = INSTRUMENTATIONS[instrumentation]
    os.environ.update(OFFLINE)
    if how != INSTRUMENT:  # none of the instrumentors installed beside
        os.environ["OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"] = "litellm"
    import litellm

    from loopwatch.attach.frameworks import instrument_frameworks

    provider, switch = global_provider()
    calls = ModelCalls()
    provider.add_span_processor(calls)
    switched = instrument_frameworks(provider)  # what loopwatch.instrument() switches on
    if how == CALLBACK:
        litellm.callbacks = ["otel"]  # it takes the global provider
    elif how != INSTRUMENT:
        _load(how)().instrument(tracer_provider=provider)
    tools = quickstart_tools()
    spans: dict[str, Any] = {}

    with loopback() as server:

        def play(order: Sequence[int], mode: str) -> None:
            model = ScriptedModel("openai", order)
            server.answer = lambda path, body: answer(model, path, body)
            server.failures.clear()
            messages: list[Any] = []
            for turn in order:
                TicketService.down = turn == 0
                got = litellm_turn(
                    f"{server.base_url}/v1", messages, QUESTIONS[turn], tools, mode == "stream"
                )
                if got != ANSWERS[turn]:
                    raise AssertionError(f"turn {turn} answered {got!r}: {server.failures}")
            if server.failures or model.i != len(model.steps):
                raise AssertionError(f"played {model.i} of {len(model.steps)}: {server.failures}")
            calls.wait(played[0] + model.i)
            played[0] += model.i

        played = [0]
        result: dict[str, Any] = {"switched": switched}
        if "--record" in argv:  # the spans of two runs, as they reached the processors
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )

            from tests.framework_runs.handrolled import span_json

            exporter = InMemorySpanExporter()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            for order, mode in RECORDED:
                play(order, mode)
                key = f"{''.join(map(str, order))}-{mode}"
                spans[key] = [span_json(s) for s in exporter.get_finished_spans()]
                exporter.clear()
            exporter.shutdown()
        result["runs"] = run_orders(switch, MODES, play)
    result["scopes"] = sorted(calls.scopes)
    result["versions"] = {n: metadata.version(n) for n in dict.fromkeys(("litellm", package))}
    out.write_text(json.dumps(result), encoding="utf-8")
    if "--record" in argv:
        record = Path(argv[argv.index("--record") + 1])
        fixture = {"versions": result["versions"], "runs": spans}
        record.write_text(json.dumps(fixture, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
