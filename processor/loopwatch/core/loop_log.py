"""One INFO line per loop found: tool, hashed key, attempts, trace id. Never an argument,
result or identity value (the key's identity is a hash)."""

from __future__ import annotations

import logging

from loopwatch.core.outcomes import OK
from loopwatch.core.spans import trace_hex
from loopwatch.core.summary import NO_ROWS, TurnSummary

log = logging.getLogger("loopwatch")


def log_loops(s: TurnSummary) -> None:
    if not log.isEnabledFor(logging.INFO):
        return
    for t in s.tools:
        for key, attempts in t.looping_keys:
            log.info(
                "loopwatch: loop found: tool=%s key=%s attempts=%d service=%s agent=%s trace_id=%s",
                t.tool,
                key.short(),
                attempts,
                s.service,
                s.agent,
                trace_hex(s.trace_id),
            )
        if (OK, NO_ROWS) in t.loops:
            log.info(
                "loopwatch: loop found: tool=%s no_rows_streak=%d service=%s agent=%s trace_id=%s",
                t.tool,
                t.no_rows_streak or 0,
                s.service,
                s.agent,
                trace_hex(s.trace_id),
            )
