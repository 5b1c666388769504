"""Selectors, uids and names shared by every dashboard: the mixin's ``_config``."""

from __future__ import annotations

# The Grafana image this source targets; the Foundation SDK build in pyproject's `dashboards`
# extra is the one made for this Grafana version.
GRAFANA_VERSION = "11.6.0"

DASHBOARD_UID = "loopwatch-loops"
DASHBOARD_TITLE = "loopwatch / Tool-call loops"
DASHBOARD_FILE = "loopwatch-loops.json"
TAGS = ["loopwatch", "loopwatch-mixin"]

# Provisioned datasource uids (dashboards/provisioning/datasources/loopwatch.yaml).
PROMETHEUS_UID = "prometheus"
JAEGER_UID = "jaeger"

# Every product panel is filtered by these template variables; "All" is ".*" so an empty label
# value (e.g. an unknown tool version) still matches.
TURN_FILTER = 'service=~"$service", agent=~"$agent", model=~"$model"'
TOOL_FILTER = TURN_FILTER + ', tool=~"$tool"'
# guard decisions carry no model label
GUARD_FILTER = 'service=~"$service", agent=~"$agent", tool=~"$tool"'

# Portable `le` matchers: Prometheus 3 stores le="2" as "2.0".
LE_2 = 'le=~"2(\\\\.0)?"'
LE_5 = 'le=~"5(\\\\.0)?"'
