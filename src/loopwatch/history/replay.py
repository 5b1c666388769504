"""``loopwatch replay PATH...``: stored traces through the service's pipeline, a whole trace at
a time, in time order, whatever order they were stored in.

A batch job in two passes: the input is read once and its spans grouped by trace in temporary
files (:mod:`loopwatch.history.by_trace`, memory bounded by ``Limits``); then every trace goes
through ``loopwatch serve``'s pipeline (same reading, keys, config and turn rules), in order of
its earliest span end, and is finalized as soon as it has: nothing of it can come later, so the
numbers are the same for any order of lines and any split of the spans across files. The clock
is span time: the earliest span end of the trace being fed."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, TextIO

from loopwatch.core.config import Config, ConfigError, load_config
from loopwatch.core.log_view import LogView
from loopwatch.core.sink import Sink
from loopwatch.core.summary import TurnSummary
from loopwatch.core.words import counted, plural
from loopwatch.history.by_trace import DEFAULT_LIMITS, Grouping, GroupingError, Limits, Trace
from loopwatch.history.formats import AUTO, FORMATS, Reader, ReadStats
from loopwatch.history.progress import Progress
from loopwatch.history.report import Report, ReportSink
from loopwatch.service.otlp import REMOTE_PARENT

EXIT_OK = 0
EXIT_UNREADABLE = 2
CHUNK_SPANS = 512  # spans through the pipeline at once: a BatchSpanProcessor's export batch


class Replayer:
    """The service's pipeline without its worker thread, fed whole traces in time order."""

    def __init__(
        self,
        config: Config,
        sink: Sink,
        loop_spans: Callable[[TurnSummary], None] | None = None,
    ) -> None:
        from loopwatch.service.pipeline import Pipeline

        self.now = 0.0  # seconds: the earliest span end of the latest trace fed
        self.pipeline = Pipeline(
            config, sink, clock=self.clock, worker=False, loop_spans=loop_spans
        )
        self.traces = 0
        self.rootless = 0  # traces without a root span (a parent missing): their turns cut
        self._idle = config.idle_timeout_seconds

    def clock(self) -> float:
        return self.now

    def feed(self, traces: list[Trace]) -> None:
        """Whole traces, in order of earliest span end (as ``Grouping.traces`` gives them), at
        most ``config.max_open_turns``: their turns reach the sink before this returns. Their
        spans go through the pipeline together (a request's worth, as the service takes them)
        at the clock of the last; then each trace is finalized in turn at its own."""
        if not traces:
            return
        pipeline = self.pipeline
        self.now = traces[-1].first_end_ns / 1e9
        pipeline.process(
            traces[0].spans if len(traces) == 1 else [s for t in traces for s in t.spans]
        )
        for trace in traces:
            self.now = trace.first_end_ns / 1e9
            # a local root, or the top of this process's part (its parent in another process)
            rooted = any(s.parent_id is None or s.extra.get(REMOTE_PARENT) for s in trace.spans)
            if not rooted:
                self.rootless += 1
            pipeline.complete(trace.trace_id, cut=not rooted)
        pipeline.advance()
        self.traces += len(traces)

    def feed_logs(self, logs: list[LogView]) -> None:
        """One request of stored log records (the coding agents' events), in the order of the
        file, at the clock of its latest record: a turn ends as in ``serve``, at the session's
        next prompt or after the idle timeout (in record time)."""
        from loopwatch.service.pipeline import LogBatch

        latest = max((v.time_ns for v in logs), default=0) / 1e9
        self.now = max(self.now, latest)
        self.pipeline.process(LogBatch(logs))
        self.pipeline.advance()

    def logs_done(self) -> None:
        """Every stored log record is in: the log turns still open end as idle ones."""
        self.now += self._idle + 1.0
        self.pipeline.advance()

    def settled(self) -> float:
        """Span time up to which every turn has reached the sink. A trace is finalized as it
        is fed, and every span of the traces still to come ends at the clock or later (the
        earliest span end of the last trace fed); only a hand-rolled turn (model calls across
        traces) stays open, while its last model call ended within the idle timeout."""
        return self.now - self._idle

    def finish(self) -> None:
        self.pipeline.finish()


@dataclass
class ReplayResult:
    """What one replay gave: its report, what was read, the replayer, and its time."""

    report: Report
    stats: ReadStats
    replay: Replayer
    seconds: float  # wall time
    cpu_seconds: float


def chunks(traces: Iterator[Trace], config: Config) -> Iterator[list[Trace]]:
    """Consecutive traces, up to CHUNK_SPANS spans (or one larger trace) and at most
    ``max_open_turns`` traces a chunk (all of them are open at once)."""
    chunk: list[Trace] = []
    spans = 0
    most = config.max_open_turns
    for trace in traces:
        if chunk and (spans + len(trace.spans) > CHUNK_SPANS or len(chunk) >= most):
            yield chunk
            chunk, spans = [], 0
        chunk.append(trace)
        spans += len(trace.spans)
    if chunk:
        yield chunk


def run_replay(
    paths: list[str],
    config: Config,
    forced: str = AUTO,
    forward: Sink | None = None,
    progress: TextIO | None = None,
    on_batch: Any = None,
    limits: Limits = DEFAULT_LIMITS,
    loop_spans: Callable[[TurnSummary], None] | None = None,
) -> ReplayResult:
    """Read ``paths`` through the pipeline; the report, what the reader met, and the engine.
    ``on_batch(settled)`` after each chunk of traces fed (``Replayer.settled``); ``loop_spans``
    takes each turn with loops. Raises GroupingError when the temporary files cannot be
    written."""
    if loop_spans is None:  # no loop marks built: they would go nowhere
        config = replace(config, loop_spans_per_turn=0)
    report = Report()
    replay = Replayer(config, ReportSink(report, forward), loop_spans)
    stats = ReadStats()
    shown = Progress(progress, stats)
    reader = Reader(paths, forced, stats, on_file=shown.on_file, on_logs=replay.feed_logs)
    started, cpu = time.monotonic(), time.process_time()
    try:
        with Grouping(limits) as grouping:
            for batch in reader.batches():
                grouping.add(batch)
                shown.tick()
            if stats.log_records:
                replay.logs_done()
            fed = 0
            for chunk in chunks(grouping.traces(on_bucket=shown.sorting), config):
                replay.feed(chunk)
                if on_batch is not None:
                    on_batch(replay.settled())
                fed += sum([len(t.spans) for t in chunk])
                shown.replaying(fed)
            replay.finish()
    finally:
        shown.done()
    seconds, cpu_seconds = time.monotonic() - started, time.process_time() - cpu
    return ReplayResult(report, stats, replay, seconds, cpu_seconds)


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
    # accepted, and without effect: every trace is read whole before its turns are finalized,
    # so there is nothing to wait for
    parser.add_argument("--grace", type=float, metavar="SECONDS", help=argparse.SUPPRESS)


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
        "--export-otlp",
        metavar="URL",
        help="also send a loopwatch.loop span per loop, in its own trace, to this OTLP/gRPC "
        "endpoint, e.g. http://localhost:4317 ([serve] export_otlp)",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress line, even on a terminal"
    )


def load(args: argparse.Namespace, command: str) -> Config | None:
    """The config, or None after printing why not."""
    try:
        return load_config(args.config)
    except ConfigError as e:
        print(f"loopwatch {command}: {e}", file=sys.stderr)
        return None


def command(
    name: str, body: Callable[[argparse.Namespace, Config], int]
) -> Callable[[argparse.Namespace], int]:
    """``loopwatch NAME``'s run: ``body`` with the config loaded (exit 2 when it cannot be),
    in the collector settings of :func:`own_process`."""

    def run(args: argparse.Namespace) -> int:
        with own_process():
            config = load(args, name)
            return EXIT_UNREADABLE if config is None else body(args, config)

    return run


def input_lines(outcome: ReplayResult, name: str = "") -> list[str]:
    """What the reader met, for stderr: problems by file and line, traces without a root."""
    stats, replay, report = outcome.stats, outcome.replay, outcome.report
    prefix = f"{name}: " if name else ""
    lines = []
    for problem in stats.problems:
        lines.append(f"{prefix}skipped {problem}")
    if stats.skipped > len(stats.problems):
        lines.append(f"{prefix}... and {stats.skipped - len(stats.problems)} more skipped")
    lines.extend(f"{prefix}{note}" for note in stats.notes)
    if replay.rootless:
        lines.append(
            f"{prefix}{counted(replay.rootless, 'trace')} had no root span in the input (a "
            "parent span missing): their turns were finalized with the spans the input holds, "
            "counted as cut short (turns evicted: shutdown)"
        )
    idle = report.evicted.get("idle", 0)
    if idle and stats.log_records:
        # a coding agent's prompt has no end mark: its last turn of a session ends idle
        lines.append(
            f"{prefix}{counted(idle, 'turn')} of log events or model calls "
            f"{plural(idle, 'was', 'were')} finalized after the idle timeout of record time "
            "(a session's last prompt has no end mark)"
        )
    elif idle:
        lines.append(
            f"{prefix}{counted(idle, 'hand-rolled turn')} {plural(idle, 'was', 'were')} "
            "finalized after the idle timeout of span time (the model's answer never came)"
        )
    if report.late_spans:
        lines.append(
            f"{prefix}{counted(report.late_spans, 'model call')} came after their hand-rolled "
            "turn had ended (its answer came before them): counted as late spans"
        )
    return lines


def read_summary(outcome: ReplayResult) -> str:
    stats = outcome.stats
    rate = stats.spans / outcome.cpu_seconds if outcome.cpu_seconds > 0 else 0.0
    logs = (
        f"{counted(stats.log_records, 'log record', grouped=True)}, " if stats.log_records else ""
    )
    return (
        f"{stats.files_read} of {counted(stats.files, 'file')}, "
        f"{counted(stats.units, 'request', grouped=True)}, "
        f"{counted(stats.spans, 'span', grouped=True)} ({stats.skipped} skipped), {logs}"
        f"{counted(outcome.report.turns, 'turn', grouped=True)}; "
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


def _run(args: argparse.Namespace, config: Config) -> int:
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
    lost = LostLoopSpans()
    export = None
    if args.export_otlp or config.export_otlp:
        from loopwatch.loopspans.export import loop_export_for

        config, export = loop_export_for(config, lost, args.export_otlp)
    try:
        outcome = run_replay(
            args.paths,
            config,
            args.format,
            forward=writer,
            progress=progress,
            on_batch=writer.advance if writer is not None else None,
            loop_spans=export,
        )
    except GroupingError as e:
        print(f"loopwatch replay: {e}", file=sys.stderr)
        return EXIT_UNREADABLE
    finally:
        if writer is not None:
            writer.close()
        if export is not None:
            export.shutdown()
    if export is not None:
        print(f"loopwatch replay: loop spans to {export.endpoint}: {lost.line()}", file=sys.stderr)
    for line in input_lines(outcome):
        print(f"loopwatch replay: {line}", file=sys.stderr)
    if not outcome.stats.spans and not outcome.stats.log_records:
        print("loopwatch replay: no spans could be read (nor log records)", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        _write_report(args, outcome, writer)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        stdout_gone()
    return EXIT_OK


run = command("replay", _run)


class LostLoopSpans:
    """Loop spans a replay could not send, by reason (said on stderr at the end)."""

    def __init__(self) -> None:
        self.by_reason: dict[str, int] = {}

    def __call__(self, reason: str, count: int) -> None:
        self.by_reason[reason] = self.by_reason.get(reason, 0) + count

    def line(self) -> str:
        if not self.by_reason:
            return "all sent"
        return ", ".join(f"{n} not sent ({reason})" for reason, n in sorted(self.by_reason.items()))


def stdout_gone() -> None:
    """stdout's reader went away: point it at /dev/null so exiting does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _write_report(args: argparse.Namespace, outcome: ReplayResult, writer: Any) -> None:
    if args.json:
        document = outcome.report.to_json()
        document["input"] = {
            "files": outcome.stats.files,
            "files_read": outcome.stats.files_read,
            "requests": outcome.stats.units,
            "spans": outcome.stats.spans,
            "log_records": outcome.stats.log_records,
            "rejected_spans": outcome.stats.rejected_spans,
            "skipped": outcome.stats.skipped,
            "problems": [str(p) for p in outcome.stats.problems],
            "traces": outcome.replay.traces,
            "traces_without_root": outcome.replay.rootless,
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
