"""``loopwatch serve`` as a process: SIGTERM finalizes open turns and exits in bounded time;
bind and configuration errors exit non-zero with one clear line."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from loopwatch.core.config import SETTINGS
from loopwatch.demo.emit import emit_turn
from loopwatch.demo.scenarios import fourteen_tickets
from loopwatch.service.run import STOP_SECONDS
from testkit.serve_process import ServeProcess, wait_for

TOML = """
[serve]
grace_seconds = 600.0

[tools.create_ticket]
identity = ["customer_id", "order_id"]
"""
EPHEMERAL = ("--grpc-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0")


def _metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_sigterm_finalizes_open_turns_and_exits(serve: Callable[..., ServeProcess]) -> None:
    process = serve(TOML)
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=process.grpc, insecure=True))
    )
    emit_turn(provider.get_tracer("t"), fourteen_tickets(), 1_000_000_000_000)
    provider.shutdown()
    # the turn is open: its grace is ten minutes
    wait_for(lambda: _metric(process.scrape(), "loopwatch_open_turns") == 1, 10)
    assert _metric(process.scrape(), "loopwatch_turns_total") is None
    assert process.get("/readyz")[0] == 200
    code, seconds = process.sigterm(timeout=STOP_SECONDS + 5)
    assert code == 0
    assert seconds < STOP_SECONDS
    assert "stopped: finalized 1 open trace (0 without their root)" in process.log()
    host, port = process.grpc.rsplit(":", 1)
    with pytest.raises(OSError), socket.create_connection((host, int(port)), timeout=2):
        pass


@pytest.mark.parametrize("flag", ["--grpc-address", "--http-address", "--metrics-address"])
def test_address_in_use_exits_1_with_one_line(taken: str, flag: str) -> None:
    addresses = dict(zip(EPHEMERAL[::2], EPHEMERAL[1::2], strict=True))
    addresses["--metrics-address"] = "127.0.0.1:0"
    addresses[flag] = taken
    args = [a for pair in addresses.items() for a in pair]
    result = subprocess.run(
        [sys.executable, "-m", "loopwatch.cli", "serve", *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("loopwatch serve: cannot listen for ")
    assert taken in lines[0]


SERVE_KEYS = ", ".join(sorted(s.key for s in SETTINGS if s.table == "serve"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--grpc-address", "localhost"], "--grpc-address: expected HOST:PORT, got 'localhost'"),
        (
            ["--http-address", "127.0.0.1:99999"],
            "--http-address: port 99999 is out of range (0-65535) in '127.0.0.1:99999'",
        ),
        (
            ["--config", "/nonexistent/loopwatch.toml"],
            "/nonexistent/loopwatch.toml: no such file (from argument)",
        ),
        (["--config", "DIR"], "DIR: is a directory, not a file (from argument)"),
        (["--config", "BAD"], f"BAD: unknown key serve.grace; known: {SERVE_KEYS}"),
    ],
)
def test_configuration_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[serve]\ngrace = 3\n")
    paths = {"BAD": str(bad), "DIR": str(tmp_path)}
    args = [paths.get(a, a) for a in args]
    for placeholder, path in paths.items():
        message = message.replace(placeholder, path)
    result = subprocess.run(
        [sys.executable, "-m", "loopwatch.cli", "serve", *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (result.returncode, result.stderr) == (2, f"loopwatch serve: {message}\n")
