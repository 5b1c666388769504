"""Codex CLI, the real one, run offline: installed from npm at a pinned version into
``build/coding-agents/`` (once), ``codex exec`` against a scripted model on loopback
(:mod:`testkit.scripted_openai`, a ``[model_providers]`` entry), its telemetry pointed at a
``loopwatch serve`` as docs/coding-agents.md configures it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from testkit import npm_cli

VERSION = "0.171.0"  # pinned
PREFIX = npm_cli.AGENTS / f"codex-{VERSION}"
# npm installs the platform package as an optional dependency: its binary, without install
# scripts
BINARY = (
    PREFIX
    / "node_modules"
    / "@openai"
    / "codex-linux-x64"
    / "vendor"
    / "x86_64-unknown-linux-musl"
    / "bin"
    / "codex"
)


def install() -> Path | None:
    """The binary, installed with npm if missing; None when npm is absent or offline."""
    return npm_cli.install("@openai/codex", VERSION, PREFIX, BINARY)


def config(base_url: str, exporter: str) -> str:
    """``config.toml``: the scripted model as a provider, and ``[otel]`` with ``exporter``."""
    return (
        'model = "gpt-5-codex"\n'
        'model_provider = "scripted"\n'
        "[model_providers.scripted]\n"
        'name = "scripted"\n'
        f'base_url = "{base_url}"\n'
        'wire_api = "responses"\n'
        'env_key = "SCRIPTED_API_KEY"\n'
        "[otel]\n"
        'environment = "dev"\n'
        "log_user_prompt = false\n"
        f"exporter = {exporter}\n"
    )


def grpc_exporter(address: str) -> str:
    return f'{{ otlp-grpc = {{ endpoint = "http://{address}" }} }}'


def http_exporter(address: str, protocol: str) -> str:
    return f'{{ otlp-http = {{ endpoint = "http://{address}/v1/logs", protocol = "{protocol}" }} }}'


def run(binary: Path, home: Path, toml: str, prompt: str) -> subprocess.CompletedProcess[str]:
    """``codex exec`` of one prompt in ``home`` (its ``.codex/config.toml`` written first)."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(toml)
    work = home / "work"
    work.mkdir(exist_ok=True)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "SCRIPTED_API_KEY": "sk-scripted",
    }
    command = [
        str(binary),
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        prompt,
    ]
    return subprocess.run(
        command, env=env, cwd=work, capture_output=True, text=True, timeout=300, check=False
    )


def record(directory: Path) -> list[Path]:
    """Record Codex's OTLP/JSON logs requests for the loop and the healthy run (each one
    document: the requests' ``resourceLogs`` in the order sent): ``python -m testkit.codex DIR``."""
    import json
    import tempfile

    from testkit.scripted_openai import scripted_openai

    binary = install()
    assert binary is not None, "Codex did not install"
    failing = "curl -sS --max-time 2 http://127.0.0.1:9/health"
    healthy = ["echo one", "pwd", "date -u +%Y", "uname -s", "true", "echo six"]
    written = []
    with npm_cli.logs_receiver() as (address, bodies):
        for name, commands in (("loop", [failing] * 6), ("healthy", healthy)):
            bodies.clear()
            with tempfile.TemporaryDirectory() as home, scripted_openai(commands) as base:
                toml = config(base, http_exporter(address, "json"))
                done = run(binary, Path(home), toml, "Is the service up?")
                assert done.returncode == 0, done.stderr
            path = directory / f"codex-{name}.json"
            path.write_text(json.dumps(npm_cli.logs_document(bodies), indent=1) + "\n")
            written.append(path)
    return written


if __name__ == "__main__":
    import sys

    for written in record(Path(sys.argv[1])):
        print(written)
