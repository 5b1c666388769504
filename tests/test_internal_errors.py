"""An internal error is seen and counted, and the host goes on: a sink that raises on every turn
(the stage after the readers) is logged once at WARNING with its frames (never the exception's
message, which may quote a span's values), later ones at DEBUG, and every one is counted."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk.trace import TracerProvider

from loopwatch import Config, LoopwatchSpanProcessor, ToolDeclaration
from loopwatch.core.summary import TurnSummary
from loopwatch.demo.emit import emit_turn
from loopwatch.demo.scenarios import fourteen_tickets
from tests.support.helpers import S


class BrokenSink:
    """Counts what it is told; raises on every turn, quoting a value."""

    def __init__(self) -> None:
        self.dropped_reasons: list[str] = []
        self.spans = 0

    def turn(self, summary: TurnSummary) -> None:
        value = "".join(("c_", "40912"))  # a value the spans carried, not in the source
        raise KeyError(value)

    def span(self, kind: str, count: int = 1) -> None:
        self.spans += count

    def dropped(self, reason: str, count: int = 1) -> None:
        self.dropped_reasons.extend([reason] * count)

    def evicted(self, reason: str) -> None:
        pass

    def late(self) -> None:
        pass

    def malformed(self, reason: str, count: int = 1) -> None:
        pass

    def open_turns(self, count: int) -> None:
        pass


def test_an_internal_error_is_logged_once_per_kind_and_counted_every_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="loopwatch")
    sink = BrokenSink()
    declared = ToolDeclaration(identity=("customer_id", "order_id"))
    processor = LoopwatchSpanProcessor(config=Config(tools={"create_ticket": declared}), sink=sink)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    t = 1000 * S
    for _ in range(3):  # the host's own code runs on after each turn
        t = emit_turn(provider.get_tracer("host"), fourteen_tickets(), t)
    assert processor.force_flush(10_000)
    provider.shutdown()
    assert sink.dropped_reasons == ["error"] * 3
    warnings = [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and r.getMessage().startswith("internal error")
    ]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert text.startswith("internal error (publishing turns): KeyError, logged once for this kind")
    assert "in turn" in text and "test_internal_errors.py" in text  # the frames
    assert "c_40912" not in text  # never the message
    debug = [r for r in caplog.records if r.getMessage() == "internal error (publishing turns)"]
    assert len(debug) == 2
