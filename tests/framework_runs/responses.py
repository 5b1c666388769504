"""A hand-rolled loop over the OpenAI Responses API, offline, in the README's quick-start set-up
without ``loopwatch.turn``: an OpenAI instrumentation, tools under
``@loopwatch.tool(identity=[...])``.

The model is a loopback HTTP server that speaks the Responses API's wire format: ``POST
/v1/responses``, JSON or (``stream: true``) server-sent events with the API's event types. Its
``function_call`` items carry both an item id (``fc_...``) and a ``call_id`` (``call_...``), as
the API's do; each request must send back one ``function_call_output`` per call the previous
response asked for, by ``call_id``. The real ``openai.OpenAI`` client talks to it through
``base_url``.

The three turns of tests/framework_runs/handrolled.py in one conversation, in every order of the
three, in four modes: ``stateless`` (the whole input every time) and ``chained`` (each call's
input only the new items, ``previous_response_id`` the last response), each ``unary`` and
``stream``:

    python -m tests.framework_runs.responses INSTRUMENTATION OUT.json [MODE]

writes, per order and mode, the metric samples of a fresh LoopwatchSpanProcessor (with MODE,
also the spans of the first order in that mode, to look at). One
instrumentation per process: instrumentors patch the SDK globally, and the three register the
same entry-point name (``openai``), so the runner instruments with the chosen one's class."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from tests.framework_runs.handrolled import (
    _GENAI_CONTENT,
    ANSWERS,
    QUESTIONS,
    TOOL_DESCRIPTIONS,
    TOOL_PARAMETERS,
    Step,
    TicketService,
    Tools,
    _id,
    _load,
    run_tool,
    turn_steps,
)
from tests.framework_runs.loopback import (
    ORDERS,
    Loopback,
    Reply,
    global_provider,
    loopback,
    quickstart_tools,
    run_orders,
    sse,
)

MODEL = "gpt-4.1-mini"
# instrumentation -> (its instrumentor, the environment it needs for content)
INSTRUMENTATIONS: dict[str, tuple[str, dict[str, str]]] = {
    "openinference": ("openinference.instrumentation.openai:OpenAIInstrumentor", {}),
    "openllmetry": ("opentelemetry.instrumentation.openai:OpenAIInstrumentor", {}),
    "otel-genai": ("opentelemetry.instrumentation.genai.openai:OpenAIInstrumentor", _GENAI_CONTENT),
}
PACKAGES = {
    "openinference": "openinference-instrumentation-openai",
    "openllmetry": "opentelemetry-instrumentation-openai",
    "otel-genai": "opentelemetry-instrumentation-genai-openai",
}
MODES = ("stateless-unary", "stateless-stream", "chained-unary", "chained-stream")


# ---------------------------------------------------------------------------------------------
# The scripted model: the Responses API on a loopback port
# ---------------------------------------------------------------------------------------------


class ScriptedResponses:
    """Plays the steps of the turns in ``order``, one per request; each request must answer by
    ``call_id`` every call the previous response asked for, and a chained request must name the
    previous response."""

    def __init__(self, order: Sequence[int], run: str) -> None:
        self.run = run  # in every id: ids are unique across runs, as the API's are
        self.steps = [(t, s) for t in order for s in turn_steps(t)]
        self.i = 0
        self.pending: list[str] = []
        self.last_id: str | None = None
        self.lock = threading.Lock()

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self._check(body)
            _turn, step = self.steps[self.i]
            self.i += 1
            return self._response(body, step)

    def _check(self, body: dict[str, Any]) -> None:
        if self.i >= len(self.steps):
            raise AssertionError("the script is over")
        if not body.get("tools"):
            raise AssertionError("a request without tools")
        previous = body.get("previous_response_id")
        if previous is not None and previous != self.last_id:
            raise AssertionError(f"previous_response_id {previous}, not {self.last_id}")
        items = body["input"] if isinstance(body["input"], list) else []
        answered = [
            i["call_id"]
            for i in items
            if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        if answered[len(answered) - len(self.pending) :] != self.pending or (
            self.pending and not answered
        ):
            raise AssertionError(f"request {self.i + 1} answers {answered}, not {self.pending}")

    def _response(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        calls = []
        for j, (name, args) in enumerate(step.calls):
            call = {
                "type": "function_call",
                "id": _id("fc_", self.run, "item", self.i, j, n=30),
                "call_id": _id("call_", self.run, self.i, j),
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
            calls.append(call["call_id"])
            output.append(call)
        if step.text is not None:
            output.append(
                {
                    "type": "message",
                    "id": _id("msg_", self.run, self.i, n=30),
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": step.text, "annotations": []}],
                }
            )
        self.pending = calls
        rid = _id("resp_", self.run, self.i, n=30)
        self.last_id = rid
        prompt = 40 * (len(body["input"]) if isinstance(body["input"], list) else 1)
        return {
            "id": rid,
            "object": "response",
            "created_at": 1767225600 + self.i,
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": None,
            "model": MODEL,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
            "store": True,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": body["tools"],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 30,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + 30,
            },
            "user": None,
            "metadata": {},
        }


def _events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """A response as the API streams it: created, each output item added, its arguments or
    text in two deltas, done, and completed with the whole response."""
    start = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
    ]
    for index, item in enumerate(response["output"]):
        base = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "function_call":
            added = {**item, "arguments": "", "status": "in_progress"}
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": added}
            )
            text = item["arguments"]
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                events.append(
                    {"type": "response.function_call_arguments.delta", **base, "delta": piece}
                )
            events.append(
                {"type": "response.function_call_arguments.done", **base, "arguments": text}
            )
        else:
            added = {**item, "content": [], "status": "in_progress"}
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": added}
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            events.append(
                {"type": "response.content_part.added", **base, "content_index": 0, "part": part}
            )
            text = item["content"][0]["text"]
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        **base,
                        "content_index": 0,
                        "delta": piece,
                        "logprobs": [],
                    }
                )
            events.append(
                {
                    "type": "response.output_text.done",
                    **base,
                    "content_index": 0,
                    "text": text,
                    "logprobs": [],
                }
            )
            events.append(
                {
                    "type": "response.content_part.done",
                    **base,
                    "content_index": 0,
                    "part": item["content"][0],
                }
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    return [{**e, "sequence_number": n} for n, e in enumerate(events)]


def reply(model: ScriptedResponses, path: str, body: dict[str, Any]) -> Reply:
    if path != "/v1/responses":
        raise AssertionError(f"unexpected path {path}")
    response = model.answer(body)
    if body.get("stream"):
        text = sse(_events(response), named=True)
        return 200, "text/event-stream", text, {"x-request-id": _id("req_", len(text))}
    text = json.dumps(response)
    return 200, "application/json", text, {"x-request-id": _id("req_", len(text))}


# ---------------------------------------------------------------------------------------------
# The hand-rolled loop (as the OpenAI docs write function calling with the Responses API)
# ---------------------------------------------------------------------------------------------


def responses_tools() -> list[dict[str, Any]]:
    return [
        {"type": "function", "name": n, "description": TOOL_DESCRIPTIONS[n], "parameters": p}
        for n, p in TOOL_PARAMETERS.items()
    ]


class Conversation:
    """The loop's state: the whole input (stateless) or the last response's id (chained)."""

    def __init__(self, chained: bool, stream: bool) -> None:
        self.chained, self.stream = chained, stream
        self.items: list[Any] = []
        self.previous: str | None = None

    def create(self, client: Any, new: list[Any]) -> Any:
        kwargs: dict[str, Any] = {"model": MODEL, "tools": responses_tools()}
        if self.chained:
            kwargs["input"] = new
            if self.previous is not None:
                kwargs["previous_response_id"] = self.previous
        else:
            self.items += new
            kwargs["input"] = self.items
        if self.stream:
            response = None
            for event in client.responses.create(stream=True, **kwargs):
                if event.type == "response.completed":
                    response = event.response
            if response is None:
                raise AssertionError("the stream ended without response.completed")
        else:
            response = client.responses.create(**kwargs)
        self.previous = response.id
        if not self.chained:
            self.items += response.output
        return response


def responses_turn(client: Any, conversation: Conversation, question: str, tools: Tools) -> str:
    new: list[Any] = [{"role": "user", "content": question}]
    while True:
        response = conversation.create(client, new)
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return str(response.output_text)
        new = []
        for call in calls:
            text, _failed = run_tool(tools, call.name, json.loads(call.arguments))
            new.append({"type": "function_call_output", "call_id": call.call_id, "output": text})


def play(client: Any, server: Loopback, order: Sequence[int], tools: Tools, mode: str) -> None:
    model = ScriptedResponses(order, f"{order}-{mode}")
    server.answer = lambda path, body: reply(model, path, body)
    server.failures.clear()
    conversation = Conversation(mode.startswith("chained"), mode.endswith("stream"))
    for turn in order:
        TicketService.down = turn == 0
        answer = responses_turn(client, conversation, QUESTIONS[turn], tools)
        if answer != ANSWERS[turn]:
            raise AssertionError(f"turn {turn} answered {answer!r}; failures {server.failures}")
    if server.failures or model.i != len(model.steps):
        raise AssertionError(f"played {model.i} of {len(model.steps)}: {server.failures}")


# ---------------------------------------------------------------------------------------------
# One process per instrumentation
# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str]) -> None:
    instrumentation, out = argv[0], Path(argv[1])
    record = argv[2] if len(argv) > 2 else None  # a mode whose spans to dump (debugging)
    spec, env = INSTRUMENTATIONS[instrumentation]
    os.environ.update(env)

    import openai

    provider, switch = global_provider()  # where @loopwatch.tool traces
    _load(spec)().instrument(tracer_provider=provider)
    tools = quickstart_tools()
    result: dict[str, Any] = {"spans": []}
    with loopback() as server:
        client = openai.OpenAI(
            api_key="sk-offline", base_url=f"{server.base_url}/v1", max_retries=0
        )
        if record is not None:  # the first order's spans in that mode, played once more
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )

            from tests.framework_runs.handrolled import span_json

            exporter = InMemorySpanExporter()
            switch.targets = [SimpleSpanProcessor(exporter)]
            try:
                play(client, server, ORDERS[0], tools, record)
            finally:
                switch.targets = []
            result["spans"] = [span_json(s) for s in exporter.get_finished_spans()]
        result["runs"] = run_orders(
            switch, MODES, lambda order, mode: play(client, server, order, tools, mode)
        )
    result["versions"] = {n: metadata.version(n) for n in ("openai", PACKAGES[instrumentation])}
    out.write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
