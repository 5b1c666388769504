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
``instrument()`` switched on when the SDK was imported after it. One instrumentation per
process: instrumentors patch the SDK globally; the other two are named in
``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``, as a user with more than one installed would."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from tests.framework_runs.handrolled import (
    ANSWERS,
    QUESTIONS,
    TOOL_DESCRIPTIONS,
    TOOL_PARAMETERS,
    Step,
    TicketService,
    turn_steps,
)
from tests.framework_runs.loopback import (
    Loopback,
    Reply,
    global_provider,
    loopback,
    quickstart_tools,
    run_orders,
    sse,
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


def reply(model: ScriptedGemini, path: str, body: dict[str, Any]) -> Reply:
    path = path.split("?")[0]
    if not path.startswith((f"/v1beta/models/{MODEL}:", f"/v1/models/{MODEL}:")):
        raise AssertionError(f"unexpected path {path}")
    response = model.answer(body)
    if path.endswith(":streamGenerateContent"):
        return 200, "text/event-stream", sse(_chunks(response)), {}
    return 200, "application/json", json.dumps(response), {}


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
            assert call.name is not None  # a function call always names its function
            try:
                response_value: dict[str, Any] = {"output": tools[call.name](**(call.args or {}))}
            except Exception as e:
                response_value = {"error": f"{type(e).__name__}: {e}"}
            results.append(
                types.Part.from_function_response(name=call.name, response=response_value)
            )
        contents.append(types.Content(role="user", parts=results))


def play(client: Any, server: Loopback, order: Sequence[int], tools: Any, stream: bool) -> None:
    model = ScriptedGemini(order)
    server.answer = lambda path, body: reply(model, path, body)
    server.failures.clear()
    contents: list[Any] = []
    for turn in order:
        TicketService.down = turn == 0
        answer = gemini_turn(client, contents, QUESTIONS[turn], tools, stream)
        if answer != ANSWERS[turn]:
            raise AssertionError(f"turn {turn} answered {answer!r}; failures {server.failures}")
    if server.failures or model.i != len(model.steps):
        raise AssertionError(f"played {model.i} of {len(model.steps)}: {server.failures}")


# ---------------------------------------------------------------------------------------------
# One process per instrumentation
# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str]) -> None:
    instrumentation, out = argv[0], Path(argv[1])
    entry_point, env = INSTRUMENTATIONS[instrumentation]
    others = [ep for name, (ep, _) in INSTRUMENTATIONS.items() if name != instrumentation]
    os.environ.update(env)
    os.environ["OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"] = ",".join(others)

    from loopwatch.attach.frameworks import instrument_frameworks, switched_on

    provider, switch = global_provider()  # where @loopwatch.tool traces
    # what loopwatch.instrument() switches on (its processor is added per run instead), before
    # the application imports the SDK: the SDK's import switches its instrumentation on
    if instrument_frameworks(provider):
        raise AssertionError(f"instrument() switched on {switched_on()} before the import")
    from google import genai
    from google.genai import types

    switched = switched_on()
    if entry_point not in switched:
        raise AssertionError(f"instrument() switched on {switched}, not {entry_point}")
    tools = quickstart_tools()
    result: dict[str, Any] = {"switched": switched}
    with loopback() as server:
        client = genai.Client(
            api_key="offline",
            http_options=types.HttpOptions(base_url=server.base_url, timeout=30_000),
        )
        result["runs"] = run_orders(
            switch,
            MODES,
            lambda order, mode: play(client, server, order, tools, mode == "stream"),
        )
    result["versions"] = {
        n: metadata.version(n) for n in ("google-genai", PACKAGES[instrumentation])
    }
    out.write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
