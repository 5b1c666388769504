"""Plain traces in ``loopwatch serve``: a trace with no agent, model or tool span is let go once
its root has come, without waiting for the grace, and is never an open turn; its spans are
still counted. A GenAI span that comes in a later request, under plain spans sent before it
(its root before or after it), makes its turn with the same numbers as the whole trace sent at
once."""

from __future__ import annotations

import random
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from loopwatch.conventions import read_span
from loopwatch.core.assembler import TurnAssembler
from loopwatch.core.config import Config
from loopwatch.core.span_view import SpanView
from loopwatch.demo.scenarios import fourteen_tickets
from loopwatch.service.app import Service
from loopwatch.service.otlp import span_views
from testkit.serve_process import wait_for
from tests.support.service import DECLARED, post, request_for, running, snapshot, value
from tests.support.sinks import CountingSink

WEB = "storefront"
AGENT = "support-agent"


def plain_requests(traces: int, queries: int) -> tuple[Any, Any]:
    """Plain HTTP traces, as a web app's exporter sends them: a server span with database
    calls under it. Two requests: every database span first, then the server spans (the roots,
    which end last)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": WEB}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("web")
    for i in range(traces):
        with tracer.start_as_current_span(
            "GET /orders/{id}",
            kind=SpanKind.SERVER,
            attributes={"http.request.method": "GET", "http.route": "/orders/{id}"},
        ):
            for _ in range(queries):
                with tracer.start_as_current_span(
                    "SELECT orders",
                    kind=SpanKind.CLIENT,
                    attributes={"db.system": "postgresql", "db.statement": f"SELECT {i}"},
                ):
                    pass
    provider.shutdown()
    spans = list(memory.get_finished_spans())
    children = [s for s in spans if s.parent is not None]
    roots = [s for s in spans if s.parent is None]
    return encode_spans(children), encode_spans(roots)


def post_request(service: Service, request: ExportTraceServiceRequest) -> None:
    assert service.bound is not None
    status, _, _ = post(service.bound.http, request.SerializeToString())
    assert status == 200
    assert service.pipeline is not None and service.pipeline.flush(10)


def test_plain_traces_are_let_go_at_their_root_and_their_spans_counted() -> None:
    # a grace of a minute: the plain traces end without it
    with running(Config(grace_seconds=60.0)) as service:
        for _ in range(3):
            children, roots = plain_requests(traces=100, queries=4)
            post_request(service, children)  # roots not in yet: kept, but no open turn
            assert value(service.registry, "loopwatch_open_turns") == 0
            post_request(service, roots)
            assert value(service.registry, "loopwatch_open_turns") == 0
        assert value(service.registry, "loopwatch_spans_total", kind="other") == 1500
        assert value(service.registry, "loopwatch_spans_total") == 1500
        assert value(service.registry, "loopwatch_turns_total") == 0
        assert value(service.registry, "loopwatch_spans_dropped_total") == 0
        assert value(service.registry, "loopwatch_late_spans_total") == 0


def test_a_plain_trace_holds_no_memory_once_its_root_has_come() -> None:
    assembler = TurnAssembler(Config(), CountingSink(), clock=lambda: 0.0)
    children, roots = plain_requests(traces=50, queries=3)
    for request in (children, roots):
        for span in span_views(request).spans:
            record = read_span(span, assembler.config)
            assembler.add(span.trace_id, span.service, record, root_finalizes=False)
        assert assembler.open_turns == 0
        assembler.publish()  # the request's end: kept until their roots come, then let go
        assert (assembler.buffered_bytes > 0) is (request is children)  # the request's end
    assert assembler.buffered_bytes == 0
    assert assembler.pending_roots() == []


# -- a GenAI span after its plain ancestors -------------------------------------------------------


def _id(value: int, size: int) -> bytes:
    return value.to_bytes(size, "big")


def _plain_span(template: Any, span_id: int, parent_id: int | None, name: str) -> Any:
    """A plain span of the agent's trace (an HTTP server span, a gateway's), copied from the
    agent span's trace and times."""
    span = type(template)()
    span.trace_id = template.trace_id
    span.span_id = _id(span_id, 8)
    if parent_id is not None:
        span.parent_span_id = _id(parent_id, 8)
    span.name = name
    span.start_time_unix_nano = template.start_time_unix_nano - 1_000
    span.end_time_unix_nano = template.end_time_unix_nano + 1_000
    attribute = span.attributes.add()
    attribute.key = "http.request.method"
    attribute.value.string_value = "POST"
    return span


def ticket_trace_under_plain_spans() -> tuple[ExportTraceServiceRequest, list[Any]]:
    """The fourteen tickets' spans with their agent span under a plain span under a plain
    root, and those two plain spans: the agent's request, and the plain spans apart."""
    request = request_for(fourteen_tickets())
    scope = request.resource_spans[0].scope_spans[0]
    agent = next(s for s in scope.spans if not s.parent_span_id)
    root = _plain_span(agent, 0xA1, None, "POST /support")
    handler = _plain_span(agent, 0xA2, 0xA1, "handle support request")
    agent.parent_span_id = _id(0xA2, 8)
    return request, [handler, root]


def _with_spans(like: ExportTraceServiceRequest, spans: list[Any]) -> ExportTraceServiceRequest:
    """A request of ``spans`` from the same service as ``like``'s."""
    out = ExportTraceServiceRequest()
    out.CopyFrom(like)
    scope = out.resource_spans[0].scope_spans[0]
    del scope.spans[:]
    scope.spans.extend(spans)
    return out


def _turn_numbers(sends: list[ExportTraceServiceRequest], grace: float) -> dict[Any, float]:
    config = Config(tools=DECLARED, grace_seconds=grace)
    with running(config) as service:
        for request in sends:
            post_request(service, request)
        wait_for(lambda: value(service.registry, "loopwatch_turns_total") == 1, 10)
        wait_for(lambda: value(service.registry, "loopwatch_open_turns") == 0, 10)
        return snapshot(service.registry)


def _total(numbers: dict[Any, float], name: str) -> float:
    return sum(v for (n, _), v in numbers.items() if n == name)


def test_a_genai_span_after_its_plain_parent_makes_its_turn_exactly() -> None:
    agent_request, (handler, root) = ticket_trace_under_plain_spans()
    spans = list(agent_request.resource_spans[0].scope_spans[0].spans)
    whole = _with_spans(agent_request, [*spans, handler, root])
    expected = _turn_numbers([whole], grace=0.0)
    labels = (("agent", "support"), ("model", "gpt-4.1"), ("service", AGENT))
    assert expected[("loopwatch_turns_total", labels)] == 1
    assert expected[("loopwatch_turn_max_attempts_sum", labels)] == 14
    assert _total(expected, "loopwatch_turns_total") == 1
    assert _total(expected, "loopwatch_turns_evicted_total") == 0
    assert _total(expected, "loopwatch_spans_total") == len(spans) + 2

    rng = random.Random(3)
    shuffled = spans[:]
    rng.shuffle(shuffled)
    # the plain parent first, then the agent's spans in two requests, shuffled, then the root
    parent_first = [
        _with_spans(agent_request, [handler]),
        _with_spans(agent_request, shuffled[:10]),
        _with_spans(agent_request, shuffled[10:]),
        _with_spans(agent_request, [root]),
    ]
    assert _turn_numbers(parent_first, grace=0.0) == expected
    # the plain root and its child first: let go, then the agent's spans (another service's
    # exporter) come within the grace of that root, which still ends their turn
    root_first = [
        _with_spans(agent_request, [handler, root]),
        _with_spans(agent_request, spans),
    ]
    assert _turn_numbers(root_first, grace=1.0) == expected


def test_plain_spans_in_the_request_of_their_genai_spans_stay_in_the_trace() -> None:
    """The root first in the request, its GenAI spans after it: the trace is the agent's."""
    agent_request, (handler, root) = ticket_trace_under_plain_spans()
    spans = list(agent_request.resource_spans[0].scope_spans[0].spans)
    expected = _turn_numbers([_with_spans(agent_request, [*spans, handler, root])], grace=0.0)
    assert _turn_numbers([_with_spans(agent_request, [root, handler, *spans])], 0.0) == expected


def test_a_plain_span_after_its_root_was_let_go_waits_out_that_roots_grace() -> None:
    """A plain span of another service after the plain root was let go: held, as no open turn,
    until a grace after that root (a GenAI span of a third service may yet hang under it), then
    let go with nothing left."""
    now = [0.0]
    assembler = TurnAssembler(Config(), CountingSink(), clock=lambda: now[0])

    def add(span: SpanView) -> None:
        record = read_span(span, assembler.config)
        assembler.add(span.trace_id, span.service, record, root_finalizes=False)
        assembler.publish()

    add(SpanView(7, 1, None, "GET /", 0, 10, {"http.request.method": "GET"}, service=WEB))
    assert (assembler.buffered_bytes, assembler.pending_roots()) == (0, [])
    now[0] = 0.2
    add(SpanView(7, 2, 1, "GET /stock", 1, 9, {"http.request.method": "GET"}, service="stock"))
    assert (assembler.held_spans, assembler.open_turns) == (1, 0)
    assert assembler.pending_roots() == [(7, 0.0)]  # ends with the root's grace
    now[0] = 1.0
    assembler.finalize_rooted(0.5)  # the pipeline's deadline: now minus the grace
    assert (assembler.buffered_bytes, assembler.held_spans, assembler.open_turns) == (0, 0, 0)
    assert assembler.pending_roots() == []
