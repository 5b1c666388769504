"""The report of a profile of ``loopwatch serve`` (benchmarks/profile_service.py): py-spy's raw
samples (``--threads``) mapped to loopwatch's stages, each thread's CPU seconds split among the
stages as that thread's own samples are. Here so that the tests check the arithmetic and the
benchmark uses it, neither importing the other."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

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
