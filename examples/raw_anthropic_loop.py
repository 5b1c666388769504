"""A hand-rolled agent over the raw Anthropic SDK that loops, watched by loopwatch. Offline: the
real client talks to a scripted model through its HTTP transport.

    scripts/example raw_anthropic_loop    # installs what it needs into .venv first

No agent framework: the loop calls the Messages API with ``tools=``, runs each ``tool_use`` block
the model sends, answers them with ``tool_result`` blocks (``is_error`` when the tool raised)
and calls again until the model ends its turn. The model searches the customer's orders three
times with reworded queries (no rows each time), then tries to open a ticket six times,
rewording the summary after every timeout.

loopwatch is attached the README's way: ``loopwatch.instrument()`` (which also switches on the
installed Anthropic instrumentation, so the model calls' messages are on spans), the tools
declared with ``@loopwatch.tool`` and the turn marked with ``loopwatch.turn``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anthropic
import httpx2
from support_incident import ANSWER, QUESTION, SCRIPT, TIMEOUT, show_metrics

import loopwatch

MODEL = "claude-sonnet-4-5"


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
TOOL_DEFINITIONS: list[Any] = [
    {
        "name": name,
        "description": TOOLS[name].__doc__,
        "input_schema": {
            "type": "object",
            "properties": {p: {"type": "string"} for p in params},
            "required": params,
        },
    }
    for name, params in PARAMETERS.items()
]


def scripted_model(request: httpx2.Request) -> httpx2.Response:
    """The Messages API as it answers: SCRIPT's calls one per response, then ANSWER."""
    step = sum(m["role"] == "assistant" for m in json.loads(request.content)["messages"])
    if step < len(SCRIPT):
        name, arguments = SCRIPT[step]
        block = {"type": "tool_use", "id": f"toolu_{step:02d}", "name": name, "input": arguments}
        content, stop = [block], "tool_use"
    else:
        content, stop = [{"type": "text", "text": ANSWER}], "end_turn"
    body = {
        "id": f"msg_{step:02d}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }
    return httpx2.Response(200, json=body)


def run_tool(block: Any) -> dict[str, Any]:
    """The ``tool_result`` block for one ``tool_use`` block."""
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.id}
    try:
        result["content"] = json.dumps(TOOLS[block.name](**block.input))
    except Exception as e:
        result["content"], result["is_error"] = f"Error: {type(e).__name__}: {e}", True
    return result


def answer(client: anthropic.Anthropic, question: str) -> str:
    """The hand-rolled agent loop: one user turn."""
    messages: list[Any] = [{"role": "user", "content": question}]
    while True:
        response = client.messages.create(
            model=MODEL, max_tokens=1024, messages=messages, tools=TOOL_DEFINITIONS
        )
        messages.append({"role": "assistant", "content": response.content})
        if response.stop_reason != "tool_use":
            return "".join(block.text for block in response.content if block.type == "text")
        calls = [block for block in response.content if block.type == "tool_use"]
        messages.append({"role": "user", "content": [run_tool(block) for block in calls]})


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    processor = loopwatch.instrument()
    http = httpx2.Client(transport=httpx2.MockTransport(scripted_model))
    client = anthropic.Anthropic(api_key="offline", http_client=http)
    with loopwatch.turn(agent="support"):
        text = answer(client, QUESTION)
    print(f"agent: {text}")
    show_metrics(processor)


if __name__ == "__main__":
    main()
