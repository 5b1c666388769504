"""Live: real Prometheus and Alertmanager on loopback, scraping loopwatch fed by the incidents.

Prometheus scrapes a loopwatch /metrics endpoint (the in-process processor on its own registry)
every second and evaluates the committed rules every second. The rule files are the committed
ones with every `for:` shortened to 2s (the real durations are covered by the promtool unit
tests in alerts/tests); the Alertmanager config is the committed one with its webhook URLs
pointed at a receiver in this test and its group timers shortened.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer
from prometheus_client import CollectorRegistry, start_http_server

from loopwatch import LoopwatchSpanProcessor
from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.emit import emit_turn, growing_history
from loopwatch.demo.scenarios import (
    eleven_empty_searches,
    five_bookings,
    fourteen_tickets,
    healthy,
)
from testkit.serve_process import free_port
from tests.support.helpers import require_tool

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dashboards.queries import expand, targets  # noqa: E402
from mixin.config import DASHBOARD_FILE, RUNBOOK_BASE_URL  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.slow]

MS = 1_000_000
SHORT_FOR = "2s"
DEADLINE_SECONDS = 60
# Dashboard queries that are right to return nothing in this test, and why.
LEGITIMATELY_EMPTY = {
    "'p99 max attempts by model: now vs a week earlier' B": "no history a week back",
    "'Connections refused' A": "the processor in process has no HTTP endpoints to refuse",
    # the stack's scenarios are the seed incidents; these kinds are exact in tests/test_progress.py
    "'Turns with a same-result loop (per minute)' A": "no same-result loop in the scenarios",
    "'Turns with a failing loop (per minute)' A": "no failing loop in the scenarios",
    # the coding agents' telemetry is OTLP logs, which only `loopwatch serve` takes
    # (tests/test_coding_agents.py reads it through serve); this stack's loopwatch is in process
    "\"Coding agents' loops: loopwatch's and their own guards'\" A": "no coding agent here",
    "\"Coding agents' loops: loopwatch's and their own guards'\" B": "no coding agent here",
    "'Coding agents in range: turns, loops, own detections' A": "no coding agent here",
    "'Coding agents in range: turns, loops, own detections' B": "no coding agent here",
    "'Coding agents in range: turns, loops, own detections' C": "no coding agent here",
}
# A fresh install: the history-relative alerts (new loop pattern, new model, regressions) wait
# for history; the severe-loop, duplicate and no-rows alerts work from the first minute.
EXPECTED_ALERTS = {
    "LoopwatchSevereLoop": "critical",
    "LoopwatchDuplicateSideEffect": "critical",
    "LoopwatchNoRowsStreak": "warning",
}


def _get(url: str, timeout: float = 5) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def _ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as response:
        return bool(response.status == 200)


def _wait(what: str, check: Callable[[], Any], deadline: float) -> Any:
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except (OSError, ValueError, KeyError, IndexError) as e:
            last = e
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what} (last error: {last})")


@dataclass
class Webhook:
    """An HTTP receiver for Alertmanager's webhook notifications."""

    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def start(self) -> ThreadingHTTPServer:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                hook.received.append((self.path, json.loads(self.rfile.read(length))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def firing(self) -> dict[str, str]:
        """alertname -> route path of every firing alert received."""
        return {
            a["labels"]["alertname"]: path
            for path, body in self.received
            for a in body["alerts"]
            if a["status"] == "firing"
        }


# -- what the agent does -------------------------------------------------------------------------
def _tool_span(tracer: Tracer, start: int, tool: str, attrs: dict[str, Any]) -> int:
    span = tracer.start_span(
        f"execute_tool {tool}",
        start_time=start,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, **attrs},
    )
    span.end(end_time=start + 50 * MS)
    return start + 60 * MS


def _agent_root(tracer: Tracer, start: int, agent: str) -> trace.Span:
    return tracer.start_span(
        f"invoke_agent {agent}",
        start_time=start,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent},
    )


def _guarded_turn(tracer: Tracer, start: int) -> None:
    """A turn in which a guard stopped the third create_ticket (it did not execute)."""
    root = _agent_root(tracer, start, "support")
    with trace.use_span(root, end_on_exit=False):
        args = json.dumps({"customer_id": "c_1", "order_id": "1", "summary": "x"})
        t = _tool_span(tracer, start + MS, "create_ticket", {"gen_ai.tool.call.arguments": args})
        t = _tool_span(
            tracer,
            t,
            "create_ticket",
            {"gen_ai.tool.call.arguments": args, "loopwatch.guard.decision": "stopped"},
        )
    root.end(end_time=t + MS)


def _turn_without_arguments(tracer: Tracer, start: int) -> None:
    root = _agent_root(tracer, start, "support")
    with trace.use_span(root, end_on_exit=False):
        t = _tool_span(tracer, start + MS, "lookup_customer", {"gen_ai.tool.call.result": "{}"})
    root.end(end_time=t + MS)


def _turns_of_many_agents(tracer: Tracer, start: int, count: int) -> None:
    """More agent names than the label bound: the last ones become 'other'."""
    for i in range(count):
        root = _agent_root(tracer, start, f"agent-{i}")
        with trace.use_span(root, end_on_exit=False):
            args = json.dumps({"query": f"q{i}", "customer_id": "c_2"})
            t = _tool_span(
                tracer,
                start + MS,
                "search_orders",
                {"gen_ai.tool.call.arguments": args, "gen_ai.tool.call.result": "[1]"},
            )
        root.end(end_time=t + MS)


def _abandoned_turn(tracer: Tracer, start: int) -> trace.Span:
    """A turn whose root does not end: evicted as idle; when it finally ends it is late."""
    root = _agent_root(tracer, start, "support")
    with trace.use_span(root, end_on_exit=False):
        _tool_span(
            tracer,
            start + MS,
            "search_orders",
            {"gen_ai.tool.call.arguments": '{"query": "late"}', "gen_ai.tool.call.result": "[1]"},
        )
    return root


# -- the stack -----------------------------------------------------------------------------------
@dataclass
class Stack:
    prometheus: str
    webhook: Webhook
    ticket_trace_id: str
    incidents_at: float

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"{self.prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        data = _get(url)
        assert data["status"] == "success", data
        result: list[dict[str, Any]] = data["data"]["result"]
        return result

    def alerts(self) -> dict[str, str]:
        """alertname -> state, as Prometheus reports them."""
        data = _get(f"{self.prometheus}/api/v1/alerts")
        return {a["labels"]["alertname"]: a["state"] for a in data["data"]["alerts"]}


def _shorten_for(text: str) -> str:
    return re.sub(r"^(\s+for:) \S+$", rf"\1 {SHORT_FOR}", text, flags=re.M)


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    out = log.open("wb")
    return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus_bin = require_tool("prometheus")
    alertmanager_bin = require_tool("prometheus-alertmanager")
    tmp = tmp_path_factory.mktemp("stack")
    deadline = time.monotonic() + DEADLINE_SECONDS

    # loopwatch: the in-process processor on its own registry, behind /metrics
    registry = CollectorRegistry()
    config = Config(
        tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))},
        label_limit=4,
        idle_timeout_seconds=1.0,
    )
    processor = LoopwatchSpanProcessor(config=config, registry=registry)
    spans = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("live-test")
    metrics_port = free_port()
    metrics_server, _ = start_http_server(metrics_port, addr="127.0.0.1", registry=registry)

    webhook = Webhook()
    hook_server = webhook.start()
    hook_url = f"http://127.0.0.1:{hook_server.server_address[1]}"

    # Alertmanager: the committed routes, receivers pointed here, timers short
    am_config = yaml.safe_load((ROOT / "alerts" / "alertmanager.yml").read_text())
    (mine,) = am_config["route"]["routes"]
    for route in (am_config["route"], mine):
        route.update(group_wait="1s", group_interval="1s", repeat_interval="1m")
    for route in mine["routes"]:
        route.pop("group_wait", None)
        route.pop("repeat_interval", None)
    for receiver in am_config["receivers"]:
        for hook in receiver.get("webhook_configs", []):
            hook["url"] = hook["url"].replace("http://webhook:8080", hook_url)
    (tmp / "alertmanager.yml").write_text(yaml.safe_dump(am_config))
    am_port = free_port()
    procs = [
        _start(
            [
                alertmanager_bin,
                f"--config.file={tmp / 'alertmanager.yml'}",
                f"--storage.path={tmp / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{am_port}",
                "--cluster.listen-address=",
            ],
            tmp / "alertmanager.log",
        )
    ]

    # Prometheus: the committed rules (for: shortened), 1s scrape and evaluation
    rules_dir = tmp / "rules"
    rules_dir.mkdir()
    for path in sorted((ROOT / "alerts" / "rules").glob("*.yaml")):
        (rules_dir / path.name).write_text(_shorten_for(path.read_text()))
    prom_config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules_dir / "*.yaml")],
        "alerting": {
            "alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]
        },
        "scrape_configs": [
            {
                "job_name": "loopwatch",
                "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}],
            }
        ],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(prom_config))
    prom_port = free_port()
    procs.append(
        _start(
            [
                prometheus_bin,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'prom-data'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
                "--enable-feature=exemplar-storage",
            ],
            tmp / "prometheus.log",
        )
    )
    prometheus = f"http://127.0.0.1:{prom_port}"
    try:
        # before Prometheus' first scrapes: healthy traffic, so most series exist already
        rng = random.Random(7)
        now = time.time_ns()
        description = {"create_ticket": "Create a support ticket for a customer's order."}
        for i in range(30):
            turn = healthy(rng, model="gpt-4.1" if i % 3 else "claude-sonnet-4")
            if i % 2:
                turn = type(turn)(turn.agent, turn.model, turn.calls, description)
            emit_turn(tracer, turn, now + i * 10_000 * MS)
        _guarded_turn(tracer, now)
        _turn_without_arguments(tracer, now)
        _turns_of_many_agents(tracer, now, 6)
        abandoned = _abandoned_turn(tracer, now)
        assert processor.force_flush(10_000)

        _wait("Prometheus ready", lambda: _ok(f"{prometheus}/-/ready"), deadline)
        _wait("Alertmanager ready", lambda: _ok(f"http://127.0.0.1:{am_port}/-/ready"), deadline)
        _wait(
            "a healthy scrape of loopwatch",
            lambda: (
                _get(f"{prometheus}/api/v1/query?query=up")["data"]["result"][0]["value"][1] == "1"
            ),
            deadline,
        )
        # the abandoned turn evicted as idle, and a few scrapes of the healthy state before the
        # incidents (so rates have samples before them)
        _wait(
            "the abandoned turn evicted",
            lambda: registry.get_sample_value("loopwatch_turns_evicted_total", {"reason": "idle"}),
            deadline,
        )
        scrapes = urllib.parse.urlencode({"query": 'count_over_time(up{job="loopwatch"}[1m])'})
        _wait(
            "three scrapes of the healthy state",
            lambda: (
                float(_get(f"{prometheus}/api/v1/query?{scrapes}")["data"]["result"][0]["value"][1])
                >= 3
            ),
            deadline,
        )
        abandoned.end(end_time=time.time_ns())  # its root arrives after eviction: a late span

        # the incidents: fourteen timed-out tickets, eleven empty searches, five bookings
        incidents_at = time.time()
        t = emit_turn(tracer, fourteen_tickets(), time.time_ns(), usage=growing_history)
        t = emit_turn(tracer, eleven_empty_searches(), t, usage=growing_history)
        emit_turn(tracer, five_bookings(agent="support"), t, usage=growing_history)
        assert processor.force_flush(10_000)
        ticket_traces = {
            s.context.trace_id
            for s in spans.get_finished_spans()
            if s.name == "execute_tool create_ticket" and not s.status.is_ok
        }
        assert len(ticket_traces) == 1
        yield Stack(
            prometheus,
            webhook,
            f"{ticket_traces.pop():032x}",
            incidents_at,
        )
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        metrics_server.shutdown()
        hook_server.shutdown()
        provider.shutdown()


def test_alerts_fire_in_prometheus_and_reach_the_webhook_through_alertmanager(
    stack: Stack,
) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    states = _wait(
        "the severe-loop and no-rows alerts firing in Prometheus",
        lambda: (
            (s := stack.alerts()) and all(s.get(name) == "firing" for name in EXPECTED_ALERTS) and s
        ),
        deadline,
    )
    assert {name: states[name] for name in EXPECTED_ALERTS} == dict.fromkeys(
        EXPECTED_ALERTS, "firing"
    )
    firing = _wait(
        "the webhook to receive them from Alertmanager",
        lambda: (f := stack.webhook.firing()) and set(EXPECTED_ALERTS) <= set(f) and f,
        deadline,
    )
    # routed by severity: critical to the pager route, warnings to the ticket route
    for name, severity in EXPECTED_ALERTS.items():
        assert firing[name] == f"/{severity}", (name, firing[name])
    payloads = [a for _, body in stack.webhook.received for a in body["alerts"]]
    severe = next(a for a in payloads if a["labels"]["alertname"] == "LoopwatchSevereLoop")
    assert severe["labels"]["tool"] == "create_ticket"
    assert severe["labels"]["model"] == "gpt-4.1"
    assert severe["labels"]["system"] == "loopwatch"
    assert severe["annotations"]["runbook_url"] == f"{RUNBOOK_BASE_URL}#loopwatchsevereloop"
    # no history yet: every pattern is new, and none of them pages
    assert "LoopwatchNewLoopPattern" not in stack.alerts()
    no_rows = {
        a["labels"]["tool"] for a in payloads if a["labels"]["alertname"] == "LoopwatchNoRowsStreak"
    }
    assert no_rows == {"search_orders"}


def test_every_rule_evaluates_without_error(stack: Stack) -> None:
    data = _get(f"{stack.prometheus}/api/v1/rules")
    rules = [r for g in data["data"]["groups"] for r in g["rules"]]
    assert len(rules) == 20
    # the hourly baseline group may not have run yet ("unknown"); nothing may be in error
    assert [(r["name"], r.get("lastError")) for r in rules if r["health"] == "err"] == []
    assert sum(r["health"] == "ok" for r in rules) >= 13


def test_every_dashboard_query_returns_data(stack: Stack) -> None:
    model = json.loads((ROOT / "dashboards" / "generated" / DASHBOARD_FILE).read_text())

    def read() -> tuple[list[str], list[str]]:
        empty: list[str] = []
        unexpected_empty: list[str] = []
        for t in targets(model):
            # short windows for a short test
            expr = expand(t.expr, {"$__rate_interval": "1m", "$__range": "5m"})
            result = stack.query(expr)
            legit = any(key in t.where for key in LEGITIMATELY_EMPTY)
            if not result:
                (empty if legit else unexpected_empty).append(t.where)
            elif legit:
                unexpected_empty.append(f"{t.where} returned data: update LEGITIMATELY_EMPTY")
        return empty, unexpected_empty

    # a rate has data from its second scrape after an increase: wait for every query to have
    # it, then read once more for the assertion's message
    deadline = time.monotonic() + DEADLINE_SECONDS
    with contextlib.suppress(AssertionError):
        _wait("data in every panel", lambda: not read()[1], deadline)
    empty, unexpected_empty = read()
    assert unexpected_empty == []
    assert len(empty) == len(LEGITIMATELY_EMPTY)


def test_exact_numbers_reach_prometheus(stack: Stack) -> None:
    def value(expr: str) -> float:
        (sample,) = stack.query(expr)
        return float(sample["value"][1])

    assert value('sum(loopwatch_repeat_calls_total{error_class="timeout"})') == 13
    assert value('sum(loopwatch_loops_total{kind="no_rows", tool="search_orders"})') == 1
    assert value('sum(loopwatch_loops_total{kind="duplicate", tool="book_meeting"})') == 1
    assert value('sum(loopwatch_repeat_calls_total{error_class="ok", tool="book_meeting"})') == 4
    assert value('sum(loopwatch_no_rows_streak_sum{tool="search_orders"})') == 11
    assert value("histogram_quantile(1, sum by (le) (loopwatch_turn_max_attempts_bucket))") == 16
    assert value('sum(loopwatch_guard_decisions_total{decision="stopped"})') == 1
    # agent-3..agent-5, and "unknown": the evicted turn lost its agent span with its root
    assert value('sum(loopwatch_label_overflow_total{label="agent"})') == 4
    assert value('sum(loopwatch_turns_total{agent="other"})') == 4
    assert value('sum(loopwatch_turns_evicted_total{reason="idle"})') == 1
    assert value("sum(loopwatch_late_spans_total)") == 1
    assert value('sum(loopwatch_calls_without_arguments_total{tool="lookup_customer"})') == 1


def test_overview_stats_count_the_incidents_exactly(stack: Stack) -> None:
    """The range stats see series born inside the range (the incidents' own counters)."""
    model = json.loads((ROOT / "dashboards" / "generated" / DASHBOARD_FILE).read_text())
    overview = {
        p["title"]: p["targets"][0]["expr"] for p in model["panels"] if p["gridPos"]["y"] == 1
    }

    def stat(title: str) -> float:
        (sample,) = stack.query(expand(overview[title], {"$__range": "5m"}))
        return float(sample["value"][1])

    # the thirteen repeated tickets and the four repeated bookings
    assert stat("Duplicate calls") == 13 + 4
    # the tickets' eleven calls past the cap, and the bookings' two (430 and 440 ms)
    assert round(stat("Seconds past the cap"), 3) == round(330.088 + 0.87, 3)
    assert stat("Max attempts per turn") == 16
    # Prometheus is younger than the range, so every turn counts: 30 healthy, the guarded one,
    # the one without arguments, 6 of many agents, the evicted one and the three incidents;
    # the fourteen tickets and the five bookings looped on one key
    assert round(stat("Turns with a loop"), 9) == round(2 / 42, 9)


def test_exemplars_carry_the_trace_id_of_the_fourteen_tickets_turn(stack: Stack) -> None:
    params = urllib.parse.urlencode(
        {
            "query": "loopwatch_turn_max_attempts_bucket",
            "start": f"{stack.incidents_at - 60:.3f}",
            "end": f"{time.time() + 60:.3f}",
        }
    )
    data = _wait(
        "exemplars",
        lambda: (d := _get(f"{stack.prometheus}/api/v1/query_exemplars?{params}"))["data"] and d,
        time.monotonic() + DEADLINE_SECONDS,
    )
    assert data["status"] == "success"
    exemplars = [e for series in data["data"] for e in series["exemplars"]]
    assert all(set(e["labels"]) == {"trace_id"} for e in exemplars)
    assert all(re.fullmatch(r"[0-9a-f]{32}", e["labels"]["trace_id"]) for e in exemplars)
    fourteen = [e for e in exemplars if float(e["value"]) == 14]
    assert fourteen and {e["labels"]["trace_id"] for e in fourteen} == {stack.ticket_trace_id}
