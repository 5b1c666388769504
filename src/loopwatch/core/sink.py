"""Where the core's results go. The metrics module implements this; tests can too."""

from __future__ import annotations

from typing import Protocol, cast

from loopwatch.core.summary import TurnSummary


class Sink(Protocol):
    """What the pipeline reports, called from its one worker thread (never concurrently).
    ``LoopwatchMetrics`` turns each call into Prometheus metrics; a replay's report counts the
    same calls. An implementation must not raise: the pipeline counts an error as a dropped
    span and goes on."""

    def turn(self, summary: TurnSummary) -> None:
        """A finished turn's numbers (observed once per turn)."""
        ...

    def span(self, kind: str, count: int = 1) -> None:
        """``count`` spans read, of ``kind`` (``tool``, ``agent``, ``llm`` or ``other``)."""
        ...

    def dropped(self, reason: str, count: int = 1) -> None:
        """``count`` spans not read, and why (``queue_full``, ``turn_full``, ``error``, ...)."""
        ...

    def evicted(self, reason: str) -> None:
        """A turn finalized before its root ended (``idle``, ``capacity``, ``bytes``)."""
        ...

    def late(self) -> None:
        """A span that arrived for a turn already finalized."""
        ...

    def malformed(self, reason: str, count: int = 1) -> None:
        """What a model call's messages held that could not be read as it is (records'
        MALFORMED_REASONS)."""
        ...

    def open_turns(self, count: int) -> None:
        """How many traces are waiting for their turn to end."""
        ...


class QueueHealth(Protocol):
    """What an entry point with a queue to its worker reports besides the Sink: a sink without
    these methods (a replay's, say) is not told."""

    def queued(self, count: int) -> None:
        """Items waiting for the worker when it last looked at its queue."""
        ...

    def all_starts(self, on: bool) -> None:
        """Whether the in-process processor queues every span start (its bound of followed
        traces reached)."""
        ...


def queue_health(sink: object) -> QueueHealth | None:
    """``sink`` where it has QueueHealth's methods (LoopwatchMetrics has), else None.
    (Tested by its methods: compiled, a Protocol does not take ``isinstance``.)"""
    if callable(getattr(sink, "queued", None)) and callable(getattr(sink, "all_starts", None)):
        return cast(QueueHealth, sink)
    return None


class AgentEvents(Protocol):
    """What the log-events entry point reports besides the Sink: the records read, by kind,
    and the agents' own loop detections (a sink without these methods is not told)."""

    def log_records(self, kind: str, count: int = 1) -> None: ...

    def agent_detection(self, service: str, source: str, kind: str) -> None: ...


def agent_events(sink: object) -> AgentEvents | None:
    """``sink`` where it has AgentEvents' methods (LoopwatchMetrics has), else None."""
    if callable(getattr(sink, "log_records", None)) and callable(
        getattr(sink, "agent_detection", None)
    ):
        return cast(AgentEvents, sink)
    return None


class QueueGauges:
    """The QueueHealth gauges of a sink that has them (none otherwise), each set when its value
    changes only: the worker that owns the queue calls these as often as it looks."""

    def __init__(self, sink: object) -> None:
        self.health = queue_health(sink)
        self.queued = 0
        self.all_starts = False

    def show_queued(self, count: int) -> None:
        if self.health is not None and count != self.queued:
            self.queued = count
            self.health.queued(count)

    def show_all_starts(self, on: bool) -> None:
        if self.health is not None and on != self.all_starts:
            self.all_starts = on
            self.health.all_starts(on)
