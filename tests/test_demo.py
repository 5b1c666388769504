"""`loopwatch demo` as a user runs it: progress, the summary with the incidents, clear errors."""

from __future__ import annotations

import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

from testkit.serve_process import free_port
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


def test_demo_finds_the_three_incidents_and_exits(tmp_path: Path) -> None:
    out = run("--exit", "--turns", "40", "--metrics-address", "127.0.0.1:0", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "model gpt-4.1: 43/43 turns (100%)" in text  # progress, incidents included
    assert "turns finished        83" in text
    worst = next(line for line in text.splitlines() if "attempts  create_ticket/" in line)
    assert worst.split()[0] == "14" and worst.split()[2].endswith("/timeout")
    booked = next(line for line in text.splitlines() if "attempts  book_meeting/" in line)
    assert booked.split()[0] == "5" and booked.split()[2].endswith("/ok")
    assert "search_orders    ok                 no_rows     1" in text
    assert "book_meeting     ok                 duplicate   1" in text
    # values never shown: no customer, order or summary text
    assert "c_40912" not in text and "88214" not in text and "boots" not in text


def test_demo_exit_prints_progress_then_the_summary_and_nothing_else(tmp_path: Path) -> None:
    """No warning about the simulated tools (the demo declares them), and no metrics address:
    the server goes when the demo exits."""
    out = run("--exit", "--turns", "40", "--metrics-address", "127.0.0.1:0", cwd=tmp_path)
    assert (out.returncode, out.stderr) == (0, "")
    progress, summary = out.stdout.split("\n\nSummary\n")
    assert progress.splitlines() == [
        *(f"  model gpt-4.1: {n}/43 turns ({100 * n // 43}%)" for n in FIRST_MODEL_STEPS),
        *(f"  model gpt-5-mini: {n}/40 turns ({100 * n // 40}%)" for n in SECOND_MODEL_STEPS),
    ]
    assert summary.splitlines()[0] == "  turns finished        83"


# the turns after which the progress line is written: every 10% and the last
FIRST_MODEL_STEPS = (1, 6, 10, 15, 19, 24, 28, 33, 37, 42, 43)
SECOND_MODEL_STEPS = (1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 40)


def test_demo_that_stays_up_says_where_its_metrics_are_and_serves_them(tmp_path: Path) -> None:
    port = free_port()
    demo = subprocess.Popen(
        [*LOOPWATCH, "demo", "--turns", "5", "--metrics-address", f"127.0.0.1:{port}"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=keep_build({"PATH": "/usr/bin:/bin"}),
    )
    try:
        lines = _lines_until(demo, "Serving /metrics; press Ctrl-C to stop.")
        assert lines[0] == f"loopwatch demo: metrics on http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
            assert "loopwatch_turns_total{" in answer.read().decode()
    finally:
        demo.send_signal(signal.SIGINT)
        _, err = demo.communicate(timeout=60)
    assert (demo.returncode, err) == (0, "")


def _lines_until(process: subprocess.Popen[str], last: str) -> list[str]:
    """The lines ``process`` writes up to ``last``, read on a thread so that a hung process
    fails the test after a minute instead of hanging it."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    while not seen or seen[-1] != last:
        seen.append(lines.get(timeout=60))
    return seen


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
    assert re.search(r"; [1-9]\d* spans? (was|were) not delivered\. Is a Collector", last)
