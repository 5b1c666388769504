"""``loopwatch serve`` under load: throughput against a decode-only baseline, and a soak.

    .venv/bin/python benchmarks/bench_service.py rate [--copies 20] [--rounds 3] [--out DIR]
                                                      [--baseline REV]
    .venv/bin/python benchmarks/bench_service.py views [--baseline REV] [--rounds 3]
    .venv/bin/python benchmarks/bench_service.py throughput [--turns 3000] [--rounds 3]
    .venv/bin/python benchmarks/bench_service.py soak [--seconds 180] [--rate 40] [--out DIR]

rate: the realistic stream of streams.py (spans with 15-30 attributes, as instrumentations write
them; web spans beside the agents), encoded once into OTLP requests of 512 spans, copied with
fresh trace ids and fresh values where real spans differ (ids, messages, token counts, queries),
and sent pre-encoded from two driver processes (two connections each) over gRPC and over HTTP,
so the figure is the service's, not the driver's:
- service-grpc / service-http: into ``loopwatch serve`` (a process), timed from the start until
  it has finished with every span (:func:`until_finished`: ``loopwatch_spans_total`` at the
  number sent, its queue empty and ``loopwatch_open_turns`` 0, every turn finalized);
- service-http-json: the same requests as OTLP/JSON (hex ids) over HTTP, as OpenTelemetry JS's
  HTTP exporter sends them;
- null-grpc: the same drivers into a gRPC server that only decodes and counts (the drivers' own
  ceiling: it must sit far above the service's figure);
- exporter: the same stream through the Python OTLP gRPC exporter (one driver process), which
  is what a Python agent or a benchmark with the SDK would see (its stream is streams.py as
  recorded: its values repeat more than real ones, which the service's attribute cache favours).
``--stream plain``: plain web traffic alone instead of the mix (an HTTP span with a database
span under it, no GenAI span), as many spans as the mix's; no exporter row. ``--transports``:
the service rows to run (default all: grpc, http, http-json, exporter).
``--baseline REV``: the service rows again (``baseline-*``) with loopwatch as of a git revision,
or from a directory (an import root: another checkout's ``src``, or its compiled build's
``build/compiled``), interleaved in the same rounds, and the ratios per CPU-second. This
checkout is the one on PYTHONPATH (``build/compiled`` first for the compiled build).

views: decoding and building the span views (``parse_protobuf`` + ``span_views``), and the
service's whole core (those, then the pipeline: read, assemble, summarize, metrics; ``/core``),
CPU per span in process, without transport, on the fresh copies of ``rate`` and on the stream
as recorded (its values repeat); each code (this checkout, ``--baseline REV``) in its own
processes, interleaved rounds.

throughput: the same spans (seeded ids, so every process builds identical requests) go
- decode-only: ``ExportTraceServiceRequest.FromString`` over the encoded requests (the floor:
  what decoding alone costs), in this process;
- core-only: decode, OTLP -> span views, and the service's pipeline (read, assemble, summarize,
  metrics), in this process, no network: the service's CPU cost per span;
- null receiver: from a driver process through the real OTLP gRPC exporter into a gRPC server
  that only decodes and counts: what the exporter and transport alone allow;
- service: from the driver through the real OTLP gRPC exporter into ``loopwatch serve`` (a
  process), timed until it has finished with every span (as in rate).
Interleaved rounds, medians, and the ratios (the figures: the machine is shared and noisy).

soak: ``loopwatch serve`` fed at a steady rate of turns, a share of them never finishing (their
root span never ends, so the idle timeout and the open-turn bound must end them), recording the
service's RSS, open turns and counters every few seconds, and every export that failed.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import grpc
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.source_tree import export_package
from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.emit import CONVENTIONS, emit_turn
from loopwatch.metrics.exporter import LoopwatchMetrics
from loopwatch.service.grpc_server import SERVICE
from loopwatch.service.otlp import hex_ids_json, span_views
from loopwatch.service.pipeline import Pipeline
from testkit.results_dir import out_dir
from testkit.serve_process import ServeProcess
from testkit.streams import SeededIds, emit_plain, mixed_turn, realistic_requests, record

ROOT = Path(__file__).resolve().parent.parent
BATCH = 512  # BatchSpanProcessor's default export batch
TOML = """
[serve]
grace_seconds = {grace}

[limits]
queue_spans = 1000000
open_turns = {open_turns}
idle_timeout_seconds = {idle}

[tools.create_ticket]
identity = ["customer_id", "order_id"]
"""
CONFIG = Config(
    tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))},
    grace_seconds=0.5,
    queue_spans=10**7,
)


def make_spans(turns: int, seed: int) -> list[ReadableSpan]:
    rng = random.Random(seed)
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "bench-agent"}), id_generator=SeededIds(seed)
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    t = 1_700_000_000 * 10**9
    for i in range(turns):
        t = emit_turn(tracer, mixed_turn(rng, i), t, CONVENTIONS[i % 3]) + 10**6
    return list(memory.get_finished_spans())


def batches(spans: Sequence[ReadableSpan]) -> list[Sequence[ReadableSpan]]:
    return [spans[i : i + BATCH] for i in range(0, len(spans), BATCH)]


# -- pre-encoded requests from other processes ----------------------------------------------------
EXPORT_METHOD = f"/{SERVICE}/Export"
DRIVERS = 2
RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)
CONNECTIONS = 2


# What differs between real spans, fresh in every copy (so a copy costs the service what new
# spans would, not what repeated ones do): per span the ids and texts of one call, per trace
# those of one request or conversation; the rest (models, kinds, code location, routes, and
# the messages' roles: _SAME) repeats.
_PER_SPAN = (
    "gen_ai.response.id",
    "gen_ai.tool.call.id",
    "gen_ai.usage.",
    "llm.token_count.",
    "llm.usage.",
    "gen_ai.prompt.",
    "gen_ai.completion.",
    "llm.input_messages.",
    "llm.output_messages.",
    "logfire.msg",
    "db.query.text",
    "url.path",
)
_PER_TRACE = (
    "request.id",
    "gen_ai.conversation.id",
    "session.",
    "traceloop.association.properties.session_id",
    "client.address",
)


_SAME = (".role",)


def _freshen(span: Any, per_span: str, per_trace: str, number: int) -> None:
    for kv in span.attributes:
        if kv.key.endswith(_SAME):
            continue
        fresh = per_span if kv.key.startswith(_PER_SPAN) else None
        fresh = per_trace if kv.key.startswith(_PER_TRACE) else fresh
        if fresh is None:
            continue
        value = kv.value
        if value.WhichOneof("value") == "string_value":
            value.string_value += fresh
        elif value.WhichOneof("value") == "int_value":
            value.int_value += number


def copies(bodies: list[bytes], count: int, first: int) -> list[bytes]:
    """``count`` copies of the requests, each copy's traces under new trace ids, and the values
    that differ between real spans and traces fresh in each."""
    out = []
    number = 0
    for k in range(first, first + count):
        salt = (k + 1) << 64
        for body in bodies:
            request = ExportTraceServiceRequest.FromString(body)
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        trace_id = int.from_bytes(span.trace_id, "big") ^ salt
                        span.trace_id = trace_id.to_bytes(16, "big")
                        number += 1
                        _freshen(span, f"-{k}-{number}", f"-{trace_id:x}", number)
            out.append(request.SerializeToString())
    return out


def span_count(bodies: Sequence[bytes]) -> int:
    return sum(
        len(ss.spans)
        for body in bodies
        for rs in ExportTraceServiceRequest.FromString(body).resource_spans
        for ss in rs.scope_spans
    )


def _send_grpc(address: str, bodies: list[bytes]) -> int:
    retries = 0
    with grpc.insecure_channel(address) as channel:
        export = channel.unary_unary(EXPORT_METHOD)  # bytes in, bytes out: no re-encoding
        for body in bodies:
            while True:
                try:
                    export(body, timeout=60)
                    break
                except grpc.RpcError as e:
                    if e.code() not in RETRYABLE:
                        raise
                    retries += 1
                    time.sleep(0.05)
    return retries


def _send_http(address: str, bodies: list[bytes], content_type: str) -> int:
    import http.client

    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    retries = 0
    for body in bodies:
        while True:
            connection.request("POST", "/v1/traces", body, {"Content-Type": content_type})
            response = connection.getresponse()
            response.read()
            if response.status == 200:
                break
            if response.status not in (429, 502, 503, 504):
                raise SystemExit(f"HTTP {response.status}")
            retries += 1
            time.sleep(0.05)
    connection.close()
    return retries


SENDERS: dict[str, Callable[[str, list[bytes]], int]] = {
    "grpc": _send_grpc,
    "http": partial(_send_http, content_type="application/x-protobuf"),
    "http-json": partial(_send_http, content_type="application/json"),
}


def pre_drive(transport: str, address: str, path: str) -> None:
    data: list[bytes] = pickle.loads(Path(path).read_bytes())
    send = SENDERS[transport]
    parts = [data[i::CONNECTIONS] for i in range(CONNECTIONS)]
    print("ready", flush=True)
    sys.stdin.readline()  # "go"
    started = time.perf_counter()
    with ThreadPoolExecutor(CONNECTIONS) as pool:
        retries = sum(pool.map(lambda part: send(address, part), parts))
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "retries": retries}), flush=True)


@contextmanager
def pre_drivers(
    transport: str, address: str, shares: list[list[bytes]], tmp: str
) -> Iterator[list[subprocess.Popen[str]]]:
    processes = []
    for i, share in enumerate(shares):
        path = Path(tmp, f"share-{i}.pickle")
        path.write_bytes(pickle.dumps(share))
        processes.append(
            subprocess.Popen(
                [sys.executable, __file__, "pre-drive", transport, address, str(path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    for p in processes:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
    try:
        yield processes
    finally:
        for p in processes:
            p.wait(timeout=600)


def _cpu(served: Served) -> float:
    import psutil

    times = psutil.Process(served.process.pid).cpu_times()
    return float(times.user + times.system)


# past this after the last span is counted, a turn still open is a fault, not a slow finish
FINISH_TIMEOUT = 120.0


def until_finished(served: Served, sent: int, timeout: float = FINISH_TIMEOUT) -> None:
    """Wait until the service has finished with ``sent`` spans: every one counted
    (``loopwatch_spans_total``), none queued, and every turn finalized (``loopwatch_open_turns``
    0); the grace period is part of the work."""
    deadline = None
    while True:
        s = served.samples()
        counted = s.get("loopwatch_spans_total", 0) >= sent
        if counted and not s.get("loopwatch_queue_spans", 0) and not s.get("loopwatch_open_turns"):
            return
        if counted and deadline is None:
            deadline = time.monotonic() + timeout
        if deadline is not None and time.monotonic() > deadline:
            raise SystemExit(f"loopwatch serve did not finalize every turn in {timeout:g} s: {s}")
        time.sleep(0.25)  # a scrape takes the service's GIL: not too often


def pre_into_service(
    transport: str, shares: list[list[bytes]], sent: int, tmp: str, code: str | None = None
) -> tuple[float, float]:
    """(spans/s, spans per CPU-second of the service process); ``code``: loopwatch's source
    directory to serve from (default: this checkout)."""
    served = Served(TOML.format(grace=0.5, open_turns=10_000, idle=300), code)
    try:
        address = served.grpc if transport == "grpc" else served.http
        with pre_drivers(transport, address, shares, tmp) as ds:
            cpu = _cpu(served)
            started = min(go(d) for d in ds)
            for d in ds:
                result(d)
            until_finished(served, sent)
            seconds = time.perf_counter() - started
            cpu = _cpu(served) - cpu
        return sent / seconds, sent / cpu
    finally:
        served.stop()


def pre_into_null(shares: list[list[bytes]], sent: int, tmp: str) -> tuple[float, float]:
    receiver = NullReceiver()
    try:
        with pre_drivers("grpc", receiver.address, shares, tmp) as ds:
            started = min(go(d) for d in ds)
            for d in ds:
                result(d)
            while receiver.spans < sent:
                time.sleep(0.01)
            return sent / (time.perf_counter() - started), float("nan")  # in this process
    finally:
        receiver.server.stop(None)


def exporter_into_service(turns: int, code: str | None = None) -> tuple[float, float]:
    served = Served(TOML.format(grace=0.5, open_turns=10_000, idle=300), code)
    try:
        process = subprocess.Popen(
            [sys.executable, __file__, "drive", served.grpc, str(turns), "3", "realistic"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        cpu = _cpu(served)
        started = go(process)
        r = result(process)
        process.wait(timeout=60)
        until_finished(served, r["spans"])
        assert r["failures"] == 0, r
        seconds = time.perf_counter() - started
        return r["spans"] / seconds, r["spans"] / (_cpu(served) - cpu)
    finally:
        served.stop()


def baseline_code(revision: str, tmp: str) -> str:
    """loopwatch's import root: ``revision`` itself when it is a directory (another checkout's
    ``src``, a compiled build), else the source as of that git revision, extracted under
    ``tmp``."""
    if Path(revision).is_dir():
        return str(Path(revision).resolve())
    target = Path(tmp, "baseline")
    target.mkdir()
    return str(export_package(revision, target))


def plain_requests(spans: int) -> list[bytes]:
    """Plain web traffic of about ``spans`` spans (two a request: HTTP, database) as serialized
    OTLP requests of 512 spans each."""
    recorded = record(lambda t: emit_plain(t, spans // 2))
    return [
        encode_spans(recorded[i : i + BATCH]).SerializePartialToString()
        for i in range(0, len(recorded), BATCH)
    ]


def rate(args: argparse.Namespace) -> None:
    base = realistic_requests(args.turns, seed=1)
    if args.stream == "plain":  # as many spans as the mix's
        base = plain_requests(span_count(base))
    transports = set(args.transports.split(","))
    if args.stream == "plain":
        transports.discard("exporter")  # the exporter's driver sends the mix
    per_driver = max(1, args.copies // DRIVERS)
    shares = [copies(base, per_driver, first=i * per_driver) for i in range(DRIVERS)]
    sent = sum(span_count(share) for share in shares)
    # the same requests as OTLP/JSON (hex ids), as OpenTelemetry JS's HTTP exporter sends them
    json_shares = [
        [hex_ids_json(ExportTraceServiceRequest.FromString(body)) for body in share]
        for share in shares
    ]
    attrs = [
        len(span.attributes)
        for body in base
        for rs in ExportTraceServiceRequest.FromString(body).resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    ]
    print(
        f"{sent} spans in {sum(len(s) for s in shares)} requests from {DRIVERS} driver processes;"
        f" attributes per span: median {statistics.median(attrs)}, max {max(attrs)}",
        flush=True,
    )
    rows: dict[str, list[float]] = {}
    cpu_rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        codes: list[tuple[str, str | None]] = [("", None)]
        if args.baseline:
            codes.insert(0, ("baseline-", baseline_code(args.baseline, tmp)))
        for round_ in range(args.rounds):
            runs: list[tuple[str, Callable[[], tuple[float, float]]]] = [
                ("null-grpc", lambda: pre_into_null(shares, sent, tmp))
            ]
            for prefix, code in codes:
                runs += [
                    (name, run)
                    for name, run in [
                        (
                            f"{prefix}service-grpc",
                            partial(pre_into_service, "grpc", shares, sent, tmp, code),
                        ),
                        (
                            f"{prefix}service-http",
                            partial(pre_into_service, "http", shares, sent, tmp, code),
                        ),
                        (
                            f"{prefix}service-http-json",
                            partial(pre_into_service, "http-json", json_shares, sent, tmp, code),
                        ),
                        (
                            f"{prefix}exporter",
                            partial(exporter_into_service, args.exporter_turns, code),
                        ),
                    ]
                    if name.removeprefix(prefix).removeprefix("service-") in transports
                ]
            for name, run in runs if round_ % 2 == 0 else runs[::-1]:
                wall, per_cpu = run()
                rows.setdefault(name, []).append(wall)
                cpu_rows.setdefault(name, []).append(per_cpu)
            print(
                f"round {round_ + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rows.items()),
                flush=True,
            )
    m = {k: statistics.median(v) for k, v in rows.items()}
    report = {
        "spans_sent": sent,
        "attributes_per_span": {"median": statistics.median(attrs), "max": max(attrs)},
        "spans_per_second": {k: round(v) for k, v in m.items()},
        # what one process does with one core to itself: spans over the service's CPU time
        # (the machine is shared, so the wall-clock rate also measures the neighbours)
        "spans_per_cpu_second": {
            k: round(statistics.median(v)) for k, v in cpu_rows.items() if k != "null-grpc"
        },
        "rounds": {k: [round(x) for x in v] for k, v in rows.items()},
        "rounds_per_cpu_second": {
            k: [round(x) for x in v] for k, v in cpu_rows.items() if k != "null-grpc"
        },
        "stream": args.stream,
        "ratio_service_grpc_to_null": round(m.get("service-grpc", 0) / m["null-grpc"], 3),
        "baseline": args.baseline,
        # per CPU-second, this checkout over the baseline, in the same run
        "ratio_to_baseline_per_cpu_second": {
            k: round(
                statistics.median(cpu_rows[k]) / statistics.median(cpu_rows[f"baseline-{k}"]), 2
            )
            for k in ("service-grpc", "service-http", "service-http-json", "exporter")
            if args.baseline and k in cpu_rows
        },
        "goal_spans_per_second": 50_000,
        "cpus": os.cpu_count(),
    }
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out, "service-rate.json").write_text(json.dumps(report, indent=2) + "\n")


# -- views: decoding and span views alone ---------------------------------------------------------
def views_child(path: str) -> None:
    """Median CPU per span over each pickled list of requests, with the loopwatch this process
    imports: of ``parse_protobuf`` + ``span_views`` (this thread), and of the whole core, those
    and the pipeline to the end (read, assemble, summarize, metrics; the process, its worker
    included: every turn is finalized by the stop, as a shutdown does)."""
    from loopwatch.service.otlp import parse_protobuf

    lists: list[list[bytes]] = pickle.loads(Path(path).read_bytes())
    views_us, core_us = [], []
    for bodies in lists:
        cpu = time.process_time()
        started = time.thread_time_ns()
        decoded = [span_views(parse_protobuf(body)).spans for body in bodies]
        n = sum(map(len, decoded))
        views_us.append((time.thread_time_ns() - started) / n / 1000)
        pipeline = Pipeline(CONFIG, LoopwatchMetrics(CollectorRegistry()))
        for spans in decoded:
            assert pipeline.submit(spans)
        assert pipeline.stop(600)
        core_us.append((time.process_time() - cpu) / n * 1e6)
    print(
        json.dumps(
            {"us_per_span": statistics.median(views_us), "core": statistics.median(core_us)}
        ),
        flush=True,
    )


def views(args: argparse.Namespace) -> None:
    base = realistic_requests(args.turns, seed=1)
    streams = {
        "fresh": [copies(base, 1, first=k) for k in range(args.repeats)],
        "recorded": [base] * args.repeats,
    }
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        codes: list[tuple[str, str | None]] = [("now", None)]
        if args.baseline:
            codes.append((f"baseline {args.baseline}", baseline_code(args.baseline, tmp)))
        for name, lists in streams.items():
            Path(tmp, name).write_bytes(pickle.dumps(lists))
        for round_ in range(args.rounds):
            for label, code in codes if round_ % 2 == 0 else codes[::-1]:
                for name in streams:
                    out = subprocess.run(
                        [sys.executable, __file__, "views-child", str(Path(tmp, name))],
                        env=dict(os.environ, PYTHONPATH=code) if code else None,
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    got = json.loads(out.stdout.splitlines()[-1])
                    rows.setdefault(f"{label}/{name}", []).append(got["us_per_span"])
                    rows.setdefault(f"{label}/{name}/core", []).append(got["core"])
    report = {k: round(statistics.median(v), 2) for k, v in rows.items()}
    for name in [f"{n}{part}" for n in streams for part in ("", "/core")] if args.baseline else ():
        report[f"ratio/{name}"] = round(
            report[f"baseline {args.baseline}/{name}"] / report[f"now/{name}"], 2
        )
    print(json.dumps(report, indent=2))


# -- the driver (another process): the real exporter ---------------------------------------------
def drive(endpoint: str, turns: int, seed: int, realistic: bool = False) -> None:
    """``realistic``: the stream of streams.py (15-30 attributes a span), else the demo's."""
    if realistic:
        from testkit.streams import emit_mix, record

        work = batches(record(lambda t: emit_mix(t, turns, seed=seed)))
    else:
        work = batches(make_spans(turns, seed))
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=60)
    print("ready", flush=True)
    sys.stdin.readline()  # "go"
    started = time.perf_counter()
    failures = sum(exporter.export(b) is not SpanExportResult.SUCCESS for b in work)
    seconds = time.perf_counter() - started
    spans = sum(len(b) for b in work)
    print(json.dumps({"spans": spans, "seconds": seconds, "failures": failures}), flush=True)


@contextmanager
def driver(endpoint: str, turns: int, seed: int) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, __file__, "drive", endpoint, str(turns), str(seed)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    try:
        yield process
    finally:
        process.wait(timeout=600)


def go(process: subprocess.Popen[str]) -> float:
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.flush()
    return time.perf_counter()


def result(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    out: dict[str, Any] = json.loads(process.stdout.readline())
    return out


# -- the service (a process) ---------------------------------------------------------------------
class Served(ServeProcess):
    """``loopwatch serve`` as measured: at WARNING (an INFO line a loop would be part of the
    cost), its log echoed here, from the checkout in ``code`` when given (PYTHONPATH)."""

    def __init__(self, toml: str, code: str | None = None) -> None:
        env = dict(os.environ, PYTHONPATH=code) if code else None
        super().__init__(toml, log_level="WARNING", env=env, echo=True)


# -- throughput ----------------------------------------------------------------------------------
def decode_only(requests: list[bytes]) -> float:
    started = time.perf_counter()
    n = 0
    for body in requests:
        request = ExportTraceServiceRequest.FromString(body)
        n += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    return n / (time.perf_counter() - started)


def core_only(requests: list[bytes]) -> float:
    pipeline = Pipeline(CONFIG, LoopwatchMetrics(CollectorRegistry()))
    started = time.perf_counter()
    n = 0
    for body in requests:
        spans = span_views(ExportTraceServiceRequest.FromString(body)).spans
        n += len(spans)
        pipeline.submit(spans)
    assert pipeline.flush(600)
    seconds = time.perf_counter() - started
    pipeline.stop()
    return n / seconds


class NullReceiver:
    """OTLP/gRPC that decodes each request and counts its spans, nothing more."""

    def __init__(self) -> None:
        self.spans = 0
        self.server = grpc.server(ThreadPoolExecutor(4))

        def export(body: bytes, context: Any) -> Any:
            request = ExportTraceServiceRequest.FromString(body)
            self.spans += sum(
                len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans
            )
            return ExportTraceServiceResponse()

        handler = grpc.unary_unary_rpc_method_handler(
            export, response_serializer=ExportTraceServiceResponse.SerializeToString
        )
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, {"Export": handler}),)
        )
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()


def through_null(turns: int, seed: int) -> float:
    receiver = NullReceiver()
    with driver(receiver.address, turns, seed) as d:
        go(d)
        r = result(d)
    receiver.server.stop(None)
    assert r["failures"] == 0 and receiver.spans == r["spans"], r
    return float(r["spans"] / r["seconds"])


def through_service(turns: int, seed: int) -> float:
    served = Served(TOML.format(grace=0.5, open_turns=10_000, idle=300))
    try:
        with driver(served.grpc, turns, seed) as d:
            started = go(d)
            r = result(d)
            until_finished(served, r["spans"])
            seconds = time.perf_counter() - started
        assert r["failures"] == 0, r
        return float(r["spans"] / seconds)
    finally:
        served.stop()


def throughput(args: argparse.Namespace) -> None:
    spans = make_spans(args.turns, seed=1)
    requests = [encode_spans(b).SerializePartialToString() for b in batches(spans)]
    print(f"{len(spans)} spans in {len(requests)} requests of up to {BATCH} spans", flush=True)
    rows: dict[str, list[float]] = {"decode": [], "core": [], "null": [], "service": []}
    for round_ in range(args.rounds):
        rows["decode"].append(statistics.median(decode_only(requests) for _ in range(5)))
        rows["core"].append(core_only(requests))
        rows["null"].append(through_null(args.turns, seed=1))
        rows["service"].append(through_service(args.turns, seed=1))
        print(f"round {round_ + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rows.items()))
    m = {k: statistics.median(v) for k, v in rows.items()}
    report = {
        "spans": len(spans),
        "spans_per_second": {k: round(v) for k, v in m.items()},
        "ratio_service_to_decode_only": round(m["service"] / m["decode"], 4),
        "ratio_service_to_null_receiver": round(m["service"] / m["null"], 3),
        "ratio_core_to_decode_only": round(m["core"] / m["decode"], 4),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out, "service-throughput.json").write_text(json.dumps(report, indent=2) + "\n")


# -- soak ----------------------------------------------------------------------------------------
class Counting(SpanExporter):
    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.ok = self.failed = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        r = self.inner.export(spans)
        if r is SpanExportResult.SUCCESS:
            self.ok += len(spans)
        else:
            self.failed += len(spans)
        return r

    def shutdown(self) -> None:
        self.inner.shutdown()


def soak_drive(endpoint: str, seconds: float, rate: float, never: float) -> None:
    exporter = Counting(OTLPSpanExporter(endpoint=endpoint, insecure=True))
    provider = TracerProvider(resource=Resource.create({"service.name": "soak-agent"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=100_000))
    tracer = provider.get_tracer("soak")
    rng = random.Random(5)
    started = time.monotonic()
    i = 0
    unfinished = 0
    while time.monotonic() - started < seconds:
        turn = mixed_turn(rng, i)
        if rng.random() < never:
            # a request span that never ends: its trace's root never reaches the service
            root = tracer.start_span("POST /chat")
            with trace.use_span(root, end_on_exit=False):
                emit_turn(tracer, turn, time.time_ns(), CONVENTIONS[i % 3])
            unfinished += 1
        else:
            emit_turn(tracer, turn, time.time_ns(), CONVENTIONS[i % 3])
        i += 1
        time.sleep(max(0.0, started + i / rate - time.monotonic()))
    provider.shutdown()
    print(
        json.dumps(
            {"turns": i, "unfinished": unfinished, "ok": exporter.ok, "failed": exporter.failed}
        ),
        flush=True,
    )


def soak(args: argparse.Namespace) -> None:
    import psutil

    served = Served(TOML.format(grace=2.0, open_turns=args.open_turns, idle=args.idle))
    rows = []
    try:
        d = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "soak-drive",
                served.grpc,
                str(args.seconds),
                str(args.rate),
                str(args.never),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        process = psutil.Process(served.process.pid)
        started = time.monotonic()
        while d.poll() is None:
            s = served.samples()
            rows.append(
                {
                    "t": round(time.monotonic() - started, 1),
                    "rss_mb": round(process.memory_info().rss / 2**20, 1),
                    "open_turns": s.get("loopwatch_open_turns", 0),
                    "spans": s.get("loopwatch_spans_total", 0),
                    "turns": s.get("loopwatch_turns_total", 0),
                    "evicted": s.get("loopwatch_turns_evicted_total", 0),
                    "late": s.get("loopwatch_late_spans_total", 0),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
            time.sleep(args.every)
        assert d.stdout is not None
        sent = json.loads(d.stdout.read())
    finally:
        served.stop()
    half = len(rows) // 2
    summary = {
        "seconds": args.seconds,
        "driver": sent,
        "open_turns_bound": args.open_turns,
        "open_turns_max": max(r["open_turns"] for r in rows),
        "rss_mb_first_half_max": max(r["rss_mb"] for r in rows[: max(1, half)]),
        "rss_mb_second_half_max": max(r["rss_mb"] for r in rows[half:]),
    }
    print(json.dumps(summary, indent=2))
    if args.out:
        out = Path(args.out)
        with (out / "service-soak.csv").open("w") as f:
            f.write(",".join(rows[0]) + "\n")
            for r in rows:
                f.write(",".join(str(v) for v in r.values()) + "\n")
        (out / "service-soak.json").write_text(json.dumps(summary, indent=2) + "\n")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "drive":
        drive(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:] == ["realistic"])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "pre-drive":
        pre_drive(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "views-child":
        views_child(sys.argv[2])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "soak-drive":
        soak_drive(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("rate")
    r.add_argument("--turns", type=int, default=300, help="turns in the stream before copying")
    r.add_argument("--copies", type=int, default=20)
    r.add_argument("--exporter-turns", type=int, default=1500)
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--out", type=out_dir, help="directory for service-rate.json")
    r.add_argument("--stream", choices=("mix", "plain"), default="mix")
    r.add_argument("--transports", default="grpc,http,http-json,exporter")
    r.add_argument(
        "--baseline", help="git revision or import root whose service is measured too (baseline-*)"
    )
    v = sub.add_parser("views")
    v.add_argument("--turns", type=int, default=300)
    v.add_argument("--repeats", type=int, default=8, help="request lists timed per process")
    v.add_argument("--rounds", type=int, default=3)
    v.add_argument("--baseline", help="git revision measured too, in the same rounds")
    t = sub.add_parser("throughput")
    t.add_argument("--turns", type=int, default=3000)
    t.add_argument("--rounds", type=int, default=3)
    t.add_argument("--out", type=out_dir, help="directory for service-throughput.json")
    s = sub.add_parser("soak")
    s.add_argument("--seconds", type=float, default=180)
    s.add_argument("--rate", type=float, default=40, help="turns per second")
    s.add_argument("--never", type=float, default=0.1, help="share of turns that never end")
    s.add_argument("--idle", type=float, default=20, help="idle timeout, seconds")
    s.add_argument("--open-turns", type=int, default=300, help="open-turn bound")
    s.add_argument("--every", type=float, default=5, help="sampling period, seconds")
    s.add_argument("--out", type=out_dir, help="directory for service-soak.csv and .json")
    args = parser.parse_args()
    {"rate": rate, "views": views, "throughput": throughput, "soak": soak}[args.command](args)


if __name__ == "__main__":
    main()
