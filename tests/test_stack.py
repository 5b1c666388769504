"""The compose stack, checked without an engine: compose config, Prometheus config, Collector."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import tomllib
import urllib.request
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.serve_process import free_port
from tests.support.helpers import require_tool

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
COLLECTOR = ROOT / "deploy" / "otel-collector" / "config.yaml"
PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"
SERVE = [
    "loopwatch",
    "serve",
    "--grpc-address",
    "0.0.0.0:4317",
    "--http-address",
    "0.0.0.0:4318",
    "--metrics-address",
    "0.0.0.0:9464",
]
DEMO = ["loopwatch", "demo", "--otlp-endpoint", "http://collector:4317", "--forever"]
REPLICAS = ("loopwatch-1", "loopwatch-2")


@cache
def compose() -> dict[str, Any]:
    """The compose file as docker-compose resolves it (anchors and merges applied)."""
    tool = require_tool("docker-compose")
    done = subprocess.run(
        [tool, "-f", str(COMPOSE), "config"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = yaml.safe_load(done.stdout)
    return data


def services() -> dict[str, Any]:
    result: dict[str, Any] = compose()["services"]
    return result


@pytest.mark.slow
def test_docker_compose_config_accepts_the_file() -> None:
    tool = require_tool("docker-compose")
    done = subprocess.run(
        [tool, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert set(services()) == {
        "loopwatch-1",
        "loopwatch-2",
        "collector",
        "demo",
        "prometheus",
        "alertmanager",
        "webhook",
        "grafana",
        "jaeger",
    }


def test_images_are_pinned_to_exact_versions() -> None:
    for name, service in services().items():
        image = service["image"]
        repo, _, tag = image.rpartition(":")
        assert repo and re.fullmatch(r"v?\d+\.\d+\.\d+(-[a-z0-9.-]+)?", tag), f"{name}: {image}"
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    base = re.search(r"^FROM (\S+)", dockerfile, re.M)
    assert base and re.fullmatch(r"python:3\.11\.\d+-slim", base.group(1))
    # the compiled build, its wheel made in a stage of its own, installed with the serve extra
    assert "RUN LOOPWATCH_COMPILE=1 pip wheel --no-deps --wheel-dir /wheels ." in dockerfile
    assert 'pip install "$(ls /wheels/loopwatch-*.whl)[serve]"' in dockerfile
    assert re.findall(r"^FROM (\S+)", dockerfile, re.M) == [base.group(1)] * 2


def test_loopwatch_replicas_and_demo_run_the_agreed_commands() -> None:
    for name in REPLICAS:
        service = services()[name]
        assert service["command"] == SERVE
        assert service["build"]["context"] == str(ROOT)
        assert service["environment"]["LOOPWATCH_CONFIG"] == "/etc/loopwatch/loopwatch.toml"
    assert services()["demo"]["command"] == DEMO
    assert services()["demo"]["image"] == services()["loopwatch-1"]["image"]


def test_long_running_services_have_healthchecks() -> None:
    # collector: distroless image, no shell to probe from inside (its health_check extension is
    # published on 13133); demo: a client with nothing to probe.
    exempt = {"collector", "demo"}
    for name, service in services().items():
        if name in exempt:
            continue
        test = service["healthcheck"]["test"]
        assert test[0] == "CMD" and any("http://127.0.0.1:" in part for part in test), name
    # `disable: true` in the file; docker-compose renders it as test NONE
    assert services()["demo"]["healthcheck"]["test"] == ["NONE"]


def test_prometheus_runs_with_exemplar_storage_and_enough_retention() -> None:
    command = services()["prometheus"]["command"]
    assert "--enable-feature=exemplar-storage" in command
    retention = next(c for c in command if c.startswith("--storage.tsdb.retention.time="))
    assert retention.endswith("15d")  # the week-over-week rules read offset 7d of 1h windows


def mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of each volume; docker-compose prints "source:target[:mode]"."""
    out = []
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            out.append((volume["source"], volume["target"]))
        else:
            source, target = volume.split(":")[:2]
            out.append((source, target))
    return out


def _materialize(service: dict[str, Any], into: Path) -> None:
    """Recreate the service's bind mounts under ``into`` (symlinks), as the container sees them."""
    for source, target in mounts(service):
        if not source.startswith("/"):
            continue  # a named volume
        link = into / target.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(source)


def test_promtool_check_config_on_the_mounted_prometheus_config(tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    _materialize(services()["prometheus"], tmp_path)
    config = tmp_path / "etc" / "prometheus" / "prometheus.yml"
    done = subprocess.run(
        [promtool, "check", "config", str(config)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
    # the rule files it loads are the committed ones
    assert "loopwatch-rules.yaml" in done.stdout and "loopwatch-alerts.yaml" in done.stdout


def test_prometheus_scrapes_every_replica_and_alerts_alertmanager() -> None:
    config = yaml.safe_load(PROMETHEUS.read_text(encoding="utf-8"))
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "loopwatch")
    targets = job["static_configs"][0]["targets"]
    assert targets == [f"{name}:9464" for name in REPLICAS]
    (am,) = config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert am == "alertmanager:9093"
    am_service = services()["alertmanager"]
    assert any(p["target"] == 9093 for p in am_service["ports"])


def test_collector_pipelines_reference_only_defined_components() -> None:
    config = yaml.safe_load(COLLECTOR.read_text(encoding="utf-8"))
    kinds = ("receivers", "processors", "exporters")
    for name, pipeline in config["service"]["pipelines"].items():
        for kind in kinds:
            for component in pipeline.get(kind, []):
                assert component in config[kind], f"pipeline {name}: {kind} {component} undefined"
    for extension in config["service"].get("extensions", []):
        assert extension in config["extensions"]
    # and nothing is defined but unused (a typo in a pipeline would leave its target unused)
    used = {
        (kind, c)
        for p in config["service"]["pipelines"].values()
        for kind in kinds
        for c in p[kind]
    }
    assert {(kind, c) for kind in kinds for c in config[kind]} == used


def test_collector_routes_by_trace_id_to_every_replica() -> None:
    config = yaml.safe_load(COLLECTOR.read_text(encoding="utf-8"))
    lb = config["exporters"]["loadbalancing"]
    assert lb["routing_key"] == "traceID"
    assert lb["resolver"]["static"]["hostnames"] == [f"{name}:4317" for name in REPLICAS]
    assert "otlp" in lb["protocol"]
    assert config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"] == "0.0.0.0:4318"
    assert config["exporters"]["otlp/jaeger"]["endpoint"] == "jaeger:4317"
    collector = services()["collector"]
    mounted = {target for _, target in mounts(collector)}
    assert "/etc/otelcol-contrib/config.yaml" in mounted
    assert collector["command"] == ["--config=/etc/otelcol-contrib/config.yaml"]


def test_loop_spans_go_through_the_collector_to_jaeger_only() -> None:
    config = yaml.safe_load(COLLECTOR.read_text(encoding="utf-8"))
    assert config["receivers"]["otlp/loops"]["protocols"]["grpc"]["endpoint"] == "0.0.0.0:4319"
    loops = config["service"]["pipelines"]["traces/loops"]
    assert loops["receivers"] == ["otlp/loops"]
    assert loops["exporters"] == ["otlp/jaeger"]  # never back to a replica
    toml = tomllib.loads((ROOT / "deploy" / "loopwatch" / "loopwatch.toml").read_text())
    assert toml["serve"]["export_otlp"] == "http://collector:4319"


def test_every_mounted_file_exists() -> None:
    for name, service in services().items():
        for source, _ in mounts(service):
            if source.startswith("/"):
                assert Path(source).exists(), f"{name}: {source}"


def test_webhook_receiver_prints_each_alert() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "deploy" / "webhook" / "receiver.py"), str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    assert r.status == 200
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        body = {
            "alerts": [
                {
                    "status": "firing",
                    "labels": {"alertname": "LoopwatchSevereLoop", "severity": "critical"},
                    "annotations": {"summary": "A turn called one tool six or more times."},
                }
            ]
        }
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/critical", data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=2) as r:
            assert r.status == 200
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=5)
    assert out.strip() == (
        "critical firing LoopwatchSevereLoop severity=critical service= tool=: "
        "A turn called one tool six or more times."
    )


@pytest.mark.parametrize("path", [".dockerignore", "Dockerfile"])
def test_image_files_exist(path: str) -> None:
    assert (ROOT / path).is_file()


@pytest.mark.parametrize("service", ["loopwatch-1", "demo"])
def test_compose_commands_parse_with_the_real_cli(service: str) -> None:
    """The command lines in docker-compose.yml are accepted by loopwatch's own parsers."""
    import argparse
    import importlib

    from loopwatch.cli import COMMANDS

    command = services()[service]["command"]
    assert command[0] == "loopwatch"
    module_name, _ = COMMANDS[command[1]]
    parser = argparse.ArgumentParser(prog=f"loopwatch {command[1]}", exit_on_error=False)
    importlib.import_module(module_name).add_arguments(parser)
    parsed = vars(parser.parse_args(command[2:]))
    given = {v for v in command[2:] if not v.startswith("--")}
    assert given <= {str(v) for v in parsed.values()}


def test_dockerfile_default_command_is_the_replicas_command() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    cmd = re.search(r"^CMD (\[.*\])$", dockerfile, re.M)
    assert cmd and json.loads(cmd.group(1)) == SERVE
