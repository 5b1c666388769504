"""Alert and recording rules: promtool check/lint/unit tests, mixin style, routing, runbook."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import urllib.parse
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.helpers import require_tool
from tests.support.metric_names import exported_metric_names

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # alerts/ and dashboards/ are source, not installed packages
    sys.path.insert(0, str(ROOT))

from alerts import build  # noqa: E402
from mixin import config  # noqa: E402
from tests.support.durations import duration_seconds  # noqa: E402

ALERTS = ROOT / "alerts"
RULE_FILES = sorted((ALERTS / "rules").glob("*.yaml"))
UNIT_TESTS = sorted((ALERTS / "tests").glob("*-test.yaml"))
AM_CONFIG = ALERTS / "alertmanager.yml"
RUNBOOK = ALERTS / "runbook.md"

# Every alert loopwatch ships (docs/stack.md's table), by the question it answers.
REQUIRED = {
    "LoopwatchSevereLoop": "a turn reached >= 6 attempts on one key",
    "LoopwatchDuplicateSideEffect": "a write succeeded twice on one identity in a turn",
    "LoopwatchAttemptsP99AboveOne": "p99 of max attempts per turn above 1, sustained",
    "LoopwatchNewLoopPattern": "tool + error class + kind not seen in the previous 7 days",
    "LoopwatchModelLoopShareRegression": "a model loops more than its own baseline predicts",
    "LoopwatchToolLoopShareRegression": "a tool loops more than its own baseline predicts",
    "LoopwatchNewModelLoops": "a new model loops more than the agent's baseline predicts",
    "LoopwatchNewToolVersionLoops": "a new tool version loops more than the tool's baseline",
    "LoopwatchNoRowsStreak": "no-rows streaks >= 3",
    "LoopwatchSameResultStreak": "same-result streaks >= 3",
    "LoopwatchFailingStreak": "failing streaks >= 5",
    "LoopwatchDown": "loopwatch down",
    "LoopwatchSpansDropped": "spans dropped",
    "LoopwatchTurnsEvicted": "turns evicted",
    "LoopwatchLabelOverflow": "label overflow",
    "LoopwatchArgumentsNotCaptured": "arguments not captured for a tool",
}


@cache
def rules() -> list[dict[str, Any]]:
    out = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
            out.extend(group["rules"])
    return out


def alerts() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for r in rules() if "alert" in r}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, cwd=ROOT)


# -- promtool ------------------------------------------------------------------------------------
def test_promtool_check_rules_with_lint() -> None:
    promtool = require_tool("promtool")
    done = run(promtool, "check", "rules", "--lint=all", "--lint-fatal", *map(str, RULE_FILES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 4 rules found" in done.stdout
    assert "SUCCESS: 16 rules found" in done.stdout


# -- generated from one config -------------------------------------------------------------------
def test_generated_files_match_the_config() -> None:
    for name, text in build.render().items():
        assert (ALERTS / name).read_text(encoding="utf-8") == text, (
            f"alerts/{name} is stale: run python -m alerts.build"
        )
    done = run(sys.executable, "-m", "alerts.build", "--check")
    assert done.returncode == 0, done.stderr


def test_a_changed_threshold_changes_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drift test can fail: the rules follow the config."""
    monkeypatch.setattr(config, "LE_LOOP", config.le(4))
    changed = build.render()["rules/loopwatch-alerts.yaml"]
    assert changed != (ALERTS / "rules" / "loopwatch-alerts.yaml").read_text(encoding="utf-8")
    assert 'le=~"4(\\\\.0)?"' in changed


def test_thresholds_match_loopwatch_defaults_and_the_stack_config() -> None:
    from loopwatch.core.config import Config
    from loopwatch.metrics.exporter import ATTEMPT_BUCKETS, STREAK_BUCKETS

    toml = tomllib.loads((ROOT / "deploy" / "loopwatch" / "loopwatch.toml").read_text())
    assert config.LOOP_THRESHOLD == Config().loop_threshold == toml["defaults"]["loop_threshold"]
    assert toml["defaults"]["no_rows_threshold"] == config.NO_ROWS_THRESHOLD
    defaults = Config()
    assert defaults.same_result_threshold is None  # the no-rows threshold
    assert defaults.no_rows_threshold == config.SAME_RESULT_THRESHOLD
    assert (
        config.FAILING_THRESHOLD
        == defaults.failing_threshold
        == toml["defaults"]["failing_threshold"]
    )
    # "at or above n" is count minus the bucket n - 1: that bucket must exist
    assert {config.LOOP_THRESHOLD - 1, config.SEVERE_THRESHOLD - 1, 1} <= set(ATTEMPT_BUCKETS)
    streaks = (config.NO_ROWS_THRESHOLD, config.SAME_RESULT_THRESHOLD, config.FAILING_THRESHOLD)
    assert {n - 1 for n in streaks} <= set(STREAK_BUCKETS)


@pytest.mark.slow
def test_promtool_unit_tests_pass() -> None:
    promtool = require_tool("promtool")
    done = run(promtool, "test", "rules", *map(str, UNIT_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("SUCCESS") == len(UNIT_TESTS) == 3


@pytest.mark.slow
def test_a_wrong_expectation_fails_promtool(tmp_path: Path) -> None:
    """The unit tests can fail: expecting the severe loop one evaluation early is an error."""
    promtool = require_tool("promtool")
    source = (ALERTS / "tests" / "loops-test.yaml").read_text(encoding="utf-8")
    early = source.replace(
        "      - eval_time: 5m\n        alertname: LoopwatchSevereLoop\n      - eval_time: 6m\n",
        "      - eval_time: 5m\n",
        1,
    )
    assert early != source
    data = yaml.safe_load(early)
    data["rule_files"] = [str(path) for path in RULE_FILES]
    test_file = tmp_path / "early-test.yaml"
    test_file.write_text(yaml.safe_dump(data), encoding="utf-8")
    done = run(promtool, "test", "rules", str(test_file))
    assert done.returncode != 0
    assert "alertname: LoopwatchSevereLoop, time: 5m" in done.stdout + done.stderr


# -- mixin style guide (mixtool lint, ported) ------------------------------------------------------
def test_exactly_the_required_alerts_exist() -> None:
    assert set(alerts()) == set(REQUIRED)


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_alert_style(name: str) -> None:
    rule = alerts()[name]
    assert re.fullmatch(r"([A-Z]+[a-z0-9]+)+", name) and len(name) <= 40
    assert name.startswith("Loopwatch")
    assert rule["labels"]["severity"] in {"critical", "warning", "info"}
    # values belong in annotations, not labels; the routing label marks loopwatch's alerts
    assert rule["labels"] == {"severity": rule["labels"]["severity"], "system": "loopwatch"}
    summary = rule["annotations"]["summary"]
    assert "{{" not in summary and summary[0].isupper() and summary.endswith(".")
    assert "{{" in rule["annotations"]["description"]
    url = rule["annotations"]["runbook_url"]
    assert url == f"{config.RUNBOOK_BASE_URL}#{name.lower()}"
    assert urllib.parse.urlsplit(url).scheme == "https"
    assert duration_seconds(rule["for"]) > 0


def test_every_alert_has_a_runbook_section_and_every_section_an_alert() -> None:
    headings = re.findall(r"^## (\w+)$", RUNBOOK.read_text(encoding="utf-8"), re.M)
    assert sorted(headings) == sorted(REQUIRED)
    for section in RUNBOOK.read_text(encoding="utf-8").split("\n## ")[1:]:
        assert "**Meaning.**" in section and "**Check.**" in section and "**Act.**" in section


def test_recording_rules_follow_level_metric_operations() -> None:
    records = [r for r in rules() if "record" in r]
    assert len(records) == 4
    for r in records:
        level, metric, operations = r["record"].split(":")
        assert metric.startswith("loopwatch_") and operations
        assert level.startswith("job_"), r["record"]  # always aggregate by job
        by = re.findall(r"by \(([^)]*)\)", r["expr"])
        for clause in by:
            assert "job" in clause.split(", ")
            labels = "_".join(c for c in clause.split(", ") if c != "quantile")
            assert labels == level, r["record"]


def test_le_is_matched_portably() -> None:
    for r in rules():
        for op, value in re.findall(r'\ble\s*(=~?|!=)\s*"([^"]*)"', r["expr"]):
            assert op == "=~" and value.endswith("(\\\\.0)?"), r.get("alert") or r["record"]


def test_every_metric_the_rules_read_is_exported_by_loopwatch() -> None:
    from dashboards.queries import metric_names

    recorded = {r["record"] for r in rules() if "record" in r}
    read = {name for r in rules() for name in metric_names(r["expr"])}
    builtin = {"up"}
    assert sorted(read - recorded - builtin - exported_metric_names()) == []
    assert len(read - recorded) >= 10


# -- unit-test coverage: every alert has its boundary pair and a must-not-fire case --------------
def _cases() -> list[tuple[int, dict[str, Any]]]:
    out: list[tuple[int, dict[str, Any]]] = []
    for path in UNIT_TESTS:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        step = duration_seconds(data.get("evaluation_interval", "1m"))
        out.extend((step, case) for case in data["tests"])
    return out


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_alert_has_a_boundary_pair(name: str) -> None:
    for_seconds = duration_seconds(alerts()[name]["for"])
    pairs = []
    for step, case in _cases():
        checks = [c for c in case.get("alert_rule_test", []) if c["alertname"] == name]
        firing = {duration_seconds(c["eval_time"]) for c in checks if c.get("exp_alerts")}
        quiet = {duration_seconds(c["eval_time"]) for c in checks if not c.get("exp_alerts")}
        pairs += [t for t in firing if t - step in quiet]
    assert pairs, f"{name}: no 'quiet one evaluation before, firing at' pair"
    assert for_seconds >= 60


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_alert_has_a_must_not_fire_case(name: str) -> None:
    """A case that checks the alert also feeds series it must ignore ('# must not fire')."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in UNIT_TESTS)
    cases = re.split(r"\n  - name: ", text)[1:]
    checking = [c for c in cases if f"alertname: {name}\n" in c]
    assert any("# must not fire" in c for c in checking), name


# -- Alertmanager --------------------------------------------------------------------------------
def test_amtool_check_config() -> None:
    amtool = require_tool("amtool")
    done = run(amtool, "check-config", str(AM_CONFIG))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout and "4 receivers" in done.stdout


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (["system=loopwatch", "severity=critical", "alertname=LoopwatchSevereLoop"], "pager"),
        (["system=loopwatch", "severity=critical", "alertname=LoopwatchDown"], "pager"),
        (["system=loopwatch", "severity=warning", "alertname=LoopwatchNoRowsStreak"], "tickets"),
        (["system=loopwatch", "severity=warning", "alertname=LoopwatchNewLoopPattern"], "tickets"),
        (["system=loopwatch", "severity=info", "alertname=Anything"], "blackhole"),
        (["system=loopwatch", "alertname=NoSeverity"], "tickets"),
        # someone else's alerts stay in the existing tree, whatever their severity
        (["severity=critical", "alertname=DiskFull"], "default"),
        (["severity=warning", "alertname=Other"], "default"),
    ],
)
def test_amtool_routes_by_severity(labels: list[str], receiver: str) -> None:
    amtool = require_tool("amtool")
    done = run(
        amtool,
        "config",
        "routes",
        "test",
        f"--config.file={AM_CONFIG}",
        f"--verify.receivers={receiver}",
        *labels,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == receiver


def test_amtool_routes_test_can_fail() -> None:
    amtool = require_tool("amtool")
    done = run(
        amtool,
        "config",
        "routes",
        "test",
        f"--config.file={AM_CONFIG}",
        "--verify.receivers=pager",
        "system=loopwatch",
        "severity=warning",
    )
    assert done.returncode != 0


def test_every_alert_severity_reaches_a_webhook() -> None:
    am = yaml.safe_load(AM_CONFIG.read_text(encoding="utf-8"))
    hooks = {r["name"]: r.get("webhook_configs", []) for r in am["receivers"]}
    (mine,) = am["route"]["routes"]
    assert mine["matchers"] == ['system="loopwatch"']
    routes = {r["matchers"][0]: r["receiver"] for r in mine["routes"]}
    for rule in alerts().values():
        severity = rule["labels"]["severity"]
        receiver = routes[f'severity="{severity}"']
        assert hooks[receiver], f"{rule['alert']} ({severity}) goes nowhere"
