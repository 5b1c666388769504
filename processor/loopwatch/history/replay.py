"""``loopwatch replay PATH...``: stored traces through the service's pipeline, on the spans'
own clock.

The pipeline is ``loopwatch serve``'s (same reading, keys, config and turn rules), driven on
this thread: its clock is the latest span end read so far, so a trace is finalized a grace
period of *span time* after its root arrives, and an idle one after the idle timeout of span
time. Memory is bounded by the traces open within that window (and by the service's own
bounds: ``open_turns``, ``buffer_bytes``), not by the size of the input. At the end of input
every trace still open is finalized."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, TextIO

from loopwatch.core.config import Config, ConfigError, load_config
from loopwatch.core.sink import Sink
from loopwatch.core.spans import SpanView
from loopwatch.history.formats import AUTO, FORMATS, Reader, ReadStats
from loopwatch.history.report import Report, ReportSink

DEFAULT_GRACE = 60.0  # seconds of span time after a root before its trace is finalized
EXIT_OK = 0
EXIT_UNREADABLE = 2
_PROGRESS_SECONDS = 0.5


class Replay:
    """The service's pipeline without its worker thread, on the spans' clock."""

    def __init__(self, config: Config, sink: Sink) -> None:
        from loopwatch.service.pipeline import Pipeline

        self.now = 0.0  # seconds: the latest span end read so far
        self.pipeline = Pipeline(config, sink, clock=self.clock, worker=False)
        self.rooted_at_end = 0  # traces finalized at the end of input: with their root
        self.rootless_at_end = 0  # and without one (its parent never came)
        self._hold = config.grace_seconds + config.idle_timeout_seconds
        # (clock before, clock after) of the batches read within the last hold of span time
        self._recent: deque[tuple[float, float]] = deque()

    def clock(self) -> float:
        return self.now

    def feed(self, spans: list[SpanView]) -> None:
        if not spans:
            return
        before = self.now
        latest = max(s.end_ns for s in spans) / 1e9
        if latest > self.now:
            self.now = latest
        self.pipeline.process(spans)
        self.pipeline.advance()
        recent = self._recent
        recent.append((before, self.now))
        while recent[0][1] <= self.now - self._hold:
            recent.popleft()

    def settled(self) -> float:
        """Span time up to which every turn has reached the sink, for input in time order.

        A trace is finalized a grace period after its root arrives, or the idle timeout after
        its last span did; a span arrives with its batch, on the clock after that batch (its
        latest end), though it may have ended as early as the clock before it. So a turn still
        to come arrived in a batch read within the last grace plus idle timeout, and ended no
        earlier than the clock before the oldest of those batches."""
        horizon = self.now - self._hold
        return min(self._recent[0][0], horizon) if self._recent else horizon

    def finish(self) -> None:
        self.rooted_at_end, self.rootless_at_end = self.pipeline.finish()


@dataclass
class Outcome:
    report: Report
    stats: ReadStats
    replay: Replay
    seconds: float  # wall time
    cpu_seconds: float


class Progress:
    """A one-line progress display on a terminal: files, spans and spans/s."""

    def __init__(self, out: TextIO | None, stats: ReadStats) -> None:
        self.out = out
        self.stats = stats
        self.started = time.monotonic()
        self.next = self.started + _PROGRESS_SECONDS
        self.file = ""
        self.shown = False

    def on_file(self, index: int, name: str) -> None:
        self.file = f"file {index + 1}/{self.stats.files}"

    def tick(self) -> None:
        if self.out is None:
            return
        now = time.monotonic()
        if now < self.next:
            return
        self.next = now + _PROGRESS_SECONDS
        rate = self.stats.spans / max(now - self.started, 1e-9)
        mib = self.stats.bytes_read / (1 << 20)
        self.out.write(
            f"\r  {self.file}: {self.stats.spans:,} spans, {mib:,.1f} MiB read, "
            f"{rate:,.0f} spans/s\x1b[K"
        )
        self.out.flush()
        self.shown = True

    def done(self) -> None:
        if self.out is not None and self.shown:
            self.out.write("\r\x1b[K")
            self.out.flush()


def run_replay(
    paths: list[str],
    config: Config,
    forced: str = AUTO,
    forward: Sink | None = None,
    progress: TextIO | None = None,
    on_batch: Any = None,
) -> Outcome:
    """Read ``paths`` through the pipeline; the report, what the reader met, and the engine."""
    report = Report()
    replay = Replay(config, ReportSink(report, forward))
    stats = ReadStats()
    shown = Progress(progress, stats)
    reader = Reader(paths, forced, stats, on_file=shown.on_file)
    started, cpu = time.monotonic(), time.process_time()
    for batch in reader.batches():
        replay.feed(batch)
        if on_batch is not None:
            on_batch(replay.settled())
        shown.tick()
    replay.finish()
    shown.done()
    return Outcome(report, stats, replay, time.monotonic() - started, time.process_time() - cpu)


# -- the command ---------------------------------------------------------------------------------
def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=AUTO,
        help="input format (default: detected from each file's content)",
    )
    parser.add_argument(
        "--config", metavar="PATH", help="loopwatch.toml (default: $LOOPWATCH_CONFIG, ./)"
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=DEFAULT_GRACE,
        metavar="SECONDS",
        help="span time after a trace's root before its turns are finalized "
        f"(default {DEFAULT_GRACE:g}); every turn is finalized at the end of input anyway",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="files, directories, globs or - (stdin): OTLP JSON or protobuf (the Collector's "
        "file exporter), Jaeger or Tempo JSON; plain, gzip or zstd",
    )
    add_input_arguments(parser)
    parser.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    parser.add_argument(
        "--openmetrics",
        metavar="FILE",
        help="also write the series /metrics would have shown, with the spans' own times, as "
        "OpenMetrics for `promtool tsdb create-blocks-from openmetrics`",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="--openmetrics: one sample per series every SECONDS of span time (default 60)",
    )
    parser.add_argument(
        "--job",
        default="loopwatch",
        help="--openmetrics: the job label of every series (default loopwatch, as the alerts "
        "and dashboards expect)",
    )
    parser.add_argument(
        "--instance",
        default="replay",
        help="--openmetrics: the instance label of every series (default replay: distinct from "
        "live replicas, so backfilled and scraped samples never collide)",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress line, even on a terminal"
    )


def load(args: argparse.Namespace, command: str) -> Config | None:
    """The config with the replay's grace, or None after printing why not."""
    try:
        config = load_config(args.config)
    except ConfigError as e:
        print(f"loopwatch {command}: {e}", file=sys.stderr)
        return None
    if not args.grace >= 0:
        print(f"loopwatch {command}: --grace must be 0 or more seconds", file=sys.stderr)
        return None
    return replace(config, grace_seconds=args.grace)


def input_lines(outcome: Outcome, name: str = "") -> list[str]:
    """What the reader met, for stderr: problems by file and line, traces without a root."""
    stats, replay, report = outcome.stats, outcome.replay, outcome.report
    prefix = f"{name}: " if name else ""
    lines = []
    for problem in stats.problems:
        lines.append(f"{prefix}skipped {problem}")
    if stats.skipped > len(stats.problems):
        lines.append(f"{prefix}... and {stats.skipped - len(stats.problems)} more skipped")
    lines.extend(f"{prefix}{note}" for note in stats.notes)
    if replay.rootless_at_end:
        lines.append(
            f"{prefix}{replay.rootless_at_end} traces had no root span in the input (a parent "
            "span missing): their turns were finalized at the end of input"
        )
    idle = report.evicted.get("idle", 0)
    if idle:
        lines.append(
            f"{prefix}{idle} turns were finalized after the idle timeout "
            "(no root span arrived within it)"
        )
    if report.late_spans:
        lines.append(
            f"{prefix}{report.late_spans} spans arrived after their trace was finalized "
            "(files out of time order? pass them in order, or raise --grace)"
        )
    return lines


def read_summary(outcome: Outcome) -> str:
    stats = outcome.stats
    rate = stats.spans / outcome.cpu_seconds if outcome.cpu_seconds > 0 else 0.0
    return (
        f"{stats.files_read} of {stats.files} files, {stats.units:,} requests, "
        f"{stats.spans:,} spans ({stats.skipped} skipped), {outcome.report.turns:,} turns; "
        f"{outcome.seconds:.1f} s, {rate:,.0f} spans per CPU-second"
    )


@contextlib.contextmanager
def own_process() -> Iterator[None]:
    """While a command runs: the garbage collector set as ``loopwatch serve`` sets it (what is
    loaded frozen, young objects collected every 50,000 allocations; with Python's defaults it
    took a sixth of a replay's CPU). Restored afterwards, for a host that called the command."""
    from loopwatch.service.run import tune_collector

    thresholds = gc.get_threshold()
    tune_collector()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def run(args: argparse.Namespace) -> int:
    with own_process():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    config = load(args, "replay")
    if config is None:
        return EXIT_UNREADABLE
    if not args.interval > 0:
        print("loopwatch replay: --interval must be more than 0 seconds", file=sys.stderr)
        return EXIT_UNREADABLE
    writer = None
    if args.openmetrics:
        from loopwatch.history.openmetrics import OpenMetricsWriter

        try:
            writer = OpenMetricsWriter.open(
                args.openmetrics,
                config,
                args.interval,
                {"job": args.job, "instance": args.instance},
            )
        except (OSError, ValueError) as e:
            print(f"loopwatch replay: cannot write {args.openmetrics}: {e}", file=sys.stderr)
            return EXIT_UNREADABLE
    progress = sys.stderr if sys.stderr.isatty() and not args.no_progress else None
    try:
        outcome = run_replay(
            args.paths,
            config,
            args.format,
            forward=writer,
            progress=progress,
            on_batch=writer.advance if writer is not None else None,
        )
    finally:
        if writer is not None:
            writer.close()
    for line in input_lines(outcome):
        print(f"loopwatch replay: {line}", file=sys.stderr)
    if not outcome.stats.spans:
        print("loopwatch replay: no spans could be read", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        _write_report(args, outcome, writer)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        stdout_gone()
    return EXIT_OK


def stdout_gone() -> None:
    """stdout's reader went away: point it at /dev/null so exiting does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _write_report(args: argparse.Namespace, outcome: Outcome, writer: Any) -> None:
    if args.json:
        document = outcome.report.to_json()
        document["input"] = {
            "files": outcome.stats.files,
            "files_read": outcome.stats.files_read,
            "requests": outcome.stats.units,
            "spans": outcome.stats.spans,
            "rejected_spans": outcome.stats.rejected_spans,
            "skipped": outcome.stats.skipped,
            "problems": [str(p) for p in outcome.stats.problems],
            "traces_without_root": outcome.replay.rootless_at_end,
        }
        if writer is not None:
            document["openmetrics"] = writer.summary()
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        out = sys.stdout
        out.write(f"loopwatch replay: {read_summary(outcome)}\n\n")
        outcome.report.write_text(out)
        if writer is not None:
            s = writer.summary()
            out.write(
                f"\nOpenMetrics: {s['samples']:,} samples in {s['scrapes']:,} scrapes every "
                f"{args.interval:g} s to {args.openmetrics}\n"
                "  backfill: promtool tsdb create-blocks-from openmetrics "
                f"{args.openmetrics} DATA_DIR\n"
            )
    sys.stdout.flush()
