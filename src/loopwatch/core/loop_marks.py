"""What marks one loop inside its trace (the ``loopwatch.loop {tool}`` span and the
``loopwatch.loop`` log event), as plain data: the entry points build the span from it.

Hashes and span ids only: never an argument, result or identity value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from loopwatch.core.cost import DUPLICATE, REPEAT, LoopRun
from loopwatch.core.records import GUARD_RAN, ToolCall


# one per loop, built only for a turn that loops: plain slots class, as the summaries
@dataclass(slots=True)
class LoopMark:
    tool: str
    kind: str  # repeat, duplicate, no_rows, same_result, failing
    error_class: str  # "ok" for a loop of successes
    attempts: int  # calls in the loop
    key_hash: str  # the attempt key's identity hash; "" for a streak over several keys
    span_ids: tuple[int, ...]  # the loop's calls, in start order
    start_ns: int  # the first extra attempt's start
    end_ns: int  # the last call's end
    tokens: tuple[int, int, int, int]  # (model calls, input, output, unsplit): core.cost's rule
    guard_stopped: bool  # a guard answered a later call of the loop without running it


_NO_TOKENS: Final = (0, 0, 0, 0)


def loop_marks(
    runs: list[LoopRun],
    per_loop: dict[int, list[int]],
    guarded: list[ToolCall],
    limit: int,
) -> tuple[tuple[LoopMark, ...], int]:
    """The marks of a turn's loops (``runs``, indexed as ``per_loop``'s tokens), the first
    ``limit`` to start, and how many loops were left unmarked past it."""
    order = sorted(range(len(runs)), key=lambda i: (runs[i][0][1].start_ns, i))
    marks: list[LoopMark] = []
    for i in order[:limit]:
        calls, error_class, kind = runs[i]
        t = per_loop.get(i)
        tokens = _NO_TOKENS if t is None else (t[0], t[1], t[2], t[3])
        first = calls[0]
        one_key = kind in (REPEAT, DUPLICATE)
        marks.append(
            LoopMark(
                first.tool,
                kind,
                error_class,
                len(calls),
                first.key.identity if one_key else "",
                tuple(c.span_id for c in calls),
                calls[1 if len(calls) > 1 else 0].start_ns,
                max(c.end_ns for c in calls),
                tokens,
                _stopped(calls, guarded, one_key),
            )
        )
    return tuple(marks), max(0, len(runs) - limit)


def _stopped(calls: list[ToolCall], guarded: list[ToolCall], one_key: bool) -> bool:
    """Whether a guard answered a call of the loop's tool (its key's, for a loop of one key)
    that started after the loop's first call, without running it."""
    first = calls[0]
    k = first.key
    for g in guarded:
        if g.guard in GUARD_RAN or g.tool != first.tool or g.start_ns < first.start_ns:
            continue
        if not one_key or g.key.identity == k.identity:
            return True
    return False
