"""The README's compiled switch on a fresh machine. A file of its own: scripts/test runs
test_compiled_build.py on both builds, and building the wheel once is enough."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loopwatch import compiled

ROOT = Path(__file__).resolve().parent.parent


_FOURTEEN = """
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry
from loopwatch import LoopwatchSpanProcessor, compiled
from loopwatch.core.config import Config
from loopwatch.demo.emit import emit_turn
from loopwatch.demo.scenarios import fourteen_tickets

registry = CollectorRegistry()
provider = TracerProvider()
provider.add_span_processor(LoopwatchSpanProcessor(config=Config(), registry=registry))
emit_turn(provider.get_tracer("t"), fourteen_tickets(), 10**9)
provider.shutdown()
print(compiled.describe())
print(registry.get_sample_value("loopwatch_turn_max_attempts_sum", {
    "agent": "support", "model": "gpt-4.1", "service": "unknown_service:python"}))
"""


@pytest.mark.slow
def test_the_readme_switch_builds_the_compiled_build_in_a_fresh_venv(tmp_path: Path) -> None:
    """``LOOPWATCH_COMPILE=1 pip install /path/to/loopwatch`` in a venv with nothing installed:
    the build environment must hold what mypyc compiles against, not the user's venv."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    unbuilt = shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info")
    for folder in ("build_backend", "src"):
        shutil.copytree(ROOT / folder, src / folder, ignore=unbuilt)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    # not this process's build on the path, nor its switch
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", compiled.PURE_ENV)}
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(src)],
        env={**env, "LOOPWATCH_COMPILE": "1"},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    run = subprocess.run(
        [python, "-c", _FOURTEEN],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert run.stdout.split("\n")[:2] == ["compiled with mypyc", "14.0"]
