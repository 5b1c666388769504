"""What loopwatch says on its own: every self-health series at 0 from the start, one INFO line
per loop, `loopwatch serve`'s config line and periodic summary, `loopwatch --version`."""

from __future__ import annotations

import argparse
import logging
import re
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from prometheus_client import CollectorRegistry, generate_latest

from loopwatch import compiled
from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.summary import TurnSummary
from loopwatch.demo.emit import emit_turn
from loopwatch.demo.scenarios import eleven_empty_searches, fourteen_tickets
from loopwatch.metrics.exporter import LoopwatchMetrics
from loopwatch.service.activity import Activity
from loopwatch.service.run import add_arguments
from loopwatch.version import VERSION
from testkit.serve_process import ServeProcess
from tests.support.helpers import Pipeline, S

TICKETS = Config(tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))})


def test_every_self_health_series_is_there_at_zero_before_any_span() -> None:
    registry = CollectorRegistry()
    LoopwatchMetrics(registry)
    text = generate_latest(registry).decode()
    expected = [
        *(f'loopwatch_spans_total{{kind="{k}"}} 0.0' for k in ("tool", "agent", "llm", "other")),
        *(
            f'loopwatch_spans_dropped_total{{reason="{r}"}} 0.0'
            for r in ("queue_full", "turn_full", "error", "invalid_id")
        ),
        *(
            f'loopwatch_turns_evicted_total{{reason="{r}"}} 0.0'
            for r in ("idle", "capacity", "shutdown")
        ),
        *(
            f'loopwatch_label_overflow_total{{label="{label}"}} 0.0'
            for label in ("service", "agent", "model", "tool", "tool_version")
        ),
        "loopwatch_late_spans_total 0.0",
        "loopwatch_open_turns 0.0",
        f'loopwatch_build_info{{version="{VERSION}"}} 1.0',
    ]
    lines = set(text.splitlines())
    assert [e for e in expected if e not in lines] == []


def test_one_info_line_per_loop_with_hashes_and_trace_id_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="loopwatch")
    p = Pipeline(TICKETS)
    t = emit_turn(p.tracer, fourteen_tickets(), 10 * S)
    emit_turn(p.tracer, eleven_empty_searches(), t)
    p.flush()
    lines = [r.getMessage() for r in caplog.records if "loop found" in r.getMessage()]
    assert len(lines) == 2, lines
    tickets, searches = lines
    assert len(set(re.findall(r"trace_id=([0-9a-f]{32})", "".join(lines)))) == 2  # one per turn
    assert re.fullmatch(
        r"loop found: tool=create_ticket key=create_ticket/[0-9a-f]{8}/timeout "
        r"attempts=14 service=\S+ agent=support trace_id=[0-9a-f]{32}",
        tickets,
    ), tickets
    assert re.fullmatch(
        r"loop found: tool=search_orders no_rows_streak=11 service=\S+ "
        r"agent=support trace_id=[0-9a-f]{32}",
        searches,
    ), searches
    p.close()


def test_activity_line_counts_since_the_last_and_is_silent_when_idle() -> None:
    p = Pipeline(TICKETS)
    metrics = p.processor.sink
    assert isinstance(metrics, LoopwatchMetrics)
    activity = Activity(metrics)
    assert activity.line() is None  # nothing arrived
    t = emit_turn(p.tracer, fourteen_tickets(), 10 * S)
    emit_turn(p.tracer, eleven_empty_searches(), t)
    p.flush()
    spans = p.value("loopwatch_spans_total")
    assert activity.line() == f"{int(spans)} spans, 2 turns, 2 loops since the last summary"
    assert activity.line() is None  # idle again: silent
    # a turn counted after its spans (the service finalizes it after a grace)
    metrics.turn(TurnSummary(1, "svc", "agent", "model", 0, 0, 0, None, ()))
    assert activity.line() == "0 spans, 1 turn, 0 loops since the last summary"
    p.close()


def test_serve_logs_its_config_loops_and_a_summary_while_spans_flow(
    serve: Callable[..., ServeProcess],
) -> None:
    process = serve(
        '[serve]\ngrace_seconds = 0.0\n\n[tools.create_ticket]\nidentity = ["order_id"]\n',
        ("--summary-seconds", "0.2"),
        log_level="debug",
    )
    assert process.config is not None
    line = process.wait_line(r"config: ")
    assert line.endswith(f"config: {process.config.resolve()} (1 tool declaration)")
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=process.grpc, insecure=True))
    )
    emit_turn(provider.get_tracer("t"), fourteen_tickets(), 10 * S)
    provider.shutdown()
    # the spans and their turn may be summarized in two lines, either side of the loop line
    loop, totals = None, [0, 0, 0]
    deadline = time.monotonic() + 30
    while (loop is None or totals[1] < 1) and time.monotonic() < deadline:
        line = process.wait_line("loop found: |since the last summary")
        if "loop found: " in line:
            loop = line
        else:
            counts = re.search(r"INFO loopwatch: (\d+) spans?, (\d+) turns?, (\d+) loops?", line)
            assert counts is not None, line
            totals = [a + int(b) for a, b in zip(totals, counts.groups(), strict=True)]
    assert loop is not None and "tool=create_ticket" in loop and "attempts=14" in loop
    assert " INFO loopwatch: loop found: tool=create_ticket " in loop  # the name once
    assert totals[1:] == [1, 1] and totals[0] > 14
    # silence is only seen by watching for a while: five intervals with nothing arriving
    time.sleep(1.0)
    assert [q for q in process.unread() if "summary" in q] == []


def test_version_and_log_level_in_any_case() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "loopwatch.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # and which build runs (this process and the child share the environment that decides)
    assert (out.returncode, out.stdout) == (0, f"loopwatch {VERSION} ({compiled.describe()})\n")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    for level in ("warning", "Error", "DEBUG"):
        assert parser.parse_args(["--log-level", level]).log_level == level.upper()


def test_an_unknown_log_level_is_echoed_as_given_with_the_levels(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = argparse.ArgumentParser(prog="loopwatch serve")
    add_arguments(parser)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--log-level", "verbose"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "loopwatch serve: error: argument --log-level: 'verbose' is not a log level; "
        "choose from DEBUG, INFO, WARNING, ERROR"
    )
