"""What ``import loopwatch; loopwatch.instrument()`` costs an application at start, in a fresh
process each run, with every framework extra installed and with loopwatch alone.

    .venv/bin/python benchmarks/bench_startup.py [--runs 9] [--bare PYTHON] [--src DIR]

The first interpreter is this one (scripts/test's ``.venv``: the frameworks, the model SDKs and
their instrumentors); the second a venv with loopwatch alone: ``--bare``, else
``build/venv-bare``, created with ``pip install -e .`` the first time. Both run the sources of
``--src`` (default: this repository's ``src``), so the two differ only in what is installed.
Each run times the two lines with ``time.perf_counter`` inside the child, with ``/metrics``
served on a free port; reported as median, min and max over the runs, with the modules the
two lines imported and which of the installed frameworks and SDKs were among them (none is
the goal: each is instrumented when the application imports it).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# the frameworks and model SDKs of the extras, looked for in sys.modules afterwards (what
# waits for its import is listed too, where the sources have the post-import hook)
CHILD = """
import json, sys, time
before = set(sys.modules)
t0 = time.perf_counter()
import loopwatch
loopwatch.instrument()
elapsed = time.perf_counter() - t0
added = set(sys.modules) - before
try:
    from loopwatch.attach.post_import import waiting
    watched = waiting()
except ImportError:  # sources from before it
    watched = []
known = ["agents", "agno", "anthropic", "autogen_agentchat", "crewai", "google.adk",
         "google.genai", "langchain_core", "langgraph", "litellm", "llama_index.core", "mcp",
         "openai", "pydantic_ai", "smolagents", "strands"]
imported = sorted(m for m in known + watched if m in added)
print(json.dumps({"seconds": elapsed, "modules": len(added), "watched": watched,
                  "frameworks_imported": sorted(set(imported))}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bare_python(path: Path) -> str:
    """A venv with loopwatch and its own dependencies only (created once)."""
    python = path / "bin" / "python"
    if not python.exists():
        print(f"== creating {path} (pip install -e {ROOT})", file=sys.stderr)
        venv.create(path, with_pip=True)
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "-e",
                str(ROOT),
            ],
            check=True,
        )
    return str(python)


def one_run(python: str, src: Path) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPWATCH_"))}
    env.update(
        PYTHONPATH=str(src),
        LOOPWATCH_METRICS_PORT=str(_free_port()),
        OTEL_TRACES_EXPORTER="none",
    )
    out = subprocess.run(
        [python, "-c", CHILD], env=env, cwd=ROOT / "benchmarks", capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"{python} failed:\n{out.stderr}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def measure(label: str, python: str, src: Path, runs: int) -> dict[str, object]:
    one_run(python, src)  # warm: the first run also writes the bytecode caches
    results = [one_run(python, src) for _ in range(runs)]
    seconds = [float(r["seconds"]) for r in results]  # type: ignore[arg-type]
    last = results[-1]
    row = {
        "venv": label,
        "python": python,
        "runs": runs,
        "median_s": round(statistics.median(seconds), 3),
        "min_s": round(min(seconds), 3),
        "max_s": round(max(seconds), 3),
        "modules_imported": last["modules"],
        "frameworks_waiting": last["watched"],
        "frameworks_imported": last["frameworks_imported"],
    }
    print(
        f"{label:<12} median {row['median_s']:.3f} s  min {row['min_s']:.3f}  "
        f"max {row['max_s']:.3f}  ({runs} runs; {row['modules_imported']} modules imported; "
        f"frameworks imported: {row['frameworks_imported'] or 'none'}; "
        f"waiting for their import: {', '.join(row['frameworks_waiting']) or 'none'})"  # type: ignore[arg-type]
    )
    return row


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--bare", help="a venv's python with loopwatch alone")
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    args = parser.parse_args(argv)
    bare = args.bare or bare_python(ROOT / "build" / "venv-bare")
    rows = [
        measure("frameworks", sys.executable, args.src, args.runs),
        measure("alone", bare, args.src, args.runs),
    ]
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
