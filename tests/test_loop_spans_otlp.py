"""``serve --export-otlp`` and ``replay --export-otlp``: the loop spans reach a real OTLP/gRPC
receiver on loopback, in the agent's trace, under its root, and read back change no number."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwatch.demo.scenarios import five_bookings, fourteen_tickets
from loopwatch.service.otlp import hex_ids_json
from testkit.serve_process import ServeProcess, wait_for
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.service import post, request_for

NO_GRACE = "[serve]\ngrace_seconds = 0\n"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver()
    yield r
    r.close()


def _attributes(key_values: Any) -> dict[str, Any]:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in key_values}


def _agent(request: Any) -> tuple[bytes, bytes, list[bytes]]:
    """The agent's trace id, its root's span id, the create_ticket calls' span ids in order."""
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    calls = sorted(
        (s for s in spans if s.name == "execute_tool create_ticket"),
        key=lambda s: s.start_time_unix_nano,
    )
    (root,) = [s for s in spans if not s.parent_span_id and s.trace_id == calls[0].trace_id]
    return root.trace_id, root.span_id, [c.span_id for c in calls]


def _check_seed_loop(received: list[tuple[Any, Any, Any]], request: Any) -> Any:
    trace_id, root_id, call_ids = _agent(request)
    loops = [(r, sc, s) for r, sc, s in received if s.name == "loopwatch.loop create_ticket"]
    assert len(loops) == 1
    resource, scope, span = loops[0]
    assert scope.name == "loopwatch.loop"
    assert _attributes(resource.attributes)["service.name"] == "support-agent"
    assert span.trace_id == trace_id
    assert span.parent_span_id == root_id
    assert [link.span_id for link in span.links] == call_ids
    assert all(link.trace_id == trace_id for link in span.links)
    attributes = _attributes(span.attributes)
    assert attributes["gen_ai.tool.name"] == "create_ticket"
    assert attributes["error.type"] == "timeout"
    assert attributes["loopwatch.loop.kind"] == "repeat"
    assert attributes["loopwatch.loop.attempts"] == 14
    assert attributes["loopwatch.loop.guard_stopped"] is False
    return span


def _loop_request(received: list[tuple[Any, Any, Any]]) -> Any:
    """The loop spans received, as one OTLP request again (to send them back)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    for resource, scope, span in received:
        rs = request.resource_spans.add()
        rs.resource.CopyFrom(resource)
        ss = rs.scope_spans.add()
        ss.scope.CopyFrom(scope)
        ss.spans.add().CopyFrom(span)
    return request


def _numbers(serve: ServeProcess) -> dict[str, float]:
    """Every series of a scrape by its whole line, but the clocks', the HTTP front end's and
    the queue gauge's (thread timing)."""
    out = {}
    for line in serve.scrape().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        series, value = line.rsplit(" ", 1)
        volatile = ("_created", "http", "first_seen", "process_", "queue_spans")
        if not any(part in series for part in volatile):
            out[series] = float(value)
    return out


def test_serve_sends_the_loop_span_to_an_otlp_endpoint(receiver: OtlpReceiver) -> None:
    request = request_for(fourteen_tickets(), five_bookings())
    with ServeProcess(NO_GRACE, ("--export-otlp", receiver.endpoint)) as serve:
        status, _, _ = post(serve.http, request.SerializeToString())
        assert status == 200
        received = receiver.wait_spans(2)
        span = _check_seed_loop(received, request)
        (booking,) = [s for _, _, s in received if s.name == "loopwatch.loop book_meeting"]
        assert _attributes(booking.attributes)["loopwatch.loop.kind"] == "duplicate"
        assert len(receiver.spans()) == 2
        # read back, loopwatch's own spans change no number
        before = _numbers(serve)
        tickets = (
            'loopwatch_loops_total{agent="support",error_class="timeout",kind="repeat",'
            'model="gpt-4.1",service="support-agent",tool="create_ticket"}'
        )
        assert before[tickets] == 1
        status, _, _ = post(serve.http, _loop_request(received).SerializeToString())
        assert status == 200
        status, _, _ = post(serve.http, request_for(five_bookings()).SerializeToString())
        assert status == 200  # a later turn: once it is counted, the loop spans were read
        office = 'loopwatch_turns_total{agent="office",model="gpt-4.1",service="support-agent"}'
        wait_for(lambda: _numbers(serve).get(office) == 2, 30, "the second bookings turn")
        after = _numbers(serve)
        changed = {k for k in after if after[k] != before.get(k)}
        assert all("office" in k or "book_meeting" in k or "spans_total" in k for k in changed)
        spans_read = {
            k: after[k] - before[k] for k in changed if k.startswith("loopwatch_spans_total")
        }
        # the second bookings turn's own spans only (5 tools, 6 model calls, 1 agent span)
        assert spans_read == {
            'loopwatch_spans_total{kind="tool"}': 5,
            'loopwatch_spans_total{kind="llm"}': 6,
            'loopwatch_spans_total{kind="agent"}': 1,
        }
        assert after["loopwatch_late_spans_total"] == 0
    assert span.span_id  # the export went on while serve ran


def test_replay_sends_the_same_loop_span(receiver: OtlpReceiver, tmp_path: Path) -> None:
    request = request_for(fourteen_tickets())
    stored = tmp_path / "incident.json"
    stored.write_bytes(hex_ids_json(request) + b"\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "loopwatch.cli",
            "replay",
            str(stored),
            "--export-otlp",
            receiver.endpoint,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"loop spans to {receiver.endpoint}: all sent" in done.stderr
    received = receiver.wait_spans(1)
    span = _check_seed_loop(received, request)
    # what serve sends for the same trace: the same span, the same span id
    with ServeProcess(NO_GRACE, ("--export-otlp", receiver.endpoint)) as serve:
        assert post(serve.http, request.SerializeToString())[0] == 200
        received = receiver.wait_spans(2)
    first, second = (s for _, _, s in received)
    assert first == second == span


def test_serve_sends_the_log_events_when_switched_on(receiver: OtlpReceiver) -> None:
    request = request_for(fourteen_tickets())
    toml = NO_GRACE + "\n[loop_spans]\nevents = 1\n"
    with ServeProcess(toml, ("--export-otlp", receiver.endpoint)) as serve:
        assert post(serve.http, request.SerializeToString())[0] == 200
        span = _check_seed_loop(receiver.wait_spans(1), request)
        wait_for(lambda: receiver.log_records(), 30, "the loop event")
    (event,) = receiver.log_records()
    assert event.event_name == "loopwatch.loop"
    assert event.trace_id == span.trace_id
    assert event.span_id == span.span_id
    assert _attributes(event.attributes) == _attributes(span.attributes)


def _summary_with_one_loop() -> Any:
    from loopwatch.core.loop_marks import LoopMark
    from loopwatch.core.summary import TurnSummary

    mark = LoopMark(
        "create_ticket", "repeat", "timeout", 3, "00ff", (11, 12, 13), 20, 40, (2, 5, 6, 0), False
    )
    return TurnSummary(0xABC, "support-agent", "support", "gpt-4.1", 0, 50, 3, None, (), 7, (mark,))


def test_loop_spans_the_endpoint_does_not_take_are_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from loopwatch.loopspans.export import LoopExport
    from testkit.serve_process import free_port

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")  # one second, then it gives up
    lost: dict[str, int] = {}

    def dropped(reason: str, count: int) -> None:
        lost[reason] = lost.get(reason, 0) + count

    export = LoopExport(f"http://127.0.0.1:{free_port()}", dropped)  # nothing listens there
    try:
        export(_summary_with_one_loop())
        assert export.flush(30)
        assert lost == {"export_failed": 1}
    finally:
        export.shutdown(5)


def test_a_full_queue_counts_what_it_does_not_take(receiver: OtlpReceiver) -> None:
    from loopwatch.loopspans.export import LoopExport

    lost: dict[str, int] = {}

    def dropped(reason: str, count: int) -> None:
        lost[reason] = lost.get(reason, 0) + count

    export = LoopExport(receiver.endpoint, dropped, max_queue=0)
    try:
        export(_summary_with_one_loop())
        assert lost == {"export_failed": 1}
    finally:
        export.shutdown(5)
    assert receiver.spans() == []
