"""Agno (agno 3.1.10) under OpenInference (openinference-instrumentation-agno 1.0.15): an
``Agent`` over a scripted ``Model`` whose responses carry OpenAI-style tool calls (several in
one message)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from tests.framework_runs.common import ANSWER, PROVIDER, TOOLS, script


def setup() -> None:
    from openinference.instrumentation.agno import AgnoInstrumentor

    AgnoInstrumentor().instrument(tracer_provider=PROVIDER)


def drive(scenario: str) -> None:
    from agno.agent import Agent
    from agno.models.base import Model
    from agno.models.response import ModelResponse

    steps = script(scenario)
    played = [0]

    def respond() -> ModelResponse:
        i = played[0]
        played[0] += 1
        if i >= len(steps):
            return ModelResponse(role="assistant", content=ANSWER)
        calls = [
            {
                "id": f"call_{i}_{j}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for j, (name, args) in enumerate(steps[i])
        ]
        return ModelResponse(role="assistant", tool_calls=calls)

    @dataclass
    class ScriptedModel(Model):
        id: str = "scripted-v1"
        name: str = "Scripted"
        provider: str = "scripted"

        def invoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return respond()

        async def ainvoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return respond()

        def invoke_stream(self, *args: Any, **kwargs: Any) -> Iterator[ModelResponse]:
            yield respond()

        async def ainvoke_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ModelResponse]:
            yield respond()

        def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
            parsed: ModelResponse = response  # respond()'s answer, passed back as it is
            return parsed

        def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
            parsed: ModelResponse = response
            return parsed

    agent = Agent(
        name="support",
        model=ScriptedModel(),
        tools=list(TOOLS),
        telemetry=False,
    )
    agent.run("Where is my refund?")
