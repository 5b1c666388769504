"""`loopwatch demo` as a user runs it: progress, the summary with the incidents, clear errors."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.helpers import keep_build

LOOPWATCH = [sys.executable, "-m", "loopwatch.cli"]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LOOPWATCH, "demo", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=keep_build({"PATH": "/usr/bin:/bin"}),
    )


def test_demo_finds_both_incidents_and_exits(tmp_path: Path) -> None:
    out = run("--exit", "--turns", "40", "--metrics-address", "127.0.0.1:0", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "model gpt-4.1: 42/42 turns (100%)" in text  # progress, incidents included
    assert "turns finished        82" in text
    worst = next(line for line in text.splitlines() if "attempts  create_ticket/" in line)
    assert worst.split()[0] == "14" and worst.split()[2].endswith("/timeout")
    assert "search_orders    ok                 no_rows  1" in text
    # values never shown: no customer, order or summary text
    assert "c_40912" not in text and "88214" not in text and "boots" not in text


def test_demo_refuses_bad_options_clearly(tmp_path: Path) -> None:
    out = run("--metrics-address", "nowhere", cwd=tmp_path)
    assert out.returncode == 2
    assert "expected HOST:PORT, got 'nowhere'" in out.stderr
    out = run("--turns", "0", cwd=tmp_path)
    assert out.returncode == 2 and "--turns must be at least 1" in out.stderr
    (tmp_path / "loopwatch.toml").write_text("[defaults]\nloop_threshold = 1\n")
    out = run("--exit", cwd=tmp_path)
    assert out.returncode == 2 and "loop_threshold: must be at least 2" in out.stderr


def test_demo_exits_1_when_its_spans_cannot_be_exported(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    out = subprocess.run(
        [*LOOPWATCH, "demo", "--exit", "--turns", "5", "--otlp-endpoint", f"127.0.0.1:{dead}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        # one short export timeout: the first failed batch fails the rest at once
        env=keep_build({"PATH": "/usr/bin:/bin", "OTEL_EXPORTER_OTLP_TIMEOUT": "1"}),
    )
    assert out.returncode == 1, out.stdout + out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"loopwatch demo: exporting spans to 127.0.0.1:{dead} failed; ")
    assert re.search(r"; [1-9]\d* spans were not delivered\. Is a Collector", last)
