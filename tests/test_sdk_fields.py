"""The processor reads SDK spans from their private fields only where a check against the
installed SDK says they give what the public API gives; otherwise through the public API, with
one warning. Either way the metrics are the same."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.exposition import generate_latest

from loopwatch import LoopwatchSpanProcessor
from loopwatch.attach import read_fields
from loopwatch.attach.read_api import PUBLIC, SpanReader
from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.emit import CONVENTIONS, emit_turn
from loopwatch.demo.scenarios import eleven_empty_searches, fourteen_tickets
from testkit.golden import GOLDEN, in_process, normalize
from testkit.streams import STREAMS, provider
from tests.support.helpers import S

DECLARED = Config(tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))})


def _incidents(span_reader: SpanReader | None = None) -> str:
    """The exposition of both incidents in every convention, declared and not."""
    out = []
    for config in (DECLARED, Config()):
        registry = CollectorRegistry()
        processor = LoopwatchSpanProcessor(
            config=config, registry=registry, span_reader=span_reader
        )
        p = provider(5, processor)
        tracer, t = p.get_tracer("test"), 1000 * S
        for convention in CONVENTIONS:
            t = emit_turn(tracer, fourteen_tickets(), t, convention)
            t = emit_turn(tracer, eleven_empty_searches(), t, convention)
        p.shutdown()
        out.append(normalize(generate_latest(registry).decode()))
    return "".join(out)


def test_the_installed_sdk_is_read_from_its_fields() -> None:
    assert read_fields.mismatch() is None
    processor = LoopwatchSpanProcessor(config=Config(), registry=CollectorRegistry())
    assert processor.span_reader is read_fields.FAST
    processor.shutdown()


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_the_public_api_exports_the_golden_metrics(name: str) -> None:
    got = in_process(name, PUBLIC)
    assert got.splitlines() == (GOLDEN / f"{name}-processor.txt").read_text().splitlines()


def test_the_public_api_counts_the_incidents_as_the_fields_do() -> None:
    fields = _incidents()
    assert "loopwatch_turns_total" in fields
    public = _incidents(PUBLIC)
    assert public.splitlines() == fields.splitlines()


def test_a_renamed_field_fails_the_check_once_and_the_public_api_counts(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As if an SDK release renamed ReadableSpan._context (the field reader reads what FIELDS
    says): the check fails at the first processor, one warning says so, and every processor
    reads through the public API."""
    fields = _incidents()
    monkeypatch.setitem(read_fields.FIELDS, "context", "_span_context")
    monkeypatch.setattr(read_fields, "_checked", None)  # as in a new process
    with caplog.at_level(logging.WARNING, logger="loopwatch"):
        got = in_process("mix")
        public = _incidents()
    warnings = [r for r in caplog.records if r.name.startswith("loopwatch")]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    assert "_span_context" in warnings[0].getMessage()
    assert "public ReadableSpan API" in warnings[0].getMessage()
    assert read_fields.span_reader() is PUBLIC
    assert got.splitlines() == (GOLDEN / "mix-processor.txt").read_text().splitlines()
    assert public.splitlines() == fields.splitlines()


def test_the_field_reader_reads_what_fields_lists() -> None:
    """The check looks up FIELDS: the field reader must read nothing private beyond it (read from
    the module's source, which both builds ship)."""
    listed = {name for path in read_fields.FIELDS.values() for name in path.split(".")}
    source = Path(read_fields.__file__).parent / "read_fields.py"
    helpers = (
        read_fields._readable,
        read_fields.start_fields,
        read_fields.end_fields,
        read_fields.kept_start,
        read_fields.start_may_be_turn,
        read_fields.resource_field,
    )
    readers = {f.__name__ for f in (*read_fields.FAST, *helpers, read_fields.view_fields)}
    read = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name in readers:
            for n in ast.walk(node):
                if isinstance(n, ast.Attribute):
                    read.add(n.attr)
                elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                    read.add(n.value)
                elif isinstance(n, ast.Name):
                    read.add(n.id)
            readers.discard(node.name)
    assert not readers  # every reader found
    assert {n for n in read if n.startswith("_") and n not in vars(read_fields)} == listed


def test_a_check_that_cannot_run_falls_back_without_raising(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        def __init__(self, **_: object) -> None:
            raise RuntimeError("no TracerProvider here")

    # the probe's provider: what the check needs first
    monkeypatch.setattr(read_fields, "TracerProvider", Broken)
    monkeypatch.setattr(read_fields, "_checked", None)
    with caplog.at_level(logging.WARNING, logger="loopwatch"):
        processor = LoopwatchSpanProcessor(config=Config(), registry=CollectorRegistry())
    processor.shutdown()
    assert processor.span_reader is PUBLIC
    warnings = [r for r in caplog.records if r.name.startswith("loopwatch")]
    assert [r.levelno for r in warnings] == [logging.WARNING]
    assert "no TracerProvider here" in warnings[0].getMessage()


@pytest.mark.parametrize("public", [False, True], ids=["fields", "public"])
def test_names_that_are_not_text_are_read_as_text(public: bool) -> None:
    """The SDK stores whatever name the caller passed; a span named 12345 or None is still
    read, its tool call counted, not dropped as an internal error."""
    registry = CollectorRegistry()
    reader = PUBLIC if public else None
    processor = LoopwatchSpanProcessor(config=Config(), registry=registry, span_reader=reader)
    p = provider(5, processor)
    tracer = p.get_tracer("test")
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
    with (
        tracer.start_as_current_span(12345),  # type: ignore[arg-type]
        tracer.start_as_current_span(None, attributes=tool) as span,  # type: ignore[arg-type]
    ):
        span.add_event(7)  # type: ignore[arg-type]
    p.shutdown()
    exposition = generate_latest(registry).decode()
    assert 'loopwatch_spans_dropped_total{reason="error"} 0.0' in exposition
    calls = 'loopwatch_tool_calls_total{agent="unknown",error_class="ok",model="unknown",'
    assert calls + 'service="bench-agent",tool="t"} 1.0' in exposition
    assert 'loopwatch_turns_total{agent="unknown",model="unknown",service="bench-agent"} 1.0' in (
        exposition
    )
