"""Week-long metric histories through loopwatch's own code, evaluated by a real Prometheus.

promtool's unit-test engine refuses queries over more than 10,000 samples (a week at one
sample a minute is 10,080), so the history-relative alerts are tested here instead:

1. Synthetic turns (2 a minute) go through loopwatch's core (``summarize``) into two
   ``LoopwatchMetrics`` registries, the two replicas; each turn lands on one of them.
2. At every scrape time both registries are read (``registry.collect()``) and written as
   OpenMetrics samples with that timestamp and the ``job``/``instance`` labels a scrape adds.
   Scrapes are every 15 minutes during the quiet part of the baseline week and every minute
   from two hours before the change (Prometheus' own resolution matters only where alerts
   are judged).
3. ``promtool tsdb create-blocks-from openmetrics`` backfills them; a real Prometheus serves
   the blocks; ``promtool tsdb create-blocks-from rules`` materialises the recording rules
   (the hourly baseline tiles) against it; Prometheus restarts with those blocks too.
4. Each alert's expression is evaluated with ``query_range`` at a 1-minute step (the
   evaluation interval) and ``for:`` is applied in Python the way the rule manager applies it:
   pending from the first step the series is present, firing once it has been present for
   ``for`` without a gap.

Every scenario of every seed is its own ``job``, so one Prometheus serves them all; the
loop alerts group by job, so the scenarios do not see each other.
"""

from __future__ import annotations

import json
import random
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml
from prometheus_client import CollectorRegistry

from loopwatch.core.config import Config
from loopwatch.core.keys import AttemptKey
from loopwatch.core.records import LlmMark, ToolCall, TurnMark
from loopwatch.core.summary import TurnSummary, summarize
from loopwatch.metrics import LoopwatchMetrics

MINUTE = 60
DAY = 1440  # minutes
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z: the first minute of every history
CHANGE = 8 * DAY  # the change happens after eight days: a full baseline week ending a day ago
FINE_FROM = CHANGE - 120  # one scrape a minute from here on
COARSE_EVERY = 15  # minutes between scrapes before that
SERVICE, AGENT = "shop", "support"
TICKET, SEARCH = "create_ticket", "search_orders"


@dataclass(frozen=True)
class Phase:
    """How an agent behaves from ``start`` (minutes after T0) on."""

    start: int
    model: str = "m-old"
    ticket_version: str = "v-old"
    p2: float = 0.005  # share of turns that retry create_ticket once (2 attempts), at random
    p3: float = 0.0  # share of turns at 3 attempts, at random (a noisy baseline)
    loop_every: int = 0  # one turn in every `loop_every` loops at 3-4 attempts (a regression)


@dataclass(frozen=True)
class Scenario:
    name: str
    phases: tuple[Phase, ...]
    end: int = CHANGE + 8 * 60
    # (minute, attempts): single turns at that many attempts on one create_ticket key
    events: tuple[tuple[int, int], ...] = ()
    fine_from: int = FINE_FROM

    @property
    def start(self) -> int:
        return self.phases[0].start


@dataclass
class Replica:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    metrics: LoopwatchMetrics = field(init=False)

    def __post_init__(self) -> None:
        self.metrics = LoopwatchMetrics(self.registry)


# -- turns through loopwatch's core ----------------------------------------------------------------
_CONFIG = Config()
_summaries: dict[tuple[str, str, int], TurnSummary] = {}


def turn_summary(model: str, ticket_version: str, attempts: int) -> TurnSummary:
    """One turn: `attempts` create_ticket calls on one key (timeouts when repeated), one search."""
    key = (model, ticket_version, attempts)
    cached = _summaries.get(key)
    if cached is not None:  # summaries differ only by trace id (an exemplar), never by numbers
        return cached
    outcome = "timeout" if attempts > 1 else "ok"
    calls = [
        ToolCall(
            span_id=10 + i,
            parent_id=1,
            start_ns=(i + 1) * 1_000_000_000,
            end_ns=(i + 1) * 1_000_000_000 + 500_000_000,
            tool=TICKET,
            key=AttemptKey(TICKET, "c_40912/88214", outcome),
            error_class=outcome,
            result="unknown",
            arguments_known=True,
            tool_version=ticket_version,
            agent=AGENT,
        )
        for i in range(attempts)
    ]
    calls.append(
        ToolCall(
            span_id=9,
            parent_id=1,
            start_ns=500_000_000,
            end_ns=600_000_000,
            tool=SEARCH,
            key=AttemptKey(SEARCH, "boots refund", "rows"),
            error_class="ok",
            result="rows",
            arguments_known=True,
            tool_version="s-1",
            agent=AGENT,
        )
    )
    llm = LlmMark(span_id=2, parent_id=1, start_ns=100_000_000, end_ns=200_000_000, model=model)
    mark = TurnMark(1, None, 0, (attempts + 2) * 1_000_000_000, AGENT, None)
    summary = summarize(len(_summaries) + 1, SERVICE, mark, calls, [llm], _CONFIG)
    _summaries[key] = summary
    return summary


def _attempts(phase: Phase, index: int, rng: random.Random, loop_at: dict[int, int]) -> int:
    """Max attempts of the turn `index` (0-based, counted from the phase's first turn)."""
    if phase.loop_every:
        block = index // phase.loop_every
        if block not in loop_at:
            loop_at.clear()
            loop_at[block] = block * phase.loop_every + rng.randrange(phase.loop_every)
        if index == loop_at[block]:
            return rng.choice((3, 4))
    r = rng.random()
    if r < phase.p3:
        return 3
    if r < phase.p3 + phase.p2:
        return 2
    return 1


def turns(scenario: Scenario, seed: int) -> Iterator[tuple[int, TurnSummary, int]]:
    """(minute, summary, replica index) for every turn, in time order: two turns a minute."""
    rng = random.Random(f"{scenario.name}/{seed}")
    events = dict(scenario.events)
    phases = sorted(scenario.phases, key=lambda p: p.start)
    for n, phase in enumerate(phases):
        stop = phases[n + 1].start if n + 1 < len(phases) else scenario.end
        loop_at: dict[int, int] = {}
        index = 0
        for minute in range(phase.start, stop):
            for _ in range(2):
                attempts = _attempts(phase, index, rng, loop_at)
                index += 1
                summary = turn_summary(phase.model, phase.ticket_version, attempts)
                yield minute, summary, rng.randrange(2)
            if minute in events:
                summary = turn_summary(phase.model, phase.ticket_version, events[minute])
                yield minute, summary, rng.randrange(2)


# -- OpenMetrics at each scrape --------------------------------------------------------------------
def _labels(job: str, instance: str, labels: dict[str, str]) -> str:
    pairs = [("job", job), ("instance", instance), *sorted(labels.items())]
    return ",".join(f'{k}="{v}"' for k, v in pairs)


def scrape(registry: CollectorRegistry, job: str, instance: str, at: int) -> list[str]:
    """The registry's samples as OpenMetrics lines with a scrape timestamp (seconds).

    ``_created`` samples are left out: they carry the wall-clock time of this process, not of
    the synthetic history, and no rule reads them.
    """
    out = []
    for family in registry.collect():
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            out.append(f"{s.name}{{{_labels(job, instance, s.labels)}}} {s.value!r} {at}\n")
    return out


def write_history(scenario: Scenario, seed: int, job: str, out: TextIO) -> int:
    """Feed the scenario's turns into two replicas and write every scrape; returns samples."""
    replicas = (Replica(), Replica())
    instances = (f"{job}-1:9464", f"{job}-2:9464")
    samples = 0
    next_scrape = scenario.start

    def scrape_until(minute: int) -> None:
        nonlocal next_scrape, samples
        while next_scrape <= minute:
            at = T0 + next_scrape * MINUTE
            for replica, instance in zip(replicas, instances, strict=True):
                lines = scrape(replica.registry, job, instance, at)
                lines.append(f'up{{job="{job}",instance="{instance}"}} 1 {at}\n')
                out.writelines(lines)
                samples += len(lines)
            step = 1 if next_scrape >= scenario.fine_from else COARSE_EVERY
            next_scrape += step

    for minute, summary, replica in turns(scenario, seed):
        scrape_until(minute)  # turns of minute m are in the scrape at the end of minute m
        replicas[replica].metrics.turn(summary)
    scrape_until(scenario.end)
    return samples


# -- a real Prometheus -----------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _run(*args: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


@dataclass
class Prometheus:
    binary: str
    data: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.port = _free_port()
        config = self.data.parent / "prometheus.yml"
        config.write_text(yaml.safe_dump({"global": {"evaluation_interval": "1m"}}))
        log = (self.data.parent / "prometheus.log").open("ab")
        self.process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.data}",
                "--storage.tsdb.retention.time=100y",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--query.lookback-delta=5m",
            ],
            stdout=log,
            stderr=log,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"prometheus did not become ready: {self.data.parent}/prometheus.log")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=60)
            self.process = None

    def query_range(self, expr: str, start: int, end: int, step: int) -> list[dict[str, Any]]:
        query = urllib.parse.urlencode(
            {"query": expr, "start": start, "end": end, "step": step, "timeout": "120s"}
        )
        with urllib.request.urlopen(f"{self.url}/api/v1/query_range?{query}", timeout=180) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result


@contextmanager
def backfilled_prometheus(
    prometheus: str, promtool: str, openmetrics: Path, rule_file: Path, start: int, end: int
) -> Iterator[Prometheus]:
    """Prometheus serving the backfilled history plus its materialised recording rules."""
    work = openmetrics.parent
    data = work / "data"
    data.mkdir()
    # one pass over the file per block: blocks as long as the history allows
    _run(promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(openmetrics), str(data))
    server = Prometheus(prometheus, data)
    server.start()
    try:
        rules_out = work / "rule-blocks"
        _run(
            promtool,
            "tsdb",
            "create-blocks-from",
            "rules",
            "-q",
            f"--url={server.url}",
            f"--start={start}",
            f"--end={end}",
            f"--output-dir={rules_out}",
            str(rule_file),
        )
        server.stop()
        for block in rules_out.iterdir():
            if block.is_dir():
                shutil.move(str(block), data / block.name)
        server.start()
        yield server
    finally:
        server.stop()


# -- alerts, with `for:` applied -------------------------------------------------------------------
@dataclass(frozen=True)
class Firing:
    alert: str
    labels: tuple[tuple[str, str], ...]
    pending_at: int  # unix seconds
    firing_at: int

    def label(self, name: str) -> str:
        return dict(self.labels).get(name, "")


def apply_for(
    alert: str, result: list[dict[str, Any]], for_seconds: int, step: int
) -> list[Firing]:
    """Every time a series of the expression's result goes from inactive to firing."""
    out = []
    for series in result:
        labels = tuple(sorted(series["metric"].items()))
        active_since: int | None = None
        last: int | None = None
        fired = False
        for t, _ in series["values"]:
            t = int(t)
            if last is None or t - last > step:  # a gap: the alert resolved
                active_since, fired = t, False
            last = t
            assert active_since is not None
            if not fired and t - active_since >= for_seconds:
                out.append(Firing(alert, labels, active_since, t))
                fired = True
    return out
