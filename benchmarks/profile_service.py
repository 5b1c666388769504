"""Where ``loopwatch serve`` spends its CPU on the rate stream: a sampling profile, by stage.

    .venv/bin/python benchmarks/profile_service.py [--transport grpc,http] [--copies 60]
                                                   [--samples-per-second 200] [--out DIR]
                                                   [--baseline REV]

Needs py-spy (``pip install py-spy``; not a dependency of loopwatch) and the right to trace
another process (root, or ``kernel.yama.ptrace_scope`` 0). For each transport it starts
``loopwatch serve``, sends the stream of ``bench_service.py rate`` (pre-encoded requests, fresh
copies, two driver processes) and samples every thread of the service with py-spy, C frames
included, from the first request until ``loopwatch_spans_total`` reaches the number sent.

A sample whose innermost named frame blocks (``WAITS``: waiting for the GIL, a lock, a queue,
the network) is left out, and its share of all samples reported apart, so the stage shares
are of CPU. Each other sample goes to one stage: the garbage collector's when it is on the
stack, else by the innermost frame of loopwatch's own code (``STAGES``: the OTLP front ends,
decoding and span views, reading the conventions, assembling turns, finalizing them, the
pipeline's own loop), else by its libraries (``LIBRARIES``: gRPC's and tornado's servers,
threads and queues, the metrics exposition), else "other". py-spy pauses the service to
sample it, which slows it a little: the shares are the figure, not the rate. ``--baseline
REV`` profiles loopwatch as of a git revision too (``baseline-grpc``, ``baseline-http``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_service import (
    DRIVERS,
    TOML,
    Served,
    baseline_code,
    copies,
    go,
    pre_drivers,
    result,
    span_count,
)
from testkit.streams import realistic_requests

# (stage, path fragments of loopwatch's modules): the innermost loopwatch frame decides
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("OTLP/gRPC front end", ("loopwatch/service/grpc_server.py",)),
    ("OTLP/HTTP front end", ("loopwatch/service/http_server.py", "loopwatch/service/http_base.py")),
    ("decode + span views", ("loopwatch/service/otlp.py", "loopwatch/service/otlp_lean.py")),
    (
        "read conventions",
        (
            "loopwatch/conventions/",
            "loopwatch/core/identity.py",
            "loopwatch/core/keys.py",
            "loopwatch/core/outcomes.py",
            "loopwatch/core/undeclared.py",
        ),
    ),
    (
        "finalize turns (group, summarize, metrics)",
        (
            "loopwatch/core/turns.py",
            "loopwatch/core/summary.py",
            "loopwatch/core/layers.py",
            "loopwatch/core/loop_log.py",
            "loopwatch/metrics/exporter.py",
            "loopwatch/metrics/collectors.py",
        ),
    ),
    ("assemble (buffer spans per trace)", ("loopwatch/core/assembler.py",)),
    ("pipeline loop and queue", ("loopwatch/service/pipeline.py",)),
    ("metrics endpoint", ("loopwatch/service/metrics_server.py",)),
)
# (stage, fragments of a frame) for samples without a loopwatch frame, first match wins
LIBRARIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gRPC server (library, C core)", ("grpc", "cygrpc")),
    ("HTTP server (tornado, asyncio)", ("tornado", "asyncio", "selectors")),
    ("threads and queues", ("threading.py", "queue.py", "concurrent/futures")),
    ("metrics endpoint", ("prometheus_client",)),
)


# A thread blocked in one of these (innermost named frame) is waiting, not running: for the
# GIL, a lock, a queue or the network. py-spy samples C frames of such threads too.
WAITS = frozenset(
    {
        *("pthread_cond_timedwait", "pthread_cond_wait", "pthread_cond_clockwait"),
        *("pthread_mutex_lock", "PyThread_acquire_lock_timed", "sem_wait", "sem_timedwait"),
        *("sem_clockwait", "epoll_wait", "epoll_pwait", "poll", "ppoll", "select"),
        *("nanosleep", "clock_nanosleep", "accept4"),
    }
)
WAITING = "waiting (GIL, locks, queues, network)"
GC = "garbage collection"


def _function(frame: str) -> str:
    return frame.split(" (", 1)[0]


def stage_of(stack: list[str]) -> str:
    """The stage of one sampled stack (outermost frame first)."""
    named = [f for f in stack if not _function(f).startswith("0x")]
    if named and _function(named[-1]) in WAITS:
        return WAITING
    if any("gc_collect" in f for f in stack):
        return GC  # set off by an allocation anywhere: its own stage
    for frame in reversed(stack):
        if "loopwatch/" in frame:
            for stage, fragments in STAGES:
                if any(f in frame for f in fragments):
                    return stage
    for frame in reversed(stack):
        for stage, fragments in LIBRARIES:
            if any(f in frame for f in fragments):
                return stage
    return "other"


def shares(raw: str) -> tuple[dict[str, float], float]:
    """py-spy's raw output (``frame;frame;... count`` a line) as each stage's share of the
    samples of running threads, and the share of all samples that were waiting."""
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            counts[stage_of(stack.split(";"))] += int(count)
    waiting = counts.pop(WAITING, 0)
    running = sum(counts.values())
    if not running:
        return {}, 1.0
    return (
        {stage: n / running for stage, n in counts.most_common()},
        waiting / (waiting + running),
    )


def profile(
    transport: str, shares_: list[list[bytes]], sent: int, rate: int, tmp: str, code: str | None
) -> str:
    """Serve (loopwatch from ``code``, default this checkout), drive, and return py-spy's raw
    samples of the service."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        raise SystemExit("profile_service.py needs py-spy: .venv/bin/pip install py-spy")
    served = Served(TOML.format(grace=0.5, open_turns=10_000, idle=300), code)
    out = Path(tmp, f"{transport}.txt")
    out.unlink(missing_ok=True)
    try:
        address = served.grpc if transport == "grpc" else served.http
        with pre_drivers(transport, address, shares_, tmp) as drivers:
            spy = subprocess.Popen(
                [
                    py_spy,
                    "record",
                    "--pid",
                    str(served.process.pid),
                    "--native",
                    "--format",
                    "raw",
                    "--rate",
                    str(rate),
                    "--output",
                    str(out),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            time.sleep(1.0)  # py-spy attaches
            for d in drivers:
                go(d)
            for d in drivers:
                result(d)
            while served.samples().get("loopwatch_spans_total", 0) < sent:
                time.sleep(0.25)
            spy.send_signal(2)  # SIGINT: py-spy writes what it sampled and exits
            _, err = spy.communicate(timeout=60)
    finally:
        served.stop()
    if not out.exists():
        raise SystemExit(f"py-spy wrote no profile:\n{err[-2000:]}")
    return out.read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", default="grpc,http", help="grpc, http or both")
    parser.add_argument("--turns", type=int, default=300, help="turns in the stream")
    parser.add_argument("--copies", type=int, default=60, help="copies of the stream (rate: 20)")
    parser.add_argument("--samples-per-second", type=int, default=200)
    parser.add_argument("--out", help="directory for service-profile.json")
    parser.add_argument("--baseline", help="git revision profiled too (baseline-*)")
    args = parser.parse_args()
    base = realistic_requests(args.turns, seed=1)
    per_driver = max(1, args.copies // DRIVERS)
    parts = [copies(base, per_driver, first=i * per_driver) for i in range(DRIVERS)]
    sent = sum(span_count(p) for p in parts)
    report: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        codes: list[tuple[str, str | None]] = [("", None)]
        if args.baseline:
            codes.insert(0, ("baseline-", baseline_code(args.baseline, tmp)))
        for prefix, code in codes:
            for transport in args.transport.split(","):
                name = prefix + transport
                print(f"profiling {name}: {sent} spans ...", file=sys.stderr, flush=True)
                raw = profile(transport, parts, sent, args.samples_per_second, tmp, code)
                found, waiting = shares(raw)
                report[name] = {stage: round(share, 3) for stage, share in found.items()}
                report[name][WAITING + ", share of all samples"] = round(waiting, 3)
                for stage, share in found.items():
                    print(f"{name:<14} {share:6.1%}  {stage}", flush=True)
                print(f"{name:<14} (left out: {waiting:.1%} of the samples were {WAITING})")
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out, "service-profile.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
