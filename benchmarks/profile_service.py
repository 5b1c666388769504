"""Where ``loopwatch serve`` spends its CPU on the rate stream: a sampling profile, by stage.

    .venv/bin/python benchmarks/profile_service.py [--transport grpc,http] [--copies 60]
                                                   [--samples-per-second 200] [--out DIR]
                                                   [--baseline REV|DIR]

Needs py-spy (``pip install py-spy``, or ``--py-spy PATH``; not a dependency of loopwatch) and
the right to trace another process (root, or ``kernel.yama.ptrace_scope`` 0). For each transport
it starts ``loopwatch serve``, sends the stream of ``bench_service.py rate`` (pre-encoded
requests, fresh copies, two driver processes) and samples the service from the first request
until it has finished with every span (``bench_service.until_finished``: every turn finalized).

What is sampled, and what is not: py-spy samples whichever of the service's Python threads holds
the GIL (``--gil``; C frames included, ``--native``, which pauses the service a moment each
sample; ``--nonblocking``: without C frames, never paused), naming each sample's thread. Every
thread's CPU time over the run is measured apart (psutil, every thread of the process), and
each thread's CPU seconds are split among the stages as that thread's own samples are: a stage's
share is of the process's CPU, not of the samples (which a thread waiting for the GIL or the
sampler's pauses would skew). A thread with CPU time and no sample runs no Python (gRPC's C
core's threads): it is its own row, "not sampled", named as the kernel names it.

Each sample goes to one stage: the garbage collector's when it is on the stack, else by the
innermost frame of loopwatch's own code (``STAGES`` in testkit/profile_report.py: the OTLP
front ends, decoding and span views, reading the conventions, assembling turns, finalizing them,
the pipeline's own loop), else by its libraries (``LIBRARIES``: gRPC's and tornado's servers,
threads and queues, the metrics exposition), else "other". ``--baseline REV|DIR`` profiles
loopwatch as of a git revision or from an import root too (``baseline-grpc``, ``baseline-http``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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
    until_finished,
)
from testkit.profile_report import report_of
from testkit.results_dir import out_dir
from testkit.streams import realistic_requests


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """Every thread of the process: its name as the kernel has it, and its CPU seconds so far."""
    import psutil

    out = {}
    for t in psutil.Process(pid).threads():
        try:
            name = Path(f"/proc/{pid}/task/{t.id}/comm").read_text().strip()
        except OSError:
            name = "?"
        out[t.id] = (name, t.user_time + t.system_time)
    return out


def profile(
    transport: str,
    shares_: list[list[bytes]],
    sent: int,
    rate: int,
    tmp: str,
    code: str | None,
    py_spy: str,
    native: bool = True,
) -> tuple[str, dict[int, tuple[str, float]]]:
    """Serve (loopwatch from ``code``, default this checkout), drive, and return py-spy's raw
    samples of the service and each of its threads' CPU seconds over the run."""
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
                    "--gil",
                    # C frames (a compiled build's functions) need the service paused a sample
                    "--native" if native else "--nonblocking",
                    "--threads",
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
            before = thread_cpu(served.process.pid)
            for d in drivers:
                go(d)
            for d in drivers:
                result(d)
            until_finished(served, sent)
            after = thread_cpu(served.process.pid)
            spy.send_signal(2)  # SIGINT: py-spy writes what it sampled and exits
            _, err = spy.communicate(timeout=60)
    finally:
        served.stop()
    if not out.exists():
        raise SystemExit(f"py-spy wrote no profile:\n{err[-2000:]}")
    spent = {
        tid: (name, cpu - before.get(tid, (name, 0.0))[1]) for tid, (name, cpu) in after.items()
    }
    return out.read_text(), spent


def py_spy_path(given: str | None) -> str:
    """py-spy's path: ``given``, else on PATH or beside this python; SystemExit without one."""
    found = given or shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not os.access(found, os.X_OK):
        raise SystemExit("profiling needs py-spy: pip install py-spy, or --py-spy PATH")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", default="grpc,http", help="grpc, http, http-json")
    parser.add_argument("--turns", type=int, default=300, help="turns in the stream")
    parser.add_argument("--copies", type=int, default=60, help="copies of the stream (rate: 20)")
    parser.add_argument("--samples-per-second", type=int, default=200)
    parser.add_argument("--out", type=out_dir, help="directory for service-profile.json")
    parser.add_argument("--baseline", help="git revision or import root profiled too")
    parser.add_argument("--py-spy", help="py-spy's path (default: on PATH or beside python)")
    parser.add_argument(
        "--nonblocking",
        action="store_true",
        help="sample without pausing the service (no C frames: a compiled build's functions "
        "are then not seen)",
    )
    args = parser.parse_args()
    py_spy = py_spy_path(args.py_spy)
    base = realistic_requests(args.turns, seed=1)
    per_driver = max(1, args.copies // DRIVERS)
    parts = [copies(base, per_driver, first=i * per_driver) for i in range(DRIVERS)]
    sent = sum(span_count(p) for p in parts)
    report: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        codes: list[tuple[str, str | None]] = [("", None)]
        if args.baseline:
            codes.insert(0, ("baseline-", baseline_code(args.baseline, tmp)))
        for prefix, code in codes:
            for transport in args.transport.split(","):
                name = prefix + transport
                print(f"profiling {name}: {sent} spans ...", file=sys.stderr, flush=True)
                sent_as = parts
                if transport == "http-json":
                    sent_as = json_requests(parts)
                raw, spent = profile(
                    transport,
                    sent_as,
                    sent,
                    args.samples_per_second,
                    tmp,
                    code,
                    py_spy,
                    native=not args.nonblocking,
                )
                report[name], lines = report_of(raw, spent)
                for line in lines:
                    print(f"{name:<16} {line}", flush=True)
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out, "service-profile.json").write_text(json.dumps(report, indent=2) + "\n")


def json_requests(parts: list[list[bytes]]) -> list[list[bytes]]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from loopwatch.service.otlp import hex_ids_json

    return [[hex_ids_json(ExportTraceServiceRequest.FromString(b)) for b in p] for p in parts]


if __name__ == "__main__":
    main()
