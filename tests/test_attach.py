"""Attaching: instrument(), opentelemetry-instrument with no code change, and /metrics."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.emit import emit_turn
from loopwatch.demo.scenarios import (
    SEARCH_QUERIES,
    TICKET_SUMMARIES,
    eleven_empty_searches,
    fourteen_tickets,
)
from testkit.serve_process import free_port
from tests.support.attach_process import BIN
from tests.support.helpers import Pipeline, S

TOML = '[tools.create_ticket]\nidentity = ["customer_id", "order_id"]\n'


@pytest.mark.slow
def test_opentelemetry_instrument_attaches_without_code_change(tmp_path: Path) -> None:
    (tmp_path / "loopwatch.toml").write_text(TOML)
    port = free_port()
    app = tmp_path / "app.py"
    app.write_text(
        textwrap.dedent(
            f"""
            import urllib.request
            from opentelemetry import trace
            from loopwatch.demo.emit import emit_turn
            from loopwatch.demo.scenarios import fourteen_tickets

            emit_turn(trace.get_tracer("app"), fourteen_tickets(), 10**18)
            trace.get_tracer_provider().force_flush()
            body = urllib.request.urlopen("http://127.0.0.1:{port}/metrics").read().decode()
            print("\\n".join(l for l in body.splitlines() if l.startswith("loopwatch_")))
            """
        )
    )
    env = {
        **os.environ,
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_SERVICE_NAME": "ticket-agent",
        "LOOPWATCH_METRICS_PORT": str(port),
    }
    out = subprocess.run(
        [str(BIN / "opentelemetry-instrument"), sys.executable, str(app)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert (
        'loopwatch_turn_max_attempts_sum{agent="support",model="gpt-4.1",service="ticket-agent"}'
        " 14.0" in out
    ), out
    assert 'loopwatch_build_info{version="0.1.0"} 1.0' in out


def test_instrument_refuses_a_provider_without_processors() -> None:
    with pytest.raises(RuntimeError, match="not an SDK TracerProvider"):
        import loopwatch

        wrong: Any = object()  # a caller without type checks
        loopwatch.instrument(tracer_provider=wrong, serve=False, frameworks=False)


def test_the_provider_loopwatch_sets_is_said_as_done_not_as_an_order() -> None:
    code = (
        "import logging; logging.basicConfig(level=logging.INFO)\n"
        "from loopwatch.attach.provider import global_sdk_provider\n"
        "global_sdk_provider()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert (out.returncode, out.stderr) == (
        0,
        "INFO:loopwatch.attach.provider:no tracer provider was set: "
        "loopwatch set an SDK TracerProvider from OTEL_* "
        "(exporters: none, OTEL_TRACES_EXPORTER unset)\n",
    )


def test_no_argument_result_or_identity_value_leaves_the_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    p = Pipeline(
        Config(tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))})
    )
    t = emit_turn(p.tracer, fourteen_tickets(), 10 * S)
    emit_turn(p.tracer, eleven_empty_searches(), t)
    p.flush()
    exposed = generate_openmetrics(p.registry).decode() + generate_latest(p.registry).decode()
    assert "loopwatch_turn_max_attempts_bucket" in exposed and "trace_id=" in exposed
    secrets = ["c_40912", "88214", *TICKET_SUMMARIES, *SEARCH_QUERIES]
    for secret in secrets:
        assert secret not in exposed
        assert secret not in caplog.text
    p.close()


def test_label_values_past_the_bound_become_other() -> None:
    from loopwatch.demo.scenarios import Call, Turn

    p = Pipeline(Config(label_limit=2))
    turn = Turn(
        "support",
        "m",
        tuple(Call(f"tool_{i}", {"x": i}, 10, result=[1]) for i in range(5)),
    )
    emit_turn(p.tracer, turn, 10 * S)
    assert p.value("loopwatch_tool_calls_total", tool="tool_0") == 1
    assert p.value("loopwatch_tool_calls_total", tool="tool_1") == 1
    assert p.value("loopwatch_tool_calls_total", tool="other") == 3
    assert p.value("loopwatch_label_overflow_total", label="tool") == 3
    p.close()


def test_metrics_endpoint_serves_openmetrics_with_exemplars() -> None:
    from prometheus_client import start_http_server

    p = Pipeline(Config(tools={"create_ticket": ToolDeclaration(identity=("order_id",))}))
    port = free_port()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=p.registry)
    try:
        emit_turn(p.tracer, fourteen_tickets(), 10 * S)
        p.flush()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0"},
        )
        body = urllib.request.urlopen(request, timeout=10).read().decode()
        line = next(
            x
            for x in body.splitlines()
            if x.startswith("loopwatch_turn_max_attempts_bucket") and 'le="16.0"' in x
        )
        count, exemplar = line.split(" # ")
        assert count.endswith(" 1.0")
        assert exemplar.startswith('{trace_id="') and '"} 14.0 ' in exemplar
    finally:
        server.shutdown()
        p.close()


def test_attaching_twice_neither_raises_nor_counts_twice() -> None:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from prometheus_client import REGISTRY

    import loopwatch

    provider = TracerProvider(resource=Resource.create({"service.name": "attach-twice"}))
    config = Config(tools={"create_ticket": ToolDeclaration(identity=("order_id",))})
    first = loopwatch.instrument(provider, config, serve=False, frameworks=False)
    assert loopwatch.instrument(provider, config, serve=False, frameworks=False) is first
    # a second processor on the same (default) registry shares its metrics instead of raising
    second = loopwatch.LoopwatchSpanProcessor(config=config)
    assert second.sink is first.sink
    second.shutdown()
    emit_turn(provider.get_tracer("t"), fourteen_tickets(), 10 * S)
    provider.force_flush()
    labels = {"service": "attach-twice", "agent": "support", "model": "gpt-4.1"}
    assert REGISTRY.get_sample_value("loopwatch_turns_total", labels) == 1
    assert REGISTRY.get_sample_value("loopwatch_turn_max_attempts_sum", labels) == 14
    provider.shutdown()
