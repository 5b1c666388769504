"""Claude Code, the real CLI, run offline: installed from npm at a pinned version into
``build/coding-agents/`` (once), run in print mode against a scripted model on loopback
(:mod:`testkit.scripted_anthropic`), its telemetry pointed at a ``loopwatch serve``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from testkit import npm_cli

VERSION = "2.1.332"  # pinned: the attribute names docs/coding-agents.md lists were read from it
PREFIX = npm_cli.AGENTS / f"claude-code-{VERSION}"
# the npm package's postinstall links this platform package's binary; npm installs it as an
# optional dependency, so it is there without running install scripts
BINARY = PREFIX / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"


def install() -> Path | None:
    """The binary, installed with npm if missing; None when npm is absent or offline."""
    return npm_cli.install("@anthropic-ai/claude-code", VERSION, PREFIX, BINARY)


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

    from testkit.scripted_anthropic import Script, scripted_anthropic

    binary = install()
    assert binary is not None, "Claude Code did not install"
    failing = "curl -sS --max-time 2 http://127.0.0.1:9/health"
    healthy = ["echo one", "pwd", "date -u +%Y", "uname -s", "true", "echo six"]
    scenarios = {
        "loop-default": [([failing] * 6, False, False)],
        "loop-details": [([failing] * 6, True, False)],
        "healthy-details": [(healthy, True, False)],
        "two_prompts-default": [(healthy[:2], False, False), (healthy[:4], False, True)],
    }
    written = []
    with npm_cli.logs_receiver() as (address, bodies):
        for name, runs in scenarios.items():
            bodies.clear()
            with tempfile.TemporaryDirectory() as home:
                for commands, details, resume in runs:
                    with scripted_anthropic(Script(commands)) as base:
                        done = run(
                            binary,
                            base,
                            f"http://{address}",
                            "http/json",
                            "Is the service up?",
                            Path(home),
                            details=details,
                            resume=resume,
                        )
                    assert done.returncode == 0, done.stderr
            path = directory / f"claude-code-{name}.json"
            path.write_text(json.dumps(npm_cli.logs_document(bodies), indent=1) + "\n")
            written.append(path)
    return written


if __name__ == "__main__":
    import sys

    for written in record(Path(sys.argv[1])):
        print(written)
