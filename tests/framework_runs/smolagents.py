"""smolagents (1.26.0) under OpenInference (openinference-instrumentation-smolagents 0.1.43), a
scripted ``Model`` driving a ``ToolCallingAgent`` (several calls in one message run in
parallel).

A ToolCallingAgent can only end its run by calling its ``final_answer`` tool, so every turn has
one ``final_answer`` call more than the scenario's (counted, not hidden). A tool's exception is
logged in the agent's memory for the model and recorded on the TOOL span as an exception."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from tests.framework_runs.common import ANSWER, PROVIDER, TIMEOUT_MESSAGE, script


def setup() -> None:
    import sys

    from loopwatch.attach.frameworks import instrument_frameworks

    # what loopwatch.instrument() switches on, before the application imports the framework:
    # its import (in drive) switches OpenInference's instrumentor on
    instrument_frameworks(PROVIDER)
    if any(m.split(".")[0] == "smolagents" for m in sys.modules):
        raise AssertionError("instrument() imported smolagents")


def drive(scenario: str) -> None:
    from smolagents import Tool, ToolCallingAgent
    from smolagents.models import (
        ChatMessage,
        ChatMessageToolCall,
        ChatMessageToolCallFunction,
        MessageRole,
        Model,
    )

    steps = [*script(scenario), [("final_answer", {"answer": ANSWER})]]

    class ScriptedModel(Model):
        def __init__(self) -> None:
            super().__init__(model_id="scripted-v1")
            self.step = 0

        def generate(self, messages: Any, *args: Any, **kwargs: Any) -> ChatMessage:
            i, self.step = self.step, self.step + 1
            calls = [
                ChatMessageToolCall(
                    id=f"call_{i}_{j}",
                    type="function",
                    function=ChatMessageToolCallFunction(name=name, arguments=json.dumps(args)),
                )
                for j, (name, args) in enumerate(steps[min(i, len(steps) - 1)])
            ]
            return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=calls)

    class CreateTicket(Tool):
        name = "create_ticket"
        description = "Open a support ticket for an order."
        inputs: ClassVar[dict[str, dict[str, str]]] = {
            "customer_id": {"type": "string", "description": "customer"},
            "order_id": {"type": "string", "description": "order"},
            "summary": {"type": "string", "description": "what happened"},
        }
        output_type = "string"

        def forward(self, customer_id: str, order_id: str, summary: str) -> str:
            raise TimeoutError(TIMEOUT_MESSAGE)

    class SearchOrders(Tool):
        name = "search_orders"
        description = "Search the customer's orders."
        inputs: ClassVar[dict[str, dict[str, str]]] = {
            "query": {"type": "string", "description": "search text"}
        }
        output_type = "array"

        def forward(self, query: str) -> list[dict[str, str]]:
            return []

    class RefundOrder(Tool):
        name = "refund_order"
        description = "Refund one order."
        inputs: ClassVar[dict[str, dict[str, str]]] = {
            "order_id": {"type": "string", "description": "order"}
        }
        output_type = "object"

        def forward(self, order_id: str) -> dict[str, str]:
            return {"order_id": order_id, "status": "refunded"}

    agent = ToolCallingAgent(
        tools=[CreateTicket(), SearchOrders(), RefundOrder()],
        model=ScriptedModel(),
        name="support",
        max_steps=20,
        verbosity_level=0,
    )
    agent.run("Where is my refund?")
