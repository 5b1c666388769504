"""One finished turn's numbers: attempts per key (runs that progress resets; a write's success
never progresses, and its second success is a duplicate), no-rows, same-result and failing
streaks, loops, time past the cap."""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Final

from loopwatch.core.config import Config
from loopwatch.core.cost import (
    DUPLICATE,
    FAILING,
    NO_ROWS,
    REPEAT,
    SAME_RESULT,
    LoopRun,
    LoopTokens,
    charge,
    extras_of,
    loop_runs,
)
from loopwatch.core.declarations import ROWS
from loopwatch.core.effects import READ, WRITE
from loopwatch.core.fingerprint import NOT_KNOWN
from loopwatch.core.keys import AttemptKey
from loopwatch.core.loop_marks import LoopMark, loop_marks
from loopwatch.core.outcomes import EMPTY, OK
from loopwatch.core.records import GUARD_RAN, LlmMark, ToolCall, TurnMark
from loopwatch.core.tool_limits import LimitsByTool, ToolLimits

UNKNOWN: Final = "unknown"


# Summaries are built once per turn and never changed: plain slots classes build several times
# faster than frozen ones (a frozen __init__ sets each field through object.__setattr__).
@dataclass(init=False, slots=True)
class ToolSummary:
    tool: str
    tool_version: str
    max_attempts: int
    # None when no call of the tool had a readable result
    no_rows_streak: int | None
    calls: tuple[tuple[str, int], ...]  # (error_class, calls)
    repeats: tuple[tuple[str, int], ...]  # (error_class, calls past the first of their key)
    loops: tuple[tuple[str, str], ...]  # (error_class, kind)
    over_cap_seconds: float
    calls_without_arguments: int
    guard_decisions: tuple[tuple[str, int], ...] = ()
    # failed calls of a tool with no identity declaration: keyed on arguments minus free text
    calls_keyed_by_inference: int = 0
    looping_keys: tuple[tuple[AttemptKey, int], ...] = ()  # (key, attempts) at the threshold
    # longest run of consecutive calls that got the same data (None: no result readable)
    same_result_streak: int | None = None
    failing_streak: int = 0  # longest run of consecutive failures with one error class
    # what its loops cost (core.cost): (error class, kind, model calls, input, output, unsplit)
    loop_tokens: tuple[LoopTokens, ...] = ()

    # written out: compiled, a generated __init__ is interpreted, its keywords passed in a dict
    # (about 3% of the service's instructions a span on the rate stream)
    def __init__(
        self,
        tool: str,
        tool_version: str,
        max_attempts: int,
        no_rows_streak: int | None,
        calls: tuple[tuple[str, int], ...],
        repeats: tuple[tuple[str, int], ...],
        loops: tuple[tuple[str, str], ...],
        over_cap_seconds: float,
        calls_without_arguments: int,
        guard_decisions: tuple[tuple[str, int], ...] = (),
        calls_keyed_by_inference: int = 0,
        looping_keys: tuple[tuple[AttemptKey, int], ...] = (),
        same_result_streak: int | None = None,
        failing_streak: int = 0,
        loop_tokens: tuple[LoopTokens, ...] = (),
    ) -> None:
        self.tool = tool
        self.tool_version = tool_version
        self.max_attempts = max_attempts
        self.no_rows_streak = no_rows_streak
        self.calls = calls
        self.repeats = repeats
        self.loops = loops
        self.over_cap_seconds = over_cap_seconds
        self.calls_without_arguments = calls_without_arguments
        self.guard_decisions = guard_decisions
        self.calls_keyed_by_inference = calls_keyed_by_inference
        self.looping_keys = looping_keys
        self.same_result_streak = same_result_streak
        self.failing_streak = failing_streak
        self.loop_tokens = loop_tokens


@dataclass(init=False, slots=True)
class TurnSummary:
    trace_id: int
    service: str
    agent: str
    model: str
    start_ns: int
    end_ns: int
    max_attempts: int  # 0: the turn made no tool call
    worst_key: AttemptKey | None
    tools: tuple[ToolSummary, ...]
    # span id of the turn's agent span, or of the local root holding the turn (0: not known)
    anchor: int = 0
    # one per loop, for the loop spans (config.loop_spans_per_turn at most; none when 0)
    loop_marks: tuple[LoopMark, ...] = ()
    loops_unmarked: int = 0  # loops past that bound

    # written out, as ToolSummary's
    def __init__(
        self,
        trace_id: int,
        service: str,
        agent: str,
        model: str,
        start_ns: int,
        end_ns: int,
        max_attempts: int,
        worst_key: AttemptKey | None,
        tools: tuple[ToolSummary, ...],
        anchor: int = 0,
        loop_marks: tuple[LoopMark, ...] = (),
        loops_unmarked: int = 0,
    ) -> None:
        self.trace_id = trace_id
        self.service = service
        self.agent = agent
        self.model = model
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.max_attempts = max_attempts
        self.worst_key = worst_key
        self.tools = tools
        self.anchor = anchor
        self.loop_marks = loop_marks
        self.loops_unmarked = loops_unmarked


_STARTED: Final = attrgetter("start_ns", "span_id")  # calls in the order they started
_START: Final = attrgetter("start_ns")
_TOOL: Final = attrgetter("tool")


def _pairs(counts: dict[str, int]) -> tuple[tuple[str, int], ...]:
    """``counts`` as sorted pairs (most turns: no pair, or one)."""
    return tuple(sorted(counts.items())) if len(counts) > 1 else tuple(counts.items())


def _model(worst: list[ToolCall], llms: list[LlmMark], turn: TurnMark | None) -> str:
    """The model of the last LLM span to start before the worst key's first call; else the most
    common model (the first to start among equals); else the turn span's."""
    if worst:
        first = worst[0].start_ns
        latest: LlmMark | None = None
        for m in llms:
            before = m.model and m.start_ns <= first
            if before and (latest is None or _STARTED(m) > _STARTED(latest)):
                latest = m
        if latest is not None:
            return latest.model or UNKNOWN
    counts: dict[str, int] = {}
    for m in _by_start(llms):
        if m.model:
            counts[m.model] = counts.get(m.model, 0) + 1
    if counts:
        return max(counts, key=counts.__getitem__)
    if turn is not None and turn.model:
        return turn.model
    return UNKNOWN


def _definition_versions(llms: list[LlmMark]) -> dict[str, str]:
    """Tool name -> version from the tool definitions sent to the models, the latest winning."""
    versions: dict[str, str] = {}
    for m in _by_start(llms):
        versions.update(m.tool_versions)
    return versions


def _by_start(llms: list[LlmMark]) -> list[LlmMark]:
    """``llms`` in start order, as a stable sort gives them: most turns' are in it already,
    and a look costs less than the sort."""
    for i in range(1, len(llms)):
        if llms[i].start_ns < llms[i - 1].start_ns:
            return sorted(llms, key=_START)
    return llms


def summarize(
    trace_id: int,
    service: str,
    turn: TurnMark | None,
    calls: list[ToolCall],
    llms: list[LlmMark],
    config: Config,
    start_ns: int = 0,
    end_ns: int = 0,
    root_agent: str | None = None,
    anchor: int = 0,
    limits: LimitsByTool | None = None,
) -> TurnSummary:
    """Numbers for one turn from its tool calls and LLM spans (any order). The agent is the
    turn span's, else the tool spans', else ``root_agent`` (the trace root's); ``anchor`` the
    span id the turn hangs under (its agent span's, else its local root's); ``limits`` each
    tool's declaration and thresholds under ``config``, remembered across turns (None: looked
    up for this turn only)."""
    executed, guarded, answered = _executed(calls)
    by_key, by_tool, keys_of = _grouped(executed)
    runs_of: dict[tuple[str, str, str], list[int]] = {}  # keys of more than one call
    worst: list[ToolCall] = []  # the calls of the longest run of attempts of one key
    for fields, key_calls in by_key.items():
        if len(key_calls) == 1:  # most keys
            if not worst:
                worst = key_calls
            continue
        runs = runs_of[fields] = attempt_runs(key_calls)
        if len(runs) == 1:  # no progress: one run of every call
            if len(key_calls) > len(worst):
                worst = key_calls
            continue
        start = 0
        for n in runs:
            if n > len(worst):
                worst = key_calls[start : start + n]
            start += n
    tools, marks, unmarked = _tool_summaries(
        by_tool,
        keys_of,
        runs_of,
        guarded,
        answered,
        llms,
        config,
        LimitsByTool(config) if limits is None else limits,
    )
    agent = (
        (turn.agent if turn else None)
        or next((c.agent for c in executed if c.agent), None)
        or root_agent
    )
    if turn is not None:
        start_ns, end_ns = turn.start_ns, turn.end_ns
    elif executed:
        start_ns = min(start_ns or executed[0].start_ns, executed[0].start_ns)
        end_ns = max(end_ns, max(c.end_ns for c in executed))
    return TurnSummary(
        trace_id=trace_id,
        service=service,
        agent=agent or UNKNOWN,
        model=_model(worst, llms, turn),
        start_ns=start_ns,
        end_ns=end_ns,
        max_attempts=len(worst),
        worst_key=worst[0].key if worst else None,
        tools=tuple(sorted(tools, key=_TOOL)) if len(tools) > 1 else tuple(tools),
        anchor=turn.span_id if turn is not None else anchor,
        loop_marks=marks,
        loops_unmarked=unmarked,
    )


def _executed(
    calls: list[ToolCall],
) -> tuple[list[ToolCall], dict[str, dict[str, int]], list[ToolCall]]:
    """The calls that ran, in start order, tool -> decision -> calls a guard answered, and the
    calls a guard answered without running them."""
    guarded: dict[str, dict[str, int]] = {}
    executed: list[ToolCall] = []
    answered: list[ToolCall] = []
    for c in calls:
        if c.guard is None or c.guard in GUARD_RAN:
            executed.append(c)
        else:
            answered.append(c)
        if c.guard is not None:
            decisions = guarded.setdefault(c.tool, {})
            decisions[c.guard] = decisions.get(c.guard, 0) + 1
    if len(executed) > 1:
        executed.sort(key=_STARTED)
    return executed, guarded, answered


_Grouped = tuple[
    dict[tuple[str, str, str], list[ToolCall]],  # key fields -> the key's calls
    dict[str, list[ToolCall]],  # tool -> its calls
    dict[str, list[list[ToolCall]]],  # tool -> its keys' calls
]


def _grouped(executed: list[ToolCall]) -> _Grouped:
    """The calls by key and by tool, each in start order, in one pass."""
    # keyed on the key's compared fields as a plain tuple: AttemptKey's own hash and equality
    # are Python calls, twice per call here
    by_key: dict[tuple[str, str, str], list[ToolCall]] = {}
    by_tool: dict[str, list[ToolCall]] = {}
    keys_of: dict[str, list[list[ToolCall]]] = {}
    for c in executed:
        k = c.key
        fields = (k.tool, k.identity, k.outcome)
        key_calls = by_key.get(fields)
        if key_calls is None:
            key_calls = by_key[fields] = [c]
            tool_keys = keys_of.get(c.tool)
            if tool_keys is None:
                keys_of[c.tool] = [key_calls]
            else:
                tool_keys.append(key_calls)
        else:
            key_calls.append(c)
        tool_calls = by_tool.get(c.tool)
        if tool_calls is None:
            by_tool[c.tool] = [c]
        else:
            tool_calls.append(c)
    return by_key, by_tool, keys_of


def attempt_runs(key_calls: list[ToolCall]) -> list[int]:
    """The attempts of one key's calls (in start order), as runs: a successful call whose
    result fingerprint changed since the key's last call made progress and starts a new run.
    Failures, and results not read, never do (one run of every call)."""
    if key_calls[0].error_class != OK:
        return [len(key_calls)]
    runs: list[int] = []
    n = 0
    previous = NOT_KNOWN
    for c in key_calls:
        current = c.fingerprint
        if n and current != previous and current != NOT_KNOWN and previous != NOT_KNOWN:
            runs.append(n)
            n = 0
        n += 1
        previous = current
    runs.append(n)
    return runs


def _tool_summaries(
    by_tool: dict[str, list[ToolCall]],
    keys_of: dict[str, list[list[ToolCall]]],
    runs_of: dict[tuple[str, str, str], list[int]],
    guarded: dict[str, dict[str, int]],
    answered: list[ToolCall],
    llms: list[LlmMark],
    config: Config,
    limits: LimitsByTool,
) -> tuple[list[ToolSummary], tuple[LoopMark, ...], int]:
    """One summary per tool called, then one per tool whose every call a guard answered; the
    turn's loop marks and how many loops were left unmarked past their bound."""
    definition_versions: dict[str, str] | None = None  # only for a tool whose calls name none
    tools: list[ToolSummary] = []
    loops: list[LoopRun] = []
    for tool, tool_calls in by_tool.items():
        tool_limits = limits.of(tool)
        summary = _tool_summary(tool, tool_calls, keys_of[tool], runs_of, tool_limits)
        if summary.loops:  # (rare) the loops' calls: charged and marked below
            loops += loop_runs(
                tool_calls,
                keys_of[tool],
                runs_of,
                summary.loops,
                config,
                tool_limits.declaration,
            )
        if tool in guarded:
            summary.guard_decisions = _pairs(guarded.pop(tool))
        if not summary.tool_version:
            if definition_versions is None:
                definition_versions = _definition_versions(llms)
            summary.tool_version = definition_versions.get(tool, "")
        tools.append(summary)
    for tool, decisions in guarded.items():  # tools whose every call was stopped by a guard
        tools.append(
            ToolSummary(
                tool=tool,
                tool_version="",
                max_attempts=0,
                no_rows_streak=None,
                calls=(),
                repeats=(),
                loops=(),
                over_cap_seconds=0.0,
                calls_without_arguments=0,
                guard_decisions=_pairs(decisions),
            )
        )
    if not loops:
        return tools, (), 0
    costs, per_loop = charge(extras_of(loops), llms)
    for summary in tools:
        cost = costs.get(summary.tool)
        if cost is not None:
            summary.loop_tokens = tuple(cost)
    limit = config.loop_spans_per_turn
    if not limit:  # loop spans off: nothing marked, nothing counted
        return tools, (), 0
    marks, unmarked = loop_marks(loops, per_loop, answered, limit)
    return tools, marks, unmarked


class _Streak:
    """Runs of consecutive calls with one value (a failing call's error class, a result's data):
    the longest, and whether a run holding more than one key reached ``threshold``."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.run = 0  # 0: no run (the previous call broke it)
        self.longest = 0
        self.value: object = None  # the run's value
        self.first = ""  # the identity of the run's first key
        self.keys = False  # the run holds more than one key

    def step(self, value: object, identity: str) -> bool:
        """The next call, with a value; True when its run is a loop."""
        if self.run and value == self.value:
            self.run += 1
            self.keys = self.keys or identity != self.first
        else:
            self.run, self.value, self.first, self.keys = 1, value, identity, False
        if self.run > self.longest:
            self.longest = self.run
        # a run of one key is that key's attempts (a repeat loop), not a streak of its own
        return self.keys and self.run >= self.threshold


def _tool_summary(
    tool: str,
    tool_calls: list[ToolCall],
    key_lists: list[list[ToolCall]],
    runs_of: dict[tuple[str, str, str], list[int]],
    limits: ToolLimits,
) -> ToolSummary:
    """One tool's numbers from its calls and its keys' calls, in start order (no guard decisions;
    the version the first call naming one names, else "")."""
    declaration = limits.declaration
    loops: set[tuple[str, str]] = set()
    max_attempts, over_cap_ns, repeats, looping = _key_attempts(
        key_lists, runs_of, limits.loop_threshold, loops
    )
    rows_declared = declaration is not None and declaration.result == ROWS
    # one pass over the tool's calls in start order: no-rows, failing and same-result runs
    run = longest = bare = inferred = 0
    failing = _Streak(limits.failing_threshold)  # one error class
    same_data = _Streak(limits.same_result_threshold)  # one result's data
    readable, version = False, ""
    classes: dict[str, int] = {}
    for c in tool_calls:
        result = c.result
        # a failed call breaks a run like a call with rows; a write's empty answer is no search
        # unless its results are declared rows
        if result == EMPTY and (c.effect == READ or rows_declared):
            run += 1
            if run > longest:
                longest = run
        else:
            run = 0
        error_class = c.error_class
        if error_class == OK:
            failing.run = 0
        elif failing.step(error_class, c.key.identity):
            loops.add((error_class, FAILING))
        same = c.same_result
        if not same:  # a failure, an empty result, an acknowledgement, a result not read
            same_data.run = 0
        elif same_data.step(same, c.key.identity):
            loops.add((OK, SAME_RESULT))
        readable = readable or result != UNKNOWN
        version = version or c.tool_version
        classes[error_class] = classes.get(error_class, 0) + 1
        if not c.arguments_known:
            bare += 1
        if c.key.inferred:
            inferred += 1
    # None when no result was readable (content capture off, or every call failed)
    streak = longest if readable else None
    if streak is not None and streak >= limits.no_rows_threshold:
        loops.add((OK, NO_ROWS))
    return ToolSummary(
        tool=tool,
        tool_version=version,
        max_attempts=max_attempts,
        no_rows_streak=streak,
        calls=_pairs(classes),
        repeats=_pairs(repeats) if repeats else (),
        loops=tuple(sorted(loops)) if loops else (),
        over_cap_seconds=over_cap_ns / 1e9,
        calls_without_arguments=bare,
        guard_decisions=(),
        calls_keyed_by_inference=inferred,
        looping_keys=tuple(looping) if looping else (),
        same_result_streak=same_data.longest if readable else None,
        failing_streak=failing.longest,
    )


def _key_attempts(
    key_lists: list[list[ToolCall]],
    runs_of: dict[tuple[str, str, str], list[int]],
    threshold: int,
    loops: set[tuple[str, str]],
) -> tuple[int, int, dict[str, int], list[tuple[AttemptKey, int]]]:
    """A tool's keys' attempts: the most of one key in a run, the nanoseconds its calls past
    the loop threshold took, the calls past the first of their run per error class, and the
    keys at the threshold; their repeat and duplicate loops added to ``loops``."""
    max_attempts = over_cap_ns = 0
    repeats: dict[str, int] = {}
    looping: list[tuple[AttemptKey, int]] = []
    for key_calls in key_lists:
        if len(key_calls) == 1:  # most keys have one call: nothing more to count
            if not max_attempts:
                max_attempts = 1
            continue
        k = key_calls[0].key
        runs = runs_of[(k.tool, k.identity, k.outcome)]
        error_class = key_calls[0].error_class
        repeated = len(key_calls) - len(runs)  # calls past the first of their run
        if repeated:
            repeats[error_class] = repeats.get(error_class, 0) + repeated
        longest = max(runs) if len(runs) > 1 else runs[0]
        if longest > max_attempts:
            max_attempts = longest
        # a write that succeeded again on one identity: the side effect happened twice
        duplicate = error_class == OK and key_calls[0].effect == WRITE
        if duplicate or longest >= threshold:
            loops.add((error_class, DUPLICATE if duplicate else REPEAT))
            looping.append((k, longest))
            start = 0
            for n in runs:
                # attempts past the loop threshold are what a breaker at cap threshold-1 stops
                for c in key_calls[start + threshold : start + n]:
                    over_cap_ns += max(0, c.end_ns - c.start_ns)
                start += n
    return max_attempts, over_cap_ns, repeats, looping


# the loop kinds are core.cost's (which charges them), named here too where they are read
__all__ = [
    "DUPLICATE",
    "FAILING",
    "NO_ROWS",
    "REPEAT",
    "SAME_RESULT",
    "UNKNOWN",
    "ToolSummary",
    "TurnSummary",
    "attempt_runs",
    "summarize",
]
