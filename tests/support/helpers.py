"""Shared test helpers: real SDK tracers with explicit timestamps, metric reads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode, Tracer
from prometheus_client import CollectorRegistry

from loopwatch import LoopwatchSpanProcessor
from loopwatch.compiled import PURE_ENV
from loopwatch.core.config import Config

S = 1_000_000_000  # nanoseconds per second


def keep_build(env: dict[str, str], *first: object) -> dict[str, str]:
    """``env`` for a child process, with ``first`` (paths) first on PYTHONPATH and this
    process's choice of loopwatch build kept: scripts/test puts the compiled build on
    PYTHONPATH, and LOOPWATCH_PURE_PYTHON runs its sources instead."""
    out = {k: v for k, v in env.items() if k not in ("PYTHONPATH", PURE_ENV)}
    path = [str(p) for p in first] + [p for p in [os.environ.get("PYTHONPATH")] if p]
    if path:
        out["PYTHONPATH"] = os.pathsep.join(path)
    if PURE_ENV in os.environ:
        out[PURE_ENV] = os.environ[PURE_ENV]
    return out


ROOT = Path(__file__).resolve().parents[2]


def venv_python(venv: str | None) -> str:
    """The interpreter of one of scripts/test's extra venvs (None: this one); a missing venv
    skips locally and fails under CI."""
    if venv is None:
        return sys.executable
    python = ROOT / venv / "bin" / "python"
    if python.exists():
        return str(python)
    message = f"{venv} is missing (scripts/test creates it)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def run_scenario(
    python: str, args: list[str], out: Path, env: Mapping[str, str] | None = None
) -> Any:
    """Run ``python -m <args>`` from the repository, with this process's loopwatch build and
    no OTEL_/LOOPWATCH_ settings but ``env``, and read the JSON it wrote to ``out``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPWATCH_"))}
    done = subprocess.run(
        [python, "-m", *args],
        cwd=ROOT,
        env=keep_build({**clean, **(env or {})}, ROOT),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(out.read_text(encoding="utf-8"))


def require_tool(name: str) -> str:
    """The path of a binary; a missing one skips locally and fails under CI."""
    path = shutil.which(name)
    if path:
        return path
    if os.environ.get("CI") == "true":
        pytest.fail(f"{name} is not installed (scripts/test installs it)")
    pytest.skip(f"{name} not installed")


class Pipeline:
    """A real TracerProvider with a LoopwatchSpanProcessor on its own registry."""

    def __init__(
        self, config: Config | None = None, service: str = "support-agent", **processor: Any
    ) -> None:
        self.registry = CollectorRegistry()
        self.processor = LoopwatchSpanProcessor(
            config=config or Config(), registry=self.registry, **processor
        )
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.provider.add_span_processor(self.processor)
        self.tracer: Tracer = self.provider.get_tracer("test")

    def flush(self) -> None:
        assert self.processor.force_flush(10_000)

    def value(self, name: str, **labels: str) -> float:
        """Sum of a sample over every series matching ``labels`` (0 when absent)."""
        self.flush()
        total = 0.0
        for metric in self.registry.collect():
            for sample in metric.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    total += sample.value
        return total

    def observations(self, histogram: str, **labels: str) -> dict[float, float]:
        """Cumulative bucket counts ``{le: count}`` of a histogram, summed over series."""
        self.flush()
        out: dict[float, float] = {}
        for metric in self.registry.collect():
            for sample in metric.samples:
                if sample.name != f"{histogram}_bucket":
                    continue
                if not all(sample.labels.get(k) == v for k, v in labels.items()):
                    continue
                le = float(sample.labels["le"])
                out[le] = out.get(le, 0.0) + sample.value
        return out

    def close(self) -> None:
        self.provider.shutdown()


@contextmanager
def span(
    tracer: Tracer,
    name: str,
    start: int,
    end: int,
    attributes: dict[str, Any] | None = None,
    error: BaseException | None = None,
    status: tuple[StatusCode, str] | None = None,
) -> Iterator[Any]:
    """A span with explicit start/end (ns), so 30-second timeouts cost no real time."""
    s = tracer.start_span(name, start_time=start, attributes=attributes or {})
    from opentelemetry import trace as api

    with api.use_span(s, end_on_exit=False):
        yield s
    if error is not None:
        s.record_exception(error)
        s.set_status(Status(StatusCode.ERROR, str(error)))
    elif status is not None:
        s.set_status(Status(*status))
    s.end(end_time=end)


def dumps(value: Any) -> str:
    return json.dumps(value)


def exposition_sum(text: str, name: str, **labels: str) -> float:
    """Sum of a sample over the series matching ``labels`` in Prometheus text exposition
    (lines that are not samples are skipped; 0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    samples = "\n".join(line.strip() for line in text.splitlines() if line.strip().startswith(name))
    return sum(
        s.value
        for family in text_string_to_metric_families(samples + "\n")
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )
