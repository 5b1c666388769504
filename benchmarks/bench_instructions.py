"""The service's core in instructions a span (callgrind), a figure the machine's load does not move.

    .venv/bin/python benchmarks/bench_instructions.py [--baseline DIR] [--copies 2]

Needs valgrind (``apt-get install valgrind``). On the rate stream of ``bench_service.py`` (fresh
copies of the realistic mix, 2,720 spans a copy), in a child process under callgrind, with the
service's collector settings (frozen, young objects every 50,000 allocations) and
``PYTHONHASHSEED=0``:
- core: each request decoded (``parse_protobuf``), into span views, then the pipeline
  (``Pipeline(worker=False)``: read, assemble, summarize, metrics; every turn finalized at the
  end), on one thread;
- json: the same requests as OTLP/JSON (hex ids) decoded into span views (``otlp_json.decode``).
Each figure is the instructions of a child that does ``1 + copies`` copies minus one that does
1, over the spans of ``copies`` copies: the start-up, the imports and the first copy's warm-up
cancel out. The loopwatch measured is the one on PYTHONPATH (``build/compiled`` first for the
compiled build; ``LOOPWATCH_PURE_PYTHON=1`` with ``src`` for pure Python); ``--baseline DIR``
measures another import root too (another checkout's ``src`` or ``build/compiled``), and the
ratio. Instructions are not time (a cache miss costs more than an add), but a change that does
less work shows here at a tenth of a percent, where CPU time on a shared machine moves by 20%.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.bench_service import CONFIG, copies
from testkit.streams import realistic_requests

STAGES = ("core", "json")


def child(stage: str, path: str, count: int) -> None:
    """``count`` copies of the pickled stream through ``stage``; prints the spans done."""
    from prometheus_client import CollectorRegistry

    from loopwatch.metrics.exporter import LoopwatchMetrics
    from loopwatch.service.otlp import parse_protobuf, span_views
    from loopwatch.service.otlp_json import decode
    from loopwatch.service.pipeline import Pipeline

    lists: dict[str, list[list[bytes]]] = pickle.loads(Path(path).read_bytes())
    gc.collect()
    gc.freeze()  # as loopwatch serve sets its collector (service/run.py)
    gc.set_threshold(50_000, 20, 20)
    spans = 0
    for bodies in lists[stage][:count]:
        if stage == "json":
            spans += sum(len(decode(body).spans) for body in bodies)
            continue
        pipeline = Pipeline(CONFIG, LoopwatchMetrics(CollectorRegistry()), worker=False)
        for body in bodies:
            views = span_views(parse_protobuf(body)).spans
            pipeline.process(views)
            pipeline.advance()
            spans += len(views)
        pipeline.finish()
    print(spans)


def instructions(root: str, stage: str, path: str, count: int) -> tuple[int, int]:
    """(instructions, spans) of one child under callgrind."""
    with tempfile.NamedTemporaryFile(suffix=".callgrind") as out:
        env = dict(os.environ, PYTHONPATH=f"{root}:{Path.cwd()}", PYTHONHASHSEED="0")
        run = subprocess.run(
            [
                *("valgrind", "--tool=callgrind", f"--callgrind-out-file={out.name}"),
                *(sys.executable, __file__, "child", stage, path, str(count)),
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        totals = [
            line for line in Path(out.name).read_text().splitlines() if line.startswith("summary:")
        ]
    return int(totals[0].split()[1]), int(run.stdout.split()[-1])


def main() -> None:
    if sys.argv[1:2] == ["child"]:
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--baseline", help="another import root measured too")
    parser.add_argument("--copies", type=int, default=2, help="copies measured (after one)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_instructions.py needs valgrind (apt-get install valgrind)")
    here = os.environ.get("PYTHONPATH", "src").split(":")[0]
    roots = {"this": here, **({"baseline": args.baseline} if args.baseline else {})}
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from loopwatch.service.otlp import hex_ids_json

    base = realistic_requests(300, seed=1)
    core = [copies(base, 1, first=k) for k in range(args.copies + 1)]
    stream = {
        "core": core,
        "json": [
            [hex_ids_json(ExportTraceServiceRequest.FromString(b)) for b in bodies]
            for bodies in core
        ],
    }
    report: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp, "stream.pickle"))
        Path(path).write_bytes(pickle.dumps(stream))
        for stage in STAGES:
            for label, root in roots.items():
                one, spans_one = instructions(root, stage, path, 1)
                more, spans_more = instructions(root, stage, path, 1 + args.copies)
                per_span = (more - one) / (spans_more - spans_one)
                report[f"{label}/{stage}"] = round(per_span)
                print(f"{label} {stage}: {per_span:,.0f} instructions a span", file=sys.stderr)
            if args.baseline:
                report[f"ratio/{stage}"] = round(
                    report[f"this/{stage}"] / report[f"baseline/{stage}"], 3
                )
    print(json.dumps({"roots": roots, "instructions_per_span": report}, indent=2))


if __name__ == "__main__":
    main()
