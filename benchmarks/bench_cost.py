"""What loopwatch costs in process, and whether any cost grows with the size of a trace.

    .venv/bin/python benchmarks/bench_cost.py worker [--baseline REV] [--public] [--rounds 5]
    .venv/bin/python benchmarks/bench_cost.py host [--baseline REV] [--rates 1000,5000] [--rounds 7]
    .venv/bin/python benchmarks/bench_cost.py flat [--sizes 10,100,1000,10000] [--rounds 3]
    .venv/bin/python benchmarks/bench_cost.py stages [--rounds 5]
    .venv/bin/python benchmarks/bench_cost.py all --out benchmarks/results [--baseline REV]

Every measurement runs in a fresh child process, rounds interleaved (the machine is shared and
noisy: each figure is a median, each goal a ratio or a bound measured in the same run). Each
subcommand prints how long it took, in wall-clock and in its children's CPU time.
``--baseline REV`` runs the same children against loopwatch as of a git revision (its
package exported to a temporary directory), so before and after share the run.

worker: CPU time of the worker thread (time.thread_time) per span, span starts included, on
  the realistic GenAI mix (streams.py: three conventions, 15-30 attributes a span), on plain
  web spans that no GenAI span hangs under, and on the whole mix. Goals: <= 15 us and <= 3 us.
  ``--public`` adds the same streams read through ReadableSpan's public API instead of the
  SDK's fields (attach/read_fields: what loopwatch falls back to on an SDK that keeps them
  otherwise).
host: a CPU-bound host (a loop of pure-Python work) that also emits the mix at a fixed span
  rate: its work done per second with BatchSpanProcessor and loopwatch, over its work with
  BatchSpanProcessor alone. Both setups live in one child and take turns in short segments
  (ABBA...), so both see the same machine; each round is one child, and the report gives the
  median and every round's ratio (the spread). Seconds are the process's CPU seconds, every
  thread included (the machine is shared: wall time would measure the neighbours), and each
  segment ends with a flush, so the spans it queued are part of its cost. Also reported:
  loopwatch's worker thread's share of that CPU, and its CPU per span in place (more than in
  ``worker``: there it runs in one hot batch). Goal at 1,000 spans/s: >= 0.95.
stages: where the worker's CPU goes on the GenAI mix, per span of the stream: reading finished
  spans into records, handing starts and records to the assembler, publishing the turns they
  complete (summary, loop lines, metrics), timed around each of the worker's three stages; and
  reading one span of each kind in a tight loop (what a tool span costs alone).
flat: worker CPU per span as one dimension grows: turns under one root, spans in one turn, open
  traces (in process, and in the service's pipeline with every root waiting for its grace).
  Goal: the largest over the smallest per-span cost <= 1.5 on each curve.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

from benchmarks.source_tree import PACKAGE_ROOT, export_package  # noqa: E402
from testkit.results_dir import out_dir  # noqa: E402


# -- children: one measurement each, printed as JSON -------------------------------------------
def _ends(events: Sequence[Any]) -> int:
    return sum(1 for e in events if not isinstance(e, tuple))


def _record_events(emit: Callable[[Any], None], events: list[Any] | None = None) -> list[Any]:
    """Starts (as 1-tuples) and ends of the spans ``emit`` writes, in the order they happened."""
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

    from testkit.streams import provider

    recorded: list[Any] = [] if events is None else events

    class Recorder(SpanProcessor):
        def on_start(self, span: Span, parent_context: Context | None = None) -> None:
            recorded.append((span,))

        def on_end(self, span: ReadableSpan) -> None:
            recorded.append(span)

    emit(provider(5, Recorder()).get_tracer("bench"))
    return recorded


def _drain_ns(events: Sequence[Any], setup: Sequence[Any] = (), public: bool = False) -> int:
    """Worker thread CPU for ``events`` (after ``setup``, untimed), queue filled beforehand."""
    from prometheus_client import CollectorRegistry

    from loopwatch import LoopwatchSpanProcessor
    from loopwatch.attach.read_api import PUBLIC
    from testkit.streams import CONFIG

    reader = PUBLIC if public else None
    processor = LoopwatchSpanProcessor(
        config=CONFIG, registry=CollectorRegistry(), span_reader=reader
    )
    with processor.worker.held():  # the worker waits while the queue fills; this thread drains it
        for part in (setup, events):  # the last one is timed
            for e in part:
                if isinstance(e, tuple):
                    processor.on_start(e[0])
                else:
                    processor.on_end(e)
            started = time.thread_time_ns()
            processor.worker.step()
            elapsed = time.thread_time_ns() - started
    processor.shutdown()
    return elapsed


def _worker_stream(name: str) -> Callable[[Any], None]:
    from testkit import streams

    return {
        "genai": lambda t: streams.emit_mix(t, 150, seed=1, plain_per_turn=0, http_roots=False),
        "plain": lambda t: streams.emit_plain(t, 700),
        "mix": lambda t: streams.emit_mix(t, 150, seed=1),
        "handrolled": lambda t: streams.emit_handrolled(t, 60, seed=1),
    }[name]


def child_worker(name: str, repeat: int, public: bool = False) -> dict[str, Any]:
    # public: the reader loopwatch falls back to when the SDK's span fields are not as expected
    events = _record_events(_worker_stream(name))
    spans = _ends(events)
    ns = statistics.median(_drain_ns(events, public=public) for _ in range(repeat))
    return {"us_per_span": ns / spans / 1000, "spans": spans}


def child_stages(repeat: int) -> dict[str, Any]:
    """The worker's three stages, timed apart on the GenAI mix (processor._drain_chunk's,
    without its error handling: keep the two in step; it reads the processor's private parts)."""
    from prometheus_client import CollectorRegistry

    from loopwatch import LoopwatchSpanProcessor
    from loopwatch.attach.queued import EndRecord, PlainEnd, SpanStart
    from loopwatch.attach.read_fields import StartFields
    from loopwatch.core.records import kind_of
    from testkit.streams import CONFIG

    events = _record_events(_worker_stream("genai"))
    spans = _ends(events)
    clock = time.thread_time_ns
    runs = []
    for _ in range(repeat):
        p = LoopwatchSpanProcessor(config=CONFIG, registry=CollectorRegistry())
        took = {"read": 0, "assemble": 0, "publish": 0}
        with p.worker.held():  # the worker waits; this thread runs its stages
            for e in events:
                if isinstance(e, tuple):
                    p.on_start(e[0])
                else:
                    p.on_end(e)
            while chunk := p.worker.take(256):
                t0 = clock()
                items = [
                    item if isinstance(item, (StartFields, SpanStart)) else p._reader.ended(item)
                    for item in chunk
                ]
                t1 = clock()
                for item in items:
                    if isinstance(item, PlainEnd):
                        p._plain(item)
                    elif isinstance(item, EndRecord):
                        p._assembler.add(item.trace_id, item.service, item.record)
                    else:  # a start
                        p._started(item)
                t2 = clock()
                p._assembler.publish()
                took["read"] += t1 - t0
                took["assemble"] += t2 - t1
                took["publish"] += clock() - t2
        p.shutdown()
        runs.append(took)
    out: dict[str, Any] = {
        stage: statistics.median(r[stage] for r in runs) / spans / 1000 for stage in runs[0]
    }
    # one span of each kind read in a tight loop (caches warm: less than its share above)
    p = LoopwatchSpanProcessor(config=CONFIG, registry=CollectorRegistry())
    by_kind: dict[str, list[Any]] = {}
    for e in events:
        if not isinstance(e, tuple):
            read = p._reader.ended(e)
            kind = kind_of(read.record) if isinstance(read, EndRecord) else "plain"
            by_kind.setdefault(kind, []).append(e)
    p.shutdown()
    for kind, ended in by_kind.items():
        times = []
        for _ in range(repeat * 4):
            started = clock()
            for span in ended:
                p._reader.ended(span)
            times.append(clock() - started)
        out[f"read_one_{kind}"] = statistics.median(times) / len(ended) / 1000
    return {k: round(v, 2) for k, v in out.items()}


def _work() -> int:
    return sum(i * i for i in range(300))


def child_host(rate: float, seconds: float, segments: int) -> dict[str, Any]:
    """Work units done per CPU second while emitting ``rate`` spans per CPU second of the mix,
    with BatchSpanProcessor alone and with loopwatch beside it, in one process: the two take
    turns in short segments (ABBA...), so both see the same machine. Each segment ends with a
    flush, so the spans it queued are part of its cost."""
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from prometheus_client import CollectorRegistry

    from loopwatch import LoopwatchSpanProcessor
    from testkit.streams import CONFIG, emit_mix, provider

    class Null(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    class Counter(SpanProcessor):
        def __init__(self) -> None:
            self.ended = 0

        def on_end(self, span: ReadableSpan) -> None:
            self.ended += 1

    loopwatch = LoopwatchSpanProcessor(config=CONFIG, registry=CollectorRegistry())
    assert loopwatch.worker.ident is not None
    worker_clock = time.pthread_getcpuclockid(loopwatch.worker.ident)
    setups = {}
    for how, extra in (("batch", ()), ("loopwatch", (loopwatch,))):
        counter = Counter()
        batch = BatchSpanProcessor(Null(), max_queue_size=100_000)
        p = provider(9, batch, *extra, counter)
        setups[how] = (p, p.get_tracer("host"), counter)
    totals = {how: {"work": 0, "cpu": 0.0, "spans": 0, "worker_cpu": 0.0} for how in setups}
    turn = 0
    for segment in range(2 * segments):
        how = ("batch", "loopwatch")[(segment + segment // 2) % 2]  # ABBA ABBA ...
        p, tracer, counter = setups[how]
        total = totals[how]
        work, first = 0, counter.ended
        # The clock is this process's CPU time, every thread included: the machine is shared,
        # so wall time would measure the neighbours; in CPU time the worker's share is counted.
        worker0 = time.clock_gettime(worker_clock)
        cpu0 = time.process_time()
        while (elapsed := time.process_time() - cpu0) < seconds / segments:
            if counter.ended - first < rate * elapsed:
                emit_mix(tracer, 1, seed=turn, first=turn)
                turn += 1
            else:
                _work()
                work += 1
        p.force_flush()  # the spans still queued are part of the cost
        total["cpu"] += time.process_time() - cpu0
        total["worker_cpu"] += time.clock_gettime(worker_clock) - worker0
        total["work"] += work
        total["spans"] += counter.ended - first
    for p, _, _ in setups.values():
        p.shutdown()
    alone, lw = totals["batch"], totals["loopwatch"]
    return {
        "ratio": (lw["work"] / lw["cpu"]) / (alone["work"] / alone["cpu"]),
        "spans_per_cpu_s": lw["spans"] / lw["cpu"],
        # how much of the host's loss is loopwatch's worker thread (the rest is the host
        # thread's own share: on_start/on_end, GIL handovers, caches)
        "worker_share": lw["worker_cpu"] / lw["cpu"],
        "worker_us_per_span": lw["worker_cpu"] / lw["spans"] * 1e6,
    }


def _flat_emit(curve: str, n: int) -> tuple[Callable[[Any], object], Callable[[Any], None]]:
    """(the untimed setup, the measured spans) for one point of a curve. The setup first sends
    the same kind of turns once, so the metric series exist before the timing (creating one is
    a fixed cost); small sizes repeat their unit to have ~1,000 spans or more to time."""
    from opentelemetry import trace

    from loopwatch.demo.emit import emit_turn
    from testkit import streams

    repeat = max(1, 1000 // n)
    if curve == "roots":

        def roots(t: Any) -> None:
            for i in range(repeat):
                streams.emit_long_root(t, n, seed=i)

        return (lambda t: streams.emit_long_root(t, 20, seed=99)), roots
    if curve == "spans":

        def turns(t: Any) -> None:
            for i in range(repeat):
                emit_turn(t, streams.wide(n), streams.START_NS + i * 10**12)

        return (lambda t: emit_turn(t, streams.wide(60), streams.START_NS)), turns

    def open_traces(t: Any) -> None:  # n turns whose agent span never ends: n open traces
        streams.emit_mix(t, 60, seed=4, plain_per_turn=0)
        for i in range(n):
            agent = t.start_span("invoke_agent support", attributes=streams.AGENT_ATTRIBUTES)
            with trace.use_span(agent, end_on_exit=False):
                emit_turn(t, streams.wide(1), streams.START_NS + i * streams.MS)

    return open_traces, (lambda t: streams.emit_mix(t, 60, seed=4, plain_per_turn=0))


def child_flat(curve: str, n: int, repeat: int) -> dict[str, Any]:
    setup, emit = _flat_emit(curve, n)
    events: list[Any] = []
    split = [0]

    def both(t: Any) -> None:  # one recording: the setup and the measured spans
        setup(t)
        split[0] = len(events)
        emit(t)

    _record_events(both, events)
    before, measured = events[: split[0]], events[split[0] :]
    ns = statistics.median(_drain_ns(measured, before) for _ in range(repeat))
    return {"us_per_span": ns / _ends(measured) / 1000, "spans": _ends(measured)}


def child_flat_service(n: int, repeat: int) -> dict[str, Any]:
    """The service's pipeline with ``n`` traces whose root is in, waiting for a long grace:
    CPU (this process, the pipeline's worker included) per span of the measured turns."""
    from dataclasses import replace

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from prometheus_client import CollectorRegistry

    from loopwatch.metrics.exporter import LoopwatchMetrics
    from loopwatch.service.otlp import span_views
    from loopwatch.service.pipeline import Pipeline
    from testkit import streams

    def views(spans: Sequence[Any]) -> list[list[Any]]:
        out = []
        for i in range(0, len(spans), 512):
            body = encode_spans(spans[i : i + 512]).SerializePartialToString()
            out.append(span_views(ExportTraceServiceRequest.FromString(body)).spans)
        return out

    pending = views(streams.record(lambda t: streams.emit_plain(t, n), seed=21))
    measured = views(
        streams.record(lambda t: streams.emit_mix(t, 60, seed=4, plain_per_turn=0), seed=22)
    )
    spans = sum(len(b) for b in measured)
    times = []
    for _ in range(repeat):
        config = replace(streams.CONFIG, grace_seconds=3600.0)
        pipeline = Pipeline(config, LoopwatchMetrics(CollectorRegistry()))
        for b in pending:
            pipeline.submit(b)
        assert pipeline.flush(600)
        time.sleep(0.2)  # a few grace checks with every root waiting
        started = time.process_time()
        for b in measured:
            pipeline.submit(b)
        assert pipeline.flush(600)
        time.sleep(0.2)  # the grace checks that follow are part of the cost
        times.append(time.process_time() - started)
        pipeline.stop(600)
    return {"us_per_span": statistics.median(times) / spans * 1e6, "spans": spans}


# -- the parent: interleaved children, medians, the report --------------------------------------
class Code:
    """Where the children import loopwatch from: this checkout, or a revision's export."""

    def __init__(self, label: str, path: Path) -> None:
        self.label, self.path = label, path

    def run(self, *args: str) -> dict[str, Any]:
        env = dict(os.environ, PYTHONPATH=f"{self.path}{os.pathsep}{ROOT}")
        out = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "child", *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=1800,
        )
        if out.returncode:
            raise SystemExit(f"child {args} failed:\n{out.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        return result


def codes(baseline: str | None, keep: list[Any]) -> list[Code]:
    current = Code("current", PACKAGE_ROOT)
    if not baseline:
        return [current]
    tmp = tempfile.TemporaryDirectory()
    keep.append(tmp)
    return [Code(f"baseline {baseline}", export_package(baseline, Path(tmp.name))), current]


def interleaved(
    rounds: int, cells: list[tuple[str, Code, tuple[str, ...]]]
) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in cells}
    for r in range(rounds):
        order = cells if r % 2 == 0 else cells[::-1]
        for name, code, args in order:
            out[name].append(code.run(*args))
        print(f"  round {r + 1}/{rounds}", file=sys.stderr, flush=True)
    return out


def med(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def worker(args: argparse.Namespace, keep: list[Any]) -> dict[str, Any]:
    streams = ("genai", "plain", "mix", "handrolled")
    cells: list[tuple[str, Code, tuple[str, ...]]] = [
        (f"{code.label}/{stream}", code, ("worker", stream, "5"))
        for code in codes(args.baseline, keep)
        for stream in streams
    ]
    if args.public:
        current = codes(None, keep)[0]
        cells += [(f"public API/{s}", current, ("worker", s, "5", "public")) for s in streams]
    rows = interleaved(args.rounds, cells)
    report: dict[str, Any] = {}
    for name, r in rows.items():
        report[name] = {"us_per_span": round(med(r, "us_per_span"), 2), "spans": r[0]["spans"]}
        print(f"worker {name:<28} {report[name]['us_per_span']:>7.2f} us/span", flush=True)
    report["goals"] = {"genai_us": 15.0, "plain_us": 3.0}
    return report


def host(args: argparse.Namespace, keep: list[Any]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for rate in args.rates:
        head = ("host", str(rate), str(args.seconds), str(args.segments))
        cells: list[tuple[str, Code, tuple[str, ...]]] = [
            (f"{code.label}/{rate}", code, head) for code in codes(args.baseline, keep)
        ]
        for name, rows in interleaved(args.rounds, cells).items():
            ratios = sorted(r["ratio"] for r in rows)
            report[name] = {
                "host_throughput_ratio": round(statistics.median(ratios), 3),
                "ratios": [round(x, 3) for x in ratios],
                "worker_share": round(med(rows, "worker_share"), 3),
                "worker_us_per_span": round(med(rows, "worker_us_per_span"), 1),
                "spans_per_cpu_s": round(med(rows, "spans_per_cpu_s")),
            }
            r = report[name]
            print(
                f"host {name:<24} keeps {r['host_throughput_ratio']:.3f} "
                f"(rounds {ratios[0]:.3f}-{ratios[-1]:.3f}); loopwatch's worker: "
                f"{r['worker_share']:.1%} of the CPU, {r['worker_us_per_span']} us/span",
                flush=True,
            )
    report["goal_at_1000"] = 0.95
    return report


def flat(args: argparse.Namespace, keep: list[Any]) -> dict[str, Any]:
    current = codes(None, keep)[0]
    report: dict[str, Any] = {}
    curves = {
        "turns_under_one_root": ("flat", "roots"),
        "spans_per_turn": ("flat", "spans"),
        "open_traces": ("flat", "open"),
        "open_traces_service": ("flat-service",),
    }
    for curve, head in curves.items():
        cells = [(str(n), current, (*head, str(n), "3")) for n in args.sizes]
        rows = interleaved(args.rounds, cells)
        points = {n: round(med(r, "us_per_span"), 2) for n, r in rows.items()}
        spread = max(points.values()) / min(points.values())
        report[curve] = {"us_per_span": points, "largest_over_smallest": round(spread, 2)}
        print(f"flat {curve:<22} {points}  spread {spread:.2f}x (goal <= 1.5)", flush=True)
    return report


def stages(args: argparse.Namespace, keep: list[Any]) -> dict[str, Any]:
    current = codes(None, keep)[0]
    rows = interleaved(args.rounds, [("stages", current, ("stages", "5"))])["stages"]
    report = {key: round(med(rows, key), 2) for key in rows[0]}
    for key, value in report.items():
        print(f"stages {key:<18} {value:>6.2f} us a span", flush=True)
    return report


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child(argv: list[str]) -> dict[str, Any]:
    kind, rest = argv[0], argv[1:]
    if kind == "worker":
        return child_worker(rest[0], int(rest[1]), rest[2:] == ["public"])
    if kind == "host":
        return child_host(float(rest[0]), float(rest[1]), int(rest[2]))
    if kind == "flat":
        return child_flat(rest[0], int(rest[1]), int(rest[2]))
    if kind == "stages":
        return child_stages(int(rest[0]))
    if kind == "flat-service":
        return child_flat_service(int(rest[0]), int(rest[1]))
    raise SystemExit(f"unknown child {kind}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        print(json.dumps(child(sys.argv[2:])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["worker", "host", "flat", "stages", "all"])
    parser.add_argument("--baseline", help="git revision to measure too (worker, host)")
    parser.add_argument("--rounds", type=int, help="worker: 5, host: 7, flat: 3, stages: 5")
    parser.add_argument(
        "--public",
        action="store_true",
        help="worker: also read spans through the public ReadableSpan API (the fallback)",
    )
    parser.add_argument(
        "--seconds", type=float, default=4.0, help="host: CPU seconds per setup and round"
    )
    parser.add_argument("--segments", type=int, default=8, help="host: segments per setup")
    parser.add_argument(
        "--rates", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 5000]
    )
    parser.add_argument(
        "--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[10, 100, 1000, 10000]
    )
    parser.add_argument("--out", type=out_dir, help="directory for in-process-WHAT.json")
    args = parser.parse_args()
    keep: list[Any] = []
    report: dict[str, Any] = {"cpus": os.cpu_count()}
    rounds = args.rounds
    steps = (("worker", worker, 5), ("host", host, 7), ("flat", flat, 3), ("stages", stages, 5))
    for what, fn, default in steps:
        if args.what in (what, "all"):
            args.rounds = rounds or default
            started, cpu = time.monotonic(), _children_cpu()
            report[what] = fn(args, keep)
            took, cpu = time.monotonic() - started, _children_cpu() - cpu
            # on a shared machine the wall clock counts the neighbours; the children's CPU
            # time is what the run takes on a quiet one (they run one at a time)
            print(
                f"{what} took {took / 60:.1f} min ({cpu / 60:.1f} min of CPU)",
                file=sys.stderr,
                flush=True,
            )
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out, f"in-process-{args.what}.json").write_text(
            json.dumps(report, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
