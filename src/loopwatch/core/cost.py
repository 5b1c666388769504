"""What a turn's loops cost: the tokens of the model calls that asked for their extra attempts.

The rule, in one place (docs/metrics.md, docs/history.md and loopwatch_loop_tokens_total's help say
the same):

- An extra attempt is a call of a loop past its first: for a repeat loop, each call past the
  first of a run of one key's attempts that reached the loop threshold; for a duplicate, each
  success of a write past the first on its key; for a no-rows,
  same-result or failing loop, each call past the first of the streak that reached its
  threshold (the calls that made it a loop: a same-result or failing streak over more than one
  key).
- The model call charged for an extra attempt is the one that asked for it: the turn's model
  call (LLM span) that started last at or before the attempt started. A model call is charged
  once per turn, whatever number of extra attempts it asked for, under the tool, error class
  and kind of the first of them (in start order; among the kinds of one call, repeat,
  duplicate, no_rows, same_result, failing).
- Its tokens are those its span reports (conventions.usage): input, output, or a total
  reported alone. A model call that reports none is charged 0.

So a turn without a loop costs nothing, and neither does the first attempt of a loop: that
call was the agent's to make.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Hashable
from typing import Final

from loopwatch.core.config import Config
from loopwatch.core.declarations import ROWS, ToolDeclaration
from loopwatch.core.effects import READ, WRITE
from loopwatch.core.outcomes import EMPTY, OK
from loopwatch.core.records import LlmMark, ToolCall

REPEAT: Final = "repeat"
DUPLICATE: Final = "duplicate"
NO_ROWS: Final = "no_rows"
SAME_RESULT: Final = "same_result"
FAILING: Final = "failing"
_KIND_ORDER: Final = {REPEAT: 0, DUPLICATE: 1, NO_ROWS: 2, SAME_RESULT: 3, FAILING: 4}

# (the call, its loop's error class, its loop's kind, its loop's index in the turn)
Extra = tuple[ToolCall, str, str, int]
# (error class, kind, model calls, input tokens, output tokens, tokens reported as a total only)
LoopTokens = tuple[str, str, int, int, int, int]
# one loop's calls (its first attempt, then its extra attempts, in start order), error class, kind
LoopRun = tuple[list[ToolCall], str, str]


def extras_of(runs: list[LoopRun], first_index: int = 0) -> list[Extra]:
    """The extra attempts of ``runs`` (each call past a loop's first), each with its loop's index
    (counted from ``first_index``)."""
    return [
        (c, error_class, kind, first_index + i)
        for i, (calls, error_class, kind) in enumerate(runs)
        for c in calls[1:]
    ]


def loop_runs(
    tool_calls: list[ToolCall],
    key_lists: list[list[ToolCall]],
    runs_of: dict[tuple[str, str, str], list[int]],
    loops: tuple[tuple[str, str], ...],
    config: Config,
    declaration: ToolDeclaration | None,
) -> list[LoopRun]:
    """The calls of one tool's loops in a turn, one run per loop (its calls and its keys' calls
    in start order; ``runs_of`` as core.summary builds it; ``loops`` the (error class, kind)
    found)."""
    kinds = {kind for _, kind in loops}
    runs: list[LoopRun] = []
    if REPEAT in kinds or DUPLICATE in kinds:
        threshold = config.loop_threshold_for(declaration)
        for key_calls in key_lists:
            if len(key_calls) < 2:
                continue
            k = key_calls[0].key
            error_class = key_calls[0].error_class
            duplicate = error_class == OK and key_calls[0].effect == WRITE
            kind = DUPLICATE if duplicate else REPEAT
            if kind not in kinds:
                continue
            start = 0
            for n in runs_of[(k.tool, k.identity, k.outcome)]:
                if n >= (2 if duplicate else threshold):
                    runs.append((key_calls[start : start + n], error_class, kind))
                start += n
    if NO_ROWS in kinds:
        rows = declaration is not None and declaration.result == ROWS
        threshold = config.no_rows_threshold_for(declaration)
        runs.extend(
            _streaks(tool_calls, _empty_rows if rows else _empty, threshold, False, NO_ROWS)
        )
    if SAME_RESULT in kinds:
        threshold = config.same_result_threshold_for(declaration)
        runs.extend(_streaks(tool_calls, _same_data, threshold, True, SAME_RESULT))
    if FAILING in kinds:
        threshold = config.failing_threshold_for(declaration)
        runs.extend(_streaks(tool_calls, _failure, threshold, True, FAILING))
    return runs


def _empty(c: ToolCall) -> Hashable:
    return True if c.result == EMPTY and c.effect == READ else None


def _empty_rows(c: ToolCall) -> Hashable:
    """For a tool declared ``result = "rows"``: an empty answer is no rows, write or read."""
    return True if c.result == EMPTY else None


def _same_data(c: ToolCall) -> Hashable:
    return c.same_result or None


def _failure(c: ToolCall) -> Hashable:
    return c.error_class if c.error_class != OK else None


def _streaks(
    calls: list[ToolCall],
    group: Callable[[ToolCall], Hashable],
    threshold: int,
    over_keys: bool,
    kind: str,
) -> list[LoopRun]:
    """Each run of consecutive calls in one group (None: no group, a break) that reached
    ``threshold`` (and, ``over_keys``, held more than one key)."""
    out: list[LoopRun] = []
    start, current = 0, None
    for i in range(len(calls) + 1):
        value = group(calls[i]) if i < len(calls) else None
        if value is not None and value == current:
            continue
        if current is not None and i - start >= max(threshold, 1):
            run = calls[start:i]
            if not over_keys or len({c.key.identity for c in run}) > 1:
                out.append((run, run[0].error_class, kind))
        start, current = i, value
    return out


Charged = tuple[dict[str, list[LoopTokens]], dict[int, list[int]]]


def charge(extras: list[Extra], llms: list[LlmMark]) -> Charged:
    """tool -> what its loops cost in the turn (see the module's docstring for the rule), and
    loop index -> [model calls, input, output, unsplit] charged to that loop."""
    if not extras or not llms:
        return {}, {}
    marks = sorted(llms, key=lambda m: (m.start_ns, m.span_id))
    starts = [m.start_ns for m in marks]
    ordered = sorted(extras, key=lambda e: (e[0].start_ns, e[0].span_id, _KIND_ORDER[e[2]]))
    charged: set[int] = set()
    # tool -> (error class, kind) -> [model calls, input, output, unsplit]
    totals: dict[str, dict[tuple[str, str], list[int]]] = {}
    per_loop: dict[int, list[int]] = {}
    for call, error_class, kind, index in ordered:
        at = bisect_right(starts, call.start_ns)
        if not at:
            continue  # no model call started before it
        mark = marks[at - 1]
        if mark.span_id in charged:
            continue
        charged.add(mark.span_id)
        cell = totals.setdefault(call.tool, {}).setdefault((error_class, kind), [0, 0, 0, 0])
        cell[0] += 1
        cell[1] += mark.input_tokens
        cell[2] += mark.output_tokens
        cell[3] += mark.unsplit_tokens
        loop = per_loop.setdefault(index, [0, 0, 0, 0])
        loop[0] += 1
        loop[1] += mark.input_tokens
        loop[2] += mark.output_tokens
        loop[3] += mark.unsplit_tokens
    by_tool = {
        tool: [(e, k, n[0], n[1], n[2], n[3]) for (e, k), n in sorted(cells.items())]
        for tool, cells in totals.items()
    }
    return by_tool, per_loop
