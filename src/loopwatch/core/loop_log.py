"""One INFO line per loop found: tool, hashed key, attempts, trace id. Never an argument,
result or identity value (the key's identity is a hash)."""

from __future__ import annotations

import logging

from loopwatch.core.outcomes import OK
from loopwatch.core.span_view import trace_hex
from loopwatch.core.summary import DUPLICATE, FAILING, NO_ROWS, SAME_RESULT, TurnSummary

log = logging.getLogger(__name__)


def log_loops(s: TurnSummary) -> None:
    if not log.isEnabledFor(logging.INFO):
        return
    for t in s.tools:
        duplicate = (OK, DUPLICATE) in t.loops
        for key, attempts in t.looping_keys:
            log.info(
                "loop found: tool=%s key=%s attempts=%d%s service=%s agent=%s trace_id=%s",
                t.tool,
                key.short(),
                attempts,
                " kind=duplicate" if duplicate and key.outcome == OK else "",
                s.service,
                s.agent,
                trace_hex(s.trace_id),
            )
        for error_class, kind in t.loops:
            if kind == NO_ROWS:
                streak = t.no_rows_streak or 0
            elif kind == SAME_RESULT:
                streak = t.same_result_streak or 0
            elif kind == FAILING:
                streak = t.failing_streak
            else:
                continue  # a repeat: its keys are logged above
            log.info(
                "loop found: tool=%s %s_streak=%d%s service=%s agent=%s trace_id=%s",
                t.tool,
                kind,
                streak,
                f" error_class={error_class}" if kind == FAILING else "",
                s.service,
                s.agent,
                trace_hex(s.trace_id),
            )
