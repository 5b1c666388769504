"""Where ``loopwatch serve``'s CPU goes beside its core: the rate stream (``bench_service.py
rate``'s requests, pre-encoded, over gRPC) into the service, its CPU a span split by thread,
beside the service's core alone on one thread in the same round; and the service with all its
threads held to one CPU (``taskset``), in the same rounds.

    PYTHONPATH=$PWD/build/compiled:$PWD .venv/bin/python benchmarks/bench_serve_threads.py
    LOOPWATCH_PURE_PYTHON=1 PYTHONPATH=$PWD/src:$PWD .venv/bin/python \\
        benchmarks/bench_serve_threads.py

Each round, in turn (the order alternating between rounds):
- core: a fresh process reads every request as the service's worker does (``parse_protobuf``,
  ``span_views``, the pipeline without its thread: read, assemble, summarize, count; every turn
  finalized), with the service's collector settings: its thread's CPU a span;
- serve: ``loopwatch serve`` from the first request until every turn is finalized (as ``rate``
  times it), its user and system CPU a span, and each thread's: the pipeline (the Python thread
  with the most CPU: its worker), the other Python threads (gRPC's request threads and its
  poller), and the threads that run no Python (gRPC's C core, named by it);
- pinned: the same, every thread of the service held to CPU 0 from its start.

The import root on PYTHONPATH decides which loopwatch both run. Linux only (``/proc``,
``taskset``).
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks.bench_service import (
    CONFIG,
    DRIVERS,
    TOML,
    Served,
    copies,
    go,
    pre_drivers,
    result,
    span_count,
    until_finished,
)
from benchmarks.profile_service import thread_cpu
from testkit.results_dir import out_dir
from testkit.streams import realistic_requests

PER_DRIVER = 10  # copies of the stream each driver sends, as `rate` does by default


def core_child(path: str) -> None:
    """Print the thread CPU a span of the service's core over the pickled requests."""
    import logging

    from prometheus_client import CollectorRegistry

    from loopwatch.metrics.exporter import LoopwatchMetrics
    from loopwatch.service.otlp import parse_protobuf, span_views
    from loopwatch.service.pipeline import Pipeline
    from loopwatch.service.run import tune_collector

    logging.disable(logging.WARNING)  # the service logs at WARNING: undeclared tools
    bodies: list[bytes] = pickle.loads(Path(path).read_bytes())
    tune_collector()
    pipeline = Pipeline(CONFIG, LoopwatchMetrics(CollectorRegistry()), worker=False)
    spans = 0
    started = time.thread_time()
    for body in bodies:
        views = span_views(parse_protobuf(body)).spans
        spans += len(views)
        pipeline.process(views)
        pipeline.advance()
    pipeline.finish()
    print(json.dumps({"us": (time.thread_time() - started) / spans * 1e6}))


def serve_round(shares: list[list[bytes]], sent: int, tmp: str, pinned: bool) -> dict[str, float]:
    """The service's CPU a span (µs), in all and by thread."""
    served = Served(TOML.format(grace=0.5, open_turns=10_000, idle=300))
    try:
        process = psutil.Process(served.process.pid)
        # its Python threads keep the process's name; gRPC's C threads are named by gRPC
        python = Path(f"/proc/{process.pid}/comm").read_text().strip()
        if pinned:
            command = ["taskset", "--all-tasks", "--pid", "--cpu-list", "0", str(process.pid)]
            subprocess.run(command, check=True, capture_output=True)
        with pre_drivers("grpc", served.grpc, shares, tmp) as drivers:
            before, threads_before = process.cpu_times(), thread_cpu(process.pid)
            for d in drivers:
                go(d)
            for d in drivers:
                result(d)
            until_finished(served, sent)
            after, threads_after = process.cpu_times(), thread_cpu(process.pid)
    finally:
        served.stop()
    spent = [
        (cpu - threads_before.get(tid, (name, 0.0))[1], name)
        for tid, (name, cpu) in threads_after.items()
    ]
    ours = sorted((cpu for cpu, name in spent if name == python), reverse=True)
    per_span = 1e6 / sent
    return {
        "user": (after.user - before.user) * per_span,
        "system": (after.system - before.system) * per_span,
        "pipeline": ours[0] * per_span if ours else 0.0,
        "other_python": sum(ours[1:]) * per_span,
        "no_python": sum(cpu for cpu, name in spent if name != python) * per_span,
    }


def core_round(path: str) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "core-child", path], check=True, capture_output=True, text=True
    ).stdout
    return float(json.loads(out.strip().splitlines()[-1])["us"])


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 2),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
    }


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "core-child":
        core_child(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", type=out_dir, help="directory for serve-threads.json")
    args = parser.parse_args()
    if shutil.which("taskset") is None or not Path("/proc/self/task").is_dir():
        raise SystemExit("bench_serve_threads.py needs Linux's /proc and taskset (util-linux)")
    base = realistic_requests(300, seed=1)
    shares = [copies(base, PER_DRIVER, first=i * PER_DRIVER) for i in range(DRIVERS)]
    sent = sum(span_count(share) for share in shares)
    print(f"{sent} spans a round; {args.rounds} rounds of core, serve, pinned", flush=True)
    rows: dict[str, list[dict[str, float]]] = {"serve": [], "pinned": []}
    cores: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp, "requests.pickle"))
        Path(path).write_bytes(pickle.dumps([body for share in shares for body in share]))
        steps = ["core", "serve", "pinned"]
        for round_ in range(args.rounds):
            for step in steps if round_ % 2 == 0 else steps[::-1]:
                if step == "core":
                    cores.append(core_round(path))
                else:
                    rows[step].append(serve_round(shares, sent, tmp, pinned=step == "pinned"))
            serve, pinned = rows["serve"][-1], rows["pinned"][-1]
            print(
                f"round {round_ + 1}: core {cores[-1]:.2f} µs a span; serve"
                f" {serve['user'] + serve['system']:.2f}; pinned"
                f" {pinned['user'] + pinned['system']:.2f}",
                flush=True,
            )
    report: dict[str, Any] = {"spans_a_round": sent, "core_us": _summary(cores)}
    for name, runs in rows.items():
        report[f"{name}_us"] = {part: _summary([run[part] for run in runs]) for part in runs[0]} | {
            "total": _summary([run["user"] + run["system"] for run in runs])
        }
    core = statistics.median(cores)
    serve = report["serve_us"]["total"]["median"]
    pinned = report["pinned_us"]["total"]["median"]
    report["serve_over_core"] = round(serve / core, 2)
    report["pinned_over_core"] = round(pinned / core, 2)
    report["spans_per_cpu_second"] = {
        "core": round(1e6 / core),
        "serve": round(1e6 / serve),
        "pinned": round(1e6 / pinned),
    }
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out, "serve-threads.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
