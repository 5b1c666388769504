"""One finished turn's numbers: attempts per key, no-rows streaks, loops, time past the cap."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from loopwatch.core.config import Config
from loopwatch.core.keys import AttemptKey
from loopwatch.core.outcomes import EMPTY, OK
from loopwatch.core.records import LlmMark, ToolCall, TurnMark

UNKNOWN = "unknown"
REPEAT = "repeat"
NO_ROWS = "no_rows"


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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


def _streak(calls: list[ToolCall]) -> int | None:
    """Longest run of consecutive empty results; None when no result was readable (content
    capture off, or every call failed). A failed call breaks a run like a call with rows."""
    if all(c.result == UNKNOWN for c in calls):
        return None
    longest = run = 0
    for c in calls:
        run = run + 1 if c.result == EMPTY else 0
        longest = max(longest, run)
    return longest


def _model(worst: list[ToolCall], llms: list[LlmMark], turn: TurnMark | None) -> str:
    with_model = [m for m in llms if m.model]
    if worst and with_model:
        first = worst[0].start_ns
        before = [m for m in with_model if m.start_ns <= first]
        if before:
            return max(before, key=lambda m: (m.start_ns, m.span_id)).model or UNKNOWN
    if with_model:
        counts = Counter(m.model for m in sorted(with_model, key=lambda m: m.start_ns))
        return counts.most_common(1)[0][0] or UNKNOWN
    if turn is not None and turn.model:
        return turn.model
    return UNKNOWN


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
) -> TurnSummary:
    """Numbers for one turn from its tool calls and LLM spans (any order). The agent is the
    turn span's, else the tool spans', else ``root_agent`` (the trace root's)."""
    guarded: dict[str, Counter[str]] = defaultdict(Counter)
    for c in calls:
        if c.guard is not None:
            guarded[c.tool][c.guard] += 1
    calls = sorted((c for c in calls if c.guard is None), key=lambda c: (c.start_ns, c.span_id))
    # keyed on the key's compared fields as a plain tuple: AttemptKey's own hash and equality
    # are Python calls, twice per call here
    by_key: dict[tuple[str, str, str], list[ToolCall]] = {}
    by_tool: dict[str, list[ToolCall]] = {}
    keys_of: dict[str, list[list[ToolCall]]] = {}  # tool -> its keys' calls: one pass per tool
    for c in calls:
        k = c.key
        fields = (k.tool, k.identity, k.outcome)
        key_calls = by_key.get(fields)
        if key_calls is None:
            key_calls = by_key[fields] = []
            keys_of.setdefault(c.tool, []).append(key_calls)
        key_calls.append(c)
        tool_calls = by_tool.get(c.tool)
        if tool_calls is None:
            by_tool[c.tool] = [c]
        else:
            tool_calls.append(c)

    worst: list[ToolCall] = []
    for key_calls in by_key.values():
        if len(key_calls) > len(worst):
            worst = key_calls

    definition_versions: dict[str, str] = {}
    for m in sorted(llms, key=lambda m: m.start_ns):
        definition_versions.update(m.tool_versions)

    tools: list[ToolSummary] = []
    for tool, tool_calls in by_tool.items():
        declaration = config.declaration(tool)
        threshold = config.loop_threshold_for(declaration)
        max_attempts = 0
        repeats: dict[str, int] = {}
        loops: set[tuple[str, str]] = set()
        over_cap_ns = 0
        looping: list[tuple[AttemptKey, int]] = []
        for key_calls in keys_of[tool]:
            key = key_calls[0].key
            n = len(key_calls)
            max_attempts = max(max_attempts, n)
            error_class = key_calls[0].error_class
            if n > 1:
                repeats[error_class] = repeats.get(error_class, 0) + n - 1
            if n >= threshold:
                loops.add((error_class, REPEAT))
                looping.append((key, n))
            # attempts past the loop threshold are what a breaker at cap threshold-1 would stop
            over_cap_ns += sum(max(0, c.end_ns - c.start_ns) for c in key_calls[threshold:])
        streak = _streak(tool_calls)
        if streak is not None and streak >= config.no_rows_threshold_for(declaration):
            loops.add((OK, NO_ROWS))
        version = next((c.tool_version for c in tool_calls if c.tool_version), "")
        classes: dict[str, int] = {}
        for c in tool_calls:
            classes[c.error_class] = classes.get(c.error_class, 0) + 1
        decisions = guarded.pop(tool, None)
        tools.append(
            ToolSummary(
                tool=tool,
                tool_version=version or definition_versions.get(tool, ""),
                max_attempts=max_attempts,
                no_rows_streak=streak,
                calls=tuple(sorted(classes.items())),
                repeats=tuple(sorted(repeats.items())),
                loops=tuple(sorted(loops)),
                over_cap_seconds=over_cap_ns / 1e9,
                calls_without_arguments=sum(1 for c in tool_calls if not c.arguments_known),
                guard_decisions=tuple(sorted(decisions.items())) if decisions else (),
                calls_keyed_by_inference=sum(1 for c in tool_calls if c.key.inferred),
                looping_keys=tuple(looping),
            )
        )
    for tool, decisions in guarded.items():  # tools whose every call was stopped by a guard
        tools.append(
            ToolSummary(tool, "", 0, None, (), (), (), 0.0, 0, tuple(sorted(decisions.items())))
        )

    agent = (
        (turn.agent if turn else None)
        or next((c.agent for c in calls if c.agent), None)
        or root_agent
    )
    if calls:
        start_ns = min(start_ns or calls[0].start_ns, calls[0].start_ns)
        end_ns = max(end_ns, max(c.end_ns for c in calls))
    return TurnSummary(
        trace_id=trace_id,
        service=service,
        agent=agent or UNKNOWN,
        model=_model(worst, llms, turn),
        start_ns=turn.start_ns if turn else start_ns,
        end_ns=turn.end_ns if turn else end_ns,
        max_attempts=len(worst),
        worst_key=worst[0].key if worst else None,
        tools=tuple(sorted(tools, key=lambda t: t.tool)),
    )
