"""Hand-rolled agents: no framework, a loop over a raw model SDK, offline.

The loop calls the model with ``tools=``, runs every tool call the model asked for, appends the
results to the conversation and calls again until the model answers in text. The model is
scripted: the real ``openai`` / ``anthropic`` client sends real HTTP requests to an
``httpx2.MockTransport`` that answers in the real wire format (Chat Completions, Messages), and
checks that each request carries back the results of the calls it asked for.

One conversation, three turns (each one user message; the history carries over):

1. ``create_ticket`` six times, same ``customer_id``/``order_id``, the summary reworded each
   time; each raises ``TimeoutError`` and the model is sent ``Error: TimeoutError: ticket
   service timed out after 30s`` (Anthropic: a ``tool_result`` with ``is_error: true``);
2. ``search_orders`` four times, reworded, each ``[]``;
3. one model response with six parallel ``create_ticket`` calls for six orders, all succeed.

Variants: ``a`` each model call its own trace (no parent span), ``b`` each turn under a plain
``POST /chat`` server span, ``c`` all three turns under one ``nightly-support-batch`` span.

Instrumentations (``INSTRUMENTATIONS``): OpenInference, OpenLLMetry, OpenTelemetry's openai-v2
and its successors opentelemetry-instrumentation-genai-{openai,anthropic}, the anthropic SDK's
own spans, and ``loopwatch`` (no instrumentation: tools under ``@loopwatch.tool`` and each turn
in ``loopwatch.turn``). Instrumentors patch the SDKs globally and read their settings from the
environment, so each instrumentation runs in a process of its own:

    python -m tests.framework_runs.handrolled INSTRUMENTATION SDK OUT.json [--record DIR]

writes, per variant, the metric samples of a fresh LoopwatchSpanProcessor and the spans (with
``--record``, variants a and b also go to DIR/<instrumentation>-<sdk>.json). Span and trace ids
come from a seeded generator, so a recording differs from the last only in its timestamps
(tests/test_handrolled.py checks that). ``python -m tests.framework_runs.handrolled
--record-all`` re-records every tests/fixtures/handrolled/ file.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import random
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import SpanKind

from tests.framework_runs.common import BULK_ORDERS, CUSTOMER, ORDER, QUERIES, SUMMARIES

# ---------------------------------------------------------------------------------------------
# The conversation
# ---------------------------------------------------------------------------------------------

MODELS = {"openai": "gpt-4.1-mini", "anthropic": "claude-sonnet-4-5"}
QUESTIONS = (
    "My refund for the boots I returned (order 88214) never arrived. Please open a ticket.",
    "Can you find the order for those boots?",
    "Please open a ticket for each of my six orders 88214 to 88219.",
)
ANSWERS = (
    "I could not reach the ticket service; please try again later.",
    "I could not find any order for the boots.",
    "I have opened a ticket for each of your six orders.",
)
TIMEOUT_TEXT = "ticket service timed out after 30s"
BATCH_SUMMARY = "Customer asks for a ticket on each order"
TOOL_DESCRIPTIONS = {
    "create_ticket": "Open a support ticket for one order of a customer.",
    "search_orders": "Search the customer's orders; returns the matching orders.",
}
TOOL_PARAMETERS: dict[str, dict[str, Any]] = {
    "create_ticket": {
        "type": "object",
        "properties": {
            "customer_id": {"type": "string"},
            "order_id": {"type": "string"},
            "summary": {"type": "string"},
        },
        "required": ["customer_id", "order_id", "summary"],
    },
    "search_orders": {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
}
# what loopwatch is told about the tools (tests load it with loopwatch.load_config)
LOOPWATCH_TOML = """\
[tools.create_ticket]
identity = ["customer_id", "order_id"]
reviewed_parameters = ["customer_id", "order_id", "summary"]

[tools.search_orders]
result = "rows"
"""

ToolCall = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Step:
    """One model response: tool calls (in one message), or the text answer when there are
    none."""

    calls: tuple[ToolCall, ...] = ()
    text: str | None = None


def turn_steps(turn: int) -> list[Step]:
    """The model's responses in turn 0, 1 or 2."""
    if turn == 0:
        steps = [Step(calls=(("create_ticket", ticket(ORDER, SUMMARIES[i])),)) for i in range(6)]
    elif turn == 1:
        steps = [Step(calls=(("search_orders", {"query": q}),)) for q in QUERIES[:4]]
    else:
        bulk = tuple(("create_ticket", ticket(o, BATCH_SUMMARY)) for o in BULK_ORDERS)
        steps = [Step(calls=bulk)]
    return [*steps, Step(text=ANSWERS[turn])]


def ticket(order_id: str, summary: str) -> dict[str, Any]:
    return {"customer_id": CUSTOMER, "order_id": order_id, "summary": summary}


# ---------------------------------------------------------------------------------------------
# The tools (plain functions; the ticket service is down during turn 1)
# ---------------------------------------------------------------------------------------------


class TicketService:
    down = False
    opened = 0


def create_ticket(customer_id: str, order_id: str, summary: str) -> dict[str, str]:
    """Open a support ticket for one order of a customer."""
    if TicketService.down:
        raise TimeoutError(TIMEOUT_TEXT)
    TicketService.opened += 1
    return {"ticket_id": f"T-{TicketService.opened}"}


def search_orders(query: str) -> list[dict[str, str]]:
    """Search the customer's orders; returns the matching orders."""
    return []


Tools = Mapping[str, Callable[..., Any]]
TOOLS: Tools = {"create_ticket": create_ticket, "search_orders": search_orders}


def run_tool(tools: Tools, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    """(the result text the loop sends back, whether the call failed)."""
    try:
        return json.dumps(tools[name](**arguments)), False
    except Exception as e:
        return f"Error: {type(e).__name__}: {e}", True


# ---------------------------------------------------------------------------------------------
# The scripted model: a MockTransport that answers in each API's wire format
# ---------------------------------------------------------------------------------------------


def _id(prefix: str, *parts: object, n: int = 24) -> str:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return prefix + "".join(alphabet[int(digest[i : i + 2], 16) % 62] for i in range(0, 2 * n, 2))


class ScriptedModel:
    """Plays the three turns' steps in order, one per request. Each request must carry the
    results of every call the previous response asked for (by call id); ``requests`` keeps the
    request bodies."""

    def __init__(self, sdk: str, order: Sequence[int] = (0, 1, 2)) -> None:
        self.sdk = sdk
        self.steps = [(t, s) for t in order for s in turn_steps(t)]
        self.i = 0
        self.pending: list[str] = []  # call ids the next request must answer
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: Any) -> Any:
        import httpx2

        body = json.loads(request.content)
        self.requests.append(body)
        self._check(body)
        _turn, step = self.steps[self.i]
        self.i += 1
        if self.sdk == "openai":
            payload, header = self._openai(body, step), "x-request-id"
        else:
            payload, header = self._anthropic(body, step), "request-id"
        return httpx2.Response(200, json=payload, headers={header: _id("req_01", self.i)})

    def _check(self, body: dict[str, Any]) -> None:
        answered: set[str] = set()
        for m in body["messages"]:
            if m.get("role") == "tool":
                answered.add(m["tool_call_id"])
            if isinstance(m.get("content"), list):
                for block in m["content"]:
                    if block.get("type") == "tool_result":
                        answered.add(block["tool_use_id"])
        missing = [c for c in self.pending if c not in answered]
        if missing:
            raise AssertionError(f"request {len(self.requests)} lacks results for {missing}")
        if self.i >= len(self.steps):
            raise AssertionError("the script is over")
        if not body.get("tools"):
            raise AssertionError("a request without tools=")

    def call_ids(self, step: Step) -> list[str]:
        """Ids shaped like the API's: call_ + 24 characters, toolu_01 + 22."""
        prefix, n = ("call_", 24) if self.sdk == "openai" else ("toolu_01", 22)
        return [_id(prefix, self.sdk, self.i, j, n=n) for j in range(len(step.calls))]

    def _openai(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        ids = self.call_ids(step)
        self.pending = ids
        message: dict[str, Any] = {
            "role": "assistant",
            "content": step.text,
            "refusal": None,
            "annotations": [],
        }
        if step.calls:
            message["tool_calls"] = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for cid, (name, args) in zip(ids, step.calls, strict=True)
            ]
        prompt = 40 * len(body["messages"])
        return {
            "id": _id("chatcmpl-", self.i, n=29),
            "object": "chat.completion",
            "created": 1767225600 + self.i,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if step.calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": 30,
                "total_tokens": prompt + 30,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 0,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
            "service_tier": "default",
            "system_fingerprint": "fp_scripted",
        }

    def _anthropic(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        ids = self.call_ids(step)
        self.pending = ids
        content: list[dict[str, Any]] = []
        first_of_turn = body["messages"][-1]["role"] == "user" and isinstance(
            body["messages"][-1]["content"], str
        )
        if step.calls and first_of_turn:
            content.append({"type": "text", "text": "Let me take care of that."})
        if step.text is not None:
            content.append({"type": "text", "text": step.text})
        content += [
            {"type": "tool_use", "id": cid, "name": name, "input": args}
            for cid, (name, args) in zip(ids, step.calls, strict=True)
        ]
        return {
            "id": _id("msg_01", self.i, n=22),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": "tool_use" if step.calls else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 40 * len(body["messages"]),
                "output_tokens": 30,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "service_tier": "standard",
            },
        }


# ---------------------------------------------------------------------------------------------
# The hand-rolled loops (as the SDKs' own docs write them)
# ---------------------------------------------------------------------------------------------


def openai_tools() -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": n, "description": TOOL_DESCRIPTIONS[n], "parameters": p},
        }
        for n, p in TOOL_PARAMETERS.items()
    ]


def anthropic_tools() -> list[dict[str, Any]]:
    return [
        {"name": n, "description": TOOL_DESCRIPTIONS[n], "input_schema": p}
        for n, p in TOOL_PARAMETERS.items()
    ]


def openai_turn(client: Any, messages: list[Any], question: str, tools: Tools) -> str:
    messages.append({"role": "user", "content": question})
    while True:
        response = client.chat.completions.create(
            model=MODELS["openai"], messages=messages, tools=openai_tools()
        )
        message = response.choices[0].message
        messages.append(message)  # the assistant message, tool calls and all
        if not message.tool_calls:
            return str(message.content)
        for call in message.tool_calls:
            text, _failed = run_tool(tools, call.function.name, json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})


def anthropic_turn(client: Any, messages: list[Any], question: str, tools: Tools) -> str:
    messages.append({"role": "user", "content": question})
    while True:
        response = client.messages.create(
            model=MODELS["anthropic"], max_tokens=1024, messages=messages, tools=anthropic_tools()
        )
        messages.append({"role": "assistant", "content": response.content})
        if response.stop_reason != "tool_use":
            return "".join(b.text for b in response.content if b.type == "text")
        results = []
        for block in response.content:
            if block.type != "tool_use":
                continue
            text, failed = run_tool(tools, block.name, block.input)
            result = {"type": "tool_result", "tool_use_id": block.id, "content": text}
            if failed:
                result["is_error"] = True
            results.append(result)
        messages.append({"role": "user", "content": results})


def make_client(
    sdk: str, model: ScriptedModel, anthropic_spans: Any = False, provider: Any = None
) -> Any:
    """A real SDK client whose HTTP goes to ``model``. ``anthropic_spans``: the anthropic
    client's ``open_telemetry`` option (False: its own spans off; None: its default, read from
    ``ANTHROPIC_OPEN_TELEMETRY*``), to which ``provider`` is added as its tracer provider."""
    import httpx2

    http = httpx2.Client(transport=httpx2.MockTransport(model.handle))
    if sdk == "openai":
        import openai

        return openai.OpenAI(api_key="sk-offline", http_client=http, max_retries=0)
    import anthropic

    kwargs: dict[str, Any] = {}
    if isinstance(anthropic_spans, dict):
        anthropic_spans = {**anthropic_spans, "tracer_provider": provider}
    if anthropic_spans is not None:
        kwargs["open_telemetry"] = anthropic_spans
    return anthropic.Anthropic(api_key="sk-ant-offline", http_client=http, max_retries=0, **kwargs)


# ---------------------------------------------------------------------------------------------
# Instrumentations
# ---------------------------------------------------------------------------------------------

# Content capture of OpenTelemetry's own instrumentations. Their util (opentelemetry-util-genai,
# 1.1b0 and 1.3b0 alike) always writes the latest experimental conventions, so the opt-in is not
# read (set as their docs say), and reads the capture variable as a mode: NO_CONTENT (unset),
# SPAN_ONLY, EVENT_ONLY, SPAN_AND_EVENT; "true" is an invalid mode, i.e. no content.
_GENAI_CONTENT = {
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
}


@dataclass(frozen=True)
class Instrumentation:
    instrumentors: Mapping[str, str]  # sdk -> "module:Class" ("" for none)
    env: Mapping[str, str] = field(default_factory=dict)
    # the anthropic client's open_telemetry option (False: the SDK's own spans off)
    anthropic_spans: Any = False
    packages: tuple[str, ...] = ()


INSTRUMENTATIONS: dict[str, Instrumentation] = {
    "openinference": Instrumentation(
        {
            "openai": "openinference.instrumentation.openai:OpenAIInstrumentor",
            "anthropic": "openinference.instrumentation.anthropic:AnthropicInstrumentor",
        },
        packages=(
            "openinference-instrumentation-openai",
            "openinference-instrumentation-anthropic",
            "openinference-instrumentation",
            "openinference-semantic-conventions",
        ),
    ),
    "openllmetry": Instrumentation(
        {
            "openai": "opentelemetry.instrumentation.openai:OpenAIInstrumentor",
            "anthropic": "opentelemetry.instrumentation.anthropic:AnthropicInstrumentor",
        },
        packages=(
            "opentelemetry-instrumentation-openai",
            "opentelemetry-instrumentation-anthropic",
            "opentelemetry-semantic-conventions-ai",
        ),
    ),
    # OpenTelemetry's own, as last released from -contrib (a venv of its own: VENVS)
    "otel-openai-v2": Instrumentation(
        {"openai": "opentelemetry.instrumentation.openai_v2:OpenAIInstrumentor"},
        env=_GENAI_CONTENT,
        packages=("opentelemetry-instrumentation-openai-v2", "opentelemetry-util-genai"),
    ),
    "otel-genai": Instrumentation(
        {
            "openai": "opentelemetry.instrumentation.genai.openai:OpenAIInstrumentor",
            "anthropic": "opentelemetry.instrumentation.genai.anthropic:AnthropicInstrumentor",
        },
        env=_GENAI_CONTENT,
        packages=(
            "opentelemetry-instrumentation-genai-openai",
            "opentelemetry-instrumentation-genai-anthropic",
            "opentelemetry-util-genai",
        ),
    ),
    # the anthropic SDK's own spans: on by default, messages only in content mode
    "anthropic-sdk": Instrumentation(
        {"anthropic": ""}, anthropic_spans={"traces": {"content_mode": "content"}}
    ),
    "loopwatch": Instrumentation({"openai": "", "anthropic": ""}),
}
VARIANTS = ("a", "b", "c")
COMBINATIONS = [(i, sdk) for i, inst in INSTRUMENTATIONS.items() for sdk in inst.instrumentors]
# instrumentations whose pins cannot share .venv (pyproject.toml says why): their virtualenv
VENVS = {"otel-openai-v2": ".venv-openai-v2"}
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "handrolled"


def python_for(instrumentation: str) -> Path:
    """The interpreter that runs ``instrumentation`` (may not exist: scripts/test makes it)."""
    venv = VENVS.get(instrumentation)
    return ROOT / venv / "bin" / "python" if venv else Path(sys.executable)


def _load(spec: str) -> Any:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


# ---------------------------------------------------------------------------------------------
# Spans: one provider, processors switched per run, ids from a seeded generator
# ---------------------------------------------------------------------------------------------


class SeededIds(IdGenerator):
    def __init__(self, seed: int = 1) -> None:
        self.random = random.Random(seed)

    def generate_span_id(self) -> int:
        return self.random.getrandbits(64)

    def generate_trace_id(self) -> int:
        return self.random.getrandbits(128)


class Switch(SpanProcessor):
    """The provider's one processor; forwards to the current run's processors."""

    def __init__(self) -> None:
        self.targets: list[SpanProcessor] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        for t in self.targets:
            t.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for t in self.targets:
            t.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(t.force_flush(timeout_millis) for t in self.targets)


@dataclass
class Harness:
    """One instrumentation of one SDK, instrumented once; ``run`` plays the conversation."""

    instrumentation: str
    sdk: str
    switch: Switch = field(default_factory=Switch)
    provider: TracerProvider = field(init=False)
    spec: Instrumentation = field(init=False)
    instrumentor: Any = None
    saved_env: dict[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.provider = TracerProvider(
            resource=Resource.create({"service.name": "support-agent"}), id_generator=SeededIds()
        )
        self.provider.add_span_processor(self.switch)
        self.spec = INSTRUMENTATIONS[self.instrumentation]
        if self.sdk not in self.spec.instrumentors:
            raise ValueError(f"{self.instrumentation} does not instrument {self.sdk}")

    def instrument(self) -> None:
        self.saved_env = {k: os.environ.get(k) for k in self.spec.env}
        os.environ.update(self.spec.env)
        if self.instrumentation == "loopwatch":
            # @loopwatch.tool traces with the global provider
            trace.set_tracer_provider(self.provider)
        cls = self.spec.instrumentors[self.sdk]
        if cls:
            self.instrumentor = _load(cls)()
            self.instrumentor.instrument(tracer_provider=self.provider)

    def uninstrument(self) -> None:
        if self.instrumentor is not None:
            self.instrumentor.uninstrument()
            self.instrumentor = None
        for k, v in self.saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def tools(self) -> Tools:
        if self.instrumentation != "loopwatch":
            return dict(TOOLS)
        import loopwatch

        return {
            "create_ticket": loopwatch.tool(identity=["customer_id", "order_id"])(create_ticket),
            "search_orders": loopwatch.tool(result="rows")(search_orders),
        }

    def run(self, variant: str, processors: Sequence[SpanProcessor] = ()) -> list[str]:
        """The three turns in ``variant``, the run's spans going to ``processors``; the
        model's three answers."""
        self.switch.targets = list(processors)
        TicketService.opened = 0
        model = ScriptedModel(self.sdk)
        client = make_client(self.sdk, model, self.spec.anthropic_spans, self.provider)
        play = openai_turn if self.sdk == "openai" else anthropic_turn
        tools = self.tools()
        tracer = self.provider.get_tracer("support-app")
        messages: list[Any] = []
        answers = []
        try:
            with self._batch(tracer, variant):
                for turn, question in enumerate(QUESTIONS):
                    TicketService.down = turn == 0
                    with self._request(tracer, variant), self._turn():
                        answers.append(play(client, messages, question, tools))
            if model.i != len(model.steps):
                raise AssertionError(f"the model played {model.i} of {len(model.steps)} steps")
            for p in processors:
                p.force_flush(10_000)
        finally:
            self.switch.targets = []
        return answers

    def _batch(self, tracer: trace.Tracer, variant: str) -> AbstractContextManager[Any]:
        if variant != "c":
            return contextlib.nullcontext()
        return tracer.start_as_current_span(
            "nightly-support-batch", attributes={"batch.size": len(QUESTIONS)}
        )

    def _request(self, tracer: trace.Tracer, variant: str) -> AbstractContextManager[Any]:
        if variant != "b":
            return contextlib.nullcontext()
        return tracer.start_as_current_span(
            "POST /chat",
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": "POST",
                "http.route": "/chat",
                "url.path": "/chat",
                "url.scheme": "http",
            },
        )

    def _turn(self) -> AbstractContextManager[Any]:
        if self.instrumentation != "loopwatch":
            return contextlib.nullcontext()
        import loopwatch

        turn: Callable[..., AbstractContextManager[Any]] = loopwatch.turn
        return turn(agent="support")


@contextlib.contextmanager
def harness(instrumentation: str, sdk: str) -> Iterator[Harness]:
    h = Harness(instrumentation, sdk)
    h.instrument()
    try:
        yield h
    finally:
        h.uninstrument()


# ---------------------------------------------------------------------------------------------
# Spans as JSON
# ---------------------------------------------------------------------------------------------


def _value(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def span_json(s: ReadableSpan) -> dict[str, Any]:
    ctx = s.get_span_context()
    assert ctx is not None
    return {
        "name": s.name,
        "kind": s.kind.name,
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_span_id": f"{s.parent.span_id:016x}" if s.parent is not None else None,
        "scope": s.instrumentation_scope.name if s.instrumentation_scope else None,
        "start_time_unix_nano": s.start_time,
        "end_time_unix_nano": s.end_time,
        "status": {"code": s.status.status_code.name, "description": s.status.description},
        "attributes": {k: _value(v) for k, v in (s.attributes or {}).items()},
        "events": [
            {"name": e.name, "attributes": {k: _value(v) for k, v in (e.attributes or {}).items()}}
            for e in s.events
        ],
    }


def versions(instrumentation: str, sdk: str) -> dict[str, str]:
    names = [sdk, *INSTRUMENTATIONS[instrumentation].packages, "opentelemetry-sdk"]
    if instrumentation == "loopwatch":
        names.append("loopwatch")
    if sdk == "openai" and instrumentation != "loopwatch":
        names = [n for n in names if "anthropic" not in n]
    if sdk == "anthropic":
        names = [n for n in names if "openai" not in n]
    out = {}
    for n in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[n] = metadata.version(n)
    return out


# ---------------------------------------------------------------------------------------------
# One process per instrumentation
# ---------------------------------------------------------------------------------------------


def samples(registry: Any) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, dict(s.labels), s.value) for m in registry.collect() for s in m.samples]


def record_all() -> None:
    """Re-record every fixture, each instrumentation in its own process and virtualenv."""
    import subprocess

    with tempfile.TemporaryDirectory() as tmp:
        for instrumentation, sdk in COMBINATIONS:
            if instrumentation == "loopwatch":
                continue  # no instrumentation: nothing of a third party's to record
            python = python_for(instrumentation)
            out = Path(tmp) / f"{instrumentation}-{sdk}.json"
            command = [str(python), "-m", "tests.framework_runs.handrolled", instrumentation, sdk]
            subprocess.run([*command, str(out), "--record", str(FIXTURES)], cwd=ROOT, check=True)
            print(f"recorded {instrumentation}-{sdk}")


def main(argv: Sequence[str]) -> None:
    if argv == ["--record-all"]:
        record_all()
        return
    instrumentation, sdk, out = argv[0], argv[1], Path(argv[2])
    record = Path(argv[argv.index("--record") + 1]) if "--record" in argv else None
    from prometheus_client import CollectorRegistry

    import loopwatch

    result: dict[str, Any] = {"variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        toml = Path(tmp) / "loopwatch.toml"
        toml.write_text(LOOPWATCH_TOML, encoding="utf-8")
        config = loopwatch.load_config(toml)
        with harness(instrumentation, sdk) as h:
            for variant in VARIANTS:
                registry = CollectorRegistry()
                processor = loopwatch.LoopwatchSpanProcessor(config=config, registry=registry)
                exporter = InMemorySpanExporter()
                answers = h.run(variant, [processor, SimpleSpanProcessor(exporter)])
                if answers != list(ANSWERS):
                    raise AssertionError(f"answers {answers}")
                result["variants"][variant] = {
                    "samples": samples(registry),
                    "spans": [span_json(s) for s in exporter.get_finished_spans()],
                }
                processor.shutdown()
    result["versions"] = versions(instrumentation, sdk)
    result["env"] = dict(INSTRUMENTATIONS[instrumentation].env)
    out.write_text(json.dumps(result), encoding="utf-8")
    if record is not None:
        record.mkdir(parents=True, exist_ok=True)
        fixture = {
            "instrumentation": instrumentation,
            "sdk": sdk,
            "versions": result["versions"],
            "env": result["env"],
            "anthropic_open_telemetry": (
                INSTRUMENTATIONS[instrumentation].anthropic_spans if sdk == "anthropic" else None
            ),
            "variants": {v: result["variants"][v]["spans"] for v in ("a", "b")},
        }
        path = record / f"{instrumentation}-{sdk}.json"
        path.write_text(json.dumps(fixture, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
