"""Attaching in a fresh process, as a user's program does: instrument() with no provider set,
the exporters OTEL_* asks for, the frameworks switched on (and the ways to keep them off), a
busy metrics port, and the zero-code path (opentelemetry-instrument)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testkit.serve_process import free_port
from tests.support.attach_process import BIN, last_json

pytestmark = pytest.mark.frameworks


def run_python(
    code: str, tmp_path: Path, env: dict[str, str] | None = None, *prefix: str
) -> subprocess.CompletedProcess[str]:
    """``code`` as a script in a fresh process, in an empty directory (no loopwatch.toml), with
    no OTEL_* or LOOPWATCH_* setting but those given."""
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(code))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPWATCH_"))}
    return subprocess.run(
        [*prefix, sys.executable, str(script)],
        cwd=tmp_path,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
    )


def warnings_in(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("WARNING")]


LOGGING = "logging.basicConfig(level=logging.INFO)"  # as the README writes it


@pytest.mark.slow
def test_instrument_sets_an_sdk_provider_with_the_requested_exporter_and_the_frameworks(
    tmp_path: Path,
) -> None:
    out = run_python(
        f"""
        import json, logging
        {LOGGING}
        from opentelemetry import trace
        from openinference.instrumentation.langchain import LangChainInstrumentor
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
        from pydantic_ai import Agent
        import loopwatch

        processor = loopwatch.instrument()
        provider = trace.get_tracer_provider()
        with provider.get_tracer("probe").start_as_current_span("probe-span"):
            pass
        provider.force_flush()
        # not imported yet: switched on when the application imports them
        before = [OpenAIAgentsInstrumentor().is_instrumented_by_opentelemetry,
                  LangChainInstrumentor().is_instrumented_by_opentelemetry]
        import agents
        import langgraph.graph
        settings = Agent._instrument_default
        print(json.dumps({{
            "provider": type(provider).__module__ + "." + type(provider).__name__,
            "pydantic_ai_content": getattr(settings, "include_content", None),
            "before_import": before,
            "openai_agents": OpenAIAgentsInstrumentor().is_instrumented_by_opentelemetry,
            "langchain": LangChainInstrumentor().is_instrumented_by_opentelemetry,
        }}))
        """,
        tmp_path,
        {"OTEL_TRACES_EXPORTER": "console", "LOOPWATCH_METRICS_PORT": str(free_port())},
    )
    result = last_json(out)
    assert result == {
        "provider": "opentelemetry.sdk.trace.TracerProvider",
        "pydantic_ai_content": True,
        "before_import": [False, False],
        "openai_agents": True,
        "langchain": True,
    }
    assert '"name": "probe-span"' in out.stdout  # the console exporter OTEL_* asked for
    assert "INFO:loopwatch.attach.instrument:config none, defaults" in out.stderr
    assert "exporters: console" in out.stderr
    assert "switched on GenAI instrumentation: pydantic_ai\n" in out.stderr
    assert "switched on GenAI instrumentation: openai_agents\n" in out.stderr
    assert "switched on GenAI instrumentation: langchain\n" in out.stderr
    assert warnings_in(out.stderr) == []


def test_a_missing_exporter_and_a_busy_port_are_warnings_and_loopwatch_still_counts(
    tmp_path: Path,
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = run_python(
            f"""
            import json, logging
            {LOGGING}
            from opentelemetry import trace
            from prometheus_client import REGISTRY
            from loopwatch.demo.emit import emit_turn
            from loopwatch.demo.scenarios import eleven_empty_searches
            import loopwatch

            processor = loopwatch.instrument()
            emit_turn(trace.get_tracer("app"), eleven_empty_searches(), 10**18)
            processor.force_flush()
            value = REGISTRY.get_sample_value
            print(json.dumps({{
                "turns": sum(m.samples[0].value for m in REGISTRY.collect()
                             if m.name == "loopwatch_turns" and m.samples),
                "tool_spans": value("loopwatch_spans_total", {{"kind": "tool"}}),
            }}))
            """,
            tmp_path,
            {
                "OTEL_TRACES_EXPORTER": "zipkin",
                "LOOPWATCH_METRICS_PORT": str(port),
                "LOOPWATCH_INSTRUMENT_FRAMEWORKS": "0",  # not needed here; saves seconds
            },
        )
    assert last_json(out) == {"turns": 1.0, "tool_spans": 11.0}
    # the undeclared search_orders gets a warning of its own
    warnings = [w for w in warnings_in(out.stderr) if "has no identity declaration" not in w]
    assert len(warnings) == 2, out.stderr
    assert "'zipkin'" in warnings[0] and "pip install opentelemetry-exporter-zipkin" in warnings[0]
    assert f"cannot serve /metrics on 127.0.0.1:{port}" in warnings[1]
    assert "LOOPWATCH_METRICS_PORT" in warnings[1] and "attached and counting" in warnings[1]


@pytest.mark.slow
def test_frameworks_opt_out_and_what_is_already_on_is_left_alone(tmp_path: Path) -> None:
    code = f"""
        import json, logging, os
        {LOGGING}
        from opentelemetry.sdk.trace import TracerProvider
        from openinference.instrumentation.langchain import LangChainInstrumentor
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
        from pydantic_ai import Agent
        from pydantic_ai.models.instrumented import InstrumentationSettings
        import loopwatch

        mine = InstrumentationSettings(include_content=False)
        if os.environ.get("PRESET"):
            Agent.instrument_all(mine)
            LangChainInstrumentor().instrument(tracer_provider=TracerProvider())
        loopwatch.instrument(serve=False)
        print(json.dumps({{
            "pydantic_ai_untouched": Agent._instrument_default in (False, mine),
            "openai_agents": OpenAIAgentsInstrumentor().is_instrumented_by_opentelemetry,
            "langchain": LangChainInstrumentor().is_instrumented_by_opentelemetry,
        }}))
        """
    off = run_python(code, tmp_path, {"LOOPWATCH_INSTRUMENT_FRAMEWORKS": "false"})
    assert last_json(off) == {
        "pydantic_ai_untouched": True,
        "openai_agents": False,
        "langchain": False,
    }
    assert "switched on" not in off.stderr
    # already on (pydantic-ai's settings, the langchain instrumentor) stays as the app set it;
    # a name in OTEL_PYTHON_DISABLED_INSTRUMENTATIONS stays off (the model SDKs' instrumentors
    # and MCP's, installed beside the frameworks too: this run is about the frameworks)
    disabled = "openai_agents,openai,anthropic,google_genai,google-genai,google_generativeai,mcp"
    preset = run_python(
        code, tmp_path, {"PRESET": "1", "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": disabled}
    )
    assert last_json(preset) == {
        "pydantic_ai_untouched": True,
        "openai_agents": False,
        "langchain": True,
    }
    assert "switched on" not in preset.stderr, preset.stderr
    assert warnings_in(preset.stderr) == []


PYDANTIC_AGENT = """
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
"""


@pytest.mark.slow
def test_zero_code_path_switches_the_framework_on(tmp_path: Path) -> None:
    """opentelemetry-instrument, a pydantic-ai agent, no line of loopwatch in the app."""
    port = free_port()
    out = run_python(
        PYDANTIC_AGENT
        + f"""
    import urllib.request
    from opentelemetry import trace
    trace.get_tracer_provider().force_flush()
    body = urllib.request.urlopen("http://127.0.0.1:{port}/metrics").read().decode()
    print("\\n".join(l for l in body.splitlines() if l.startswith("loopwatch_loops_total")))
    """,
        tmp_path,
        {
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_SERVICE_NAME": "zero-code",
            # the other frameworks' instrumentors are not needed here; importing them is slow
            "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "langchain,openai_agents",
            "LOOPWATCH_METRICS_PORT": str(port),
        },
        str(BIN / "opentelemetry-instrument"),
    )
    assert out.returncode == 0, out.stderr
    assert (
        'loopwatch_loops_total{agent="support",error_class="ok",kind="no_rows",'
        'model="scripted-v1",service="zero-code",tool="search_orders"} 1.0'
    ) in out.stdout, out.stdout + out.stderr


@pytest.mark.slow
def test_zero_code_path_honours_disabled_instrumentations(tmp_path: Path) -> None:
    out = run_python(
        """
        import json
        from opentelemetry import trace
        from prometheus_client import REGISTRY, generate_latest
        provider = trace.get_tracer_provider()
        processors = provider._active_span_processor._span_processors
        print(json.dumps({
            "attached": any(type(p).__name__ == "LoopwatchSpanProcessor" for p in processors),
            "metrics": "loopwatch_build_info" in generate_latest(REGISTRY).decode(),
        }))
        """,
        tmp_path,
        {
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "langchain, openai_agents, loopwatch",
            "LOOPWATCH_METRICS_PORT": str(free_port()),
        },
        str(BIN / "opentelemetry-instrument"),
    )
    assert last_json(out) == {"attached": False, "metrics": False}
