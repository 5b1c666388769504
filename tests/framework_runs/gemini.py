"""A hand-rolled loop over the google-genai SDK (the Gemini API), offline, as the README's quick
start sets it up: the instrumentation ``loopwatch.instrument()`` switches on, tools under
``@loopwatch.tool(identity=[...])``, no ``loopwatch.turn``.

The model is a loopback HTTP server that speaks the Gemini API's wire format:
``POST /v1beta/models/{model}:generateContent`` (JSON) and ``:streamGenerateContent?alt=sse``
(server-sent events). Its ``functionCall`` parts carry no id, as the API's do; each request must
send back one ``functionResponse`` part per call the previous response asked for, by name and in
order. The real ``google.genai.Client`` talks to it through ``http_options.base_url``.

The three turns of tests/framework_runs/handrolled.py (six reworded ``create_ticket``
timeouts; four reworded searches returning nothing; one response with six ``create_ticket``
calls), in one conversation, in every order of the three, each order once with
``generate_content`` and once with ``generate_content_stream``:

    python -m tests.framework_runs.gemini INSTRUMENTATION OUT.json

writes, per order and mode, the metric samples of a fresh LoopwatchSpanProcessor and what
``instrument()`` switched on. One instrumentation per process: instrumentors patch the SDK
globally; the other two are named in ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``, as a user with
more than one installed would."""

from __future__ import annotations

import itertools
import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from tests.framework_runs.handrolled import (
    ANSWERS,
    LOOPWATCH_TOML,
    QUESTIONS,
    TOOL_DESCRIPTIONS,
    TOOL_PARAMETERS,
    Step,
    Switch,
    TicketService,
    create_ticket,
    samples,
    search_orders,
    turn_steps,
)

MODEL = "gemini-2.5-flash"
# instrumentation -> (its entry point's name, the content capture it needs)
INSTRUMENTATIONS: dict[str, tuple[str, dict[str, str]]] = {
    "openinference": ("google_genai", {}),
    "openllmetry": ("google_generativeai", {}),
    # OpenTelemetry's own: instrument() sets the capture mode where unset (SPAN_ONLY)
    "otel-genai": ("google-genai", {}),
}
PACKAGES = {
    "openinference": "openinference-instrumentation-google-genai",
    "openllmetry": "opentelemetry-instrumentation-google-generativeai",
    "otel-genai": "opentelemetry-instrumentation-google-genai",
}
ORDERS = list(itertools.permutations(range(3)))
MODES = ("unary", "stream")


# ---------------------------------------------------------------------------------------------
# The scripted model: the Gemini API on a loopback port
# ---------------------------------------------------------------------------------------------


class ScriptedGemini:
    """Plays the steps of the turns in ``order``, one per request, and checks that each request
    answers the calls the previous response asked for (by name and order: there are no ids)."""

    def __init__(self, order: Sequence[int]) -> None:
        self.steps = [(t, s) for t in order for s in turn_steps(t)]
        self.i = 0
        self.pending: list[str] = []  # tool names the next request must answer, in order
        self.failures: list[str] = []
        self.lock = threading.Lock()

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self._check(body)
            _turn, step = self.steps[self.i]
            self.i += 1
            self.pending = [name for name, _ in step.calls]
            return self._response(body, step)

    def _check(self, body: dict[str, Any]) -> None:
        if self.i >= len(self.steps):
            raise AssertionError("the script is over")
        if not body.get("tools"):
            raise AssertionError("a request without tools")
        last = body["contents"][-1]
        answered = [
            p["functionResponse"]["name"] for p in last.get("parts", []) if "functionResponse" in p
        ]
        if answered != self.pending:
            raise AssertionError(f"request {self.i + 1} answers {answered}, not {self.pending}")

    def _response(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        parts: list[dict[str, Any]] = [
            {"functionCall": {"name": name, "args": args}} for name, args in step.calls
        ]
        if step.text is not None:
            parts.append({"text": step.text})
        prompt = 40 * len(body["contents"])
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": prompt,
                "candidatesTokenCount": 30,
                "totalTokenCount": prompt + 30,
            },
            "modelVersion": MODEL,
            "responseId": f"scripted-{self.i}",
        }


def _chunks(response: dict[str, Any]) -> list[dict[str, Any]]:
    """A response as the API streams it: a text in two chunks, calls in the last one."""
    candidate = response["candidates"][0]
    parts = candidate["content"]["parts"]
    texts = [p["text"] for p in parts if "text" in p]
    calls = [p for p in parts if "functionCall" in p]
    out: list[dict[str, Any]] = []
    pieces = [texts[0][: len(texts[0]) // 2], texts[0][len(texts[0]) // 2 :]] if texts else []
    for piece in pieces[:-1] if not calls else pieces:
        out.append({"candidates": [{"content": {"role": "model", "parts": [{"text": piece}]}}]})
    last_parts = calls if calls else [{"text": pieces[-1]}]
    out.append(
        {
            **response,
            "candidates": [
                {**candidate, "content": {"role": "model", "parts": last_parts}},
            ],
        }
    )
    return out


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length))
        path = self.path.split("?")[0]
        try:
            if not path.startswith((f"/v1beta/models/{MODEL}:", f"/v1/models/{MODEL}:")):
                raise AssertionError(f"unexpected path {self.path}")
            response = self.server.model.answer(body)
        except AssertionError as e:
            self.server.model.failures.append(str(e))
            self._send(400, "application/json", json.dumps({"error": {"message": str(e)}}))
            return
        if path.endswith(":streamGenerateContent"):
            events = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in _chunks(response))
            self._send(200, "text/event-stream", events)
        else:
            self._send(200, "application/json", json.dumps(response))

    def _send(self, status: int, content_type: str, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet


class _Server(ThreadingHTTPServer):
    model: ScriptedGemini
    daemon_threads = True


@contextmanager
def loopback() -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# ---------------------------------------------------------------------------------------------
# The hand-rolled loop (as the google-genai docs write function calling by hand)
# ---------------------------------------------------------------------------------------------


def gemini_tools() -> Any:
    from google.genai import types

    return types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name=n, description=TOOL_DESCRIPTIONS[n], parameters_json_schema=p
            )
            for n, p in TOOL_PARAMETERS.items()
        ]
    )


def gemini_turn(
    client: Any,
    contents: list[Any],
    question: str,
    tools: dict[str, Callable[..., Any]],
    stream: bool,
) -> str:
    from google.genai import types

    contents.append(types.Content(role="user", parts=[types.Part.from_text(text=question)]))
    config = types.GenerateContentConfig(tools=[gemini_tools()])
    while True:
        if stream:
            parts: list[Any] = []
            for chunk in client.models.generate_content_stream(
                model=MODEL, contents=contents, config=config
            ):
                parts.extend(chunk.candidates[0].content.parts or [])
            content = types.Content(role="model", parts=parts)
        else:
            response = client.models.generate_content(model=MODEL, contents=contents, config=config)
            content = response.candidates[0].content
        contents.append(content)
        calls = [p.function_call for p in content.parts or [] if p.function_call]
        if not calls:
            return "".join(p.text for p in content.parts or [] if p.text)
        results = []
        for call in calls:
            try:
                response_value: dict[str, Any] = {"output": tools[call.name](**(call.args or {}))}
            except Exception as e:
                response_value = {"error": f"{type(e).__name__}: {e}"}
            results.append(
                types.Part.from_function_response(name=call.name, response=response_value)
            )
        contents.append(types.Content(role="user", parts=results))


def play(client: Any, server: _Server, order: Sequence[int], tools: Any, stream: bool) -> None:
    model = server.model = ScriptedGemini(order)
    TicketService.opened = 0
    contents: list[Any] = []
    for turn in order:
        TicketService.down = turn == 0
        answer = gemini_turn(client, contents, QUESTIONS[turn], tools, stream)
        if answer != ANSWERS[turn]:
            raise AssertionError(f"turn {turn} answered {answer!r}; failures {model.failures}")
    if model.failures or model.i != len(model.steps):
        raise AssertionError(f"played {model.i} of {len(model.steps)}: {model.failures}")


# ---------------------------------------------------------------------------------------------
# One process per instrumentation
# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str]) -> None:
    instrumentation, out = argv[0], Path(argv[1])
    entry_point, env = INSTRUMENTATIONS[instrumentation]
    others = [ep for name, (ep, _) in INSTRUMENTATIONS.items() if name != instrumentation]
    os.environ.update(env)
    os.environ["OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"] = ",".join(others)

    from google import genai
    from google.genai import types

    import loopwatch
    from loopwatch.attach.frameworks import instrument_frameworks

    switch = Switch()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(switch)
    trace.set_tracer_provider(provider)  # where @loopwatch.tool traces
    # what loopwatch.instrument() switches on (its processor is added per run below instead)
    switched = instrument_frameworks(provider)
    if entry_point not in switched:
        raise AssertionError(f"instrument() switched on {switched}, not {entry_point}")
    tools = {
        "create_ticket": loopwatch.tool(identity=["customer_id", "order_id"])(create_ticket),
        "search_orders": loopwatch.tool(result="rows")(search_orders),
    }
    result: dict[str, Any] = {"runs": {}, "switched": switched}
    with tempfile.TemporaryDirectory() as tmp, loopback() as server:
        toml = Path(tmp) / "loopwatch.toml"
        toml.write_text(LOOPWATCH_TOML, encoding="utf-8")
        config = loopwatch.load_config(toml)
        base_url = f"http://127.0.0.1:{server.server_address[1]}"
        client = genai.Client(
            api_key="offline", http_options=types.HttpOptions(base_url=base_url, timeout=30_000)
        )
        for order in ORDERS:
            for mode in MODES:
                registry = CollectorRegistry()
                processor = loopwatch.LoopwatchSpanProcessor(config=config, registry=registry)
                switch.targets = [processor]
                try:
                    play(client, server, order, tools, mode == "stream")
                    processor.force_flush(10_000)
                finally:
                    switch.targets = []
                processor.shutdown()  # a turn still open is counted now (the idle timeout's way)
                result["runs"][f"{''.join(map(str, order))}-{mode}"] = samples(registry)
    result["versions"] = {
        n: metadata.version(n) for n in ("google-genai", PACKAGES[instrumentation])
    }
    out.write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
