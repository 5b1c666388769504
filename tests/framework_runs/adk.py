"""Google ADK (google-adk 2.13.0) with its native OpenTelemetry spans, a scripted BaseLlm.

The schema (current or legacy) and content capture come from the environment the test sets:
``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`` for the legacy format, and
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`` for arguments and results on
the current format's tool spans. A tool that raises ends an ADK run, so the timeouts turn runs
under ADK's ``ReflectAndRetryToolPlugin``, which hands the model the error as the result."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from tests.framework_runs.common import ANSWER, TOOLS, install_global_provider, script


def setup() -> None:
    install_global_provider()  # its native spans go to the global provider


def drive(scenario: str) -> None:
    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.adk.plugins import ReflectAndRetryToolPlugin
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    steps = script(scenario)

    class ScriptedLlm(BaseLlm):
        step: int = 0

        async def generate_content_async(
            self, llm_request: Any, stream: bool = False
        ) -> AsyncIterator[LlmResponse]:
            i, self.step = self.step, self.step + 1
            if i < len(steps):
                parts = [
                    types.Part(function_call=types.FunctionCall(id=f"call_{i}_{j}", name=n, args=a))
                    for j, (n, a) in enumerate(steps[i])
                ]
            else:
                parts = [types.Part(text=ANSWER)]
            yield LlmResponse(content=types.Content(role="model", parts=parts))

    agent = LlmAgent(
        name="support",
        model=ScriptedLlm(model="scripted-v1"),
        tools=list(TOOLS),
    )
    retry = ReflectAndRetryToolPlugin(max_retries=10, throw_exception_if_retry_exceeded=False)
    runner = InMemoryRunner(agent=agent, app_name="support", plugins=[retry])

    async def run() -> None:
        session = await runner.session_service.create_session(app_name="support", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="Where is my refund?")])
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass

    asyncio.run(run())
