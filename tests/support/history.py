"""Week-long metric histories through loopwatch's own code, evaluated by a real Prometheus.

promtool's unit-test engine refuses queries over more than 10,000 samples (a week at one
sample a minute is 10,080), so the history-relative alerts are tested here instead:

1. Synthetic turns (2 a minute) go through loopwatch's core (``summarize``) into two
   ``LoopwatchMetrics`` registries, the two replicas; each turn lands on one of them.
2. At every scrape time both registries are read (``registry.collect()``) and written as
   OpenMetrics samples with that timestamp and the ``job``/``instance`` labels a scrape adds.
   Scrapes are every 30 minutes during the quiet part of the baseline week and every minute
   from an hour before the change (Prometheus' own resolution matters only where alerts
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
import os
import random
import shutil
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

from loopwatch.core.summary import TurnSummary
from loopwatch.metrics.exporter import LoopwatchMetrics
from testkit.serve_process import free_port
from testkit.summaries import turn_summary

MINUTE = 60
DAY = 1440  # minutes
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z: the first minute of every history
CHANGE = 8 * DAY  # the change happens after eight days: a full baseline week ending a day ago
FINE_FROM = CHANGE - 60  # one scrape a minute from here on
COARSE_EVERY = 30  # minutes between scrapes before that


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
    end: int = CHANGE + 6 * 60
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


def _turns(
    phases: tuple[Phase, ...],
    start: int,
    stop: int,
    rng: random.Random,
    events: dict[int, int],
) -> Iterator[tuple[int, TurnSummary, int]]:
    """(minute, summary, replica index) of every turn in [start, stop): two turns a minute."""
    ordered = sorted(phases, key=lambda p: p.start)
    for n, phase in enumerate(ordered):
        phase_stop = ordered[n + 1].start if n + 1 < len(ordered) else stop
        loop_at: dict[int, int] = {}
        for minute in range(max(start, phase.start), min(stop, phase_stop)):
            for i in range(2):
                attempts = _attempts(phase, 2 * (minute - phase.start) + i, rng, loop_at)
                yield (
                    minute,
                    turn_summary(phase.model, phase.ticket_version, attempts),
                    rng.randrange(2),
                )
            if minute in events:
                summary = turn_summary(phase.model, phase.ticket_version, events[minute])
                yield minute, summary, rng.randrange(2)


# -- OpenMetrics at each scrape ----------------------------------------------------------------
JOB = "@job@"  # written once for a baseline shared by several scenarios, replaced per scenario
_prefixes: dict[tuple[str, ...], str] = {}


def scrape(registry: CollectorRegistry, instance: str, at: int) -> list[str]:
    """The registry's samples as OpenMetrics lines with a scrape timestamp (seconds).

    ``_created`` samples are left out: they carry the wall-clock time of this process, not of
    the synthetic history, and no rule reads them.
    """
    out = []
    for family in registry.collect():
        for s in family.samples:
            key = (s.name, instance, *s.labels.values())
            prefix = _prefixes.get(key)
            if prefix is None:
                if s.name.endswith("_created"):
                    prefix = ""
                else:
                    pairs = [("job", JOB), ("instance", instance), *sorted(s.labels.items())]
                    prefix = s.name + "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "} "
                _prefixes[key] = prefix
            if prefix:
                out.append(f"{prefix}{s.value!r} {at}\n")
    out.append(f'up{{job="{JOB}",instance="{instance}"}} 1 {at}\n')
    return out


def chunk(at: int) -> str:
    """Which backfill file a sample goes to. promtool re-reads its whole input once per 2-hour
    block, so files are short where samples are dense: a day each before the last two days
    (scraped every 30 minutes), an hour each after."""
    seconds = at - T0
    if seconds < 7 * 86400:
        return f"day-{seconds // 86400}"
    return f"hour-{seconds // 3600}"


@dataclass
class Chunks:
    """OpenMetrics lines in one file per chunk, under a directory."""

    directory: Path
    key: str = ""
    handle: TextIO | None = None

    def write(self, at: int, lines: list[str]) -> None:
        key = chunk(at)
        if key != self.key or self.handle is None:
            self.close()
            self.directory.mkdir(parents=True, exist_ok=True)
            self.handle = (self.directory / f"{key}.om").open("a", encoding="utf-8")
            self.key = key
        self.handle.writelines(lines)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


@dataclass
class History:
    """Two replicas and the scrapes of them so far."""

    out: Chunks
    next_scrape: int
    fine_from: int
    replicas: tuple[Replica, Replica] = field(default_factory=lambda: (Replica(), Replica()))

    def scrape_until(self, minute: int) -> None:
        while self.next_scrape <= minute:
            at = T0 + self.next_scrape * MINUTE
            for n, replica in enumerate(self.replicas):
                self.out.write(at, scrape(replica.registry, f"replica-{n + 1}:9464", at))
            fine = self.next_scrape >= self.fine_from
            self.next_scrape += 1 if fine else COARSE_EVERY

    def run(self, turns: Iterator[tuple[int, TurnSummary, int]], stop: int) -> None:
        for minute, summary, replica in turns:
            self.scrape_until(minute)  # turns of minute m are in the scrape that ends it
            self.replicas[replica].metrics.turn(summary)
        self.scrape_until(stop - 1)


def write_histories(scenarios: list[Scenario], seed: int, out: Path, work: Path) -> None:
    """Every scenario's scrapes as OpenMetrics lines (job = scenario name + seed), appended to
    one file per chunk under ``out``.

    Scenarios whose phases agree before their ``fine_from`` share one baseline: its turns go
    through loopwatch once, and at each scenario's ``fine_from`` a forked child continues that
    state with the scenario's own turns (a fork copies the registries exactly, and cheaply).
    """
    groups: dict[tuple[Phase, ...], list[Scenario]] = {}
    for s in scenarios:
        assert chunk(T0 + s.fine_from * MINUTE - 1) != chunk(T0 + s.fine_from * MINUTE)
        groups.setdefault(tuple(p for p in s.phases if p.start < s.fine_from), []).append(s)
    parts: list[tuple[str, list[Path], Path]] = []  # job, baseline chunks, own chunks
    children = []
    for base_phases, members in groups.items():
        members.sort(key=lambda s: s.fine_from)
        base = Chunks(work / f"base-{members[0].name}-{seed}")
        rng = random.Random(f"{members[0].name}/{seed}")
        history = History(base, members[0].start, fine_from=members[-1].end)
        done = members[0].start
        for s in members:
            history.run(_turns(base_phases, done, s.fine_from, rng, {}), s.fine_from)
            done = s.fine_from
            base.close()
            before = sorted(base.directory.glob("*.om")) if base.directory.exists() else []
            own = Chunks(work / f"{s.name}-{seed}")
            parts.append((f"{s.name}-{seed}", before, own.directory))
            pid = os.fork()
            if pid == 0:  # the child: this scenario from here on, then exit
                code = 1
                try:
                    history.out = own
                    history.fine_from = s.fine_from
                    own_rng = random.Random(f"{s.name}/{seed}")
                    events = dict(s.events)
                    history.run(_turns(s.phases, s.fine_from, s.end, own_rng, events), s.end)
                    own.close()
                    code = 0
                finally:
                    os._exit(code)
            children.append((pid, s.name))
    for pid, name in children:
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError(f"history of {name} (seed {seed}) failed")
    out.mkdir(exist_ok=True)
    for job, before, own_dir in parts:
        for path in [*before, *sorted(own_dir.glob("*.om"))]:
            with (out / path.name).open("a", encoding="utf-8") as f:
                f.write(path.read_text(encoding="utf-8").replace(JOB, job))


# -- a real Prometheus -----------------------------------------------------------------------------
def _run(*args: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


_QUERY_ONLY: dict[str, Any] = {"global": {"evaluation_interval": "1m"}}  # nothing scraped


@dataclass
class Prometheus:
    binary: str
    data: Path
    config: dict[str, Any] = field(default_factory=lambda: dict(_QUERY_ONLY))  # prometheus.yml
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.port = free_port()
        config = self.data.parent / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config))
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
        while time.monotonic() < deadline and self.process.poll() is None:
            if self._ours_and_ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"prometheus did not become ready: {self.data.parent}/prometheus.log")

    def _ours_and_ready(self) -> bool:
        """Ready, and this process: free_port's port can be taken by another test session's
        server before this one binds it (a Prometheus, or prometheus-client's, which answers
        any path), and its empty answers would read as no data here."""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/status/flags", timeout=2) as r:
                flags = json.loads(r.read())["data"]
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                ready = r.status == 200
        except (OSError, ValueError, KeyError, TypeError):
            return False
        return ready and flags.get("storage.tsdb.path") == str(self.data)

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
    prometheus: str,
    promtool: str,
    openmetrics: Path,
    rule_file: Path,
    start: int,
    end: int,
    config: dict[str, Any] | None = None,
) -> Iterator[Prometheus]:
    """Prometheus serving the backfilled history plus its materialised recording rules.

    ``openmetrics`` is one file, or a directory of ``*.om`` files; ``config`` the
    prometheus.yml it then runs with (default: nothing scraped, no rules loaded)."""
    work = openmetrics.parent
    data = work / "data"
    data.mkdir()
    files = [openmetrics] if openmetrics.is_file() else sorted(openmetrics.glob("*.om"))
    for path in files:
        with path.open("rb+") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 6))
            if f.read() != b"# EOF\n":  # promtool wants it; loopwatch replay writes it
                f.write(b"# EOF\n")
        _run(promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(path), str(data))
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
            # promtool (2.42) writes nothing for a rule whose first two-hour block has no
            # evaluation left after --start, which depends on the clock and on the rule file's
            # path (it offsets the group's evaluations): started on a block boundary, it has
            f"--start={start // 7200 * 7200}",
            f"--end={end}",
            f"--output-dir={rules_out}",
            str(rule_file),
        )
        server.stop()
        if not rules_out.is_dir():  # promtool writes no block where every query came back empty
            raise RuntimeError(f"the recording rules gave no samples over {start}..{end}")
        for block in rules_out.iterdir():
            if block.is_dir():
                shutil.move(str(block), data / block.name)
        if config is not None:
            server.config = config
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
    alert: str,
    result: list[dict[str, Any]],
    for_seconds: int,
    step: int,
    rule_labels: dict[str, str],
) -> list[Firing]:
    """Every time a series of the expression's result goes from inactive to firing."""
    out = []
    for series in result:
        labels = tuple(sorted({**series["metric"], **rule_labels}.items()))
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
