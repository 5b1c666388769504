"""The logs path of ``loopwatch serve``: the coding agents' events, log records per CPU-second.

    .venv/bin/python benchmarks/bench_logs.py [--sessions 400] [--rounds 3] [--out DIR]

The three agents' fixtures (testkit/coding_agents.py: Claude Code, gemini-cli and Codex, each a
loop, a healthy run and two prompts, arguments on) copied into ``--sessions`` sessions of their
own (fresh session, prompt and trace ids), encoded once as OTLP requests, then:
- core: ``parse_logs_protobuf`` + ``log_views`` and the pipeline (read by the agents' readers,
  assemble, summarize, metrics) in this process, no transport: CPU per record;
- grpc / http-json: sent pre-encoded to ``loopwatch serve`` (a process) over OTLP/gRPC and as
  OTLP/JSON over HTTP, timed until its ``loopwatch_log_records_total`` reaches the number sent;
  records per CPU-second of the service.
Medians of ``--rounds``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request
from pathlib import Path

import grpc

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import CollectorRegistry

from loopwatch.core.config import Config
from loopwatch.metrics.exporter import LoopwatchMetrics
from loopwatch.service.otlp_logs import (
    count_records,
    log_views,
    parse_logs_json,
    parse_logs_protobuf,
)
from loopwatch.service.pipeline import LogBatch, Pipeline
from testkit import coding_agents
from testkit.results_dir import out_dir
from testkit.serve_process import ServeProcess, wait_for

EXPORT_LOGS = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
# the ids each fixture's sessions are made of: replaced to make a session of its own
_IDS = ("5c6f8a0e", "c0ffee00", "b1946ac9", "0199a6f4", "5eed")
TOML = "[limits]\nidle_timeout_seconds = 1.0\nopen_turns = 100000\n[serve]\ngrace_seconds = 0.5\n"


def requests(sessions: int) -> list[str]:
    """OTLP/JSON logs requests: every fixture with arguments on, ``sessions`` times."""
    texts = [
        (coding_agents.FIXTURES / coding_agents.name(agent, scenario, True)).read_text()
        for agent in coding_agents.AGENTS
        for scenario in coding_agents.SCENARIOS
    ]
    out = []
    for n in range(sessions):
        for k, text in enumerate(texts):
            for old in _IDS:
                text = text.replace(old, f"{n:0{len(old) - 1}x}{k:x}"[-len(old) :])
            out.append(json.dumps(json.loads(text)))
    return out


def core(bodies: list[bytes]) -> float:
    """Records per CPU-second: decode, read, assemble, summarize, metrics."""
    cpu = time.process_time()
    pipeline = Pipeline(Config(), LoopwatchMetrics(CollectorRegistry()), worker=False)
    records = 0
    for body in bodies:
        views = log_views(parse_logs_protobuf(body))
        records += len(views)
        pipeline.process(LogBatch(views))
    pipeline.finish()
    return records / (time.process_time() - cpu)


def _service_cpu(served: ServeProcess) -> float:
    import psutil

    times = psutil.Process(served.pid).cpu_times()
    return float(times.user + times.system)


def into_service(transport: str, bodies: list[bytes], sent: int) -> float:
    """Records per CPU-second of ``loopwatch serve``."""
    with ServeProcess(TOML, log_level="WARNING") as served:
        cpu = _service_cpu(served)
        if transport == "grpc":
            with grpc.insecure_channel(served.grpc) as channel:
                export = channel.unary_unary(EXPORT_LOGS)
                for body in bodies:
                    export(body, timeout=30)
        else:
            for body in bodies:
                request = urllib.request.Request(
                    f"http://{served.http}/v1/logs", data=body, method="POST"
                )
                request.add_header("Content-Type", "application/json")
                with urllib.request.urlopen(request, timeout=30) as answer:
                    answer.read()

        def read() -> bool:
            return served.samples().get("loopwatch_log_records_total", 0) >= sent

        wait_for(read, 600, "every record read")
        return sent / (_service_cpu(served) - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=out_dir, help="directory for logs-rate.json")
    args = parser.parse_args()
    texts = requests(args.sessions)
    proto = [bytes(parse_logs_json(t.encode()).SerializeToString()) for t in texts]
    sent = sum(count_records(parse_logs_protobuf(b)) for b in proto)
    rows: dict[str, list[float]] = {"core": [], "grpc": [], "http-json": []}
    for _ in range(args.rounds):
        rows["core"].append(core(proto))
        rows["grpc"].append(into_service("grpc", proto, sent))
        rows["http-json"].append(into_service("http", [t.encode() for t in texts], sent))
    report = {
        "records": sent,
        "requests": len(proto),
        "records_per_cpu_second": {k: round(statistics.median(v)) for k, v in rows.items()},
        "rounds": {k: [round(x) for x in v] for k, v in rows.items()},
    }
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out, "logs-rate.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
