"""A replayed week as the baseline of the history-relative alerts on the first day after install.

The steps of docs/stack.md, end to end, with real binaries:

1. A week of stored traces: two agent services (``shop-a``, ``shop-b``) answer a turn every two
   minutes with the demo's healthy turns (one in twenty retries a ticket once, none loops),
   in all three conventions, written as the Collector's file exporter writes them (OTLP JSON).
2. ``loopwatch replay --openmetrics`` turns them into the series a replica would have shown;
   ``promtool tsdb create-blocks-from openmetrics`` backfills them, and ``promtool tsdb
   create-blocks-from rules`` materialises the baseline tiles up to the install.
3. Prometheus runs on those blocks with the committed rule files (every ``for:`` shortened, as
   in tests/test_stack_live.py: the real durations are tested in alerts/tests and
   tests/test_alert_history.py) and scrapes three live agents, each with the in-process
   processor behind its own /metrics: ``shop-a`` switches to model ``m-new`` whose turns loop
   (one in twenty at 3-4 attempts); ``shop-b`` switches to ``m-new`` with no change in
   behaviour; ``shop-c`` regresses like ``shop-a`` but has no stored history.

The history-relative alerts (new loop pattern, new model, share regressions) fire for
``shop-a`` within the first minutes, stay quiet for ``shop-b``, and stay quiet for ``shop-c``
(without a baseline they wait eight days; there only the p99 alert, which needs none, fires).
The first day's turns come in a few batches a scrape apart, not over hours: every alert reads
a window of an hour or more, which holds them either way. Every wait is on Prometheus' state.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer
from prometheus_client import CollectorRegistry, start_http_server

from loopwatch import LoopwatchSpanProcessor
from loopwatch.cli import main
from loopwatch.demo.emit import CONVENTIONS, emit_turn
from loopwatch.demo.scenarios import Turn, flaky, healthy
from testkit.serve_process import free_port
from testkit.stored import write_collector_json
from testkit.streams import SeededIds
from tests.support.helpers import S, require_tool
from tests.support.history import Prometheus, backfilled_prometheus
from tests.support.replay import CONFIG, batches

pytestmark = [pytest.mark.live, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
WEEK = 7 * 86_400
INTERVAL = 1800  # --interval: the hourly baseline tiles need two samples an hour, no more
TURN_EVERY = 180  # seconds between stored turns of one service
STORED = ("shop-a", "shop-b")
REGRESSES, NEUTRAL, FRESH = "shop-a", "shop-b", "shop-c"
RETRY_SHARE = 0.05  # turns that retry a ticket once (2 attempts: no loop), before and after
LIVE_BATCHES, LIVE_BATCH = 5, 40  # the first day: 200 turns a service after one seeding turn
SHORT_FOR = 2  # seconds
DEADLINE_SECONDS = 60
HISTORY_RELATIVE = {
    "LoopwatchNewLoopPattern",
    "LoopwatchModelLoopShareRegression",
    "LoopwatchToolLoopShareRegression",
    "LoopwatchNewModelLoops",
    "LoopwatchNewToolVersionLoops",
}
TOML = '[tools.create_ticket]\nidentity = ["customer_id", "order_id"]\n'  # = CONFIG's


def _labels(**labels: str) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


def _expected(service: str) -> set[tuple[str, frozenset[tuple[str, str]]]]:
    """(alert, labels) that must fire for a service, and nothing else may even be pending."""
    new = _labels(service=service, agent="support", model="m-new")
    if service == NEUTRAL:
        return set()
    if service == FRESH:
        return {("LoopwatchAttemptsP99AboveOne", new)}
    ticket = {"service": service, "tool": "create_ticket"}
    return {
        ("LoopwatchNewModelLoops", new),
        ("LoopwatchAttemptsP99AboveOne", new),
        ("LoopwatchToolLoopShareRegression", _labels(**ticket)),
        ("LoopwatchNewLoopPattern", _labels(**ticket, error_class="timeout", kind="repeat")),
    }


# -- the stored week -------------------------------------------------------------------------------
def _usual(rng: random.Random, model: str) -> Turn:
    if rng.random() < RETRY_SHARE:
        return flaky(rng, model, attempts=3)  # two timeouts of one key, then success
    return healthy(rng, model)


def _tracer(service: str, seed: int, *processors: Any) -> tuple[TracerProvider, Tracer]:
    provider = TracerProvider(
        resource=Resource.create({"service.name": service}), id_generator=SeededIds(seed)
    )
    for processor in processors:
        provider.add_span_processor(processor)
    return provider, provider.get_tracer("agent")


def write_stored_week(path: Path, start: int, end: int) -> int:
    """Healthy turns of the stored services from ``start`` to ``end`` (seconds) as the file
    exporter writes them: requests of spans in the order they ended, services interleaved.
    Returns the number of turns."""
    spans: list[ReadableSpan] = []
    turns = 0
    for n, service in enumerate(STORED):
        memory = InMemorySpanExporter()
        _, tracer = _tracer(service, n, SimpleSpanProcessor(memory))
        rng = random.Random(service)
        at = start + n  # a second apart, so the services' spans interleave
        while at < end - 600:  # every turn (a retry takes a minute) ends before the install
            emit_turn(tracer, _usual(rng, "m-old"), at * S, CONVENTIONS[turns % 3])
            turns += 1
            at += TURN_EVERY
        spans += memory.get_finished_spans()
    spans.sort(key=lambda s: s.end_time or 0)
    write_collector_json(path, batches(spans))
    return turns


# -- the live agents -------------------------------------------------------------------------------
@dataclass
class Agent:
    """One agent process: the in-process processor behind its own /metrics."""

    service: str
    seed: int
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    turns: int = 0
    port: int = 0

    def __post_init__(self) -> None:
        self.processor = LoopwatchSpanProcessor(config=CONFIG, registry=self.registry)
        self.provider, self.tracer = _tracer(self.service, self.seed, self.processor)
        self.rng = random.Random(f"live/{self.service}")
        self.port = free_port()
        self.server, _ = start_http_server(self.port, addr="127.0.0.1", registry=self.registry)

    def emit(self, turns: list[Turn]) -> None:
        start = time.time_ns() - 600 * S  # ended by now: a loop of four timeouts takes 2 min
        for turn in turns:
            emit_turn(self.tracer, turn, start, CONVENTIONS[self.turns % 3])
            self.turns += 1
        assert self.processor.force_flush(10_000)

    def first_turn(self) -> Turn:
        """A turn of the new model that uses both tools, so every series the alerts read
        exists before the first loop (a counter's first sample is no increase)."""
        while True:
            turn = healthy(self.rng, "m-new")
            if len(turn.calls) == 2:
                return turn

    def batch(self) -> list[Turn]:
        """``LIVE_BATCH`` turns of the new model; a regressing agent loops (3-4 attempts) in
        one turn of every 20, at a random place in each block of 20."""
        out = [_usual(self.rng, "m-new") for _ in range(LIVE_BATCH)]
        if self.service != NEUTRAL:
            for block in range(0, LIVE_BATCH, 20):
                attempts = self.rng.choice((4, 5))  # 3-4 timeouts of one key, then success
                out[block + self.rng.randrange(20)] = flaky(self.rng, "m-new", attempts=attempts)
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.provider.shutdown()


# -- Prometheus' state -----------------------------------------------------------------------------
def _api(server: Prometheus, path: str, **params: str) -> Any:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"{server.url}/api/v1/{path}{query}", timeout=30) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]


def _wait(what: str, check: Callable[[], Any], deadline: float, want: Any = True) -> None:
    got = None
    while time.monotonic() < deadline:
        got = check()
        if got == want:
            return
        time.sleep(0.1)  # a poll of Prometheus' state, not a guess at how long it takes
    raise AssertionError(f"timed out waiting for {what}: {got!r}, not {want!r}")


def _live_turns(server: Prometheus) -> dict[str, float]:
    result = _api(
        server,
        "query",
        query='sum by (service) (loopwatch_turns_total{job="loopwatch", instance!="replay"})',
    )["result"]
    return {r["metric"]["service"]: float(r["value"][1]) for r in result}


def _seconds(stamp: str) -> float:
    """An RFC 3339 time as Prometheus writes it (nanoseconds) in unix seconds."""
    stamp = re.sub(r"(\.\d{6})\d+", r"\1", stamp).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp()


def _evaluated_after(server: Prometheus, at: float) -> bool:
    groups = _api(server, "rules")["groups"]
    (group,) = [g for g in groups if g["name"] == "loopwatch.alerts"]
    return _seconds(group["lastEvaluation"]) > at


def _ever(server: Prometheus, seconds: int) -> dict[str, set[tuple[str, Any]]]:
    """service -> (alert, labels) of every alert pending or firing in the last ``seconds``."""
    result = _api(
        server,
        "query",
        query=f'max_over_time(ALERTS{{service=~"shop-.*"}}[{seconds}s])',
    )["result"]
    out: dict[str, set[tuple[str, Any]]] = {}
    for r in result:
        labels = dict(r["metric"])
        alert = labels.pop("alertname")
        for drop in ("alertstate", "job", "severity", "system"):
            labels.pop(drop, None)
        out.setdefault(labels["service"], set()).add((alert, frozenset(labels.items())))
    return out


def _firing(server: Prometheus) -> dict[str, set[tuple[str, Any]]]:
    out: dict[str, set[tuple[str, Any]]] = {}
    for a in _api(server, "alerts")["alerts"]:
        if a["state"] != "firing" or "service" not in a["labels"]:
            continue
        labels = dict(a["labels"])
        alert = labels.pop("alertname")
        for drop in ("job", "severity", "system"):
            labels.pop(drop, None)
        out.setdefault(labels["service"], set()).add((alert, frozenset(labels.items())))
    return out


def _shorten_for(text: str) -> str:
    return re.sub(r"^(\s+for:) \S+$", rf"\1 {SHORT_FOR}s", text, flags=re.M)


@dataclass
class Outcome:
    stored_turns: int
    report: dict[str, Any]
    ever: dict[str, set[tuple[str, Any]]]
    firing: dict[str, set[tuple[str, Any]]]
    rules: list[dict[str, Any]]


@pytest.fixture(scope="module")
def first_day(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    prometheus, promtool = require_tool("prometheus"), require_tool("promtool")
    work = tmp_path_factory.mktemp("backfill")
    # the install: the last half hour boundary, so the replay's last scrape is not in the future
    install = int(time.time()) // INTERVAL * INTERVAL
    start = install - WEEK
    traces = work / "traces.json"
    stored_turns = write_stored_week(traces, start, install)
    (work / "loopwatch.toml").write_text(TOML)
    openmetrics = work / "backfill.om"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(
            [
                "replay",
                str(traces),
                "--config",
                str(work / "loopwatch.toml"),
                "--openmetrics",
                str(openmetrics),
                "--interval",
                str(INTERVAL),
                "--json",
                "--no-progress",
            ]
        )
    assert code == 0
    report = json.loads(out.getvalue())

    rules_dir = work / "rules"
    rules_dir.mkdir()
    for path in sorted((ROOT / "alerts" / "rules").glob("*.yaml")):
        (rules_dir / path.name).write_text(_shorten_for(path.read_text()))
    agents = [Agent(service, 10 + n) for n, service in enumerate((REGRESSES, NEUTRAL, FRESH))]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules_dir / "*.yaml")],
        "scrape_configs": [
            {
                "job_name": "loopwatch",
                "static_configs": [{"targets": [f"127.0.0.1:{a.port}" for a in agents]}],
            }
        ],
    }
    try:
        with backfilled_prometheus(
            prometheus,
            promtool,
            openmetrics,
            ROOT / "alerts" / "rules" / "loopwatch-rules.yaml",
            start,
            install,
            config,
        ) as server:
            live_from = time.time()
            deadline = time.monotonic() + DEADLINE_SECONDS
            for step in range(LIVE_BATCHES + 1):
                for agent in agents:
                    agent.emit([agent.first_turn()] if step == 0 else agent.batch())
                want = {a.service: float(a.turns) for a in agents}
                _wait(
                    f"Prometheus to scrape live batch {step}",
                    lambda: _live_turns(server),
                    deadline,
                    want,
                )
            all_in = time.time()
            # every alert had the time to go from pending to firing on what came last
            _wait(
                "an evaluation `for:` and a second after the last scrape",
                lambda: _evaluated_after(server, all_in + SHORT_FOR + 1),
                deadline,
            )
            _wait(
                "the regression's alerts firing",
                lambda: _firing(server).get(REGRESSES, set()) & _expected(REGRESSES),
                deadline,
                _expected(REGRESSES),
            )
            firing = _firing(server)
            ever = _ever(server, int(time.time() - live_from) + 60)
            rules = [
                r
                for g in _api(server, "rules")["groups"]
                if g["name"] == "loopwatch.alerts"
                for r in g["rules"]
            ]
            yield Outcome(stored_turns, report, ever, firing, rules)
    finally:
        for agent in agents:
            agent.close()


def test_the_replay_reads_the_whole_week(first_day: Outcome) -> None:
    report = first_day.report
    assert report["input"]["skipped"] == 0 and report["input"]["problems"] == []
    assert report["turns"] == first_day.stored_turns > 2 * WEEK // TURN_EVERY - 20
    assert report["turns_with_a_loop"] == 0
    assert report["openmetrics"]["late_turns"] == 0
    assert report["openmetrics"]["scrapes"] >= WEEK // INTERVAL - 1


def test_history_relative_alerts_fire_on_the_regression_on_the_first_day(
    first_day: Outcome,
) -> None:
    expected = _expected(REGRESSES)
    assert {a for a, _ in expected} & HISTORY_RELATIVE
    assert first_day.firing.get(REGRESSES) == expected
    assert first_day.ever.get(REGRESSES) == expected  # nothing else was even pending


def test_they_stay_quiet_on_a_neutral_model_switch(first_day: Outcome) -> None:
    assert first_day.ever.get(NEUTRAL, set()) == set()


def test_without_the_backfill_they_would_wait(first_day: Outcome) -> None:
    """The same regression on a service without stored history: only the alert that needs no
    baseline fires, so the backfill is what made the others fire on the first day."""
    assert first_day.ever.get(FRESH) == first_day.firing.get(FRESH) == _expected(FRESH)
    assert not {alert for alert, _ in _expected(FRESH)} & HISTORY_RELATIVE


def test_every_alert_rule_evaluates_without_error(first_day: Outcome) -> None:
    assert [(r["name"], r.get("lastError")) for r in first_day.rules if r["health"] != "ok"] == []
