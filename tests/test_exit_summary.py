"""A program that ends in the middle of a loop still shows it: at exit, in-process loopwatch
counts the turns still open and logs the loop and its summary line at INFO (the program's
/metrics are gone with it). A hand-rolled loop over the real openai SDK, traced by the
instrumentation ``instrument()`` switches on, run as a program with
``logging.basicConfig(level=logging.INFO)``."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testkit.serve_process import free_port

pytestmark = pytest.mark.frameworks

# four reworded tickets for one order, each timing out; the program gives up before the model
# answers, so the turn is still open when it exits
APP = """
import json
import logging

logging.basicConfig(level=logging.INFO)

import os

if os.environ.get("OWN_PROVIDER"):  # one that does not shut its processors down at exit
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider(shutdown_on_exit=False))

import loopwatch

loopwatch.instrument()

import httpx2
import openai

SUMMARIES = [
    "Customer has not received refund for returned boots",
    "Refund not received for returned boots - customer following up",
    "Missing refund on order 88214 (returned boots), customer awaiting resolution",
    "Follow-up: refund for returned boots still outstanding",
]
TOOLS = [{"type": "function", "function": {
    "name": "create_ticket", "description": "Open a support ticket for an order.",
    "parameters": {"type": "object", "properties": {
        "customer_id": {"type": "string"}, "order_id": {"type": "string"},
        "summary": {"type": "string"}}}}}]


@loopwatch.tool(identity=["customer_id", "order_id"])
def create_ticket(customer_id: str, order_id: str, summary: str) -> dict:
    raise TimeoutError("ticket service did not answer")


asked = 0


def model(request):
    # a scripted model: each answer asks for one more ticket, reworded
    global asked
    call = {"id": f"call_{asked}", "type": "function", "function": {
        "name": "create_ticket", "arguments": json.dumps({
            "customer_id": "c_40912", "order_id": "88214", "summary": SUMMARIES[asked]})}}
    asked += 1
    return httpx2.Response(200, json={
        "id": f"chatcmpl-{asked}", "object": "chat.completion", "created": 1, "model": "gpt-4.1",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [call]}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}})


client = openai.OpenAI(api_key="sk-offline", max_retries=0,
                       http_client=httpx2.Client(transport=httpx2.MockTransport(model)))
messages = [{"role": "user", "content": "Where is my refund?"}]
for _ in SUMMARIES:  # the program ends in the middle of the loop: no answer, the turn still open
    message = client.chat.completions.create(
        model="gpt-4.1", messages=messages, tools=TOOLS).choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls:
        try:
            result = json.dumps(create_ticket(**json.loads(call.function.arguments)))
        except TimeoutError as e:
            result = f"Error: TimeoutError: {e}"
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
print("gave up")
"""

TRACE = "[0-9a-f]{32}"
KEY = "create_ticket/22562c0f/timeout"


@pytest.mark.parametrize(
    "own_provider", ["", "1"], ids=["set-by-instrument", "shutdown_on_exit-off"]
)
def test_at_exit_the_open_turn_is_counted_and_the_summary_logged(
    tmp_path: Path, own_provider: str
) -> None:
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(APP), encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPWATCH_"))}
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**clean, "LOOPWATCH_METRICS_PORT": str(free_port()), "OWN_PROVIDER": own_provider},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert (out.returncode, out.stdout) == (0, "gave up\n"), out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("INFO:loopwatch.")]
    loop, summary = lines[-2:]
    assert re.fullmatch(
        f"INFO:loopwatch.core.loop_log:loop found: tool=create_ticket key={KEY} attempts=4 "
        f"service=unknown_service:python agent=unknown trace_id={TRACE}",
        loop,
    ), loop
    assert re.fullmatch(
        f"INFO:loopwatch.attach.processor:shut down: 1 turn, 1 loop; worst key {KEY} at 4 attempts "
        f"\\(service=unknown_service:python agent=unknown trace_id={TRACE}\\)",
        summary,
    ), summary
    assert loop[-32:] == summary[-33:-1]  # the same turn
    # once, though both the SDK's provider (unless told not to) and instrument() shut the
    # processor down at exit
    assert sum("shut down:" in line for line in lines) == 1
    # hashes only: no argument value in any of loopwatch's lines
    assert not [line for line in lines if "boots" in line or "c_40912" in line]


def test_a_processor_that_saw_nothing_says_so_at_shutdown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from prometheus_client import CollectorRegistry

    from loopwatch import LoopwatchSpanProcessor

    processor = LoopwatchSpanProcessor(registry=CollectorRegistry())
    with caplog.at_level(logging.INFO, logger="loopwatch"):
        processor.shutdown()
        processor.shutdown()
    assert [r.getMessage() for r in caplog.records] == ["shut down: 0 turns, 0 loops"]
