"""Recording and alerting rules, as functions of the mixin config (``mixin/config.py``) and the
metric catalog (``loopwatch.metrics.catalog``)."""

from __future__ import annotations

from typing import Any

from loopwatch.metrics import catalog as m
from mixin import config as c

Rule = dict[str, Any]
Group = dict[str, Any]

# counts in descriptions: increase() extrapolates, so round
VALUE = '{{ printf "%.0f" $value }}'
TURN = m.TURN_MAX_ATTEMPTS.name
TOOL = m.TOOL_MAX_ATTEMPTS.name
BY_MODEL = "job, service, agent, model"
BY_AGENT = "job, service, agent"
BY_VERSION = "job, service, tool, tool_version"
BY_TOOL = "job, service, tool"

# hourly tiles (the baseline group runs once an hour): a week of them is 168 samples a series,
# where the raw counters would be tens of thousands, and a counter reset costs one tile only
TILE_MODEL_TURNS = f"job_service_agent_model:{TURN}_count:increase1h"
TILE_MODEL_LOOPS = "job_service_agent_model:loopwatch_turns_looped:increase1h"
TILE_VERSION_USES = f"job_service_tool_tool_version:{TOOL}_count:increase1h"
TILE_VERSION_LOOPS = "job_service_tool_tool_version:loopwatch_tool_uses_looped:increase1h"


def _looped(metric: str, by: str, window: str | None, selector: str = "") -> str:
    """Observations at or above the loop threshold: count minus the bucket just below it."""
    if window is None:
        count = f"{metric}_count{{{selector}}}" if selector else f"{metric}_count"
        inner = f"{count} - ignoring (le) {metric}_bucket{{{c.LE_LOOP}}}"
    else:
        inner = (
            f"increase({metric}_count[{window}])"
            f" - ignoring (le) increase({metric}_bucket{{{c.LE_LOOP}}}[{window}])"
        )
    return f"sum by ({by}) ({inner})"


def _past(tile: str, by: str) -> str:
    """A tile summed over the baseline window (the week before yesterday)."""
    return f"sum by ({by}) (sum_over_time({tile}[{c.BASELINE_WINDOW}] offset {c.BASELINE_OFFSET}))"


def _baseline_share(loops_tile: str, uses_tile: str, by: str) -> str:
    """Loop share over the baseline window; absent while the baseline holds too few turns."""
    return (
        f"(\n  {_past(loops_tile, by)}\n  /\n"
        f"  ({_past(uses_tile, by)} >= {c.BASELINE_MIN_TURNS})\n)"
    )


def _in_history(tile: str, by: str) -> str:
    return (
        f"count by ({by}) (count_over_time({tile}[{c.BASELINE_WINDOW}] offset {c.BASELINE_OFFSET}))"
    )


def _above_expected(
    observed: str, expected: str, on: str, z: float = c.MARGIN_Z, floor: float = c.MARGIN_FLOOR
) -> str:
    """observed > expected + z * sqrt(expected) + floor (Poisson-style margin)."""
    return (
        f"(\n  {_indent(observed)}\n)\n> on ({on})\n(\n"
        f"  ({_indent(expected)})\n"
        f"  + {z:g} * sqrt({_indent(expected)})\n"
        f"  + {floor:g}\n)"
    )


def _indent(text: str) -> str:
    return text.replace("\n", "\n  ")


def _scaled(uses: str, on: str, share: str) -> str:
    """Expected loops: uses x a share joined on fewer labels."""
    return f"{uses}\n* on ({on}) group_left ()\n{share}"


def _new_against_baseline(
    metric: str, by: str, parent: str, tiles: tuple[str, str], selector: str = ""
) -> str:
    """Something absent from the baseline (a model, a tool version): its loops since it appeared
    (raw counters: its series are new) against its parent's baseline share x its uses."""
    uses_tile = tiles[1]
    count = f"{metric}_count{{{selector}}}" if selector else f"{metric}_count"
    return (
        _above_expected(
            _looped(metric, by, None, selector),
            _scaled(f"sum by ({by}) ({count})", parent, _baseline_share(*tiles, parent)),
            by,
        )
        + f"\nunless on ({by})\n  {_in_history(uses_tile, by)}"
    )


def _against_own_baseline(metric: str, by: str, tiles: tuple[str, str]) -> str:
    """Loops over the regression window against the same thing's baseline share x its uses."""
    w = c.REGRESSION_WINDOW
    return _above_expected(
        _looped(metric, by, w),
        _scaled(f"sum by ({by}) (increase({metric}_count[{w}]))", by, _baseline_share(*tiles, by)),
        by,
    )


def recording_groups() -> list[Group]:
    tiles = [
        (TILE_MODEL_TURNS, f"sum by ({BY_MODEL}) (increase({TURN}_count[1h]))"),
        (TILE_MODEL_LOOPS, _looped(TURN, BY_MODEL, "1h")),
        (TILE_VERSION_USES, f"sum by ({BY_VERSION}) (increase({TOOL}_count[1h]))"),
        (TILE_VERSION_LOOPS, _looped(TOOL, BY_VERSION, "1h")),
    ]
    return [
        {
            "name": "loopwatch.baseline",
            "interval": "1h",
            "rules": [{"record": name, "expr": expr} for name, expr in tiles],
        }
    ]


def _alert(name: str, expr: str, for_: str, severity: str, summary: str, description: str) -> Rule:
    key, value = c.ROUTE_LABEL
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity, key: value},
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook_url": f"{c.RUNBOOK_BASE_URL}#{name.lower()}",
        },
    }


def _event(metric: str, le: str, window: str) -> str:
    """Histogram observations above a bound in the window, new series included.

    Counters and buckets appear with their first value already counted, which increase() cannot
    see; a series younger than the window that already holds the condition counts too.
    """
    return f"""sum by (job, service, agent, model, tool) (
    (
      increase({metric}_count[{window}])
      - ignoring (le) increase({metric}_bucket{{{le}}}[{window}])
    ) > 0
  or
    (
      (
        {metric}_count
        - ignoring (le) {metric}_bucket{{{le}}}
      ) > 0
      unless {metric}_count offset {window}
    )
) > 0"""


def _loop_event(kind: str, window: str) -> str:
    """Turns that looped with ``kind`` in the window, new series included (as _event)."""
    loops = f'{m.LOOPS.name}{{kind="{kind}"}}'
    return f"""sum by (job, service, agent, model, tool) (
    increase({loops}[{window}]) > 0
  or
    ({loops} > 0 unless {loops} offset {window})
) > 0"""


def _spoken(duration: str) -> str:
    """A window in words: 10m -> 10 minutes."""
    units = {"s": "second", "m": "minute", "h": "hour", "d": "day", "w": "week"}
    n, unit = int(duration[:-1]), units[duration[-1]]
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def loop_alerts() -> list[Rule]:
    severe, duplicate, no_rows, same_result, failing = _event_alerts()
    return [severe, duplicate, _p99_alert(), *_change_alerts(), no_rows, same_result, failing]


def _event_alerts() -> list[Rule]:
    """A single turn past a threshold: the severe loop, a duplicate side effect, and the
    no-rows, same-result and failing streaks."""
    severe, no_rows = c.SEVERE_THRESHOLD, c.NO_ROWS_THRESHOLD
    same_result, failing = c.SAME_RESULT_THRESHOLD, c.FAILING_THRESHOLD
    window, last = c.EVENT_WINDOW, _spoken(c.EVENT_WINDOW)
    return [
        _alert(
            "LoopwatchSevereLoop",
            _event(TOOL, c.LE_SEVERE, window),
            c.EVENT_FOR,
            "critical",
            f"A turn called one tool {severe} or more times with the same attempt key.",
            f"Tool {{{{ $labels.tool }}}} reached {severe} or more attempts on one attempt key "
            "in a turn of agent {{ $labels.agent }} (model {{ $labels.model }}, service "
            f"{{{{ $labels.service }}}}) in the last {last}.",
        ),
        _alert(
            "LoopwatchDuplicateSideEffect",
            _loop_event("duplicate", window),
            c.EVENT_FOR,
            "critical",
            "A write succeeded twice or more on one identity within one turn: its side effect "
            "happened again.",
            "Tool {{ $labels.tool }} (a write) succeeded again on an identity that had already "
            "succeeded, in a turn of agent {{ $labels.agent }} (model {{ $labels.model }}, "
            f"service {{{{ $labels.service }}}}) in the last {last}: a duplicate ticket, "
            "payment, message or booking.",
        ),
        _alert(
            "LoopwatchNoRowsStreak",
            _event(m.NO_ROWS_STREAK.name, c.LE_NO_ROWS, window),
            c.EVENT_FOR,
            "warning",
            f"A tool returned no rows {no_rows} or more times in a row within one turn.",
            f"Tool {{{{ $labels.tool }}}} had a no-rows streak of {no_rows} or more in a turn "
            "of agent {{ $labels.agent }} (model {{ $labels.model }}, service "
            f"{{{{ $labels.service }}}}) in the last {last}.",
        ),
        _alert(
            "LoopwatchSameResultStreak",
            _loop_event("same_result", window),
            c.EVENT_FOR,
            "warning",
            f"A tool got the same data back {same_result} or more times in a row (its "
            "same-result threshold) within one turn, for reworded calls.",
            f"Tool {{{{ $labels.tool }}}} had a same-result loop (a streak of {same_result} or "
            "more over differently worded calls) in a turn of agent {{ $labels.agent }} (model "
            f"{{{{ $labels.model }}}}, service {{{{ $labels.service }}}}) in the last {last}.",
        ),
        _alert(
            "LoopwatchFailingStreak",
            _loop_event("failing", window),
            c.EVENT_FOR,
            "warning",
            f"A tool failed {failing} or more times in a row (its failing threshold) with one "
            "error class within one turn, whatever the arguments.",
            f"Tool {{{{ $labels.tool }}}} had a failing loop (a streak of {failing} or more "
            "failures of one class over different calls) in a turn of agent "
            "{{ $labels.agent }} (model {{ $labels.model }}, service "
            f"{{{{ $labels.service }}}}) in the last {last}.",
        ),
    ]


def _p99_alert() -> Rule:
    """Turns with >= 2 attempts over the p99 window, against P99_SHARE of all its turns."""
    turns_p99 = f"sum by ({BY_MODEL}) (increase({TURN}_count[{c.P99_WINDOW}]))"
    repeated = (
        f"sum by ({BY_MODEL}) (\n  increase({TURN}_count[{c.P99_WINDOW}])\n"
        f"  - ignoring (le) increase({TURN}_bucket{{{c.le(1)}}}[{c.P99_WINDOW}])\n)"
    )
    p99 = (
        _above_expected(
            repeated,
            f"{c.P99_SHARE:g} * {turns_p99}",
            BY_MODEL,
            c.P99_MARGIN_Z,
            c.P99_MARGIN_FLOOR,
        )
        + f"\nand on ({BY_MODEL})\n  {_looped(TURN, BY_MODEL, c.P99_WINDOW)} > 0.5"
    )
    return _alert(
        "LoopwatchAttemptsP99AboveOne",
        p99,
        c.P99_FOR,
        "warning",
        "More than one turn in a hundred repeats a tool call.",
        f"{VALUE} turns of agent {{{{ $labels.agent }}}}, model "
        f"{{{{ $labels.model }}}} (service {{{{ $labels.service }}}}) repeated a call in the "
        f"last {c.P99_WINDOW}, clearly more than {c.P99_SHARE:.0%} of its turns (p99 of max "
        f"attempts per turn above 1), and some reached {c.LOOP_THRESHOLD} attempts.",
    )


def _new_pattern_alert() -> Rule:
    loops = m.LOOPS.name
    new_pattern = (
        f"group by (job, service, tool, error_class, kind) ({loops})\n"
        "unless on (job, service, tool, error_class, kind)\n"
        f"  present_over_time({loops}[{c.BASELINE_WINDOW}] offset {c.NEW_PATTERN_OFFSET})\n"
        "and on (job, service)\n"
        f"  {_in_history(TILE_MODEL_TURNS, 'job, service')}"
    )
    return _alert(
        "LoopwatchNewLoopPattern",
        new_pattern,
        c.NEW_PATTERN_FOR,
        "warning",
        f"A tool loops in a way not seen in the previous {c.BASELINE_WINDOW}.",
        "New loop pattern in service {{ $labels.service }}: tool {{ $labels.tool }}, error "
        "class {{ $labels.error_class }}, kind {{ $labels.kind }}.",
    )


def _change_alerts() -> list[Rule]:
    """Loops judged against history: a new pattern, a model or tool against its own baseline,
    a new model or tool version against its parent's."""
    loop, w = c.LOOP_THRESHOLD, c.REGRESSION_WINDOW
    history = (
        f"the same {{kind}}'s share over the {c.BASELINE_WINDOW} ending {c.BASELINE_OFFSET} ago"
    )
    tiles_model = (TILE_MODEL_LOOPS, TILE_MODEL_TURNS)
    tiles_tool = (TILE_VERSION_LOOPS, TILE_VERSION_USES)
    margin = f"the expected count plus {c.MARGIN_Z:g} x its square root plus {c.MARGIN_FLOOR:g}"
    return [
        _new_pattern_alert(),
        _alert(
            "LoopwatchModelLoopShareRegression",
            _against_own_baseline(TURN, BY_MODEL, tiles_model),
            c.CHANGE_FOR,
            "warning",
            "A model loops more often than it did before.",
            f"Model {{{{ $labels.model }}}} (agent {{{{ $labels.agent }}}}, service "
            f"{{{{ $labels.service }}}}): {VALUE} turns reached {loop} attempts on one "
            f"key in the last {w}, more than {history.format(kind='model')} predicts ("
            f"{margin}).",
        ),
        _alert(
            "LoopwatchToolLoopShareRegression",
            _against_own_baseline(TOOL, BY_TOOL, tiles_tool),
            c.CHANGE_FOR,
            "warning",
            "A tool loops more often than it did before.",
            f"Tool {{{{ $labels.tool }}}} (service {{{{ $labels.service }}}}): in {VALUE} "
            f"turns of the last {w} it reached {loop} attempts on one key, more than "
            f"{history.format(kind='tool')} predicts ({margin}).",
        ),
        _alert(
            "LoopwatchNewModelLoops",
            _new_against_baseline(TURN, BY_MODEL, BY_AGENT, tiles_model),
            c.CHANGE_FOR,
            "warning",
            "A new model loops more often than the agent did before it.",
            f"Model {{{{ $labels.model }}}} (agent {{{{ $labels.agent }}}}, service "
            f"{{{{ $labels.service }}}}) is new since {c.BASELINE_OFFSET} ago and "
            f"{VALUE} of its turns reached {loop} attempts on one key, more than the "
            f"agent's loop share over the {c.BASELINE_WINDOW} before predicts ({margin}).",
        ),
        _alert(
            "LoopwatchNewToolVersionLoops",
            _new_against_baseline(TOOL, BY_VERSION, BY_TOOL, tiles_tool, 'tool_version!=""'),
            c.CHANGE_FOR,
            "warning",
            "A new tool version loops more often than the tool did before it.",
            f"Tool {{{{ $labels.tool }}}} version {{{{ $labels.tool_version }}}} (service "
            f"{{{{ $labels.service }}}}) is new since {c.BASELINE_OFFSET} ago and reached "
            f"{loop} attempts on one key in {VALUE} turns, more than the tool's loop "
            f"share over the {c.BASELINE_WINDOW} before predicts ({margin}).",
        ),
    ]


def pipeline_alerts() -> list[Rule]:
    job = c.JOB_SELECTOR
    return [
        _alert(
            "LoopwatchDown",
            f"up{{{job}}} == 0\nor absent(up{{{job}}})",
            c.DOWN_FOR,
            "critical",
            "A loopwatch replica is down or not scraped; tool-call loops go unseen.",
            'loopwatch target "{{ $labels.instance }}" of job {{ $labels.job }} has been down '
            f"or missing for {_spoken(c.DOWN_FOR)}.",
        ),
        _alert(
            "LoopwatchSpansDropped",
            "sum by (job, instance, reason) "
            f"(rate({m.SPANS_DROPPED.name}[{c.DROPPED_WINDOW}])) > 0",
            c.DROPPED_FOR,
            "warning",
            "A loopwatch replica drops spans; loops can be missed.",
            "loopwatch {{ $labels.instance }} drops {{ $value | humanize }} spans/s (reason "
            "{{ $labels.reason }}).",
        ),
        _alert(
            "LoopwatchTurnsEvicted",
            "sum by (job, instance, reason) "
            f'(rate({m.TURNS_EVICTED.name}{{reason!="shutdown"}}[{c.EVICTED_WINDOW}])) > 0',
            c.EVICTED_FOR,
            "warning",
            "A loopwatch replica finalizes turns before their root span ends.",
            "loopwatch {{ $labels.instance }} evicts {{ $value | humanize }} turns/s (reason "
            "{{ $labels.reason }}); their numbers may be split or incomplete.",
        ),
        _alert(
            "LoopwatchLabelOverflow",
            "sum by (job, instance, label) "
            f"(rate({m.LABEL_OVERFLOW.name}[{c.LABEL_OVERFLOW_WINDOW}])) > 0",
            c.LABEL_OVERFLOW_FOR,
            "warning",
            'A loopwatch label reached its bound; new values become "other".',
            "loopwatch {{ $labels.instance }} label {{ $labels.label }} reached its bound of "
            'distinct values; new values are reported as "other".',
        ),
        _alert(
            "LoopwatchArgumentsNotCaptured",
            "sum by (job, service, tool) "
            f"(rate({m.CALLS_WITHOUT_ARGUMENTS.name}[{c.NO_ARGUMENTS_WINDOW}])) > 0",
            c.NO_ARGUMENTS_FOR,
            "warning",
            "Tool calls arrive without arguments; their attempt keys are coarse.",
            "Calls of tool {{ $labels.tool }} in service {{ $labels.service }} carry no "
            "captured arguments ({{ $value | humanize }} calls/s), so loopwatch keys them by "
            "tool and error class only.",
        ),
    ]


def alert_groups() -> list[Group]:
    return [
        {"name": "loopwatch.alerts", "rules": loop_alerts()},
        {"name": "loopwatch.pipeline", "rules": pipeline_alerts()},
    ]
