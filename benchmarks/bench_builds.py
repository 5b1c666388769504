"""Pure Python against the compiled build (mypyc), side by side in one run.

    scripts/build-compiled          # first: the compiled build, in build/compiled
    .venv/bin/python benchmarks/bench_builds.py instructions [--streams genai,plain,mix,handrolled]
    .venv/bin/python benchmarks/bench_builds.py worker [--rounds 9]
    .venv/bin/python benchmarks/bench_builds.py plain [--rounds 11] [--requests 1000] [--wake N,...]
                                                      [--callgrind-runs 3]
    .venv/bin/python benchmarks/bench_builds.py service [--rounds 3] [--stream mix|histories]
    .venv/bin/python benchmarks/bench_builds.py profile [--stream mix|histories]
    .venv/bin/python benchmarks/bench_builds.py all --out benchmarks/results
    .venv/bin/python benchmarks/bench_builds.py child service-passes mix|histories N  # callgrind

Both builds are the same files, build/compiled's sources and extensions: "pure" runs them with
LOOPWATCH_PURE_PYTHON=1, and every child's build is checked before its run. Each measurement
runs in fresh processes, the two builds interleaved (ABBA), and each figure is a median or an
instruction count; the goals are ratios measured in the same run.

instructions: callgrind's instruction count for the worker's drain of bench_cost.py's worker
  streams (its child, with one and with four drains of the same queue in one process: the
  difference over three is one drain), for each build. On a shared machine whose speed drifts
  by up to 2x from hour to hour, the ratio of instructions is the one that does not move.
  Goal on the GenAI mix: compiled <= 0.5x pure. Needs valgrind.
worker: bench_cost.py worker's CPU time of the worker thread per span, same streams.
plain: process CPU (every thread) per plain web span (an HTTP server span with a database span
  under it, no GenAI) emitted through the SDK with the SDK's BatchSpanProcessor (null exporter)
  alone, with loopwatch alone, and with no span processor, each setup alone in a process of its
  own (the garbage collector is the process's: in one process, a collection one setup's held
  spans bring on may land in another's turn), the processes interleaved (ABCCBA...), segments
  each ending with a flush. "adds" is a setup's cost over no processor's in the same round,
  the median over the rounds; beside it, the collections of each generation of the garbage
  collector over a process's segments. Goal: loopwatch adds at most what BatchSpanProcessor
  adds (<= 1.0x). The same in instructions too (callgrind, every thread; each setup alone,
  one and four segments; ``--callgrind-runs`` times each, the median; 0: none), and apart
  the instructions outside the garbage collector (gc_collect_main, inclusive: its share moves
  by up to a thousand a span from run to run, with where collections fall), beside two
  references: a processor that only holds each finished span until the flush, and one that
  reads each span's ids and times in on_end and holds only those (the garbage collector's
  share).
  ``--wake N,...`` adds loopwatch with its worker woken at N queued starts and ends, in the same
  rounds and instruction runs (to compare wakes).
service: bench_service.py rate's pre-encoded requests (two driver processes) over gRPC and
  HTTP into ``loopwatch serve`` of each build: spans per CPU-second of the service. Every
  round also times protobuf's decode-only rate of the rate stream's requests here, per
  CPU-second of its thread, the machine's speed that hour: the goal, 50,000 spans per
  CPU-second on a quiet hour (when those requests decode at 1.02M spans/s), scales with it
  (goal = 50,000 x decode / 1.02M), whichever stream is served. ``--stream histories``: the
  same stream with the model calls carrying their prompt history (several KB of messages,
  15-25 attributes); its tools' arguments are the rate stream's.
profile: profile_service.py's sampling profile (py-spy, C frames included) of each build's
  service on the same requests, by stage; a compiled build's C functions go to the stage of the
  module mypyc compiled them from.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import re
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

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

from testkit.results_dir import out_dir  # noqa: E402

COMPILED = ROOT / "build" / "compiled"
PURE_ENV = "LOOPWATCH_PURE_PYTHON"
BUILDS = ("pure", "compiled")
WORKER_STREAMS = ("genai", "plain", "mix", "handrolled")
QUIET_DECODE = 1_020_000  # protobuf's decode-only rate of the rate stream's requests, a quiet hour
SERVICE_GOAL = 50_000  # spans per CPU-second on a quiet hour


# -- which build a child runs ---------------------------------------------------------------------
def build_env(build: str) -> dict[str, str]:
    """The environment of a child running ``build`` (the checkout's root for benchmarks.*)."""
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    env["PYTHONPATH"] = f"{COMPILED}{os.pathsep}{ROOT}"
    if build == "pure":
        env[PURE_ENV] = "1"
    return env


@contextmanager
def building(build: str) -> Iterator[None]:
    """This process's environment set for ``build``, for helpers that copy os.environ."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(build_env(build))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def check_builds() -> None:
    if not (COMPILED / "loopwatch").is_dir():
        raise SystemExit("no compiled build in build/compiled: run scripts/build-compiled first")
    for build in BUILDS:
        out = subprocess.run(
            [sys.executable, "-c", "from loopwatch import compiled; print(compiled.describe())"],
            env=build_env(build),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if out.startswith("compiled") != (build == "compiled"):
            raise SystemExit(f"the {build} child runs {out!r}")


def child(build: str, script: str, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "child", *args],
        env=build_env(build),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if out.returncode:
        raise SystemExit(f"{build} child {script} {args} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def interleaved(
    rounds: int, cells: Sequence[tuple[str, Callable[[], Any]]]
) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {name: [] for name, _ in cells}
    for r in range(rounds):
        for name, run in cells if r % 2 == 0 else cells[::-1]:
            out[name].append(run())
        print(f"  round {r + 1}/{rounds}", file=sys.stderr, flush=True)
    return out


def med(values: Sequence[float]) -> float:
    return float(statistics.median(values))


# -- instructions: callgrind over the worker's drain ---------------------------------------------
def _callgrind(build: str, script: str, *args: str) -> tuple[int, int]:
    """Instructions executed by a child (every thread), counted by callgrind, and of those the
    garbage collector's (gc_collect_main and what it calls)."""
    with tempfile.TemporaryDirectory() as tmp:
        counts = Path(tmp) / "callgrind.out"
        out = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={counts}",
                sys.executable,
                str(ROOT / "benchmarks" / script),
                "child",
                *args,
            ],
            env=build_env(build),
            capture_output=True,
            text=True,
            timeout=3600,
            check=True,
        )
        found = re.search(r"Collected : (\d+)", out.stderr)
        if not found:
            raise SystemExit(f"no instruction count from callgrind:\n{out.stderr[-2000:]}")
        functions = subprocess.run(
            ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(counts)],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        ).stdout
    # "147,891,037 ( 5.66%)  .../gcmodule.c:gc_collect_main [.../libpython3.11.so.1.0]"; a
    # process that never collects has no such line
    collector = re.search(r"^\s*([\d,]+) \([^)]*\)\s+\S*:gc_collect_main \[", functions, re.M)
    return int(found.group(1)), int(collector.group(1).replace(",", "")) if collector else 0


def instructions(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for stream in args.streams:
        row: dict[str, Any] = {}
        for build in BUILDS:
            one, four = (
                _callgrind(build, "bench_cost.py", "worker", stream, str(n))[0] for n in (1, 4)
            )
            row[build] = round((four - one) / 3)
            row[f"{build}_collected"] = [one, four]
        row["compiled_over_pure"] = round(row["compiled"] / row["pure"], 3)
        report[stream] = row
        print(
            f"instructions {stream:<11} a drain: pure {row['pure'] / 1e6:7.1f}M, compiled "
            f"{row['compiled'] / 1e6:7.1f}M: {row['compiled_over_pure']:.3f}x",
            flush=True,
        )
    report["goal_genai"] = 0.5
    return report


# -- worker: CPU per span on the worker thread ----------------------------------------------------
def worker(args: argparse.Namespace) -> dict[str, Any]:
    cells = [
        (f"{build}/{stream}", lambda b=build, s=stream: child(b, "bench_cost.py", "worker", s, "5"))
        for build in BUILDS
        for stream in WORKER_STREAMS
    ]
    rows = interleaved(args.rounds, cells)
    report: dict[str, Any] = {}
    for stream in WORKER_STREAMS:
        us = {b: med([r["us_per_span"] for r in rows[f"{b}/{stream}"]]) for b in BUILDS}
        report[stream] = {
            **{f"{b}_us_per_span": round(us[b], 2) for b in BUILDS},
            "compiled_over_pure": round(us["compiled"] / us["pure"], 3),
        }
        print(
            f"worker {stream:<11} pure {us['pure']:6.2f} us/span, compiled "
            f"{us['compiled']:6.2f}: {us['compiled'] / us['pure']:.3f}x",
            flush=True,
        )
    return report


# -- plain: process CPU per plain span against BatchSpanProcessor -------------------------------
PLAIN_SETUPS = ("none", "batch", "loopwatch")
PLAIN_SEGMENTS = 16
# Instructions only, for where the cost of a processor that works off the agent's thread comes
# from: "hold" keeps each finished span until the flush and does nothing else (what any such
# processor's queue does to the garbage collector); "read" reads each span's ids and times in
# on_end instead and keeps only those.
HOLD_SETUPS = ("hold", "read")


def _plain_provider(how: str) -> Any:
    from collections import deque

    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from prometheus_client import CollectorRegistry

    from loopwatch import LoopwatchSpanProcessor
    from testkit.streams import CONFIG, provider

    class Null(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    class Hold(SpanProcessor):
        def __init__(self) -> None:
            self.held: deque[Any] = deque()

        def on_end(self, span: ReadableSpan) -> None:
            self.held.append(span)

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            self.held.clear()
            return True

    class Read(Hold):
        def on_end(self, span: ReadableSpan) -> None:
            ctx, parent = span.context, span.parent
            self.held.append(
                (
                    ctx.trace_id,
                    ctx.span_id,
                    parent and parent.span_id,
                    span.start_time,
                    span.end_time,
                )
            )

    if how in HOLD_SETUPS:
        return provider(7, Hold() if how == "hold" else Read())
    if how == "batch":
        return provider(7, BatchSpanProcessor(Null(), max_queue_size=100_000))
    if how.startswith("loopwatch"):  # "loopwatch@N": its worker woken at N queued items
        processor = LoopwatchSpanProcessor(config=CONFIG, registry=CollectorRegistry())
        if "@" in how:
            processor.worker.wake_at = int(how.split("@")[1])
        return provider(7, processor)
    return provider(7)


def child_plain_one(how: str, requests: int, segments: int) -> dict[str, Any]:
    """One setup's segments alone (for callgrind: one and four segments)."""
    from testkit.streams import emit_plain

    p = _plain_provider(how)
    tracer = p.get_tracer("plain")
    emit_plain(tracer, 50)  # warm, as child_plain does
    p.force_flush()
    for _ in range(segments):
        emit_plain(tracer, requests)
        p.force_flush()
    p.shutdown()
    return {}


def child_plain(how: str, requests: int, segments: int) -> dict[str, Any]:
    """Process CPU per span of one setup, alone in this process, over its segments."""
    from loopwatch import compiled
    from testkit.streams import emit_plain

    p = _plain_provider(how)
    tracer = p.get_tracer("plain")
    emit_plain(tracer, 50)  # warm: first spans, the worker's first batch
    p.force_flush()
    collections = [0, 0, 0]  # by generation, over the segments

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            collections[info["generation"]] += 1

    gc.callbacks.append(count)
    started = time.process_time()
    for _ in range(segments):
        emit_plain(tracer, requests)
        p.force_flush()  # the spans it queued are part of its cost
    cpu = time.process_time() - started
    gc.callbacks.remove(count)
    p.shutdown()
    return {
        "build": compiled.describe(),
        "us": cpu / (2 * requests * segments) * 1e6,
        "collections": collections,
    }


def plain(args: argparse.Namespace) -> dict[str, Any]:
    wakes = tuple(f"loopwatch@{n}" for n in args.wake)
    # each setup alone in its process: the collector is the process's, so in one process a
    # collection that one setup's held spans bring on may land in another setup's turn
    cells = [
        (
            f"{b}/{how}",
            lambda b=b, how=how: child(
                b, "bench_builds.py", "plain", how, str(args.requests), str(PLAIN_SEGMENTS)
            ),
        )
        for b in BUILDS
        for how in (*PLAIN_SETUPS, *wakes)
    ]
    rows = interleaved(args.rounds, cells)
    report: dict[str, Any] = {}
    for build in BUILDS:
        runs = {how: [x["us"] for x in rows[f"{build}/{how}"]] for how in (*PLAIN_SETUPS, *wakes)}
        us = {how: med(v) for how, v in runs.items()}
        # each setup's cost over its round's no-processor cost, so the machine's drift from
        # round to round divides out; then the medians over the rounds
        over = {
            how: med([x / none for x, none in zip(v, runs["none"], strict=True)])
            for how, v in runs.items()
        }
        adds = (over["loopwatch"] - 1) / (over["batch"] - 1)
        # each round's own ratio, for the spread (the processes of a round differ by more
        # than what a processor adds, so a round alone says little)
        rounds = [
            (lw - none) / (batch - none)
            for none, batch, lw in zip(runs["none"], runs["batch"], runs["loopwatch"], strict=True)
            if batch != none
        ]
        report[build] = {
            **{f"{how}_us_per_span": round(v, 2) for how, v in us.items()},
            "loopwatch_adds_over_batch_adds": round(adds, 3),
            "rounds_adds": sorted(round(a, 3) for a in rounds),
            "us_per_span_by_round": {how: [round(v, 2) for v in vs] for how, vs in runs.items()},
            "loopwatch_over_batch_total": round(over["loopwatch"] / over["batch"], 3),
        }
        # the collector's collections of each generation over a process's segments, the
        # range over the rounds
        for how in (*PLAIN_SETUPS, *wakes):
            counts = [x["collections"] for x in rows[f"{build}/{how}"]]
            report[build][f"{how}_collections"] = counts
            ranges = " / ".join(
                f"{min(c[g] for c in counts)}-{max(c[g] for c in counts)}" for g in range(3)
            )
            print(
                f"plain {build:<9} {how}: collections of generations 0 / 1 / 2 over "
                f"{2 * args.requests * PLAIN_SEGMENTS:,} spans: {ranges}",
                flush=True,
            )
        x = report[build]
        print(
            f"plain {build:<9} per span: no processor {us['none']:.2f} us, Batch "
            f"{us['batch']:.2f}, loopwatch {us['loopwatch']:.2f}; loopwatch adds "
            f"{adds:.3f}x what Batch adds (rounds {x['rounds_adds'][0]}-"
            f"{x['rounds_adds'][-1]}), total {x['loopwatch_over_batch_total']:.3f}x",
            flush=True,
        )
        for how in wakes:
            report[build][f"{how}_adds_over_batch_adds"] = round(
                (over[how] - 1) / (over["batch"] - 1), 3
            )
            print(
                f"plain {build:<9} {how}: adds "
                f"{report[build][f'{how}_adds_over_batch_adds']:.3f}x what Batch adds",
                flush=True,
            )

    # the same in instructions (callgrind, every thread): one and four segments of each setup
    # alone, the difference over three is one segment (2 x requests spans). A full collection
    # falls in that difference or not, by how the threads interleave: each setup runs several
    # times (two processes at once: callgrind runs one thread at a time), the median counts.
    # The collector's instructions are counted apart too: what lands in the segments moves by
    # up to a thousand a span from run to run, the rest by a few dozen.
    def per_span(build: str, how: str) -> tuple[float, float]:
        one, four = (
            _callgrind(build, "bench_builds.py", "plain-one", how, "1000", str(n)) for n in (1, 4)
        )
        return (four[0] - one[0]) / 3 / 2000, (four[1] - one[1]) / 3 / 2000

    report["goal_adds"] = 1.0
    if args.callgrind_runs < 1:
        return report
    setups = (*PLAIN_SETUPS, *HOLD_SETUPS, *wakes)
    jobs = [(build, how) for _ in range(args.callgrind_runs) for build in BUILDS for how in setups]
    with ThreadPoolExecutor(max_workers=2) as pool:
        counted = list(pool.map(lambda job: per_span(*job), jobs))

    def sorted_runs(
        build: str, part: Callable[[tuple[float, float]], float]
    ) -> dict[str, list[float]]:
        return {
            how: sorted(
                part(v) for (b, h), v in zip(jobs, counted, strict=True) if (b, h) == (build, how)
            )
            for how in setups
        }

    def spread(by_setup: dict[str, list[float]]) -> str:
        return ", ".join(
            f"{how} {v[0]:,.0f}-{v[-1]:,.0f}" for how, v in by_setup.items() if how in PLAIN_SETUPS
        )

    for build in BUILDS:
        runs = sorted_runs(build, lambda v: v[0])
        outside = sorted_runs(build, lambda v: v[0] - v[1])
        collector = sorted_runs(build, lambda v: v[1])
        median = {how: med(v) for how, v in runs.items()}
        adds = (median["loopwatch"] - median["none"]) / (median["batch"] - median["none"])
        rest = {how: med(v) for how, v in outside.items()}
        rest_adds = (rest["loopwatch"] - rest["none"]) / (rest["batch"] - rest["none"])
        report[build]["instructions_per_span"] = {k: round(v) for k, v in median.items()}
        report[build]["instructions_per_span_runs"] = {
            k: [round(x) for x in v] for k, v in runs.items()
        }
        report[build]["instructions_adds_over_batch_adds"] = round(adds, 3)
        report[build]["collector_instructions_per_span_runs"] = {
            k: [round(x) for x in v] for k, v in collector.items()
        }
        report[build]["outside_collector_adds_over_batch_adds"] = round(rest_adds, 3)
        print(
            f"plain {build:<9} instructions a span (median of {args.callgrind_runs}): no processor "
            f"{median['none']:,.0f}, Batch {median['batch']:,.0f}, loopwatch "
            f"{median['loopwatch']:,.0f}: loopwatch adds {adds:.3f}x what Batch adds "
            f"(runs: {spread(runs)})",
            flush=True,
        )
        print(
            f"plain {build:<9} outside the garbage collector: loopwatch adds "
            f"{rest['loopwatch'] - rest['none']:,.0f} a span, Batch "
            f"{rest['batch'] - rest['none']:,.0f}: {rest_adds:.3f}x; the collector a span "
            f"(runs: {spread(collector)})",
            flush=True,
        )
        print(
            f"plain {build:<9} instructions a span added by holding each finished span until "
            f"the flush: {median['hold'] - median['none']:,.0f}; by reading its ids and "
            f"times in on_end and holding those: {median['read'] - median['none']:,.0f}",
            flush=True,
        )
        for how in wakes:
            woken = (median[how] - median["none"]) / (median["batch"] - median["none"])
            report[build][f"{how}_instructions_adds_over_batch_adds"] = round(woken, 3)
            print(
                f"plain {build:<9} {how}: adds {woken:.3f}x the instructions Batch adds "
                f"(runs {runs[how][0]:,.0f}-{runs[how][-1]:,.0f})",
                flush=True,
            )
    return report


# -- service: loopwatch serve's rate, and protobuf's decode-only rate ----------------------------
def _history(turn: int) -> list[dict[str, Any]]:
    """A conversation of several KB: what a model call carries when its history is recorded."""
    text = (
        "The customer ordered hiking boots (order 88214), returned them on day 12, and the "
        "return was received at the warehouse; the refund has not shown up on their card yet. "
    )
    out = [{"role": "system", "parts": [{"type": "text", "content": "You are a support agent."}]}]
    for i in range(8):
        role = "user" if i % 2 == 0 else "assistant"
        content = f"({turn}.{i}) " + text * 2
        out.append({"role": role, "parts": [{"type": "text", "content": content}]})
    return out


def histories_requests(turns: int, seed: int) -> list[bytes]:
    """bench_service.py's stream, every model call carrying a prompt history in its
    convention's attributes (GenAI messages, OpenInference input messages, OpenLLMetry
    prompts)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from benchmarks.bench_service import batches
    from testkit.streams import emit_mix, provider

    class Histories(SpanProcessor):  # after streams.Dress, which writes the short messages
        calls = 0

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            attrs = span.attributes or {}
            history = _history(self.calls)
            extra: dict[str, Any] = {}
            if "gen_ai.input.messages" in attrs:
                extra["gen_ai.input.messages"] = json.dumps(history)
            elif attrs.get("openinference.span.kind") == "LLM":  # not a tool's input.value
                extra["input.value"] = json.dumps(history)
                for i, m in enumerate(history[:6]):
                    extra[f"llm.input_messages.{i}.message.role"] = m["role"]
                    extra[f"llm.input_messages.{i}.message.content"] = m["parts"][0]["content"]
            elif "gen_ai.prompt.0.role" in attrs:
                for i, m in enumerate(history[:6]):
                    extra[f"gen_ai.prompt.{i}.role"] = m["role"]
                    extra[f"gen_ai.prompt.{i}.content"] = m["parts"][0]["content"]
            if extra:
                self.calls += 1
                span.set_attributes(extra)

    memory = InMemorySpanExporter()
    tracer = provider(11, Histories(), SimpleSpanProcessor(memory)).get_tracer("bench")
    emit_mix(tracer, turns, seed=seed)
    spans = list(memory.get_finished_spans())
    return [encode_spans(b).SerializePartialToString() for b in batches(spans)]


def _decode(bodies: Sequence[bytes]) -> float:
    """protobuf's decode-only rate of the requests, spans per CPU-second of this thread."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    started = time.thread_time()
    n = 0
    for body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        n += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    return n / (time.thread_time() - started)


def service(args: argparse.Namespace) -> dict[str, Any]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from benchmarks.bench_service import DRIVERS, copies, pre_into_service, span_count
    from testkit.streams import realistic_requests

    make = histories_requests if args.stream == "histories" else realistic_requests
    base = make(args.turns, seed=1)
    per_driver = max(1, (args.copies or 20) // 2)
    shares = [copies(base, per_driver, first=i * per_driver) for i in range(DRIVERS)]
    bodies = [b for share in shares for b in share]
    sent = span_count(bodies)
    # the machine's speed: the requests QUIET_DECODE was measured on, whatever is served
    speed = copies(realistic_requests(args.turns, seed=1), per_driver * DRIVERS, first=0)
    attrs = [
        len(s.attributes)
        for body in base
        for rs in ExportTraceServiceRequest.FromString(body).resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    ]
    print(
        f"{args.stream}: {sent} spans in {len(bodies)} requests ({sum(map(len, bodies)) // sent}"
        f" bytes a span; attributes a span: median {statistics.median(attrs)}, max "
        f"{max(attrs)})",
        flush=True,
    )

    def served(build: str, transport: str) -> float:
        with building(build):
            return pre_into_service(transport, shares, sent, tmp, str(COMPILED))[1]

    with tempfile.TemporaryDirectory() as tmp:
        cells: list[tuple[str, Callable[[], float]]] = [("decode-only", lambda: _decode(speed))]
        cells += [
            (f"{build}/{transport}", partial(served, build, transport))
            for transport in ("grpc", "http")
            for build in BUILDS
        ]
        rows = interleaved(args.rounds, cells)
    decode = med(rows["decode-only"])
    goal = SERVICE_GOAL * decode / QUIET_DECODE
    report: dict[str, Any] = {
        "stream": args.stream,
        "spans_sent": sent,
        "decode_only_spans_per_second": round(decode),
        "goal_spans_per_cpu_second": round(goal),
        "rounds": {k: [round(x) for x in v] for k, v in rows.items()},
    }
    for transport in ("grpc", "http"):
        rate = {b: med(rows[f"{b}/{transport}"]) for b in BUILDS}
        report[transport] = {
            **{f"{b}_spans_per_cpu_second": round(rate[b]) for b in BUILDS},
            "compiled_over_pure": round(rate["compiled"] / rate["pure"], 3),
            "compiled_over_goal": round(rate["compiled"] / goal, 3),
            "compiled_scaled_to_a_quiet_hour": round(rate["compiled"] * QUIET_DECODE / decode),
        }
        x = report[transport]
        print(
            f"service {transport}: pure {rate['pure']:,.0f}, compiled {rate['compiled']:,.0f} "
            f"spans per CPU-second ({x['compiled_over_pure']:.2f}x); the rate stream decodes at "
            f"{decode:,.0f}/s, so the goal is {goal:,.0f} ({x['compiled_over_goal']:.2f}x of it)",
            flush=True,
        )
    return report


# -- profile: where each build's service spends its CPU, by stage ---------------------------------
_MYPYC_FRAME = re.compile(r"CPy(?:Def|Py)_([a-z0-9_]+?)___")


def _compiled_modules() -> dict[str, str]:
    """Compiled module short name (as mypyc names its C functions) -> profile_service stage."""
    from testkit.profile_report import STAGES

    package = ROOT / "src"
    out: dict[str, str] = {}
    for stage, fragments in STAGES:
        for fragment in fragments:
            path = package / fragment
            files = sorted(path.glob("*.py")) if fragment.endswith("/") else [path]
            out.update({f.stem: stage for f in files})
    return out


def stage_of(stack: list[str], modules: dict[str, str]) -> str:
    """profile_report.stage_of, and a compiled build's C functions by their module."""
    from testkit import profile_report as ps

    named = [f for f in stack if not ps._function(f).startswith("0x")]
    if named and ps._function(named[-1]) in ps.WAITS:
        return ps.WAITING
    if any("gc_collect" in f for f in stack):
        return ps.GC
    for frame in reversed(stack):
        found = _MYPYC_FRAME.match(ps._function(frame))
        if found and "__native_" in frame and found.group(1) in modules:
            return modules[found.group(1)]
        if "loopwatch/" in frame:
            stage = ps.stage_of([frame])
            if stage != "other":
                return stage
    return ps.stage_of([f for f in stack if "loopwatch/" not in f])


def shares(raw: str, modules: dict[str, str]) -> tuple[dict[str, float], float]:
    from collections import Counter

    from testkit import profile_report as ps

    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            counts[stage_of(stack.split(";"), modules)] += int(count)
    waiting = counts.pop(ps.WAITING, 0)
    running = sum(counts.values())
    return {k: n / running for k, n in counts.most_common()}, waiting / (waiting + running)


def profile(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks import profile_service as ps
    from benchmarks.bench_service import DRIVERS, copies, span_count

    make = histories_requests if args.stream == "histories" else _mix_requests
    base = make(args.turns, seed=1)
    per_driver = max(1, (args.copies or 60) // 2)
    shares_ = [copies(base, per_driver, first=i * per_driver) for i in range(DRIVERS)]
    sent = sum(span_count(s) for s in shares_)
    modules = _compiled_modules()
    report: dict[str, Any] = {"stream": args.stream, "spans_sent": sent}
    with tempfile.TemporaryDirectory() as tmp:
        for transport in ("grpc", "http"):
            for build in BUILDS:
                with building(build):
                    raw, _ = ps.profile(
                        transport, shares_, sent, 200, tmp, str(COMPILED), ps.py_spy_path(None)
                    )
                got, waiting = shares(raw, modules)
                report[f"{build}/{transport}"] = {
                    "stages": {k: round(v, 3) for k, v in got.items()},
                    "waiting": round(waiting, 3),
                }
    for transport in ("grpc", "http"):
        print(f"profile {transport}: share of the service's running samples (pure / compiled)")
        rows = {b: report[f"{b}/{transport}"]["stages"] for b in BUILDS}
        for stage in dict.fromkeys([*rows["pure"], *rows["compiled"]]):
            pure, comp = (rows[b].get(stage, 0.0) for b in BUILDS)
            print(f"  {stage:<48} {pure:6.1%} {comp:6.1%}")
    return report


def _mix_requests(turns: int, seed: int) -> list[bytes]:
    from testkit.streams import realistic_requests

    return realistic_requests(turns, seed)


# -- main ----------------------------------------------------------------------------------------
def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child_service_passes(stream: str, passes: int) -> dict[str, Any]:
    """The service's work in process, for callgrind: decode each request, build its span views
    and run them through a Pipeline, ``passes`` times over 200 turns (after one pass to warm
    the caches; one and three passes: the difference over two is one pass)."""
    import gc

    from prometheus_client import CollectorRegistry

    from benchmarks.bench_service import CONFIG
    from loopwatch.metrics.exporter import metrics_for
    from loopwatch.service.otlp import parse_protobuf, span_views
    from loopwatch.service.pipeline import Pipeline

    logging.disable(logging.WARNING)  # the undeclared-tool warning
    make = histories_requests if stream == "histories" else _mix_requests
    bodies = make(200, seed=1)
    spans = 0
    for i in range(passes + 1):
        if i == 1:
            gc.collect()
            gc.freeze()
        pipeline = Pipeline(CONFIG, metrics_for(CollectorRegistry()), worker=False)
        for body in bodies:
            views = span_views(parse_protobuf(body)).spans
            spans += len(views) if i else 0
            pipeline.process(views)
        pipeline.finish()
    return {"spans_a_pass": spans // max(1, passes)}


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1:3] == ["child", "service-passes"]:
        print(json.dumps(child_service_passes(sys.argv[3], int(sys.argv[4]))))
        return 0
    if len(sys.argv) > 2 and sys.argv[1:3] == ["child", "plain"]:
        print(json.dumps(child_plain(sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))))
        return 0
    if len(sys.argv) > 2 and sys.argv[1:3] == ["child", "plain-one"]:
        print(json.dumps(child_plain_one(sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "what", choices=["instructions", "worker", "plain", "service", "profile", "all"]
    )
    parser.add_argument("--rounds", type=int, help="worker: 9, plain: 11, service: 3")
    parser.add_argument(
        "--streams",
        type=lambda s: s.split(","),
        default=list(WORKER_STREAMS),
        help="instructions: bench_cost.py worker streams",
    )
    parser.add_argument("--requests", type=int, default=1000, help="plain: requests a segment")
    parser.add_argument(
        "--wake",
        type=lambda s: [int(n) for n in s.split(",")],
        default=[],
        help="plain: also loopwatch with its worker woken at each of these queued items",
    )
    parser.add_argument(
        "--callgrind-runs",
        type=int,
        default=3,
        help="plain: callgrind runs of each setup (the median counts; 0: none)",
    )
    parser.add_argument("--stream", choices=["mix", "histories"], default="mix")
    parser.add_argument("--turns", type=int, default=300, help="service: turns before copying")
    parser.add_argument(
        "--copies", type=int, help="copies of the stream (service: 20, profile: 60)"
    )
    parser.add_argument("--out", type=out_dir, help="directory for builds-WHAT.json")
    args = parser.parse_args()
    check_builds()
    steps: tuple[tuple[str, Callable[[argparse.Namespace], dict[str, Any]], int], ...] = (
        ("instructions", instructions, 1),
        ("worker", worker, 9),
        ("plain", plain, 11),
        ("service", service, 3),
        ("profile", profile, 1),
    )
    report: dict[str, Any] = {"cpus": os.cpu_count()}
    rounds = args.rounds
    for what, fn, default in steps:
        if args.what in (what, "all"):
            args.rounds = rounds or default
            started, cpu = time.monotonic(), _children_cpu()
            report[what] = fn(args)
            took, cpu = time.monotonic() - started, _children_cpu() - cpu
            print(f"{what} took {took / 60:.1f} min ({cpu / 60:.1f} min of CPU in children)")
    print(json.dumps(report, indent=2))
    if args.out:
        name = args.what + ("-histories" if args.stream == "histories" else "")
        Path(args.out, f"builds-{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
