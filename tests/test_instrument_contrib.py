"""instrument() switches on OpenTelemetry's own GenAI instrumentors too, one instrumentor per
library: never a second one for a library that already has one (every model call would be
recorded twice)."""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import textwrap
from collections.abc import Collection, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

# (the module opens with a file-wide ``# type: ignore``: mypy sees none of its names)
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from loopwatch.attach import frameworks as gi
from tests.support.attach_process import last_json
from tests.support.helpers import venv_python

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

# -- the rule, with stand-in instrumentors ---------------------------------------------------


class _Fake(BaseInstrumentor):
    library = "openai"
    fail = False

    def instrumentation_dependencies(self) -> Collection[str]:
        return (f"{self.library} >= 1.0",)

    def _instrument(self, **kwargs: Any) -> None:
        if self.fail:
            raise RuntimeError("cannot patch")

    def _uninstrument(self, **kwargs: Any) -> None:
        pass


class OpenInferenceOpenAI(_Fake):
    pass


class OpenLLMetryOpenAI(_Fake):
    pass


class OtelGenAIOpenAI(_Fake):
    pass


class OtelGenAIAnthropic(_Fake):
    library = "Anthropic"  # names are compared normalized


FAKES = [OpenInferenceOpenAI, OpenLLMetryOpenAI, OtelGenAIOpenAI, OtelGenAIAnthropic]


def _entry_point(cls: type[_Fake]) -> metadata.EntryPoint:
    return metadata.EntryPoint(cls.library.lower(), f"{__name__}:{cls.__name__}", "test")


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[type[_Fake]]]:
    """The stand-ins as the installed instrumentors, in the order of preference."""
    # imported: instrument_frameworks decides for it now, with the stand-in below, and leaves
    # no hook to switch the real one on when a later test imports it
    import pydantic_ai  # noqa: F401

    monkeypatch.setattr(gi, "genai_entry_points", lambda: [_entry_point(c) for c in FAKES])
    monkeypatch.setattr(gi, "_instrument_pydantic_ai", lambda provider: False)
    monkeypatch.delenv(CAPTURE, raising=False)
    # (the MCP client, installed here, would be wrapped for the rest of the test process)
    monkeypatch.setenv("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "mcp")
    yield FAKES
    for cls in FAKES:
        cls.fail = False
        if cls().is_instrumented_by_opentelemetry:
            cls().uninstrument()


def _on(classes: list[type[_Fake]]) -> list[str]:
    return [c.__name__ for c in classes if c().is_instrumented_by_opentelemetry]


def test_the_first_in_order_of_preference_gets_the_library(
    fakes: list[type[_Fake]], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="loopwatch"):
        assert gi.instrument_frameworks(None) == ["openai", "anthropic"]
    assert _on(fakes) == ["OpenInferenceOpenAI", "OtelGenAIAnthropic"]
    assert f"not switching on {__name__}:OpenLLMetryOpenAI: openai already instrumented by " in (
        caplog.text
    )
    # a second call switches on nothing, and nothing twice
    assert gi.instrument_frameworks(None) == []
    assert _on(fakes) == ["OpenInferenceOpenAI", "OtelGenAIAnthropic"]


def test_what_is_on_already_keeps_its_library(fakes: list[type[_Fake]]) -> None:
    OtelGenAIOpenAI().instrument()  # the application's choice
    assert gi.instrument_frameworks(None) == ["anthropic"]
    assert _on(fakes) == ["OtelGenAIOpenAI", "OtelGenAIAnthropic"]


def test_a_failing_instrumentor_leaves_its_library_to_the_next(
    fakes: list[type[_Fake]], caplog: pytest.LogCaptureFixture
) -> None:
    OpenInferenceOpenAI.fail = True
    assert gi.instrument_frameworks(None) == ["openai", "anthropic"]
    assert _on(fakes) == ["OpenLLMetryOpenAI", "OtelGenAIAnthropic"]
    assert "could not switch on instrumentor" in caplog.text


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.usefixtures("fakes")
def test_with_nothing_to_trace_openai_one_warning_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A hand-rolled loop over the openai SDK with no instrumentor installed would send no
    span at all: instead of silence, one warning naming what to install."""
    assert importlib.util.find_spec("openai") is not None  # installed here, as in such an agent
    monkeypatch.setattr(gi, "genai_entry_points", lambda: [])
    assert gi.instrument_frameworks(None) == []
    (warning,) = _warnings(caplog)
    assert "openai SDK traces none of its calls" in warning
    assert "pip install openinference-instrumentation-openai" in warning
    caplog.clear()  # unless the user switched openai's instrumentation off on purpose
    monkeypatch.setenv("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "mcp,openai")
    gi.instrument_frameworks(None)
    assert _warnings(caplog) == []


def test_no_warning_where_an_instrumentor_or_framework_traces(
    fakes: list[type[_Fake]], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    gi.instrument_frameworks(None)
    gi.instrument_frameworks(None)  # everything on already: switches on nothing, still traced
    monkeypatch.setattr(gi, "genai_entry_points", lambda: [])
    monkeypatch.setattr(gi, "_instrument_pydantic_ai", lambda provider: True)
    assert gi.instrument_frameworks(None) == ["pydantic_ai"]
    assert _warnings(caplog) == []


def test_the_installed_families_come_in_order_of_preference() -> None:
    order = ["openinference", "openllmetry", "otel-genai"]
    families = []
    for ep in gi.genai_entry_points():
        if ep.group == "openinference_instrumentor":
            families.append("openinference")
        elif gi._is_openllmetry(ep):
            families.append("openllmetry")
        else:
            assert gi._is_otel_genai(ep), ep
            families.append("otel-genai")
    assert families == sorted(families, key=order.index)


# -- the real instrumentors, each run in a process of its own ----------------------------------

MODEL_CALL = """
    import json, logging, os
    logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s %(message)s")
    for name in ("httpx", "httpx2", "httpcore", "openai", "urllib3", "asyncio"):
        logging.getLogger(name).setLevel(logging.WARNING)
    import httpx2, openai
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    import loopwatch

    TOOL_CALL = {"id": "call_1", "type": "function",
                 "function": {"name": "search_orders", "arguments": '{"query": "boots"}'}}

    def answer(request):
        return httpx2.Response(200, json={
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4.1",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}})

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if os.environ.get("PRESET"):
        import importlib
        module, _, name = os.environ["PRESET"].partition(":")
        getattr(importlib.import_module(module), name)().instrument(tracer_provider=provider)
    loopwatch.instrument(tracer_provider=provider, serve=False)
    loopwatch.instrument(tracer_provider=provider, serve=False)
    client = openai.OpenAI(api_key="sk-offline", max_retries=0,
                           http_client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "Where is my refund?"}])
    spans = exporter.get_finished_spans()
    print(json.dumps({
        "capture": os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"),
        "opt_in": os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN"),
        "model_spans": [s.instrumentation_scope.name for s in spans],
        "names": [s.name for s in spans],
        "output": [s.attributes.get("gen_ai.output.messages") for s in spans],
    }))
    """


def run(tmp_path: Path, env: dict[str, str], venv: str | None = None) -> Any:
    """``MODEL_CALL`` in a fresh process (no OTEL_* or LOOPWATCH_* setting but ``env``)."""
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(MODEL_CALL))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPWATCH_"))}
    return subprocess.run(
        [venv_python(venv), str(script)],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


def _require(*distributions: str) -> None:
    for name in distributions:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            pytest.skip(f"{name} is not installed")


@pytest.mark.slow
@pytest.mark.frameworks
@pytest.mark.parametrize("setting", [None, "NO_CONTENT"])
def test_openai_v2_is_switched_on_once_with_content_on_spans(
    tmp_path: Path, setting: str | None
) -> None:
    """In a venv with openai and opentelemetry-instrumentation-openai-v2 and no other
    instrumentation of openai."""
    env = {CAPTURE: setting} if setting else {}
    out = run(tmp_path, env, ".venv-openai-v2")
    result = last_json(out)
    # one span for the one call: the second instrument() did not patch openai again
    assert result["model_spans"] == ["opentelemetry.util.genai.handler"]
    assert out.stderr.count("switched on GenAI instrumentation: openai") == 1, out.stderr
    assert "switched on opentelemetry.instrumentation.openai_v2:OpenAIInstrumentor" in out.stderr
    assert result["opt_in"] is None  # not needed: its releases always write the latest
    outputs = result["output"]
    assert isinstance(outputs, list)
    [output] = outputs
    if setting is None:
        assert result["capture"] == "SPAN_ONLY"
        assert '"tool_call"' in output and '"search_orders"' in output
    else:
        assert result["capture"] == "NO_CONTENT"  # the user's setting stands
        assert output is None


@pytest.mark.slow
@pytest.mark.frameworks
@pytest.mark.parametrize(
    ("preset", "scope"),
    [
        (None, "openinference.instrumentation.openai"),
        (
            "opentelemetry.instrumentation.genai.openai:OpenAIInstrumentor",
            "opentelemetry.instrumentation.genai.openai",
        ),
        (
            "opentelemetry.instrumentation.openai:OpenAIInstrumentor",
            "opentelemetry.instrumentation.openai.v1",
        ),
    ],
)
def test_three_installed_openai_instrumentors_record_each_call_once(
    tmp_path: Path, preset: str | None, scope: str
) -> None:
    """OpenInference, OpenLLMetry and OpenTelemetry's instrumentor of openai all installed: the
    one the application switched on, else OpenInference's, and only that one."""
    _require(
        "openinference-instrumentation-openai",
        "opentelemetry-instrumentation-openai",
        "opentelemetry-instrumentation-genai-openai",
    )
    # the frameworks' instrumentors are beside the point here, and slow to load
    env = {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai_agents,langchain,anthropic"}
    out = run(tmp_path, env | ({"PRESET": preset} if preset else {}))
    assert last_json(out)["model_spans"] == [scope], out.stderr
    assert out.stderr.count(": openai already instrumented by ") == 4, out.stderr  # 2 calls
