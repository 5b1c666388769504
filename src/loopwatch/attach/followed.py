"""The traces the in-process processor's on_start follows: those in which a span that may be a
turn span has started, until the worker takes their local root's end.

on_start queues every start in them, and in no other trace (the worker would only test such a
start, as on_start just did; a plain web span's start and end cost the worker as much as
BatchSpanProcessor's whole export). A trace id, not the spans': one lookup a start, none at the
end, on the agent's thread. A dict as an ordered set, oldest first. Once a second the worker
drops those the assembler no longer holds (roots that never end, or whose end was dropped, are
evicted there) and adds those it holds with a turn span started while every start was queued.
At its bound on_start queues every start, until the worker finds the set below its bound again.
(The assembler's open traces cannot serve: they are the worker's, and a trace is followed
before the worker has taken its start.)
"""

from __future__ import annotations

from loopwatch.core.assembler import TurnAssembler


class FollowedTraces:
    """The set of followed traces, bounded, and the switch that queues every start."""

    __slots__ = ("bound", "every", "traces")

    def __init__(self, bound: int) -> None:
        self.traces: dict[int, None] = {}
        self.bound = bound
        self.every = False  # every start is queued: the set was full

    def follow(self, trace_id: int) -> None:
        """on_start's: a trace that may hold a turn, followed from now on if the set has room."""
        traces = self.traces
        if len(traces) < self.bound:
            traces[trace_id] = None
        else:
            self.every = True

    def clear(self) -> None:
        self.traces.clear()
        self.every = False

    def refollow(self, followed: list[int], assembler: TurnAssembler) -> None:
        """Back to what on_start needs: of ``followed``, whose starts the worker has taken,
        those the assembler no longer holds leave; the turns it holds that are not followed
        (started while every start was queued) join; every start is queued only while that
        fills the set."""
        traces = self.traces
        for trace_id in followed:
            if not assembler.holds(trace_id):
                traces.pop(trace_id, None)
        bound = self.bound
        for trace_id in assembler.turn_traces():
            if len(traces) >= bound:
                break
            if trace_id not in traces:
                traces[trace_id] = None
        if self.every and len(traces) < bound:
            self.every = False
