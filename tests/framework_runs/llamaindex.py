"""LlamaIndex (llama-index-core 0.14.25) under OpenInference
(openinference-instrumentation-llama-index 4.6.1): a ``FunctionAgent`` over a scripted
``MockFunctionCallingLLM`` (several calls in one message run in parallel).

The TOOL spans' result is LlamaIndex's own ``ToolOutput`` (``blocks``, ``tool_name``,
``raw_input``, ``raw_output``, ``is_error``); a tool's exception becomes a ToolOutput with
``is_error`` and the text "Encountered error: ..." handed to the model."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.framework_runs.common import ANSWER, PROVIDER, TOOLS, script


def setup() -> None:
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    LlamaIndexInstrumentor().instrument(tracer_provider=PROVIDER)


def drive(scenario: str) -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import (
        ChatMessage,
        LLMMetadata,
        MessageRole,
        ToolCallBlock,
    )
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import FunctionTool

    steps = script(scenario)
    played = [0]

    def respond(messages: Any, **kwargs: Any) -> ChatMessage:
        i = played[0]
        played[0] += 1
        if i >= len(steps):
            return ChatMessage(role=MessageRole.ASSISTANT, content=ANSWER)
        blocks: list[Any] = [
            ToolCallBlock(tool_call_id=f"call_{i}_{j}", tool_name=name, tool_kwargs=args)
            for j, (name, args) in enumerate(steps[i])
        ]
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)

    class ScriptedLlm(MockFunctionCallingLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(
                is_function_calling_model=True, is_chat_model=True, model_name="scripted-v1"
            )

    agent = FunctionAgent(
        name="support",
        description="Answers the customer",
        tools=[FunctionTool.from_defaults(f) for f in TOOLS],
        llm=ScriptedLlm(response_generator=respond, is_chat_model=True),
    )

    async def run() -> None:
        await agent.run("Where is my refund?", max_iterations=40)

    asyncio.run(run())
