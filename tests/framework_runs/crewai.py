"""CrewAI (crewai 1.15.30) under OpenInference (openinference-instrumentation-crewai 1.1.21),
a scripted ``BaseLLM`` that answers with native tool calls (CrewAI runs a message's several
calls in parallel).

What it gives: ``<tool>.run`` TOOL spans with the arguments (``input.value``), the result and,
for a raised exception, status ERROR with its ``exception`` event; the task's AGENT span
``<role>._execute_core`` carries ``graph.node.id`` = the role. No LLM span names the model."""

from __future__ import annotations

import json
import os
from typing import Any

from tests.framework_runs.common import ANSWER, PROVIDER, TOOLS, script


def setup() -> None:
    os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"  # CrewAI's own usage telemetry: off
    os.environ["CREWAI_TRACING_ENABLED"] = "false"
    from openinference.instrumentation.crewai import CrewAIInstrumentor

    CrewAIInstrumentor().instrument(tracer_provider=PROVIDER)


def drive(scenario: str) -> None:
    from crewai import Agent, Crew, Task
    from crewai.llms.base_llm import BaseLLM
    from crewai.tools import tool

    steps = script(scenario)

    class ScriptedLlm(BaseLLM):
        step: int = 0

        def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            i, self.step = self.step, self.step + 1
            if i >= len(steps):
                return ANSWER
            return [
                {
                    "id": f"call_{i}_{j}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for j, (name, args) in enumerate(steps[i])
            ]

        def supports_function_calling(self) -> bool:
            return True

    agent = Agent(
        role="support",
        goal="Answer the customer",
        backstory="A support agent",
        llm=ScriptedLlm(model="scripted-v1"),
        tools=[tool(f.__name__)(f) for f in TOOLS],
        max_iter=20,
        verbose=False,
    )
    task = Task(description="Where is my refund?", expected_output="An answer", agent=agent)
    Crew(agents=[agent], tasks=[task], verbose=False).kickoff()
