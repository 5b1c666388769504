"""Read PromQL back out of generated dashboards: for lint, promtool parsing and live queries."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# Grafana's built-in variables, replaced by values Prometheus accepts (as dashboard-linter does).
GRAFANA_GLOBALS = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
}
_VARIABLE = re.compile(r"\$\{?(\w+)\}?")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_TOKEN = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.*),\s*\w+\)$", re.S)


@dataclass(frozen=True)
class Target:
    """One query of a dashboard: where it is and its PromQL as written."""

    where: str
    expr: str
    panel_type: str = ""
    instant: bool = False


def targets(model: Mapping[str, Any]) -> Iterator[Target]:
    """Every PromQL expression of a dashboard: panel targets, annotations and query variables."""
    for panel in model.get("panels", []):
        for t in panel.get("targets", []):
            yield Target(
                f"panel {panel['id']} {panel['title']!r} {t.get('refId')}",
                t["expr"],
                panel["type"],
                bool(t.get("instant")),
            )
    for a in model.get("annotations", {}).get("list", []):
        if a.get("expr"):
            yield Target(f"annotation {a['name']!r}", a["expr"], "annotation", False)
    for v in model.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            match = _LABEL_VALUES.match(v["query"])
            expr = match.group("selector") if match else v["query"]
            yield Target(f"variable {v['name']}", expr, "variable", True)


def expand(expr: str, values: Mapping[str, str] | None = None) -> str:
    """Substitute Grafana variables: globals by durations, template variables by ``.*``."""
    out = expr
    for name, value in {**GRAFANA_GLOBALS, **(values or {})}.items():
        out = out.replace(name, value)
    return _VARIABLE.sub(".*", out)


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects (loopwatch's, recording rules', and ``up``)."""
    bare = _STRING.sub('""', expr)
    names = set()
    for token in _TOKEN.findall(bare):
        if token.startswith("loopwatch_") or token.count(":") == 2 or token == "up":
            names.add(token)
    return names


def rate_windows(expr: str) -> list[tuple[str, str]]:
    """(function, window) for every rate()/irate() call whose argument ends in a range."""
    return re.findall(r"\b(i?rate)\([^()\[]*\[([^\]]+)\]", expr)
