"""A coding agent's CLI installed from npm at a pinned version into ``build/coding-agents/``,
once, for the live tests (testkit.claude_code, testkit.codex, testkit.gemini_cli), and the
receiver their logs are recorded with."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "build" / "coding-agents"


def install(package: str, version: str, prefix: Path, binary: Path) -> Path | None:
    """``binary``, with ``package@version`` installed into ``prefix`` by npm if it is missing;
    None when npm is absent or the install fails (offline)."""
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        return None
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            npm,
            "install",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(prefix),
            f"{package}@{version}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    return binary if done.returncode == 0 and binary.exists() else None


@contextmanager
def logs_receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An OTLP/HTTP JSON logs receiver on loopback for recording fixtures: ``(its address
    host:port, the request bodies received on /v1/logs in order)``."""
    bodies: list[dict[str, Any]] = []

    class Collector(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path == "/v1/logs":
                bodies.append(json.loads(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()


def logs_document(bodies: list[dict[str, Any]]) -> dict[str, Any]:
    """The requests' ``resourceLogs`` in the order sent, as one document."""
    return {"resourceLogs": [rl for b in bodies for rl in b.get("resourceLogs", [])]}
