"""The turns completed and not yet summarized, and their publishing: each summarized, its loops
logged, then handed to the sink, the run's tally and the loop spans."""

from __future__ import annotations

import logging
from collections.abc import Callable

from loopwatch.core.config import Config
from loopwatch.core.conversations import Ready
from loopwatch.core.internal_errors import log_internal_error
from loopwatch.core.lone_calls import LONE_CALLS
from loopwatch.core.loop_log import log_loops
from loopwatch.core.reasons import DROP_ERROR
from loopwatch.core.run_tally import RunTally
from loopwatch.core.sink import Sink
from loopwatch.core.summary import TurnSummary, summarize
from loopwatch.core.tool_limits import LimitsByTool

log = logging.getLogger(__name__)


class TurnPublisher:
    """Turns wait in ``ready`` until ``publish``: summarizing a batch's turns together, after its
    spans, runs that code while it is warm in the CPU's caches (see loopwatch.attach.processor's
    _CHUNK)."""

    def __init__(self, config: Config, sink: Sink) -> None:
        self.config = config
        self.sink = sink
        self.ready: list[Ready] = []
        self.limits = LimitsByTool(config)  # each tool's declaration and thresholds
        self.tally = RunTally()  # every turn published: the line logged at shutdown

    def publish(self, loop_spans: Callable[[TurnSummary], None] | None) -> None:
        """Summarize the turns completed since the last call and hand them to the sink; a turn
        with loops also to ``loop_spans`` (None: nowhere)."""
        if not self.ready:
            return
        ready, self.ready = self.ready, []
        config, sink = self.config, self.sink
        summaries = []
        for trace_id, service, group in ready:
            try:
                LONE_CALLS.note(group.turn, group.calls, group.llms)
                summaries.append(
                    summarize(
                        trace_id=trace_id,
                        service=service,
                        turn=group.turn,
                        calls=group.calls,
                        llms=group.llms,
                        config=config,
                        start_ns=group.start_ns,
                        end_ns=group.end_ns,
                        root_agent=group.root_agent,
                        anchor=group.anchor,
                        limits=self.limits,
                    )
                )
            except Exception:  # one bad turn loses itself, not the batch
                log_internal_error(log, "summarizing a turn")
                sink.dropped(DROP_ERROR)
        # logged before they are counted: a reader of the counts (the service's activity line)
        # then never reports a loop before its line is out
        for summary in summaries:
            self._guarded(log_loops, summary)
        for summary in summaries:
            self._guarded(sink.turn, summary)
            self._guarded(self.tally.add, summary)
            if loop_spans is not None and (summary.loop_marks or summary.loops_unmarked):
                self._guarded(loop_spans, summary)  # (rare) after its numbers, as the log line

    def _guarded(self, step: Callable[[TurnSummary], None], summary: TurnSummary) -> None:
        """One turn's step of publish: a failure loses that step of that turn only."""
        try:
            step(summary)
        except Exception:
            log_internal_error(log, "publishing turns")
            self.sink.dropped(DROP_ERROR)
