"""Strands Agents (strands-agents 1.62.0) with its native OpenTelemetry spans, a scripted
``Model`` that streams tool-use blocks (several in one message run concurrently)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from tests.framework_runs.common import ANSWER, TOOLS, install_global_provider, script


def setup() -> None:
    install_global_provider()  # its native spans go to the global provider


def _events(step: list[tuple[str, dict[str, Any]]], i: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"messageStart": {"role": "assistant"}}]
    for j, (name, args) in enumerate(step):
        start = {"toolUse": {"toolUseId": f"call_{i}_{j}", "name": name}}
        events += [
            {"contentBlockStart": {"start": start}},
            {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}},
            {"contentBlockStop": {}},
        ]
    events.append({"messageStop": {"stopReason": "tool_use"}})
    return events


def _answer() -> list[dict[str, Any]]:
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"delta": {"text": ANSWER}}},
        {"contentBlockStop": {}},
        {"messageStop": {"stopReason": "end_turn"}},
    ]


def drive(scenario: str) -> None:
    from strands import Agent, tool
    from strands.models import Model

    steps = script(scenario)

    class ScriptedModel(Model):
        def __init__(self) -> None:
            self.step = 0
            self.config: dict[str, Any] = {"model_id": "scripted-v1"}

        def update_config(self, **model_config: Any) -> None:
            self.config.update(model_config)

        def get_config(self) -> Any:
            return self.config

        async def structured_output(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError
            yield  # an async generator, as the interface wants

        async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            i, self.step = self.step, self.step + 1
            for event in _events(steps[i], i) if i < len(steps) else _answer():
                yield event

    agent = Agent(
        name="support",
        model=ScriptedModel(),
        tools=[tool(f) for f in TOOLS],
        callback_handler=None,
    )
    agent("Where is my refund?")
