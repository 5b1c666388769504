"""gemini-cli, the real one, run offline: installed from npm at a pinned version into
``build/coding-agents/`` (once), run headless against a scripted model on loopback
(:mod:`testkit.scripted_gemini`, ``GOOGLE_GEMINI_BASE_URL``), its ``settings.json`` telemetry
pointed at a ``loopwatch serve`` as docs/coding-agents.md configures it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from testkit import npm_cli

VERSION = "0.61.0"  # pinned
PREFIX = npm_cli.AGENTS / f"gemini-cli-{VERSION}"
BINARY = PREFIX / "node_modules" / ".bin" / "gemini"


def install() -> Path | None:
    """The binary, installed with npm if missing; None when npm is absent or offline."""
    return npm_cli.install("@google/gemini-cli", VERSION, PREFIX, BINARY)


def run(
    binary: Path,
    base_url: str,
    endpoint: str,
    protocol: str,
    home: Path,
    *,
    log_prompts: bool = True,
) -> subprocess.CompletedProcess[str]:
    """One prompt, headless, every tool call approved (``--yolo``)."""
    settings = {
        "telemetry": {
            "enabled": True,
            "target": "local",
            "otlpEndpoint": endpoint,
            "otlpProtocol": protocol,
            "logPrompts": log_prompts,
        },
        "security": {"auth": {"selectedType": "gemini-api-key"}},
    }
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    work = home / "work"
    work.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GEMINI_API_KEY": "scripted",
        "GOOGLE_GEMINI_BASE_URL": base_url,
        "GEMINI_CLI_NO_RELAUNCH": "true",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    }
    command = [str(binary), "-p", "Is the service up?", "--yolo", "-m", "gemini-2.5-pro"]
    return subprocess.run(
        command, env=env, cwd=work, capture_output=True, text=True, timeout=300, check=False
    )
