"""The committed alert rules over week-long histories (see tests/support/history.py for how).

Each scenario is one agent at two turns a minute, exported by two replicas; the change (a new
model or a new create_ticket description) happens after eight days. Regressions loop in one
turn of every 20 (5%) at 3-4 attempts, at a random place in each block of 20; noise (retries,
rare 3-attempt loops) falls at random. Run ``pytest -s`` to see the measured delays. Three
seeds: about 2-3 minutes on a loaded 2-core machine, most of it generating and backfilling.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import TypedDict

import pytest
import yaml

from tests.support.helpers import require_tool
from tests.support.history import (
    CHANGE,
    DAY,
    MINUTE,
    T0,
    Firing,
    Phase,
    Prometheus,
    Scenario,
    apply_for,
    backfilled_prometheus,
    write_histories,
)

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.durations import duration_seconds  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.slow]

SEEDS = (1, 2, 3)
STEP = 60  # the evaluation interval
END = CHANGE + 6 * 60


class _Noisy(TypedDict):
    p3: float


class _Regresses(TypedDict):
    loop_every: int


NOISY: _Noisy = {"p3": 0.0024}  # 0.24% of turns at 3 attempts: a noisy but stable agent
REGRESSES: _Regresses = {"loop_every": 20}
SEVERE_AT = CHANGE + 30
CUMULATIVE = {"LoopwatchNewModelLoops", "LoopwatchNewToolVersionLoops", "LoopwatchSevereLoop"}

SCENARIOS = {
    s.name: s
    for s in (
        Scenario("healthy", (Phase(0),), fine_from=CHANGE - DAY),
        Scenario("model-regresses", (Phase(0), Phase(CHANGE, model="m-new", **REGRESSES))),
        Scenario("model-neutral", (Phase(0), Phase(CHANGE, model="m-new"))),
        Scenario(
            "description-regresses", (Phase(0), Phase(CHANGE, ticket_version="v-new", **REGRESSES))
        ),
        Scenario("description-neutral", (Phase(0), Phase(CHANGE, ticket_version="v-new"))),
        Scenario("noisy-model-neutral", (Phase(0, **NOISY), Phase(CHANGE, model="m-new", **NOISY))),
        Scenario(
            "noisy-description-neutral",
            (Phase(0, **NOISY), Phase(CHANGE, ticket_version="v-new", **NOISY)),
        ),
        Scenario(
            "noisy-model-regresses",
            (Phase(0, **NOISY), Phase(CHANGE, model="m-new", **NOISY, **REGRESSES)),
        ),
        Scenario("severe-turn", (Phase(0),), events=((SEVERE_AT, 14),)),
        # a fresh install: the first turn of its first minute reaches 14 attempts; a 3-attempt
        # loop follows after 20 minutes
        Scenario(
            "fresh-install",
            (Phase(CHANGE),),
            events=((CHANGE, 14), (CHANGE + 20, 3)),
            fine_from=CHANGE,
        ),
    )
}

# scenario -> {(alert, the labels that name what it is about): latest first firing, minutes
# after the change}; every other alert must stay quiet
TICKET = {"service": "shop", "tool": "create_ticket"}
OLD_MODEL = {"service": "shop", "agent": "support", "model": "m-old"}
NEW_MODEL = {"service": "shop", "agent": "support", "model": "m-new"}
PATTERN = {**TICKET, "error_class": "timeout", "kind": "repeat"}
EXPECTED: dict[str, dict[tuple[str, frozenset[tuple[str, str]]], int]] = {
    "healthy": {},
    "model-regresses": {
        ("LoopwatchNewModelLoops", frozenset(NEW_MODEL.items())): 60,
        ("LoopwatchAttemptsP99AboveOne", frozenset(NEW_MODEL.items())): 60,
        ("LoopwatchToolLoopShareRegression", frozenset(TICKET.items())): 60,
        ("LoopwatchNewLoopPattern", frozenset(PATTERN.items())): 60,
    },
    "model-neutral": {},
    "description-regresses": {
        (
            "LoopwatchNewToolVersionLoops",
            frozenset({**TICKET, "tool_version": "v-new"}.items()),
        ): 60,
        ("LoopwatchAttemptsP99AboveOne", frozenset(OLD_MODEL.items())): 60,
        ("LoopwatchModelLoopShareRegression", frozenset(OLD_MODEL.items())): 60,
        ("LoopwatchToolLoopShareRegression", frozenset(TICKET.items())): 60,
        ("LoopwatchNewLoopPattern", frozenset(PATTERN.items())): 60,
    },
    "description-neutral": {},
    "noisy-model-neutral": {},
    "noisy-description-neutral": {},
    "noisy-model-regresses": {
        ("LoopwatchNewModelLoops", frozenset(NEW_MODEL.items())): 60,
        ("LoopwatchAttemptsP99AboveOne", frozenset(NEW_MODEL.items())): 60,
        ("LoopwatchToolLoopShareRegression", frozenset(TICKET.items())): 60,
    },
    "severe-turn": {
        ("LoopwatchSevereLoop", frozenset({**OLD_MODEL, "tool": "create_ticket"}.items())): 40,
        ("LoopwatchNewLoopPattern", frozenset(PATTERN.items())): 40,
    },
    "fresh-install": {
        ("LoopwatchSevereLoop", frozenset({**OLD_MODEL, "tool": "create_ticket"}.items())): 10,
    },
}
# where each scenario's alerts are judged: every minute scraped once a minute, less the first
# hour (its 1-hour windows would still reach into the coarse part)
JUDGED_FROM = {
    name: s.fine_from + (0 if s.start == s.fine_from else 60) for name, s in SCENARIOS.items()
}


def job(scenario: str, seed: int) -> str:
    return f"{scenario}-{seed}"


@dataclass(frozen=True)
class Result:
    firings: dict[str, list[Firing]]  # job -> alerts that fired


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Result]:
    prometheus, promtool = require_tool("prometheus"), require_tool("promtool")
    work = tmp_path_factory.mktemp("history")
    openmetrics = work / "openmetrics"
    for seed in SEEDS:
        write_histories(list(SCENARIOS.values()), seed, openmetrics, work)
    rules_dir = ROOT / "alerts" / "rules"
    alerts = [
        rule
        for group in yaml.safe_load((rules_dir / "loopwatch-alerts.yaml").read_text())["groups"]
        if group["name"] == "loopwatch.alerts"
        for rule in group["rules"]
    ]
    firings: dict[str, list[Firing]] = {}
    with backfilled_prometheus(
        prometheus,
        promtool,
        openmetrics,
        rules_dir / "loopwatch-rules.yaml",
        T0,
        T0 + (END - DAY) * MINUTE,  # the alerts read the tiles a day back, no later
    ) as server:
        for rule in alerts:
            for f in _evaluate(server, rule):
                firings.setdefault(f.label("job"), []).append(f)
    yield Result(firings)


def _evaluate(server: Prometheus, rule: dict[str, object]) -> list[Firing]:
    start = T0 + (CHANGE - DAY) * MINUTE
    result = server.query_range(str(rule["expr"]), start, T0 + END * MINUTE, STEP)
    labels = rule["labels"]
    assert isinstance(labels, dict)
    return apply_for(str(rule["alert"]), result, duration_seconds(str(rule["for"])), STEP, labels)


def _judged(result: Result, name: str, seed: int) -> list[Firing]:
    since = T0 + JUDGED_FROM[name] * MINUTE
    return [f for f in result.firings.get(job(name, seed), []) if f.pending_at >= since]


def _delays(result: Result, name: str) -> dict[tuple[str, frozenset[tuple[str, str]]], list[float]]:
    """(alert, labels) -> minutes from the change (or the severe turn) to firing, per seed."""
    origin = SEVERE_AT if name == "severe-turn" else CHANGE
    out: dict[tuple[str, frozenset[tuple[str, str]]], list[float]] = {}
    for seed in SEEDS:
        for f in _judged(result, name, seed):
            labels = frozenset(
                (k, v) for k, v in f.labels if k not in {"job", "severity", "system"}
            )
            out.setdefault((f.alert, labels), []).append((f.firing_at - T0) / MINUTE - origin)
    return out


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_which_alerts_fire_with_which_labels_and_when(history: Result, name: str) -> None:
    expected = EXPECTED[name]
    for seed in SEEDS:
        fired = _judged(history, name, seed)
        got: dict[tuple[str, frozenset[tuple[str, str]]], Firing] = {}
        for f in fired:
            labels = frozenset(
                (k, v) for k, v in f.labels if k not in {"job", "severity", "system"}
            )
            got.setdefault((f.alert, labels), f)
        assert set(got) == set(expected), (name, seed, sorted(got))
        origin = SEVERE_AT if name == "severe-turn" else CHANGE
        for key, within in expected.items():
            f = got[key]
            assert f.label("system") == "loopwatch"
            minutes = (f.firing_at - T0) / MINUTE - origin
            assert 0 <= minutes <= within, (name, seed, key[0], minutes)
        # the alerts that name the change count since it appeared: once firing, they stay so
        # (the 1-hour ones may resolve and fire again near their bound)
        named = [f for f in fired if f.alert in CUMULATIVE]
        assert len(named) == len({(f.alert, f.labels) for f in named}), (name, seed, named)
    for (alert, labels), delays in sorted(_delays(history, name).items()):
        print(
            f"{name}: {alert} {dict(labels)} fired after {sorted(delays)} min"
            f" (median {median(delays)})"
        )


def test_severe_turn_pages_as_critical(history: Result) -> None:
    for seed in SEEDS:
        for name in ("severe-turn", "fresh-install"):
            (severe,) = [
                f for f in _judged(history, name, seed) if f.alert == "LoopwatchSevereLoop"
            ]
            assert severe.label("severity") == "critical"
