"""A pydantic-ai support agent that loops, watched by loopwatch. Offline: the model is scripted.

    scripts/example pydantic_ai_agent    # installs what it needs into .venv first

The model searches the customer's orders three times with reworded queries (each returns no
rows), then tries to open a ticket six times, rewording the summary after every timeout.
loopwatch is attached the README's way; nothing is declared (no loopwatch.toml).
"""

from __future__ import annotations

import logging

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from support_incident import ANSWER, QUESTION, SCRIPT, TIMEOUT, show_metrics

import loopwatch


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Plays SCRIPT one tool call per step, then answers."""
    step = sum(1 for m in messages if m.kind == "response")
    if step < len(SCRIPT):
        name, args = SCRIPT[step]
        return ModelResponse(parts=[ToolCallPart(name, args)])
    return ModelResponse(parts=[TextPart(ANSWER)])


agent = Agent(
    FunctionModel(scripted_model, model_name="scripted-v1"),
    name="support",
    retries=len(SCRIPT),
    tool_timeout=30,  # a TimeoutError from a tool goes back to the model as a retry
)


@agent.tool_plain
def search_orders(query: str) -> list[dict[str, str]]:
    """Search the customer's orders."""
    return []


@agent.tool_plain
def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
    """Open a support ticket for an order."""
    raise TimeoutError(TIMEOUT)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    processor = loopwatch.instrument()
    answer = agent.run_sync(QUESTION).output
    print(f"agent: {answer}")
    show_metrics(processor)


if __name__ == "__main__":
    main()
