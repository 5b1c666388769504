"""``loopwatch.instrument()`` imports no framework or SDK the application has not imported (in the
test venv, where every framework extra is installed), and one the application imports afterwards
is instrumented when it does, its loop counted exactly."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testkit.serve_process import free_port
from tests.support.attach_process import last_json

pytestmark = pytest.mark.frameworks

# what the application imports later; nothing of it, nor of its instrumentors, before
APP = """
    import json, logging, sys
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    import loopwatch
    from loopwatch.attach.frameworks import switched_on
    from loopwatch.attach.post_import import waiting

    before = set(sys.modules)
    loopwatch.instrument()
    added = sorted(set(sys.modules) - before)
    watched = waiting()
    frameworks = [m for m in added if any(m == w or m.startswith(w + ".") for w in watched)]
    instrumentors = [m for m in added if m.startswith("openinference.instrumentation.")
                     or (m.startswith("opentelemetry.instrumentation.")
                         and m != "opentelemetry.instrumentation.dependencies")]
    switched_at_start = switched_on()

    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    QUERIES = ["boots refund", "boots return refund status", "refund for returned boots"]

    def play(messages, info):
        step = sum(1 for m in messages if m.kind == "response")
        if step < len(QUERIES):
            return ModelResponse(parts=[ToolCallPart("search_orders", {"query": QUERIES[step]})])
        return ModelResponse(parts=[TextPart("Nothing found.")])

    agent = Agent(FunctionModel(play, model_name="scripted-v1"), name="support")

    @agent.tool_plain
    def search_orders(query: str) -> list:
        return []

    agent.run_sync("Where is my refund?")
    import openai
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from prometheus_client import REGISTRY
    from opentelemetry import trace

    trace.get_tracer_provider().force_flush()
    value = REGISTRY.get_sample_value
    labels = {"agent": "support", "model": "scripted-v1", "service": "unknown_service:python"}
    print(json.dumps({
        "watched": watched,
        "frameworks_imported": frameworks,
        "instrumentors_imported": instrumentors,
        "switched_at_start": switched_at_start,
        "switched": switched_on(),
        "openai_instrumented": OpenAIInstrumentor().is_instrumented_by_opentelemetry,
        "waiting_after": waiting(),
        "turns": value("loopwatch_turns_total", labels),
        "no_rows_streak": value("loopwatch_no_rows_streak_sum",
                                {**labels, "tool": "search_orders"}),
        "loops": value("loopwatch_loops_total", {**labels, "error_class": "ok",
                                                 "kind": "no_rows", "tool": "search_orders"}),
    }))
    """


def test_instrument_imports_no_framework_and_instruments_one_imported_later(
    tmp_path: Path,
) -> None:
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(APP), encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPWATCH_"))}
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**clean, "LOOPWATCH_METRICS_PORT": str(free_port())},
        capture_output=True,
        text=True,
        timeout=180,
    )
    result = last_json(out)
    # every framework and SDK of the test venv that has an instrumentation waits for its import
    assert result["watched"] == [
        "agents",
        "anthropic",
        "google.genai",
        "langchain_core",
        "mcp",
        "openai",
        "pydantic_ai",
    ]
    assert result["frameworks_imported"] == []
    assert result["instrumentors_imported"] == []
    assert result["switched_at_start"] == []
    # pydantic-ai, imported after instrument(), traced with content; its loop counted exactly
    assert result["turns"] == 1.0
    assert result["no_rows_streak"] == 3.0
    assert result["loops"] == 1.0
    # pydantic-ai imports none of the others; openai, imported last, got its instrumentor
    assert result["switched"] == ["pydantic_ai", "openai"]
    assert result["openai_instrumented"] is True
    assert "switched on GenAI instrumentation: pydantic_ai\n" in out.stderr
    assert "switched on GenAI instrumentation: openai\n" in out.stderr
    assert result["waiting_after"] == [
        "agents",
        "anthropic",
        "google.genai",
        "langchain_core",
        "mcp",
    ]
