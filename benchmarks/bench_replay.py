"""``loopwatch replay`` against ``loopwatch serve``, per CPU-second, in the same run; and
``loopwatch compare``'s false-alarm rate and power.

    .venv/bin/python benchmarks/bench_replay.py rate [--turns 300] [--copies 10] [--rounds 3]
                                                     [--out DIR]
    .venv/bin/python benchmarks/bench_replay.py memory [--spans 100000 1000000 ...]
                                                       [--format json|proto] [--out DIR]
    .venv/bin/python benchmarks/bench_replay.py json-split [--copies 40] [--rounds 3]
    .venv/bin/python benchmarks/bench_replay.py read [--copies 8] [--passes 7]
    .venv/bin/python benchmarks/bench_replay.py false-alarms [--seeds 2000] [--out DIR]
    .venv/bin/python benchmarks/bench_replay.py json-stages STAGE N   # under callgrind

json-stages: the rate stream's file exporter JSON lines (300 turns) read N times in process,
up to STAGE: "none" (nothing) or "views" (each line decoded and its spans read into their
views). Under callgrind, one and three passes: the difference over two, over the spans a pass,
is one pass's cost of reading the lines.

rate: bench_service.py's realistic stream (spans with 15-30 attributes, fresh ids and values in
every copy), written as the Collector's file exporter writes it: ``format: proto`` (length-
prefixed requests of 512 spans), ``format: json`` (one request a line, hex ids) and that JSON
gzipped; and as Jaeger 2's API v3 streams it (each request under ``result``, a line each).
Each file is replayed in a fresh process, its CPU time taken around the replay alone (reading,
conversion, the pipeline, the report; not the interpreter's start). The same copies
go into ``loopwatch serve`` over gRPC from two driver processes (bench_service.py's
``pre_into_service``), its CPU-seconds measured the same way; and, for the JSON files, as
OTLP/JSON over HTTP (``service-http-json``: the service reading the same JSON). Interleaved
rounds, medians, and each replay's ratio to the service's spans per CPU-second: the machine is
shared, so the ratio is the figure.

read: that stream's lines read into span views in one process, no pipeline, as the file
exporter's JSON and as Jaeger API v3's streamed answer: the best of the passes, µs a span.

json-split: where the CPU of replaying that stream's file exporter JSON goes, per span: reading
the lines into span views, and the pipeline after it; and, beside them, Python's json.loads
and freeing its dicts.

memory: the peak memory of ``loopwatch replay FILE --openmetrics OUT`` over files of that
stream's spans as a long stored period would hold them (copies in time order, each under new
trace ids, one every hour of span time), written as the file exporter's gzipped JSON (or its
``format: proto``): each in a fresh process, the peak resident set after the imports (the
kernel's high-water mark, reset once loopwatch is loaded) and its growth between sizes.

false-alarms: ``compare``'s decision on runs of 200 turns each through loopwatch's core (turn
summaries as testkit/summaries.py builds them): on identical distributions (the false-alarm
rate, per baseline loop share), and on a candidate where one turn in 20 loops at 3-4 attempts
against a clean and a slightly noisy baseline (the detection rate).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from benchmarks.bench_service import DRIVERS, copies, pre_into_service
from loopwatch.service.otlp import hex_ids_json
from testkit.results_dir import out_dir
from testkit.stored import COPY_EVERY_NS, collector_json_line, jaeger_v3_lines, stored_stream
from testkit.streams import realistic_requests

FILES = {
    "replay-proto": "traces.binpb",
    "replay-json": "traces.json",
    "replay-json-gz": "t.json.gz",
    "replay-jaeger-v3": "jaeger-v3.ndjson",  # Jaeger 2's /api/v3/traces, streamed
}


def write_files(bodies: list[bytes], directory: Path) -> None:
    proto = bytearray()
    lines = []
    for body in bodies:
        proto += len(body).to_bytes(4, "big") + body
        lines.append(collector_json_line(ExportTraceServiceRequest.FromString(body)))
    (directory / FILES["replay-proto"]).write_bytes(bytes(proto))
    text = b"".join(lines)
    (directory / FILES["replay-json"]).write_bytes(text)
    (directory / FILES["replay-json-gz"]).write_bytes(gzip.compress(text))
    (directory / FILES["replay-jaeger-v3"]).write_bytes(jaeger_v3_lines(lines))


def child(path: str) -> None:
    """Replay one file in this fresh process; print its spans and the CPU the replay took."""
    from benchmarks.bench_service import CONFIG
    from loopwatch.history.replay import own_process, run_replay

    with own_process():  # as `loopwatch replay` does
        cpu = time.process_time()
        outcome = run_replay([path], CONFIG)
        cpu = time.process_time() - cpu
    print(json.dumps({"spans": outcome.stats.spans, "cpu": cpu, "turns": outcome.report.turns}))


def replay_rate(path: Path) -> tuple[float, int]:
    done = subprocess.run(
        [sys.executable, __file__, "child", str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["spans"] / result["cpu"], result["spans"]


def rate(args: argparse.Namespace) -> None:
    base = realistic_requests(args.turns, seed=1)
    per_driver = max(1, args.copies // DRIVERS)
    shares = [copies(base, per_driver, first=i * per_driver) for i in range(DRIVERS)]
    bodies = [body for share in shares for body in share]
    json_shares = [
        [hex_ids_json(ExportTraceServiceRequest.FromString(body)) for body in share]
        for share in shares
    ]
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        write_files(bodies, directory)
        sizes = {k: (directory / f).stat().st_size for k, f in FILES.items()}
        sent = 0
        for name in FILES:
            _, spans = replay_rate(directory / FILES[name])  # warm the page cache; count
            sent = spans
        print(f"{sent} spans; file sizes {sizes}", flush=True)
        names = ["service-grpc", "service-http-json", *FILES]
        for round_ in range(args.rounds):
            for name in names if round_ % 2 == 0 else names[::-1]:
                if name == "service-grpc":
                    _, per_cpu = pre_into_service("grpc", shares, sent, tmp)
                elif name == "service-http-json":
                    _, per_cpu = pre_into_service("http-json", json_shares, sent, tmp)
                else:
                    per_cpu, spans = replay_rate(directory / FILES[name])
                    assert spans == sent, (name, spans, sent)
                rows.setdefault(name, []).append(per_cpu)
            print(
                f"round {round_ + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rows.items()),
                flush=True,
            )
    medians = {k: statistics.median(v) for k, v in rows.items()}
    report = {
        "spans": sent,
        "file_bytes": sizes,
        "spans_per_cpu_second": {k: round(v) for k, v in medians.items()},
        "rounds_per_cpu_second": {k: [round(x) for x in v] for k, v in rows.items()},
        "ratio_to_service_grpc": {k: round(medians[k] / medians["service-grpc"], 2) for k in FILES},
        # the JSON files against the service reading the same requests as OTLP/JSON
        "ratio_to_service_http_json": {
            k: round(medians[k] / medians["service-http-json"], 2)
            for k in ("replay-json", "replay-json-gz", "replay-jaeger-v3")
        },
        "goal": "each replay at least 1.0x the service",
    }
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out, "replay-rate.json").write_text(json.dumps(report, indent=2) + "\n")


# -- where a JSON replay's CPU goes -------------------------------------------------------------
JSON_STAGES = (
    "each line decoded into span views (its structs freed)",
    "grouping by trace (written to the buckets, sorted, read back)",
    "the pipeline",
)


def json_split(args: argparse.Namespace) -> None:
    """The stages of replaying the file exporter's JSON, each timed alone on the same lines:
    msgspec's decode of each line into typed structs, each span read into its view as it is
    decoded; grouping the spans by trace; the pipeline; and, beside them, Python's json.loads
    and freeing its dicts (what the structs replaced)."""
    from benchmarks.bench_service import CONFIG
    from loopwatch.history.by_trace import Grouping
    from loopwatch.history.replay import Replayer, chunks, own_process
    from loopwatch.history.report import Report, ReportSink
    from loopwatch.service.otlp_json import decode as decode_json
    from testkit.stored import timed_copies

    lines = [
        collector_json_line(ExportTraceServiceRequest.FromString(body))
        for body in realistic_requests(args.turns, seed=1)
    ]
    rows: dict[str, list[float]] = {}
    spans = 0
    clock = time.process_time
    for _ in range(args.rounds):
        took = dict.fromkeys((*JSON_STAGES, "json.loads and freeing (not used)"), 0.0)
        decode, group, pipeline, loads = took
        with own_process(), Grouping() as grouping:
            replay = Replayer(CONFIG, ReportSink(Report(), None))
            spans = 0
            for line in timed_copies(lines, args.copies, COPY_EVERY_NS):
                t0 = clock()
                read = decode_json(line)
                t1 = clock()
                grouping.add(read.spans)
                t2 = clock()
                json.loads(line)
                t3 = clock()
                spans += len(read.spans)
                took[decode] += t1 - t0
                took[group] += t2 - t1
                took[loads] += t3 - t2
            ordered = chunks(grouping.traces(), CONFIG)
            while True:
                t0 = clock()
                chunk = next(ordered, None)
                t1 = clock()
                if chunk is None:
                    break
                replay.feed(chunk)
                took[group] += t1 - t0
                took[pipeline] += clock() - t1
            t0 = clock()
            replay.finish()
            took[pipeline] += clock() - t0
        for stage, seconds in took.items():
            rows.setdefault(stage, []).append(seconds / spans * 1e6)
        print(", ".join(f"{k} {v[-1]:.1f}" for k, v in rows.items()) + " us a span", flush=True)
    medians = {k: round(statistics.median(v), 1) for k, v in rows.items()}
    report = {"spans": spans, "microseconds_per_span": medians, "rounds": rows}
    print(json.dumps(report, indent=2))


def read_formats(args: argparse.Namespace) -> None:
    """The rate stream's lines read into span views in this process (``Reader``, no pipeline),
    as the file exporter's JSON and as Jaeger API v3's streamed answer: the best of the passes
    each, interleaved, µs a span."""
    from loopwatch.history.formats import Reader
    from testkit.stored import timed_copies

    lines = [
        collector_json_line(ExportTraceServiceRequest.FromString(body))
        for body in realistic_requests(args.turns, seed=1)
    ]
    stored = list(timed_copies(lines, args.copies, COPY_EVERY_NS))
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"file exporter json": Path(tmp, "t.json"), "jaeger v3": Path(tmp, "v3.ndjson")}
        paths["file exporter json"].write_bytes(b"".join(stored))
        paths["jaeger v3"].write_bytes(jaeger_v3_lines(stored))
        spans = 0
        for _ in range(args.passes):
            for name, path in paths.items():
                cpu = time.process_time()
                spans = sum(len(batch) for batch in Reader([str(path)]).batches())
                per_span = (time.process_time() - cpu) / spans * 1e6
                best[name] = min(best.get(name, per_span), per_span)
    report = {
        "spans": spans,
        "best_microseconds_per_span": {k: round(v, 2) for k, v in best.items()},
        "jaeger_v3_over_json": round(best["jaeger v3"] / best["file exporter json"], 3),
    }
    print(json.dumps(report, indent=2))


def json_stages(stage: str, passes: int) -> None:
    from loopwatch.service.otlp_json import decode

    if stage not in ("none", "views"):
        raise SystemExit(f"json-stages: STAGE is none or views, not {stage!r}")
    lines = [
        collector_json_line(ExportTraceServiceRequest.FromString(body))
        for body in realistic_requests(300, seed=1)
    ]
    spans = 0
    for _ in range(passes):
        for line in lines:
            if stage == "views":
                spans += len(decode(line).spans)
    print(json.dumps({"stage": stage, "passes": passes, "spans": spans}))


# -- memory ---------------------------------------------------------------------------------------
def memory_child(path: str, openmetrics: str) -> None:
    """Replay one file; print the peak resident set (KiB) after loopwatch's imports."""
    import contextlib
    import io

    import loopwatch.history.openmetrics  # noqa: F401  (loaded before the mark)
    from loopwatch.cli import main

    def kib(field: str) -> int:
        status = Path("/proc/self/status").read_text()
        return int(status.split(f"{field}:", 1)[1].split()[0])

    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current size
    before = kib("VmRSS")
    args = ["replay", path, "--openmetrics", openmetrics, "--interval", "3600", "--json"]
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main([*args, "--no-progress"])
    report = json.loads(out.getvalue())
    print(
        json.dumps(
            {
                "code": code,
                "spans": report["input"]["spans"],
                "turns": report["turns"],
                "rss_before_kib": before,
                "peak_kib": kib("VmHWM"),
            }
        )
    )


def grouping_child(path: str, memory: int) -> None:
    """Group one file's spans by trace under ``Limits(memory)`` and hand every trace on (to
    nothing), under tracemalloc; print the peak bytes traced, and the peak of reading the file
    alone (what one request costs the reader) for comparison."""
    import tracemalloc

    from loopwatch.history.by_trace import Grouping, Limits
    from loopwatch.history.formats import Reader

    def read_only() -> None:
        for _ in Reader([path]).batches():
            pass

    def grouped() -> tuple[int, int, int]:
        spans = traces = 0
        with Grouping(Limits(memory)) as grouping:
            for batch in Reader([path]).batches():
                grouping.add(batch)
            for trace in grouping.traces():
                spans += len(trace.spans)
                traces += 1
        return spans, traces, grouping.spilled_bytes

    read_only()  # what the first read loads and caches, before the measurements
    peaks = []
    tracemalloc.start()
    for step in (read_only, grouped):
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = step()
        peaks.append(tracemalloc.get_traced_memory()[1] - before)
    tracemalloc.stop()
    assert result is not None
    spans, traces, spilled = result
    print(
        json.dumps(
            {
                "memory": memory,
                "spans": spans,
                "traces": traces,
                "spilled_bytes": spilled,
                "reading_peak_bytes": peaks[0],
                "peak_bytes": peaks[1],
            }
        )
    )


def replay_memory(path: Path, openmetrics: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "memory-child", str(path), str(openmetrics)],
        capture_output=True,
        text=True,
        check=True,
        timeout=4 * 3600,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def memory(args: argparse.Namespace) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for wanted in args.spans:
            path = Path(tmp, "traces.binpb" if args.format == "proto" else "traces.json.gz")
            started = time.monotonic()
            spans, size = stored_stream(path, wanted, proto=args.format == "proto")
            compressed = path.stat().st_size
            result = replay_memory(path, Path(tmp, "backfill.om"))
            assert result["code"] == 0 and result["spans"] == spans, result
            row = {
                "spans": spans,
                "bytes": size,
                "file_bytes": compressed,
                "turns": result["turns"],
                "rss_before_mib": round(result["rss_before_kib"] / 1024, 1),
                "peak_rss_mib": round(result["peak_kib"] / 1024, 1),
                "seconds": round(time.monotonic() - started),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            path.unlink()
    layout = "format: proto" if args.format == "proto" else "JSON, gzip"
    report = {"stream": f"bench_service.py realistic, file exporter {layout}", "runs": rows}
    print(json.dumps(report, indent=2))
    if args.out:
        name = f"replay-memory-{args.format}.json"
        Path(args.out, name).write_text(json.dumps(report, indent=2) + "\n")


def false_alarms(args: argparse.Namespace) -> None:
    from loopwatch.history.compare import compare
    from loopwatch.history.report import Report
    from testkit.summaries import RETRY, false_alarm_rate, simulated_report, turn_summary

    def regressing(rng: random.Random, p3: float) -> Report:
        report = Report()
        looping_at = -1
        for i in range(200):
            if i % 20 == 0:
                looping_at = i + rng.randrange(20)
            r = rng.random()
            if i == looping_at:
                attempts = rng.choice((3, 4))
            else:
                attempts = 3 if r < p3 else 2 if r < p3 + RETRY else 1
            report.add(turn_summary("m-2", "v-1", attempts))
        return report

    alpha = args.alpha
    out: dict[str, Any] = {"alpha": alpha, "turns_per_run": 200, "seeds": args.seeds}
    out["false_alarm_rate"] = {
        f"{p3:.1%}": false_alarm_rate(p3, args.seeds, alpha)
        for p3 in (0.0, 0.0024, 0.005, 0.01, 0.02, 0.05)
    }
    detected = {}
    for p3 in (0.0, 0.0024, 0.005, 0.01):
        hits = 0
        for seed in range(args.seeds):
            rng = random.Random(10_000 + seed)
            base = simulated_report(rng, p3)
            hits += bool(compare(base, regressing(rng, p3), alpha).regressions)
        detected[f"{p3:.1%}"] = hits / args.seeds
    out["detection_rate_one_in_20_at_3_4_attempts"] = detected
    print(json.dumps(out, indent=2))
    if args.out:
        name = f"compare-false-alarms-alpha-{alpha:g}.json"
        Path(args.out, name).write_text(json.dumps(out, indent=2) + "\n")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(sys.argv[2])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "json-stages":
        json_stages(sys.argv[2], int(sys.argv[3]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "memory-child":
        memory_child(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "grouping-child":
        grouping_child(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("rate")
    r.add_argument("--turns", type=int, default=300, help="turns in the stream before copying")
    r.add_argument("--copies", type=int, default=10)
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--out", type=out_dir, help="directory for replay-rate.json")
    j = sub.add_parser("json-split")
    j.add_argument("--turns", type=int, default=150, help="turns in the stream before copying")
    j.add_argument("--copies", type=int, default=40)
    j.add_argument("--rounds", type=int, default=3)
    d = sub.add_parser("read")
    d.add_argument("--turns", type=int, default=300, help="turns in the stream before copying")
    d.add_argument("--copies", type=int, default=8)
    d.add_argument("--passes", type=int, default=7)
    m = sub.add_parser("memory")
    m.add_argument(
        "--spans", type=int, nargs="+", default=[100_000, 1_000_000], help="file sizes (spans)"
    )
    m.add_argument("--format", choices=("json", "proto"), default="json")
    m.add_argument("--out", type=out_dir, help="directory for replay-memory-FORMAT.json")
    f = sub.add_parser("false-alarms")
    f.add_argument("--seeds", type=int, default=2000)
    f.add_argument("--alpha", type=float, default=0.05)
    f.add_argument("--out", type=out_dir, help="directory for compare-false-alarms.json")
    args = parser.parse_args()
    commands = {"rate": rate, "json-split": json_split, "read": read_formats, "memory": memory}
    {**commands, "false-alarms": false_alarms}[args.command](args)


if __name__ == "__main__":
    main()
