"""Cost per span of LoopwatchSpanProcessor vs the SDK's BatchSpanProcessor, same spans, same run.

    .venv/bin/python benchmarks/bench_processor.py [--turns 300] [--rounds 15]

Reports medians over interleaved rounds and their ratio (the machine is shared and noisy, so
absolute times drift; the ratio is the figure). Three numbers per span kind:
- on_end: what the agent's thread pays (goal: tool <= 1.0x, other <= 0.25x of Batch's);
  on_start+on_end is shown too, since loopwatch's on_start tests the span's trace (and, in a
  trace without turn spans, its attributes and name) and queues its ids, name and attributes
  (Batch's does nothing). These replay finished spans, cold in the CPU's caches by
  then; the last line times on_start as the SDK calls it, on each span it has just written.
- worker: what loopwatch's background thread then spends reading and assembling the span
- total: both, against BatchSpanProcessor.on_end (loopwatch does far more work; it just does it
  off the agent's thread). The "all" row is the realistic stream: every span in end order, so
  the worker's figure includes finalizing each turn and updating the metrics.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer
from prometheus_client import CollectorRegistry

from loopwatch import LoopwatchSpanProcessor
from loopwatch.conventions.read import is_tool_span
from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.emit import CONVENTIONS, emit_turn
from loopwatch.demo.scenarios import eleven_empty_searches, flaky, fourteen_tickets, healthy
from testkit.span_views import span_view

CONFIG = Config(
    tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))},
    queue_spans=10**7,
)


class NullExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _emit_turns(tracer: Tracer, turns: int, seed: int) -> None:
    import random

    rng = random.Random(seed)
    t = 10**18
    for i in range(turns):
        convention = CONVENTIONS[i % 3]
        r = rng.random()
        turn = (
            fourteen_tickets()
            if r < 0.02
            else eleven_empty_searches()
            if r < 0.04
            else flaky(rng, "m", attempts=3)
            if r < 0.2
            else healthy(rng, "m")
        )
        t = emit_turn(tracer, turn, t, convention)


def make_spans(turns: int, seed: int) -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    """Real SDK spans of a realistic mix (three conventions), split into tool and other."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    _emit_turns(provider.get_tracer("bench"), turns, seed)
    spans = list(memory.get_finished_spans())
    tools = [s for s in spans if is_tool_span(span_view(s))]
    others = [s for s in spans if not is_tool_span(span_view(s))]
    return tools, others


class _TimedStarts(SpanProcessor):
    """Times ``inner.on_start`` as the SDK calls it, on the span it has just written (in the
    CPU's caches, as in an agent; the finished spans per_span_ns replays are not)."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner
        self.ns = 0
        self.calls = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        started = time.perf_counter_ns()
        self.inner.on_start(span, parent_context)
        self.ns += time.perf_counter_ns() - started
        self.calls += 1


def live_start_ns(inner: SpanProcessor, turns: int, seed: int) -> float:
    """``inner.on_start``'s time a span as the spans of ``turns`` start (timer included)."""
    timed = _TimedStarts(inner)
    provider = TracerProvider()
    provider.add_span_processor(timed)
    # loopwatch's worker waits: only on_start is timed
    held = inner.worker.held() if isinstance(inner, LoopwatchSpanProcessor) else None
    with held if held is not None else contextlib.nullcontext():
        _emit_turns(provider.get_tracer("bench"), turns, seed)
    return timed.ns / timed.calls


def per_span_ns(fn: Callable[[ReadableSpan], None], spans: list[ReadableSpan]) -> float:
    start = time.perf_counter_ns()
    for s in spans:
        fn(s)
    return (time.perf_counter_ns() - start) / len(spans)


def worker_ns(spans: list[ReadableSpan]) -> float:
    """Time for loopwatch's worker to read and assemble ``spans`` (queue pre-filled)."""
    processor = LoopwatchSpanProcessor(config=CONFIG, registry=CollectorRegistry())
    with processor.worker.held():  # hold the worker while the queue fills, then time a round
        for s in spans:
            processor.on_end(s)
        start = time.perf_counter_ns()
        processor.worker.step()
        elapsed = time.perf_counter_ns() - start
    processor.shutdown()
    return elapsed / len(spans)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)

    results: dict[str, dict[str, list[float]]] = {}
    live: dict[str, list[float]] = {}
    for r in range(args.rounds):
        tools, others = make_spans(args.turns, seed=r)  # fresh span ids every round
        mixed = sorted(tools + others, key=lambda s: s.end_time or 0)  # as the agent ends them
        for kind, spans in (("tool", tools), ("other", others), ("all", mixed)):
            res = results.setdefault(
                kind, {"batch": [], "on_end": [], "worker": [], "batch_start": [], "on_start": []}
            )
            batch = BatchSpanProcessor(NullExporter(), max_queue_size=10**6)
            loop = LoopwatchSpanProcessor(config=CONFIG, registry=CollectorRegistry())
            # interleave, so both see the same machine
            pairs = [
                ("batch_start", batch.on_start),
                ("on_start", loop.on_start),
                ("batch", batch.on_end),
                ("on_end", loop.on_end),
            ]
            for name, fn in pairs if r % 2 else [pairs[1], pairs[0], pairs[3], pairs[2]]:
                res[name].append(per_span_ns(fn, spans))  # type: ignore[arg-type]
            batch.shutdown()
            loop.shutdown()
            res["worker"].append(worker_ns(spans))
        # on_start as spans start, each call timed, beside the timer alone (a no-op on_start)
        live_setups: list[tuple[str, Callable[[], SpanProcessor]]] = [
            ("timer", SpanProcessor),
            ("batch", lambda: BatchSpanProcessor(NullExporter(), max_queue_size=10**6)),
            (
                "loopwatch",
                lambda: LoopwatchSpanProcessor(config=CONFIG, registry=CollectorRegistry()),
            ),
        ]
        for name, make in live_setups if r % 2 else live_setups[::-1]:
            processor = make()
            live.setdefault(name, []).append(live_start_ns(processor, args.turns, seed=r))
            processor.shutdown()
        print(f"  round {r + 1}/{args.rounds}", file=sys.stderr)

    print(f"spans per round: tool {len(tools)}, other {len(others)}; rounds {args.rounds}")
    print(
        f"{'kind':<6} {'Batch on_end':>13} {'loopwatch on_end':>17} {'ratio':>6} {'goal':>5}"
        f" {'start+end ratio':>16} {'worker':>10} {'(start+end+worker)/Batch':>25}"
    )
    for kind, goal in (("tool", 1.0), ("other", 0.25), ("all", float("nan"))):
        res = results[kind]
        keys = ("batch", "on_end", "worker", "batch_start", "on_start")
        b, o, w, bs, os_ = (statistics.median(res[k]) for k in keys)
        print(
            f"{kind:<6} {b:>10.0f} ns {o:>14.0f} ns {o / b:>5.2f}x {goal:>4.2f}x"
            f" {(os_ + o) / (bs + b):>15.2f}x {w:>7.0f} ns {(os_ + o + w) / (bs + b):>24.1f}x"
        )
    timer, batch_start, loop_start = (
        statistics.median(live[k]) for k in ("timer", "batch", "loopwatch")
    )
    b, o = (statistics.median(results["all"][k]) for k in ("batch", "on_end"))
    added = (max(loop_start - timer, 0.0), max(batch_start - timer, 0.0))
    print(
        f"on_start as spans start (each call timed; the timer alone {timer:.0f} ns, taken off): "
        f"Batch {added[1]:.0f} ns, loopwatch {added[0]:.0f} ns; with on_end (all): "
        f"{(added[0] + o) / (added[1] + b):.2f}x Batch's"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
