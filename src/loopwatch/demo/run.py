"""``loopwatch demo``: simulated agents through the real processor, the incidents included."""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from typing import TextIO

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from loopwatch.attach.instrument import serve_metrics
from loopwatch.attach.processor import LoopwatchSpanProcessor
from loopwatch.core.config import Config, ConfigError, load_config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.span_view import trace_hex
from loopwatch.core.words import counted, plural
from loopwatch.demo.emit import emit_turn, growing_history
from loopwatch.demo.export import WatchedExporter, otlp_exporter
from loopwatch.demo.scenarios import (
    Turn,
    eleven_empty_searches,
    five_bookings,
    flaky,
    fourteen_tickets,
    healthy,
)
from loopwatch.demo.tally import Tally
from loopwatch.metrics.exporter import metrics_for

DEMO_TOOLS = {
    "create_ticket": ToolDeclaration(
        identity=("customer_id", "order_id"),
        reviewed_parameters=("customer_id", "order_id", "summary"),
    ),
    # a search is its whole arguments: a reworded query is another search (the no-rows streak
    # catches the rewording loop)
    "search_orders": ToolDeclaration(
        identity=("*",), reviewed_parameters=("query", "customer_id"), result="rows"
    ),
    # a booking is its room and hour: a reworded title books the same meeting again
    "book_meeting": ToolDeclaration(
        identity=("room", "start"),
        reviewed_parameters=("room", "start", "title"),
        effect="write",
    ),
}
MODELS = ("gpt-4.1", "gpt-5-mini")  # the second one loops more often: the model switch


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="loopwatch.toml (default: $LOOPWATCH_CONFIG or ./)")
    parser.add_argument("--turns", type=int, default=200, help="turns per model (default 200)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    parser.add_argument(
        "--metrics-address",
        metavar="HOST:PORT",
        help="serve /metrics here (default from config: 127.0.0.1:9464)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--exit", action="store_true", help="exit after the summary (no prompt)")
    mode.add_argument(
        "--forever", action="store_true", help="keep emitting turns in real time until stopped"
    )
    parser.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="send the spans over OTLP/gRPC (e.g. to a Collector or `loopwatch serve`) "
        "instead of the in-process processor",
    )


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--metrics-address: expected HOST:PORT, got {text!r}")
    return host, int(port)


def script(rng: random.Random, turns: int, model: str, phase: int) -> list[Turn]:
    """Healthy traffic with a few retries; the second model loops more; the incidents in phase 1."""
    loop_share = 0.02 if phase == 0 else 0.12
    out: list[Turn] = []
    for _ in range(turns):
        r = rng.random()
        if r < loop_share:
            out.append(flaky(rng, model, attempts=rng.choice((3, 4, 6))))
        elif r < loop_share + 0.05:
            out.append(flaky(rng, model, attempts=2))
        else:
            out.append(healthy(rng, model))
    if phase == 0:
        out.insert(turns // 2, fourteen_tickets(model))
        out.insert(turns // 3, eleven_empty_searches(model))
        out.insert(turns // 4, five_bookings(model))
    return out


class _Progress:
    def __init__(self, out: TextIO, total: int) -> None:
        self.out, self.total, self.done, self.next = out, total, 0, 0
        self.tty = out.isatty()

    def step(self, label: str) -> None:
        self.done += 1
        pct = 100 * self.done // self.total
        if pct >= self.next or self.done == self.total:
            end = "\r" if self.tty and self.done < self.total else "\n"
            self.out.write(f"  {label}: {self.done}/{self.total} turns ({pct}%){end}")
            self.out.flush()
            self.next = pct + 10


def _summary(tally: Tally, out: TextIO) -> None:
    out.write("\nSummary\n")
    out.write(f"  turns finished        {tally.turns}\n")
    out.write(f"  tool calls            {tally.tool_calls}\n")
    out.write(f"  duplicate calls       {tally.repeat_calls} (calls past the first of their key)\n")
    out.write(f"  time past the cap     {tally.over_cap_seconds:.0f} s (what a breaker saves)\n")
    dist = ", ".join(f"{n}:{c}" for n, c in sorted(tally.max_attempts.items()))
    out.write(f"  max attempts per turn {dist}  (attempts:turns)\n")
    out.write("  worst turns (key = tool/identity-hash/outcome; values are never shown)\n")
    for s in tally.worst:
        key = s.worst_key.short() if s.worst_key else "-"
        attempts = plural(s.max_attempts, "attempt")
        out.write(f"    {s.max_attempts:>3} {attempts:<8}  {key:<36} model={s.model} ")
        out.write(f"trace={trace_hex(s.trace_id)}\n")
    out.write("  loops found (tool, error class, kind: turns)\n")
    for (tool, error_class, kind), n in sorted(tally.loops.items()):
        out.write(f"    {tool:<16} {error_class:<18} {kind:<11} {n}\n")


def run(args: argparse.Namespace) -> int:
    out = sys.stdout
    try:
        config = _config(args)
    except ConfigError as e:
        print(f"loopwatch demo: {e}", file=sys.stderr)
        return 2
    provider = TracerProvider(resource=Resource.create({"service.name": "loopwatch-demo"}))
    tally: Tally | None = None
    exporter: WatchedExporter | None = None
    if args.otlp_endpoint:
        exporter = _attach_exporter(args.otlp_endpoint, provider, out)
        if exporter is None:
            return 2
    else:
        tally = _attach_processor(config, provider, out, announce=not args.exit)
        if tally is None:
            return 1
    try:
        _emit(args, provider, tally, exporter, out)
    except KeyboardInterrupt:
        pass
    finally:
        provider.shutdown()
    if exporter is not None and exporter.failed.is_set():
        print(
            f"loopwatch demo: exporting spans to {args.otlp_endpoint} failed; "
            f"{_lost(exporter.spans_lost)} not delivered. Is a Collector or `loopwatch serve` "
            "listening there?",
            file=sys.stderr,
        )
        return 1
    return 0


def _lost(spans: int) -> str:
    return f"{counted(spans, 'span')} {plural(spans, 'was', 'were')}"


def _config(args: argparse.Namespace) -> Config:
    """The config with the flags applied and the demo's tools declared (the file's win)."""
    config = load_config(args.config)
    if args.metrics_address:
        host, port = _address(args.metrics_address)
        config = replace(config, metrics_host=host, metrics_port=port)
    if args.turns < 1:
        raise ConfigError("--turns must be at least 1")
    return replace(config, tools={**DEMO_TOOLS, **config.tools})


def _attach_exporter(
    endpoint: str, provider: TracerProvider, out: TextIO
) -> WatchedExporter | None:
    """The spans go over OTLP to ``endpoint``; None (said on stderr) without the exporter."""
    try:
        exporter = otlp_exporter(endpoint)
    except ImportError as e:
        print(
            f"loopwatch demo: --otlp-endpoint needs the OTLP exporter ({e}); "
            "install the serve extra: pip install 'loopwatch[serve]'",
            file=sys.stderr,
        )
        return None
    provider.add_span_processor(BatchSpanProcessor(exporter))
    out.write(
        f"loopwatch demo: sending spans over OTLP to {endpoint}\n"
        "  the receiving loopwatch counts them with its own declarations: give it\n"
        '  [tools.create_ticket] identity = ["customer_id", "order_id"] and\n'
        '  [tools.search_orders] result = "rows" (deploy/loopwatch/loopwatch.toml has them),\n'
        "  to be exact (without them it infers the failed tickets' key, free text aside).\n"
    )
    return exporter


def _attach_processor(
    config: Config, provider: TracerProvider, out: TextIO, announce: bool
) -> Tally | None:
    """The spans go to the in-process processor, /metrics served (its address said when
    ``announce``: the server stays up); None (said on stderr) when the metrics address cannot
    be bound."""
    tally = Tally(
        metrics_for(
            label_limit=config.label_limit,
            series_limit=config.series_limit,
            label_chars=config.label_chars,
        )
    )
    processor = LoopwatchSpanProcessor(config=config, sink=tally)
    provider.add_span_processor(processor)
    try:
        serve_metrics(config.metrics_host, config.metrics_port)
    except OSError as e:
        print(
            f"loopwatch demo: cannot serve metrics on "
            f"{config.metrics_host}:{config.metrics_port}: {e}",
            file=sys.stderr,
        )
        return None
    if announce:
        address = f"{config.metrics_host}:{config.metrics_port}"
        out.write(f"loopwatch demo: metrics on http://{address}/metrics\n")
    return tally


def _emit(
    args: argparse.Namespace,
    provider: TracerProvider,
    tally: Tally | None,
    exporter: WatchedExporter | None,
    out: TextIO,
) -> None:
    """Both models' turns (forever: again and again, in real time), the summary after each
    round when in process, then /metrics served until Ctrl-C unless ``--exit``."""
    tracer = provider.get_tracer("loopwatch.demo")
    rng = random.Random(args.seed)
    clock = time.time_ns() - 3600 * 10**9  # simulated time: the turns happened in the last hour
    while True:
        for phase, model in enumerate(MODELS):
            turns = script(rng, args.turns, model, phase)
            progress = _Progress(out, len(turns))
            for turn in turns:
                if exporter is not None and exporter.failed.is_set():
                    break
                clock = emit_turn(tracer, turn, clock, usage=growing_history)
                progress.step(f"model {model}")
                if args.forever:
                    time.sleep(0.05)
        provider.force_flush()
        if exporter is not None and exporter.failed.is_set():
            return
        if tally is not None:
            _summary(tally, out)
        if args.forever:
            clock = max(clock, time.time_ns() - 600 * 10**9)
            continue
        break
    if not args.exit and tally is not None:
        out.write("\nServing /metrics; press Ctrl-C to stop.\n")
        out.flush()  # said now, not when the buffer fills: the demo waits here
        while True:
            time.sleep(3600)
