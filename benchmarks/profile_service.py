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
innermost frame of loopwatch's own code (``STAGES``: the OTLP front ends, decoding and span
views, reading the conventions, assembling turns, finalizing them, the pipeline's own loop),
else by its libraries (``LIBRARIES``: gRPC's and tornado's servers, threads and queues, the
metrics exposition), else "other". ``--baseline REV|DIR`` profiles loopwatch as of a git
revision or from an import root too (``baseline-grpc``, ``baseline-http``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
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
from testkit.streams import realistic_requests

# (stage, path fragments of loopwatch's modules): the innermost loopwatch frame decides
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("OTLP/gRPC front end", ("loopwatch/service/grpc_server.py",)),
    ("OTLP/HTTP front end", ("loopwatch/service/http_server.py", "loopwatch/service/http_base.py")),
    ("decode + span views", ("loopwatch/service/otlp.py", "loopwatch/service/otlp_lean.py")),
    ("decode OTLP/JSON", ("loopwatch/service/otlp_json",)),
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


_THREAD = re.compile(r"thread \((?:0x[0-9a-fA-F]+|(\d+))\)(?:: (.*))?")


def stages_by_thread(raw: str) -> dict[int, tuple[str, Counter[str]]]:
    """py-spy's raw output (``thread (tid): name;frame;... count`` a line) as each sampled
    thread's name and its samples by stage (``WAITING`` among them)."""
    out: dict[int, tuple[str, Counter[str]]] = {}
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        match = _THREAD.fullmatch(frames[0])
        tid, name = (int(match[1]), match[2] or "") if match and match[1] else (-1, "?")
        if match:
            frames = frames[1:]
        out.setdefault(tid, (name, Counter()))[1][stage_of(frames)] += int(count)
    return out


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


def report_of(raw: str, spent: dict[int, tuple[str, float]]) -> tuple[dict[str, Any], list[str]]:
    """The report of one profile, and its lines for the terminal: each thread's CPU seconds
    (psutil) split among the stages as that thread's samples are; a thread py-spy never
    sampled (it runs no Python: gRPC's C core) is its own row."""
    sampled = stages_by_thread(raw)
    cpu = sum(seconds for _, seconds in spent.values())
    seconds_of: dict[str, float] = {}
    waiting = total = 0
    threads = []
    for tid, (kernel_name, seconds) in sorted(spent.items(), key=lambda item: -item[1][1]):
        name, stages = sampled.get(tid, (kernel_name, Counter()))
        waiting += stages.pop(WAITING, 0)
        running = sum(stages.values())
        total += running
        if running:
            for stage, n in stages.items():
                seconds_of[stage] = seconds_of.get(stage, 0.0) + seconds * n / running
        else:
            row = f"{NOT_SAMPLED}: {kernel_name}"
            seconds_of[row] = seconds_of.get(row, 0.0) + seconds
        if seconds >= 0.01:
            threads.append(
                {"tid": tid, "name": name, "cpu_seconds": round(seconds, 2), "samples": running}
            )
    unknown = sum(sum(st.values()) for tid, (_, st) in sampled.items() if tid not in spent)
    share_of_cpu = (
        {k: round(v / cpu, 3) for k, v in sorted(seconds_of.items(), key=lambda i: -i[1])}
        if cpu
        else {}
    )
    report = {
        "process_cpu_seconds": round(cpu, 2),
        "share_of_cpu": share_of_cpu,
        WAITING + ", share of all samples": round(waiting / max(1, waiting + total), 3),
        "samples_of_threads_not_found": unknown,
        "threads": threads,
    }
    lines = [f"{v:6.1%}  {k}" for k, v in share_of_cpu.items()]
    lines.append(f"(of the process's {cpu:.1f} CPU-s, {total} samples)")
    lines += [
        f"thread {t['tid']} {t['name']!r}: {t['cpu_seconds']} CPU-s, {t['samples']} samples"
        for t in threads
    ]
    return report, lines


NOT_SAMPLED = "not sampled (runs no Python)"


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
    parser.add_argument("--out", help="directory for service-profile.json")
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
