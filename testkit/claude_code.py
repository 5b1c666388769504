"""Claude Code, the real CLI, run offline: installed from npm at a pinned version into
``build/coding-agents/`` (once), run in print mode against a scripted model on loopback
(:mod:`testkit.scripted_anthropic`), its telemetry pointed at a ``loopwatch serve``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

VERSION = "2.1.332"  # pinned: the attribute names docs/coding-agents.md lists were read from it
ROOT = Path(__file__).resolve().parent.parent
PREFIX = ROOT / "build" / "coding-agents" / f"claude-code-{VERSION}"
# the npm package's postinstall links this platform package's binary; npm installs it as an
# optional dependency, so it is there without running install scripts
BINARY = PREFIX / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"


def install() -> Path | None:
    """The binary, installed with npm if missing; None when npm is absent or the install
    fails (offline)."""
    if BINARY.exists():
        return BINARY
    npm = shutil.which("npm")
    if npm is None:
        return None
    PREFIX.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            npm,
            "install",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(PREFIX),
            f"@anthropic-ai/claude-code@{VERSION}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    return BINARY if done.returncode == 0 and BINARY.exists() else None


def run(
    binary: Path,
    base_url: str,
    endpoint: str,
    protocol: str,
    prompt: str,
    home: Path,
    *,
    details: bool = False,
    resume: bool = False,
) -> subprocess.CompletedProcess[str]:
    """One prompt in print mode, Bash allowed, as docs/coding-agents.md configures it.
    ``resume``: the same session as the previous run in ``home`` (``--continue``)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-scripted",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_LOGS_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_LOGS_EXPORT_INTERVAL": "500",
    }
    if details:
        env["OTEL_LOG_TOOL_DETAILS"] = "1"
    command = [str(binary), "-p", prompt, "--allowedTools", "Bash"]
    if resume:
        command.append("--continue")
    return subprocess.run(
        command, env=env, cwd=home, capture_output=True, text=True, timeout=300, check=False
    )


def record(directory: Path) -> list[Path]:
    """Record Claude Code's OTLP/JSON logs requests for the fixtures' scenarios (each one
    document: the requests' ``resourceLogs`` in the order sent): ``python -m
    testkit.claude_code DIR``."""
    import json
    import tempfile
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from typing import Any

    from testkit.scripted_anthropic import Script, scripted_anthropic

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

    binary = install()
    assert binary is not None, "Claude Code did not install"
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    failing = "curl -sS --max-time 2 http://127.0.0.1:9/health"
    healthy = ["echo one", "pwd", "date -u +%Y", "uname -s", "true", "echo six"]
    scenarios = {
        "loop-default": [([failing] * 6, False, False)],
        "loop-details": [([failing] * 6, True, False)],
        "healthy-details": [(healthy, True, False)],
        "two_prompts-default": [(healthy[:2], False, False), (healthy[:4], False, True)],
    }
    written = []
    for name, runs in scenarios.items():
        bodies.clear()
        with tempfile.TemporaryDirectory() as home:
            for commands, details, resume in runs:
                with scripted_anthropic(Script(commands)) as base:
                    done = run(
                        binary,
                        base,
                        endpoint,
                        "http/json",
                        "Is the service up?",
                        Path(home),
                        details=details,
                        resume=resume,
                    )
                assert done.returncode == 0, done.stderr
        document = {"resourceLogs": [rl for b in bodies for rl in b.get("resourceLogs", [])]}
        path = directory / f"claude-code-{name}.json"
        path.write_text(json.dumps(document, indent=1) + "\n")
        written.append(path)
    server.shutdown()
    return written


if __name__ == "__main__":
    import sys

    for written in record(Path(sys.argv[1])):
        print(written)
