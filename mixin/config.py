"""The mixin's ``_config``: thresholds, windows, margins, selectors, uids and names.

The alert rules (``python -m alerts.build``), the Alertmanager example and the dashboard
(``python -m dashboards.build``) are generated from this one module and the metric
catalog (``loopwatch.metrics.catalog``); change a value here and regenerate both. Tests fail
when a committed file differs from what these values generate.
"""

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

# -- thresholds (attempts of one attempt key in one turn) ----------------------------------------
# = [defaults] loop_threshold, no_rows_threshold, same_result_threshold and failing_threshold
# in loopwatch.toml and loopwatch's own defaults (a test keeps them equal)
LOOP_THRESHOLD = 3
NO_ROWS_THRESHOLD = 3
SAME_RESULT_THRESHOLD = 3
FAILING_THRESHOLD = 5
# a turn this bad pages from its first minute, history or not
SEVERE_THRESHOLD = 6

# -- history: the change alerts judge now against the agent's (tool's) own past -----------------
# The baseline is the window BASELINE_WINDOW ending BASELINE_OFFSET ago ("the week before
# yesterday"), so a change made today is never part of its own baseline.
BASELINE_WINDOW = "7d"
BASELINE_OFFSET = "1d"
# fewer turns than this in the baseline: no baseline yet (a fresh install stays quiet)
BASELINE_MIN_TURNS = 100
# a model or tool compared with its own baseline: over this window
REGRESSION_WINDOW = "1h"
# Poisson-style margin: loops fire above  expected + MARGIN_Z * sqrt(expected) + MARGIN_FLOOR,
# where expected = turns x baseline share. The floor keeps a zero baseline from paging on the
# first loop or two; the sqrt term grows with the expected count.
MARGIN_Z = 3.0
MARGIN_FLOOR = 2.5
CHANGE_FOR = "5m"

# -- p99 of max attempts per turn above 1, at any traffic ------------------------------------------
# p99 > 1 means more than P99_SHARE of turns repeated a call. Judged on counts over P99_WINDOW
# with its own margin, and only when at least one of those turns reached the loop threshold
# (a single retry is not a loop).
P99_WINDOW = "1h"
P99_SHARE = 0.01
P99_MARGIN_Z = 2.0
P99_MARGIN_FLOOR = 1.0
P99_FOR = "5m"

# -- where alerts go ----------------------------------------------------------------------------
# Every loopwatch alert carries ROUTE_LABEL; the Alertmanager example routes on it, so merged
# into an existing Alertmanager it touches only loopwatch's alerts.
ROUTE_LABEL = ("system", "loopwatch")
# runbook_url = RUNBOOK_BASE_URL + "#" + alert name in lower case: where you host alerts/runbook.md
RUNBOOK_BASE_URL = "https://github.com/loopwatch/loopwatch/blob/main/alerts/runbook.md"
JOB_SELECTOR = 'job="loopwatch"'

# -- loop events: a turn past a threshold, read from histogram buckets ---------------------------
# observations in this window fire (new series included); the alert holds EVENT_FOR
EVENT_WINDOW = "10m"
EVENT_FOR = "1m"
# a loop pattern is new when absent from the baseline window ending this long ago, so the
# pattern's own first minutes do not count as its history
NEW_PATTERN_OFFSET = "10m"
NEW_PATTERN_FOR = "1m"

# -- pipeline: loopwatch's own health ------------------------------------------------------------
# A replica down or unscraped this long pages: its share of the traces goes unread.
DOWN_FOR = "5m"
# Self-health counters: rate over the window, sustained for the `for`. Dropped spans get the
# shortest window (any drop can hide a loop); arguments not captured the longest `for` (a
# deployment turning content capture on takes a while to reach every process).
DROPPED_WINDOW = "5m"
DROPPED_FOR = "15m"
EVICTED_WINDOW = "15m"
EVICTED_FOR = "15m"
LABEL_OVERFLOW_WINDOW = "15m"
LABEL_OVERFLOW_FOR = "15m"
NO_ARGUMENTS_WINDOW = "15m"
NO_ARGUMENTS_FOR = "30m"


def le(bound: int) -> str:
    """Portable `le` matcher: Prometheus 3 stores le="2" as "2.0"."""
    return f'le=~"{bound}(\\\\.0)?"'


# turns at or above a threshold = count minus the bucket just below it
LE_LOOP = le(LOOP_THRESHOLD - 1)
LE_SEVERE = le(SEVERE_THRESHOLD - 1)
LE_NO_ROWS = le(NO_ROWS_THRESHOLD - 1)
LE_SAME_RESULT = le(SAME_RESULT_THRESHOLD - 1)
LE_FAILING = le(FAILING_THRESHOLD - 1)
