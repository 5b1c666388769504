"""AutoGen AgentChat (autogen-agentchat 0.7.5) under OpenInference
(openinference-instrumentation-autogen-agentchat 0.1.22) alone: an ``AssistantAgent`` over
autogen-ext's ``ReplayChatCompletionClient`` playing the script (several calls in one message
run concurrently). A tool's exception becomes a ``FunctionExecutionResult`` with ``is_error``
and the text "Error: ..." for the model."""

from __future__ import annotations

import asyncio
import json

from tests.framework_runs.common import ANSWER, PROVIDER, TIMEOUT_MESSAGE, script


def setup() -> None:
    from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor

    AutogenAgentChatInstrumentor().instrument(tracer_provider=PROVIDER)


async def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
    """Open a support ticket for an order."""
    raise TimeoutError(TIMEOUT_MESSAGE)


async def search_orders(query: str) -> list[dict[str, str]]:
    """Search the customer's orders."""
    return []


async def refund_order(order_id: str) -> dict[str, str]:
    """Refund one order."""
    return {"order_id": order_id, "status": "refunded"}


def drive(scenario: str) -> None:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, ModelFamily, ModelInfo, RequestUsage
    from autogen_ext.models.replay import ReplayChatCompletionClient

    steps = script(scenario)
    completions: list[str | CreateResult] = [
        CreateResult(
            finish_reason="function_calls",
            content=[
                FunctionCall(id=f"call_{i}_{j}", name=name, arguments=json.dumps(args))
                for j, (name, args) in enumerate(step)
            ],
            usage=RequestUsage(prompt_tokens=0, completion_tokens=0),
            cached=False,
        )
        for i, step in enumerate(steps)
    ]
    completions.append(ANSWER)
    info = ModelInfo(
        vision=False,
        function_calling=True,
        json_output=False,
        family=ModelFamily.UNKNOWN,
        structured_output=False,
    )
    agent = AssistantAgent(
        name="support",
        model_client=ReplayChatCompletionClient(completions, model_info=info),
        tools=[create_ticket, search_orders, refund_order],
        max_tool_iterations=len(steps) + 1,
    )
    asyncio.run(agent.run(task="Where is my refund?"))
