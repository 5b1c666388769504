"""The main dashboard: "loopwatch / Tool-call loops"."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import heatmap, table, timeseries
from grafana_foundation_sdk.models import dashboard

from dashboards.health import health
from dashboards.lib import (
    Layout,
    Query,
    annotation,
    bucket_heatmap,
    data_table,
    single_stat,
    ts,
    variables,
)
from loopwatch.core.log_view import AGENT_SOURCES
from loopwatch.metrics.catalog import (
    AGENT_LOOP_DETECTIONS,
    ATTEMPT_BUCKETS,
    FAILING_STREAK,
    GUARD_DECISIONS_TOTAL,
    LOOP_TOKENS,
    LOOPS,
    MODEL_FIRST_SEEN,
    NO_ROWS_STREAK,
    OVER_CAP_SECONDS,
    REPEAT_CALLS,
    SAME_RESULT_STREAK,
    TOOL_CALLS,
    TOOL_MAX_ATTEMPTS,
    TOOL_VERSION_FIRST_SEEN,
    TURN_MAX_ATTEMPTS,
    TURNS,
)
from mixin.config import (
    DASHBOARD_TITLE,
    DASHBOARD_UID,
    FAILING_THRESHOLD,
    GUARD_FILTER,
    LE_LOOP,
    LE_NO_ROWS,
    LE_SEVERE,
    LOOP_THRESHOLD,
    NO_ROWS_THRESHOLD,
    SAME_RESULT_THRESHOLD,
    SEVERE_THRESHOLD,
    TAGS,
    TOOL_FILTER,
    TURN_FILTER,
)

F = TURN_FILTER
T = TOOL_FILTER
RATE = "$__rate_interval"
RANGE = "$__range"


def in_range(series: str) -> str:
    """How much a counter grew in the dashboard's range, new series included.

    A series is born with its first increment already counted, which increase() cannot see:
    the first loop of a new tool or model would read 0. Series younger than the range count
    with their whole value instead.
    """
    new = f"({series} unless {series} offset {RANGE})"
    return f"(increase({series}[{RANGE}]) unless {new} or {new})"


def _quantile(q: str, metric: str, by: str, selector: str, window: str, offset: str = "") -> str:
    inner = f"rate({metric}_bucket{{{selector}}}[{window}]{offset})"
    if window == RANGE:
        inner = in_range(f"{metric}_bucket{{{selector}}}")
    return f"histogram_quantile({q}, sum by ({by}) ({inner}))"


# title, description, unit, query, thresholds (from, colour), width
Stat = tuple[str, str, str, Query, tuple[tuple[float | None, str], ...], int]
TURN = TURN_MAX_ATTEMPTS.name


def _overview(layout: Layout) -> None:
    layout.row("Overview")
    for title, description, unit, query, thresholds, width in _turn_stats() + _call_stats():
        layout.add(single_stat(title, description, unit, query, thresholds), width, 4)


def _turn_stats() -> list[Stat]:
    """Traffic and how bad the turns were."""
    buckets = ", ".join(map(str, ATTEMPT_BUCKETS[:10]))
    reads = min(b for b in ATTEMPT_BUCKETS if b >= 14)
    return [
        (
            "Turns/s",
            "Finished agent turns per second (with or without tool calls), summed over every "
            "loopwatch replica. Read it as the traffic behind every ratio on this dashboard: a "
            "p99 over three turns means little.",
            "short",
            Query(f"sum(rate({TURNS.name}{{{F}}}[{RATE}]))"),
            ((None, "blue"),),
            3,
        ),
        (
            "p99 max attempts per turn",
            "99th percentile, over the selected time range, of the largest number of attempts "
            "any one attempt key (tool + identity + error class) got in a turn. A healthy agent "
            "reads 1 (shown as up to 1.0: Prometheus interpolates inside the lowest bucket); "
            "above 1 means at least one turn in a hundred repeated a call.",
            "short",
            Query(_quantile("0.99", TURN, "le", F, RANGE), instant=True),
            ((None, "green"), (1.01, "orange"), (SEVERE_THRESHOLD, "red")),
            3,
        ),
        (
            "Max attempts per turn",
            "The worst turn in the range, as the upper bound of its histogram bucket (buckets "
            f"{buckets}, ...: a turn with 14 attempts reads {reads}). "
            f"{SEVERE_THRESHOLD} or more is the severe-loop alert's threshold; open the "
            "exemplars on the row below to find the trace.",
            "short",
            Query(_quantile("1", TURN, "le", F, RANGE), instant=True),
            ((None, "green"), (LOOP_THRESHOLD, "orange"), (SEVERE_THRESHOLD, "red")),
            3,
        ),
        (
            "Turns with a loop",
            f"Share of turns in the range in which one attempt key reached {LOOP_THRESHOLD} "
            f"attempts (the loop threshold, i.e. a cap of {LOOP_THRESHOLD - 1} would have "
            "stopped it). Exact: it is read from the bucket counts, not interpolated.",
            "percentunit",
            Query(
                f"1 - sum({in_range(f'{TURN}_bucket{{{F}, {LE_LOOP}}}')}) "
                f"/ sum({in_range(f'{TURN}_count{{{F}}}')})",
                instant=True,
            ),
            ((None, "green"), (0.01, "orange"), (0.05, "red")),
            4,
        ),
    ]


def _call_stats() -> list[Stat]:
    """What the loops cost: empty results, duplicate calls, time past the cap."""
    return [
        (
            "No-rows streak p99",
            "99th percentile of the longest run of consecutive empty results per tool and turn: "
            "the loops that never raise an error. 0 or 1 is healthy; 3 or more is a no-rows loop "
            "(a search reworded until the agent gives up).",
            "short",
            Query(
                _quantile("0.99", NO_ROWS_STREAK.name, "le", T, RANGE),
                instant=True,
            ),
            ((None, "green"), (3, "orange")),
            3,
        ),
        (
            "Duplicate calls",
            "Tool calls in the range that repeated an earlier call's attempt key in the same "
            "turn: the side effects a key-based dedupe or loop breaker would have absorbed "
            "(the fourteen-tickets incident counts 13).",
            "short",
            Query(f"sum({in_range(f'{REPEAT_CALLS.name}{{{T}}}')})", instant=True),
            ((None, "green"), (1, "orange")),
            4,
        ),
        (
            "Seconds past the cap",
            "Wall time spent in calls beyond the loop threshold in the range: what a loop "
            "breaker at the default cap would have given back to users (330 s for the "
            "fourteen-tickets incident).",
            "s",
            Query(f"sum({in_range(f'{OVER_CAP_SECONDS.name}{{{T}}}')})", instant=True),
            ((None, "green"), (60, "orange")),
            4,
        ),
    ]


def _attempts(layout: Layout) -> None:
    layout.row("Loops: max attempts per turn")
    for panel in (_attempt_percentiles(), _attempt_heatmap(), _loop_shares(), _guards()):
        layout.add(panel, 12, 8)


def _attempt_percentiles() -> timeseries.Panel:
    return ts(
        "Max attempts per turn by model (p50 / p90 / p99)",
        "Percentiles of the per-turn maximum attempt count, by the model that issued the "
        "worst key's calls. Healthy: every line at or just under 1. A p99 line lifting off 1 "
        "after a deploy is the regression to look at; the dots are exemplars, click one to "
        "open the turn's trace in Jaeger.",
        "short",
        [
            Query(_quantile(q, TURN, "model, le", F, RATE), legend=f"p{q[2:]} {{{{model}}}}")
            for q in ("0.50", "0.90")
        ]
        + [
            Query(
                _quantile("0.99", TURN, "model, le", F, RATE),
                legend="p99 {{model}}",
                exemplar=True,
            )
        ],
    )


def _attempt_heatmap() -> heatmap.Panel:
    return bucket_heatmap(
        "Distribution of max attempts per turn",
        "Turns per bucket of max attempts over time (darker = more turns). Nearly all turns "
        "belong in the bottom bucket (1); any colour at 3 and above is a loop, and a band "
        "that appears at 16 is a runaway like the fourteen-tickets incident.",
        Query(
            f"sum by (le) (increase({TURN}_bucket{{{F}}}[{RATE}]))",
            legend="{{le}}",
            heatmap=True,
        ),
    )


def _loop_shares() -> timeseries.Panel:
    return ts(
        f"Share of turns at ≥{LOOP_THRESHOLD} and ≥{SEVERE_THRESHOLD} attempts",
        f"Fraction of turns whose worst attempt key reached {LOOP_THRESHOLD} (a loop at the "
        f"loop threshold) and {SEVERE_THRESHOLD} (the severe-loop alert), by model. Exact "
        "bucket ratios. Compare models against each other, and a model against itself before "
        "and after a change.",
        "percentunit",
        [
            Query(
                f"1 - sum by (model) (rate({TURN}_bucket{{{F}, {le}}}[{RATE}])) "
                f"/ sum by (model) (rate({TURN}_count{{{F}}}[{RATE}]))",
                legend=f"{label} {{{{model}}}}",
            )
            for le, label in (
                (LE_LOOP, f"≥{LOOP_THRESHOLD}"),
                (LE_SEVERE, f"≥{SEVERE_THRESHOLD}"),
            )
        ],
    )


def _guards() -> timeseries.Panel:
    return ts(
        "Guards stopping loops",
        "Tool calls a loopwatch guard answered without executing, by tool and decision: "
        "stopped (loop threshold reached), no_rows_stopped (no-rows streak), "
        "budget_exhausted, suppressed (duplicate side effect), circuit_open and "
        "store_unavailable (the arbiter's shared store unreachable, on_store_error=deny); "
        "store_unchecked counts calls that ran unchecked (store unreachable, "
        "on_store_error=allow). A guard "
        "firing is a loop caught, not a loop gone: read it next to the share above. Not "
        "split by model (guards record service, agent and tool).",
        "short",
        [
            Query(
                f"sum by (tool, decision) (rate({GUARD_DECISIONS_TOTAL.name}"
                f"{{{GUARD_FILTER}}}[{RATE}]))",
                legend="{{tool}} {{decision}}",
            )
        ],
    )


def _by_tool(layout: Layout) -> None:
    layout.row("By tool")
    for panel in (_looping_tools(), _tool_percentiles(), _calls_by_class(), _duplicates()):
        layout.add(panel, 12, 8)
    layout.add(_duplicate_side_effects(), 12, 8)
    layout.add(_loop_tokens(), 12, 8)


DUPLICATES = f'{LOOPS.name}{{{T},kind="duplicate"}}'


def _duplicate_side_effects() -> table.Panel:
    return data_table(
        "Duplicate side effects by tool",
        "Turns in the selected range in which a write (a tool that creates, sends, books, "
        'pays, refunds, deletes...: declared effect = "write", an MCP tool not marked '
        "read-only, or the first verb of its name) succeeded again on an identity that had "
        "already succeeded in the same turn: the side effect happened twice (two tickets, two "
        "refunds, two messages). A write's answer is never read as progress, so a fresh ticket "
        "id does not hide it. Healthy is an empty table; every row is money or trust lost.",
        "short",
        [
            Query(
                f"sort_desc(sum by (tool, agent) ({in_range(DUPLICATES)}) > 0)",
                instant=True,
                table=True,
            )
        ],
    )


def _loop_tokens() -> table.Panel:
    return data_table(
        "Tokens of loops by tool, error class and kind",
        "Tokens in the selected range of the model calls that asked for a loop's extra "
        "attempts: the calls past the first of a looping key's run or of a looping streak. "
        "Each such model call counts once per turn: the one that started last before the "
        "attempt (the call whose answer asked for it), with the tokens its span reports "
        "(gen_ai.usage.*, llm.token_count.*, llm.usage.total_tokens). token_type input and "
        "output; unsplit: a model call that reported only a total. The first attempt of a "
        "loop, and a turn without a loop, count nothing. Multiply by the model's price to "
        "read what loops cost.",
        "short",
        [
            Query(
                "sort_desc(sum by (tool, error_class, kind, token_type) "
                f"({in_range(f'{LOOP_TOKENS.name}{{{T}}}')}) > 0)",
                instant=True,
                table=True,
            )
        ],
    )


def _looping_tools() -> table.Panel:
    return data_table(
        "Which tools loop, with which error class",
        "Turns in the selected range in which this tool looped, by error class and kind. "
        "kind=repeat: one attempt key tried again and again without progress (a timeout "
        "retried with reworded arguments, a poll whose answer never changes); duplicate: a "
        "write that succeeded again on one identity (its side effect twice); no_rows: "
        "consecutive empty results; same_result: consecutive reworded calls that got the same "
        "data back; failing: consecutive failures of one error class whatever the arguments "
        "(a tool the agent does not have, a backend that is down). The top row is where to "
        "start.",
        "short",
        [
            Query(
                "sort_desc(sum by (tool, error_class, kind) "
                f"({in_range(f'{LOOPS.name}{{{T}}}')}) > 0)",
                instant=True,
                table=True,
            )
        ],
    )


def _tool_percentiles() -> timeseries.Panel:
    return ts(
        "p99 max attempts per tool and tool version",
        "Per tool and tool version (a short hash of the tool's description; empty when "
        "unknown): 99th percentile of the max attempts that tool's keys got in a turn. A new "
        "version line that sits above the old one is a description change that made the "
        "model retry.",
        "short",
        [
            Query(
                _quantile("0.99", TOOL_MAX_ATTEMPTS.name, "tool, tool_version, le", T, RATE),
                legend="{{tool}} {{tool_version}}",
                exemplar=True,
            )
        ],
    )


def _calls_by_class() -> timeseries.Panel:
    return ts(
        "Tool calls by error class",
        "Tool calls per second by tool and error class (ok = success). A loop usually starts "
        "with a rise in one error class (timeout, rate_limited, unavailable); compare its "
        "shape with the duplicates next to it.",
        "short",
        [
            Query(
                f"sum by (tool, error_class) (rate({TOOL_CALLS.name}{{{T}}}[{RATE}]))",
                legend="{{tool}} {{error_class}}",
            )
        ],
    )


def _duplicates() -> timeseries.Panel:
    return ts(
        "Duplicate calls by tool and error class",
        "Calls per second that repeated an attempt key already seen in their turn. Healthy "
        "is zero; duplicates with error class timeout on a tool with side effects are "
        "duplicate writes (the server may have committed every one).",
        "short",
        [
            Query(
                f"sum by (tool, error_class) (rate({REPEAT_CALLS.name}{{{T}}}[{RATE}]))",
                legend="{{tool}} {{error_class}}",
            )
        ],
    )


def _streak(
    layout: Layout,
    metric: str,
    name: str,
    threshold: int,
    loop: tuple[str, str],
    texts: tuple[str, str],
) -> None:
    """A streak's p99 per tool, and the turns per minute in which it made a loop: ``loop`` is
    the bucket matcher below the threshold, or ``kind=...`` for a streak whose loops count only
    over more than one key (read from the loops counter)."""
    about, advice = texts
    le, kind = loop
    layout.add(
        ts(
            f"{name} streak p99 per tool",
            f"Per tool, 99th percentile of {about}.",
            "short",
            [
                Query(
                    _quantile("0.99", metric, "tool, le", T, RATE),
                    legend="{{tool}}",
                    exemplar=True,
                )
            ],
        ),
        12,
        8,
    )
    if kind:
        title = f"Turns with a {name.lower()} loop (per minute)"
        query = f'60 * sum by (tool) (rate({LOOPS.name}{{{T}, kind="{kind}"}}[{RATE}]))'
    else:
        title = f"Turns with a {name.lower()} streak ≥ {threshold} (per minute)"
        query = (
            f"60 * (sum by (tool) (rate({metric}_count{{{T}}}[{RATE}])) "
            f"- sum by (tool) (rate({metric}_bucket{{{T}, {le}}}[{RATE}])))"
        )
    layout.add(
        ts(title, advice, "short", [Query(query, legend="{{tool}}")]),
        12,
        8,
    )


def _streaks(layout: Layout) -> None:
    layout.row("Loops that never error")
    _streak(
        layout,
        NO_ROWS_STREAK.name,
        "No-rows",
        NO_ROWS_THRESHOLD,
        (LE_NO_ROWS, ""),
        (
            "the longest run of consecutive empty results in a turn. Every call succeeded, so "
            "error dashboards stay green: this is the only place these loops show. "
            f"{NO_ROWS_THRESHOLD} or more is a no-rows loop (the eleven-empty-searches incident "
            "reads 11, shown as its bucket's bound 12)",
            f"Turns per minute in which a tool returned no rows {NO_ROWS_THRESHOLD} or more "
            "times in a row. Any sustained value means agents are rewording a search that "
            "cannot succeed: check the tool's data source and whether the tool description "
            "tells the model what an empty result means.",
        ),
    )
    _streak(
        layout,
        SAME_RESULT_STREAK.name,
        "Same-result",
        SAME_RESULT_THRESHOLD,
        ("", "same_result"),
        (
            "the longest run of consecutive calls in a turn that got the same data back "
            "(rows, a record, several lines of text; acknowledgements such as `sent` do not "
            "count), whatever the wording of their arguments. A run over reworded calls that "
            f"reaches {SAME_RESULT_THRESHOLD} is a same-result loop (a search reworded that "
            "keeps finding the same documents); one call repeated as it was is a repeat loop "
            "instead",
            f"Turns per minute with a same-result loop ({LOOPS.name}, "
            "kind=same_result). The agent is not learning from the answer: check whether the "
            "answer says what the model is looking for, or that it is all there is.",
        ),
    )
    layout.row("Tools that keep failing")
    _streak(
        layout,
        FAILING_STREAK.name,
        "Failing",
        FAILING_THRESHOLD,
        ("", "failing"),
        (
            "the longest run of consecutive failures with one error class in a turn, whatever "
            "the arguments. A run over different calls that reaches "
            f"{FAILING_THRESHOLD} is a failing loop (a tool the agent does not have, a backend "
            "that is down); one call failing again as it was is a repeat loop instead (the "
            "fourteen-tickets incident reads 14 here and loops as a repeat)",
            f"Turns per minute with a failing loop ({LOOPS.name}, kind=failing). Read "
            "the error class on the 'Which tools loop' table: not_found for a tool the model "
            "invents (check the tool list it is given), unavailable or timeout for a backend "
            "that is down.",
        ),
    )


def _changes(layout: Layout) -> None:
    layout.row("Changes")
    layout.add(
        ts(
            "p99 max attempts by model: now vs a week earlier",
            "Solid: p99 max attempts per turn by model now; '(a week earlier)': the same query "
            "shifted by one week. A model that sits above its own line of last week regressed "
            "(model upgrade, prompt or tool-description change). A model without a week-earlier "
            "line is new: see the first-seen tables and annotations.",
            "short",
            [
                Query(_quantile("0.99", TURN, "model, le", F, RATE), legend="{{model}} now"),
                Query(
                    _quantile("0.99", TURN, "model, le", F, RATE, offset=" offset 1w"),
                    legend="{{model}} (a week earlier)",
                ),
            ],
        ),
        12,
        8,
    )
    layout.add(
        data_table(
            "Models first seen",
            "When a loopwatch replica first saw a turn of each model (earliest over replicas; a "
            "replica restart resets its clock, so compare with Prometheus history). A model "
            "first seen shortly before a rise in the panels above is the first suspect.",
            "dateTimeAsIso",
            [
                Query(
                    f"min by (service, agent, model) ({MODEL_FIRST_SEEN.name}{{{F}}}) * 1000",
                    instant=True,
                    table=True,
                )
            ],
        ),
        6,
        8,
    )
    layout.add(
        data_table(
            "Tool versions first seen",
            "When each tool version (hash of its description) was first seen. A new version of "
            "a tool that loops on the 'By tool' row points at the description change.",
            "dateTimeAsIso",
            [
                Query(
                    f"min by (service, tool, tool_version) ({TOOL_VERSION_FIRST_SEEN.name}"
                    '{service=~"$service", tool=~"$tool"}) * 1000',
                    instant=True,
                    table=True,
                )
            ],
        ),
        6,
        8,
    )


# the coding agents' own agent labels (their events name them so)
CODING_AGENTS = "|".join(AGENT_SOURCES)
CODING = f'{F}, agent=~"{CODING_AGENTS}"'
SERVICE = 'service=~"$service"'


def _coding_agents(layout: Layout) -> None:
    layout.row("Coding agents")
    layout.add(
        ts(
            "Coding agents' loops: loopwatch's and their own guards'",
            "Turns with a loop per second by coding agent as loopwatch counts them (Claude "
            "Code, gemini-cli, Codex: their OTLP log events or spans sent to loopwatch serve), "
            "beside the loops each agent reported itself by type (gemini-cli's loop_detected). "
            "A second opinion: an agent guard that fires where loopwatch sees no loop is "
            "eager; loops with no detection beside them are what the agent's guard missed.",
            "short",
            [
                Query(
                    f"sum by (agent) (rate({LOOPS.name}{{{CODING}}}[{RATE}]))",
                    legend="{{agent}} loopwatch",
                ),
                Query(
                    f"sum by (source, type) (rate({AGENT_LOOP_DETECTIONS.name}{{{SERVICE}}}"
                    f"[{RATE}]))",
                    legend="{{source}} own: {{type}}",
                ),
            ],
        ),
        12,
        8,
    )
    layout.add(
        data_table(
            "Coding agents in range: turns, loops, own detections",
            "Per service (claude-code, gemini-cli, codex_exec): turns finished, turns with a "
            "loop as loopwatch counts them, and loops the agent reported itself, in the "
            "selected range. See docs/coding-agents.md for each agent's settings.",
            "short",
            [
                Query(
                    f"sum by (service) ({in_range(f'{TURNS.name}{{{CODING}}}')})",
                    legend="turns",
                    instant=True,
                    table=True,
                ),
                Query(
                    f"sum by (service) ({in_range(f'{LOOPS.name}{{{CODING}}}')})",
                    legend="loops (loopwatch)",
                    instant=True,
                    table=True,
                ),
                Query(
                    f"sum by (service) ({in_range(f'{AGENT_LOOP_DETECTIONS.name}{{{SERVICE}}}')})",
                    legend="loops (agent's own)",
                    instant=True,
                    table=True,
                ),
            ],
        ),
        12,
        8,
    )


def dashboard_builder() -> dash_b.Dashboard:
    board = (
        dash_b.Dashboard(DASHBOARD_TITLE)
        .uid(DASHBOARD_UID)
        .description(
            "Tool-call loops of LLM agents, from loopwatch's per-turn metrics: how many times "
            "one attempt key was tried per turn, which tools loop and why, and whether "
            "loopwatch itself sees every span."
        )
        .tags(TAGS)
        .timezone("utc")
        .time("now-3h", "now")
        .refresh("30s")
        .readonly()
        .tooltip(dashboard.DashboardCursorSync.CROSSHAIR)
        .variables(variables())
        .annotation(
            annotation(
                "Model first seen",
                "purple",
                f"min by (service, agent, model) ({MODEL_FIRST_SEEN.name}{{{F}}}) > time() - 3600",
            )
        )
        .annotation(
            annotation(
                "Tool version first seen",
                "orange",
                f"min by (service, tool, tool_version) ({TOOL_VERSION_FIRST_SEEN.name}"
                '{service=~"$service", tool=~"$tool"}) > time() - 3600',
            )
        )
    )
    layout = Layout(board)
    _overview(layout)
    _attempts(layout)
    _by_tool(layout)
    _streaks(layout)
    _changes(layout)
    _coding_agents(layout)
    health(layout)
    return board
