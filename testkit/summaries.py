"""Turn summaries made by loopwatch's core, and eval runs' reports built from them: the turns of
the alert-history tests and of ``loopwatch compare``'s tests, and its false-alarm benchmark."""

from __future__ import annotations

import random

from loopwatch.core.config import Config
from loopwatch.core.keys import AttemptKey
from loopwatch.core.records import LlmMark, ToolCall, TurnMark
from loopwatch.core.summary import TurnSummary, summarize
from loopwatch.history.compare import DEFAULT_ALPHA, compare
from loopwatch.history.report import Report

SERVICE, AGENT = "shop", "support"
TICKET, SEARCH = "create_ticket", "search_orders"
TURNS = 200  # turns of an eval run
RETRY = 0.05  # turns that retry once (2 attempts: not a loop)

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


def simulated_report(rng: random.Random, p3: float, turns: int = TURNS) -> Report:
    """A run's report from turn summaries of loopwatch's core: ``p3`` of turns loop at 3
    attempts on create_ticket, 5% retry once."""
    report = Report()
    for _ in range(turns):
        r = rng.random()
        attempts = 3 if r < p3 else 2 if r < p3 + RETRY else 1
        report.add(turn_summary("m-1", "v-1", attempts))
    return report


def false_alarm_rate(p3: float, seeds: int, alpha: float = DEFAULT_ALPHA) -> float:
    alarms = 0
    for seed in range(seeds):
        rng = random.Random(seed)
        base, cand = simulated_report(rng, p3), simulated_report(rng, p3)
        alarms += bool(compare(base, cand, alpha).regressions)
    return alarms / seeds
