"""A hand-rolled agent over the raw OpenAI SDK that loops, watched by loopwatch. Offline: the
real client talks to a scripted model through its HTTP transport.

    scripts/example raw_openai_loop    # installs what it needs into .venv first

No agent framework: the loop calls Chat Completions with ``tools=``, runs each tool call the
model asks for, sends the results back and calls again until the model answers in text. The
model searches the customer's orders three times with reworded queries (no rows each time), then
tries to open a ticket six times, rewording the summary after every timeout.

loopwatch is attached the README's way: ``loopwatch.instrument()`` (which also switches on the
installed OpenAI instrumentation, so the model calls' messages are on spans), the tools declared
with ``@loopwatch.tool`` and the turn marked with ``loopwatch.turn``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx2
import openai
from support_incident import ANSWER, QUESTION, SCRIPT, TIMEOUT, show_metrics

import loopwatch

MODEL = "gpt-4.1-mini"


@loopwatch.tool(identity=["query"], result="rows")
def search_orders(query: str) -> list[dict[str, str]]:
    """Search the customer's orders."""
    return []


@loopwatch.tool(identity=["customer_id", "order_id"])
def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
    """Open a support ticket for an order."""
    raise TimeoutError(TIMEOUT)


TOOLS = {f.__name__: f for f in (search_orders, create_ticket)}
PARAMETERS = {"search_orders": ["query"], "create_ticket": ["customer_id", "order_id", "summary"]}
TOOL_DEFINITIONS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": TOOLS[name].__doc__,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": "string"} for p in params},
                "required": params,
            },
        },
    }
    for name, params in PARAMETERS.items()
]


def scripted_model(request: httpx2.Request) -> httpx2.Response:
    """Chat Completions as the API answers it: SCRIPT's calls one per response, then ANSWER."""
    step = sum(m["role"] == "assistant" for m in json.loads(request.content)["messages"])
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if step < len(SCRIPT):
        name, arguments = SCRIPT[step]
        call = {"name": name, "arguments": json.dumps(arguments)}
        message["tool_calls"] = [{"id": f"call_{step}", "type": "function", "function": call}]
        finish = "tool_calls"
    else:
        message["content"], finish = ANSWER, "stop"
    body = {
        "id": f"chatcmpl-{step}",
        "object": "chat.completion",
        "created": 1767225600,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }
    return httpx2.Response(200, json=body)


def run_tool(name: str, arguments: dict[str, Any]) -> str:
    """The tool's result as the model reads it; an exception becomes an error message."""
    try:
        return json.dumps(TOOLS[name](**arguments))
    except Exception as e:
        return f"Error: {type(e).__name__}: {e}"


def answer(client: openai.OpenAI, question: str) -> str:
    """The hand-rolled agent loop: one user turn."""
    messages: list[Any] = [{"role": "user", "content": question}]
    while True:
        response = client.chat.completions.create(
            model=MODEL, messages=messages, tools=TOOL_DEFINITIONS
        )
        message = response.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            result = run_tool(call.function.name, json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    processor = loopwatch.instrument()
    http = httpx2.Client(transport=httpx2.MockTransport(scripted_model))
    client = openai.OpenAI(api_key="offline", http_client=http)
    with loopwatch.turn(agent="support"):
        text = answer(client, QUESTION)
    print(f"agent: {text}")
    show_metrics(processor)


if __name__ == "__main__":
    main()
