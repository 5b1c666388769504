"""The dashboard: generated JSON in sync with its source, schema, lint, PromQL, metric names."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.helpers import require_tool

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # dashboards/ is source, not an installed package
    sys.path.insert(0, str(ROOT))

from dashboards import build  # noqa: E402
from dashboards.queries import expand, metric_names, rate_windows, targets  # noqa: E402
from mixin import config  # noqa: E402
from tests.support.metric_names import exported_metric_names  # noqa: E402

DASHBOARD = ROOT / "dashboards" / "generated" / config.DASHBOARD_FILE
PROVISIONING = ROOT / "dashboards" / "provisioning"
# dashboard-linter's panel-units rule, narrowed to the units this project uses
UNITS = {"short", "none", "percentunit", "s", "dateTimeAsIso", "reqps", "ops"}


@cache
def model() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def panels() -> list[dict[str, Any]]:
    return [p for p in model()["panels"] if p["type"] != "row"]


def rows() -> dict[str, list[dict[str, Any]]]:
    """Row title -> the panels that follow it (expanded rows own the panels below them)."""
    out: dict[str, list[dict[str, Any]]] = {}
    current = ""
    for p in model()["panels"]:
        if p["type"] == "row":
            current = p["title"]
            out[current] = []
        else:
            out.setdefault(current, []).append(p)
    return out


# -- generated file and SDK pin ----------------------------------------------------------------
def test_generated_json_matches_the_source() -> None:
    assert build.render() == {config.DASHBOARD_FILE: DASHBOARD.read_text(encoding="utf-8")}, (
        "dashboards/generated is stale: run python -m dashboards.build"
    )
    done = subprocess.run(
        [sys.executable, "-m", "dashboards.build", "--check"], cwd=ROOT, capture_output=True
    )
    assert done.returncode == 0, done.stderr


# python -m dashboards.build, in a process where the Foundation SDK is not installed
WITHOUT_THE_SDK = """
import runpy, sys

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "grafana_foundation_sdk":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
sys.argv = ["dashboards.build", "--check"]
runpy.run_module("dashboards.build", run_name="__main__", alter_sys=True)
"""


def test_build_without_the_sdk_says_what_to_install_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_SDK], cwd=ROOT, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        "python -m dashboards.build: No module named 'grafana_foundation_sdk'; install the "
        "dashboards extra: pip install -e '.[dashboards]'\n",
    )


def test_foundation_sdk_is_pinned_to_the_grafana_image() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pins = [
        d for d in pyproject["project"]["optional-dependencies"]["dashboards"] if "grafana" in d
    ]
    assert len(pins) == 1
    pin = pins[0].split("==")[1]
    epoch, flavour = pin.split("!")
    assert epoch.isdigit()
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    image_version = compose["services"]["grafana"]["image"].split(":")[1]
    assert image_version == config.GRAFANA_VERSION
    assert flavour.split(".")[:2] == image_version.split(".")[:2]
    assert metadata.version("grafana-foundation-sdk") == pin
    # the 11.6 build writes the schema version Grafana 11.6 expects
    assert model()["schemaVersion"] == 41


# -- schema: the SDK's generated models are the Foundation SDK's schema in code -----------------
def _roundtrip(cls: Any, data: Any) -> Any:
    from grafana_foundation_sdk.cog.encoder import JSONEncoder

    return json.loads(JSONEncoder(sort_keys=True).encode(cls.from_json(data)))


def test_dashboard_round_trips_through_the_sdk_models_unchanged() -> None:
    from grafana_foundation_sdk.models.dashboard import Dashboard

    assert _roundtrip(Dashboard, model()) == model()


def test_panel_options_and_field_config_round_trip_through_their_panel_models() -> None:
    import importlib

    for p in panels():
        module = importlib.import_module(f"grafana_foundation_sdk.models.{p['type']}")
        assert _roundtrip(module.Options, p["options"]) == p["options"], p["title"]
        custom = p.get("fieldConfig", {}).get("defaults", {}).get("custom")
        if custom is not None:
            assert _roundtrip(module.FieldConfig, custom) == custom, p["title"]


def test_unknown_keys_do_not_survive_the_round_trip() -> None:
    """The schema check can fail: a key the schema does not know is dropped."""
    from grafana_foundation_sdk.models.dashboard import Dashboard

    broken = json.loads(json.dumps(model()))
    broken["panels"][1]["intervalFactor"] = 2
    assert _roundtrip(Dashboard, broken) != broken


# -- dashboard-linter and mixin rules ----------------------------------------------------------
def test_identity_uid_title_tags_and_not_editable() -> None:
    m = model()
    assert m["title"] == "loopwatch / Tool-call loops"
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", m["uid"])
    assert m["uid"] == config.DASHBOARD_UID
    assert "loopwatch" in m["tags"]
    assert m["editable"] is False  # uneditable-dashboard: provisioned, edit the source


def test_template_variables() -> None:
    variables = {v["name"]: v for v in model()["templating"]["list"]}
    assert list(variables) == ["datasource", "service", "agent", "model", "tool"]
    ds = variables["datasource"]
    assert (ds["type"], ds["query"], ds["label"]) == ("datasource", "prometheus", "Data source")
    for name in ("service", "agent", "model", "tool"):
        v = variables[name]
        assert v["type"] == "query"
        assert v["datasource"]["uid"] == "${datasource}"
        assert v["refresh"] == 2  # template-on-time-change-reload-rule
        assert v["multi"] and v["includeAll"] and v["allValue"] == ".*"
        assert v["query"].startswith("label_values(") and v["query"].endswith(f", {name})")


def test_every_panel_uses_the_datasource_variable_and_has_targets() -> None:
    for p in panels():
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], f"{p['title']}: no targets"  # panel-no-targets-rule
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}", p["title"]
            assert t["expr"].strip()


def test_every_panel_has_a_title_a_description_and_a_unit() -> None:
    for p in panels():
        assert p["title"].strip()
        description = p.get("description", "")
        assert len(description) >= 80, f"{p['title']}: describe how to read it"
        assert p["fieldConfig"]["defaults"].get("unit") in UNITS, p["title"]


def test_ids_ref_ids_and_grid() -> None:
    ids = [p["id"] for p in model()["panels"]]
    assert all(isinstance(i, int) and i > 0 for i in ids) and len(set(ids)) == len(ids)
    occupied: set[tuple[int, int]] = set()
    for p in model()["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        cells = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not cells & occupied, f"{p['title']} overlaps another panel"
        occupied |= cells
        refs = [t["refId"] for t in p.get("targets", [])]
        assert all(refs) and len(set(refs)) == len(refs), p["title"]


def test_rate_windows_use_rate_interval_and_counters_are_aggregated() -> None:
    # `(x unless x offset $__range)` is the one bare read allowed: the whole value of a series
    # born inside the range (dashboards.loops.in_range)
    newborn = re.compile(r"\((\w+\{[^}]*\}) unless \1 offset \$__range\)")
    for t in targets(model()):
        for fn, window in rate_windows(t.expr):
            assert window == "$__rate_interval", f"{t.where}: {fn}[{window}]"
        if t.panel_type == "variable":
            continue
        # target-counter-agg-rule: a _total is only ever read through rate or increase
        bare = newborn.sub("", t.expr)
        for m in re.finditer(r"\b\w+_total\b", bare):
            assert re.search(r"\b(rate|increase)\($", bare[: m.start()]), f"{t.where}: {m[0]}"


def test_histogram_buckets_match_le_portably() -> None:
    for t in targets(model()):
        for le in re.findall(r'\ble\s*(=~?|!=)\s*"([^"]*)"', t.expr):
            assert le[0] == "=~" and le[1].endswith("(\\\\.0)?"), f"{t.where}: {le}"


def test_heatmap_reads_prometheus_buckets_as_they_are() -> None:
    heatmaps = [p for p in panels() if p["type"] == "heatmap"]
    assert len(heatmaps) == 1
    assert heatmaps[0]["options"]["calculate"] is False
    assert heatmaps[0]["targets"][0]["format"] == "heatmap"


def test_rows_and_their_panels() -> None:
    r = rows()
    assert list(r) == [
        "Overview",
        "Loops: max attempts per turn",
        "By tool",
        "Loops that never error",
        "Tools that keep failing",
        "Changes",
        "Coding agents",
        "Pipeline health",
    ]
    coding = {p["title"]: p for p in r["Coding agents"]}
    beside = coding["Coding agents' loops: loopwatch's and their own guards'"]["targets"]
    assert "loopwatch_loops_total" in beside[0]["expr"]
    assert 'agent=~"claude-code|gemini-cli|codex"' in beside[0]["expr"]
    assert "sum by (source, type) (rate(loopwatch_agent_loop_detections_total" in beside[1]["expr"]
    overview = " ".join(p["targets"][0]["expr"] for p in r["Overview"])
    for needle in (
        "loopwatch_turns_total",
        "histogram_quantile(0.99, sum by (le) ((increase(loopwatch_turn_max_attempts_bucket",
        "histogram_quantile(1, sum by (le) ((increase(loopwatch_turn_max_attempts_bucket",
        "loopwatch_no_rows_streak_bucket",
        "loopwatch_repeat_calls_total",
        "loopwatch_over_cap_seconds_total",
    ):
        assert needle in overview
    loops = {p["title"]: p for p in r["Loops: max attempts per turn"]}
    guard = loops["Guards stopping loops"]["targets"][0]["expr"]
    assert "loopwatch_guard_decisions_total" in guard and "by (tool, decision)" in guard
    for decision in (
        "stopped",
        "no_rows_stopped",
        "budget_exhausted",
        "suppressed",
        "circuit_open",
    ):
        assert decision in loops["Guards stopping loops"]["description"]
    exprs = [t["expr"] for t in loops["Share of turns at ≥3 and ≥6 attempts"]["targets"]]
    assert 'le=~"2(\\\\.0)?"' in exprs[0] and 'le=~"5(\\\\.0)?"' in exprs[1]
    by_tool = {p["title"]: p for p in r["By tool"]}
    assert by_tool["Which tools loop, with which error class"]["type"] == "table"
    streaks = " ".join(t["expr"] for p in r["Loops that never error"] for t in p["targets"])
    assert "loopwatch_no_rows_streak_bucket" in streaks
    assert "loopwatch_same_result_streak_bucket" in streaks
    failing = " ".join(t["expr"] for p in r["Tools that keep failing"] for t in p["targets"])
    assert "loopwatch_failing_streak_bucket" in failing and "loopwatch_loops_total" in failing
    assert 'kind="failing"' in failing  # a failing loop: over more than one key
    changes = " ".join(t["expr"] for p in r["Changes"] for t in p["targets"])
    assert "offset 1w" in changes
    health = " ".join(p["targets"][0]["expr"] for p in r["Pipeline health"])
    for metric in (
        "loopwatch_spans_total",
        "loopwatch_spans_dropped_total",
        "loopwatch_queue_spans",
        "loopwatch_all_starts_queued",
        "loopwatch_open_turns",
        "loopwatch_turns_evicted_total",
        "loopwatch_late_spans_total",
        "loopwatch_label_overflow_total",
        "loopwatch_calls_without_arguments_total",
        "loopwatch_http_connections_refused_total",
    ):
        assert metric in health
    annotations = [a["name"] for a in model()["annotations"]["list"]]
    assert annotations == ["Model first seen", "Tool version first seen"]
    exemplar_panels = [p["title"] for p in panels() for t in p["targets"] if t.get("exemplar")]
    assert len(exemplar_panels) >= 3


# -- PromQL parses (promtool is the reference parser) --------------------------------------------
def test_every_query_parses_with_promtool(tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    rules = [
        {"record": f"dashboard_check:query_{i}", "expr": expand(t.expr)}
        for i, t in enumerate(targets(model()))
    ]
    assert len(rules) == 53
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 53 rules found" in done.stdout


def test_a_broken_query_fails_promtool(tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    path = tmp_path / "broken.yaml"
    rule = {"record": "dashboard_check:broken", "expr": "sum(rate(loopwatch_turns_total[5m])"}
    path.write_text(yaml.safe_dump({"groups": [{"name": "d", "rules": [rule]}]}))
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode != 0 and "unclosed left parenthesis" in done.stdout + done.stderr


# -- every metric a panel reads is exported -------------------------------------------------------
def test_every_metric_the_dashboard_reads_is_exported_by_loopwatch() -> None:
    exported = exported_metric_names()
    assert {"loopwatch_turn_max_attempts_bucket", "loopwatch_guard_decisions_total"} <= exported
    read = {name for t in targets(model()) for name in metric_names(t.expr)}
    assert len(read) >= 20
    assert sorted(read - exported) == []


# -- provisioning --------------------------------------------------------------------------------
def test_provisioned_datasources_and_exemplar_link() -> None:
    data = yaml.safe_load((PROVISIONING / "datasources" / "loopwatch.yaml").read_text())
    by_uid = {d["uid"]: d for d in data["datasources"]}
    assert set(by_uid) == {config.PROMETHEUS_UID, config.JAEGER_UID, "alertmanager"}
    prom = by_uid[config.PROMETHEUS_UID]
    assert prom["type"] == "prometheus" and prom["isDefault"] is True
    link = prom["jsonData"]["exemplarTraceIdDestinations"]
    assert link == [
        {"name": "trace_id", "datasourceUid": "jaeger", "urlDisplayLabel": "Open the turn's trace"}
    ]
    assert by_uid[config.JAEGER_UID]["type"] == "jaeger"
    assert prom["jsonData"]["alertmanagerUid"] in by_uid
    # the dashboard's default datasource is the provisioned one
    ds_var = model()["templating"]["list"][0]
    assert ds_var["current"]["value"] == config.PROMETHEUS_UID
    # the datasource's scrape interval is Prometheus' (it feeds $__rate_interval)
    prom_config = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    assert prom["jsonData"]["timeInterval"] == prom_config["global"]["scrape_interval"]


def test_dashboard_provider_and_compose_mounts() -> None:
    data = yaml.safe_load((PROVISIONING / "dashboards" / "loopwatch.yaml").read_text())
    (provider,) = data["providers"]
    assert provider["folder"] == "" and provider["options"]["foldersFromFilesStructure"] is True
    assert provider["allowUiUpdates"] is False
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    grafana = compose["services"]["grafana"]
    mounts = {v.split(":")[0]: v.split(":")[1] for v in grafana["volumes"]}
    assert mounts["./dashboards/generated"] == provider["options"]["path"]
    assert mounts["./dashboards/provisioning/dashboards"] == "/etc/grafana/provisioning/dashboards"
    assert (
        mounts["./dashboards/provisioning/datasources"] == "/etc/grafana/provisioning/datasources"
    )
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/{config.DASHBOARD_FILE}"
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ENABLED"] == "true"


@pytest.mark.parametrize("name", ["datasource", "service", "agent", "model", "tool"])
def test_variables_are_used(name: str) -> None:
    used = " ".join(t.expr for t in targets(model()))
    if name == "datasource":
        assert all(p["datasource"]["uid"] == "${datasource}" for p in panels())
    else:
        assert f"${name}" in used
