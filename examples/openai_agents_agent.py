"""An OpenAI Agents SDK support agent that loops, watched by loopwatch. Offline: the model is
scripted, and no trace leaves the process.

    scripts/example openai_agents_agent    # installs what it needs into .venv first

The model searches the customer's orders three times with reworded queries (each returns no
rows), then tries to open a ticket six times, rewording the summary after every timeout.
loopwatch is attached the README's way: it switches on the installed OpenInference
instrumentor (openinference-instrumentation-openai-agents), which replaces the SDK's own trace
exporter. Nothing is declared (no loopwatch.toml).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from agents import Agent, Runner, Usage, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from support_incident import ANSWER, QUESTION, SCRIPT, TIMEOUT, show_metrics

import loopwatch


class ScriptedModel(Model):
    """Plays SCRIPT one tool call per model turn, then answers."""

    def __init__(self) -> None:
        self.step = 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        i, self.step = self.step, self.step + 1
        output: list[Any]
        if i < len(SCRIPT):
            name, arguments = SCRIPT[i]
            output = [
                ResponseFunctionToolCall(
                    type="function_call",
                    id=f"fc_{i}",
                    call_id=f"call_{i}",
                    name=name,
                    arguments=json.dumps(arguments),
                    status="completed",
                )
            ]
        else:
            text = ResponseOutputText(type="output_text", text=ANSWER, annotations=[])
            output = [
                ResponseOutputMessage(
                    type="message", id="msg", role="assistant", status="completed", content=[text]
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


def tell_the_model(ctx: Any, error: Exception) -> str:
    """What the model sees when a tool raises (the SDK's default hides the error class)."""
    return f"{type(error).__name__}: {error}"


@function_tool
def search_orders(query: str) -> list[dict[str, str]]:
    """Search the customer's orders."""
    return []


@function_tool(failure_error_function=tell_the_model)
def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
    """Open a support ticket for an order."""
    raise TimeoutError(TIMEOUT)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    processor = loopwatch.instrument()
    agent = Agent(name="support", model=ScriptedModel(), tools=[search_orders, create_ticket])
    result = asyncio.run(Runner.run(agent, QUESTION))
    print(f"agent: {result.final_output}")
    show_metrics(processor)


if __name__ == "__main__":
    main()
