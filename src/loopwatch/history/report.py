"""What a replay found: the numbers of every finished turn, aggregated as they arrive (memory
grows with distinct agents, models, tools and tool versions, not with turns), and written as
text, JSON or Markdown. Only tool names, hashed keys and trace ids appear: never an argument,
a result or an identity value."""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TextIO

from loopwatch.core.sink import Sink
from loopwatch.core.span_view import trace_hex
from loopwatch.core.summary import (
    DUPLICATE,
    FAILING,
    NO_ROWS,
    REPEAT,
    SAME_RESULT,
    TurnSummary,
)
from loopwatch.core.words import plural

WORST_KEPT = 10
# The kinds of loop, in the order reports list them, each with what it means in a few words.
LOOP_KINDS = (
    (REPEAT, "one attempt key tried again without progress"),
    (DUPLICATE, "a write that succeeded again on one identity: its side effect twice"),
    (NO_ROWS, "consecutive empty results"),
    (SAME_RESULT, "reworded calls that got the same data back"),
    (FAILING, "consecutive failures of one class, whatever the arguments"),
)


@dataclass(frozen=True, order=True)
class Worst:
    max_attempts: int
    order: int  # later turns sort first among equals: the heap keeps the earliest
    key: str = field(compare=False)  # tool/identity-hash/outcome
    agent: str = field(compare=False)
    model: str = field(compare=False)
    trace_id: str = field(compare=False)


def percentile(distribution: Counter[int], q: float) -> int:
    """Nearest-rank percentile of a distribution ``{value: count}`` (0 when empty)."""
    total = sum(distribution.values())
    if not total:
        return 0
    rank = max(1, -(-int(q * total * 1000) // 1000))  # ceil(q * total), exact for q in 0.01s
    seen = 0
    for value in sorted(distribution):
        seen += distribution[value]
        if seen >= rank:
            return value
    return max(distribution)


@dataclass
class Report:
    turns: int = 0
    turns_with_tools: int = 0
    tool_calls: int = 0
    repeat_calls: int = 0
    over_cap_seconds: float = 0.0
    agent_turns: Counter[str] = field(default_factory=Counter)  # finished turns by agent
    looping_turns: Counter[str] = field(default_factory=Counter)  # turns with any loop, by agent
    loops_by_kind: Counter[str] = field(default_factory=Counter)  # turns with a loop of a kind
    # turns with tool calls: max attempts per turn, by (agent, model)
    by_model: dict[tuple[str, str], Counter[int]] = field(default_factory=dict)
    # per use of a tool in a turn: its max attempts, by (agent, tool, tool_version)
    by_version: dict[tuple[str, str, str], Counter[int]] = field(default_factory=dict)
    tool_uses: Counter[tuple[str, str]] = field(default_factory=Counter)  # (agent, tool): turns
    # (agent, tool, error_class, kind): turns in which a key of that tool and class looped
    loops: Counter[tuple[str, str, str, str]] = field(default_factory=Counter)
    # the same, with the turn's model and the tool's version (what changed)
    loops_detail: Counter[tuple[str, str, str, str, str, str]] = field(default_factory=Counter)
    # (agent, tool, error_class, kind) -> [model calls, input, output, unsplit tokens]: what the
    # loops cost (core.cost)
    loop_tokens: dict[tuple[str, str, str, str], list[int]] = field(default_factory=dict)
    worst: list[Worst] = field(default_factory=list)  # a min-heap of the worst turns
    spans: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    evicted: Counter[str] = field(default_factory=Counter)
    late_spans: int = 0
    first_ns: int = 0  # the earliest and latest turn times met
    last_ns: int = 0

    def add(self, s: TurnSummary) -> None:
        self.turns += 1
        agent = s.agent
        self.agent_turns[agent] += 1
        if s.start_ns and (not self.first_ns or s.start_ns < self.first_ns):
            self.first_ns = s.start_ns
        self.last_ns = max(self.last_ns, s.end_ns)
        if s.max_attempts:
            self.turns_with_tools += 1
            dist = self.by_model.get((agent, s.model))
            if dist is None:
                dist = self.by_model[(agent, s.model)] = Counter()
            dist[s.max_attempts] += 1
        looped = False
        kinds: set[str] = set()
        for t in s.tools:
            self.tool_calls += sum(n for _, n in t.calls)
            self.repeat_calls += sum(n for _, n in t.repeats)
            self.over_cap_seconds += t.over_cap_seconds
            if t.max_attempts:
                self.tool_uses[(agent, t.tool)] += 1
                key = (agent, t.tool, t.tool_version)
                dist = self.by_version.get(key)
                if dist is None:
                    dist = self.by_version[key] = Counter()
                dist[t.max_attempts] += 1
            for error_class, kind in t.loops:
                looped = True
                kinds.add(kind)
                self.loops[(agent, t.tool, error_class, kind)] += 1
                self.loops_detail[(agent, t.tool, error_class, kind, s.model, t.tool_version)] += 1
            for error_class, kind, calls, input_tokens, output_tokens, unsplit in t.loop_tokens:
                cell = self.loop_tokens.setdefault((agent, t.tool, error_class, kind), [0] * 4)
                cell[0] += calls
                cell[1] += input_tokens
                cell[2] += output_tokens
                cell[3] += unsplit
        if looped:
            self.looping_turns[agent] += 1
            self.loops_by_kind.update(kinds)
        if s.max_attempts:
            worst = Worst(
                s.max_attempts,
                -self.turns,
                s.worst_key.short() if s.worst_key else "-",
                agent,
                s.model,
                trace_hex(s.trace_id),
            )
            if len(self.worst) < WORST_KEPT:
                heapq.heappush(self.worst, worst)
            elif worst > self.worst[0]:
                heapq.heapreplace(self.worst, worst)

    def worst_turns(self) -> list[Worst]:
        return sorted(self.worst, reverse=True)

    def models(self, agent: str | None = None) -> set[str]:
        return {m for a, m in self.by_model if agent is None or a == agent}

    def versions(self, tool: str) -> set[str]:
        return {v for _, t, v in self.by_version if t == tool}

    def loop_count(self) -> int:
        return sum(self.looping_turns.values())

    def token_totals(self) -> list[int]:
        """[model calls, input, output, unsplit tokens] charged to loops (core.cost)."""
        return [sum(cell[i] for cell in self.loop_tokens.values()) for i in range(4)]

    def tokens_json(self) -> dict[str, Any]:
        calls, input_tokens, output_tokens, unsplit = self.token_totals()
        return {
            "model_calls": calls,
            "input": input_tokens,
            "output": output_tokens,
            "unsplit": unsplit,
            "by_loop": [
                {
                    "agent": agent,
                    "tool": tool,
                    "error_class": error_class,
                    "kind": kind,
                    "model_calls": cell[0],
                    "input": cell[1],
                    "output": cell[2],
                    "unsplit": cell[3],
                }
                for (agent, tool, error_class, kind), cell in sorted(self.loop_tokens.items())
            ],
        }

    # -- output ---------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "turns_with_tool_calls": self.turns_with_tools,
            "turns_with_a_loop": self.loop_count(),
            "tool_calls": self.tool_calls,
            "duplicate_calls": self.repeat_calls,
            "over_cap_seconds": round(self.over_cap_seconds, 3),
            "turns_with_a_loop_by_kind": {k: self.loops_by_kind[k] for k, _ in LOOP_KINDS},
            "loop_tokens": self.tokens_json(),
            "first_turn_unix_nano": self.first_ns,
            "last_turn_unix_nano": self.last_ns,
            "loops": [
                {
                    "agent": agent,
                    "tool": tool,
                    "error_class": error_class,
                    "kind": kind,
                    "turns": n,
                    "tool_turns": self.tool_uses[(agent, tool)],
                }
                for (agent, tool, error_class, kind), n in sorted(self.loops.items())
            ],
            "max_attempts_by_model": [
                {"agent": agent, "model": model, **_distribution(dist)}
                for (agent, model), dist in sorted(self.by_model.items())
            ],
            "max_attempts_by_tool_version": [
                {"agent": agent, "tool": tool, "tool_version": version, **_distribution(dist)}
                for (agent, tool, version), dist in sorted(self.by_version.items())
            ],
            "worst_turns": [
                {
                    "max_attempts": w.max_attempts,
                    "key": w.key,
                    "agent": w.agent,
                    "model": w.model,
                    "trace_id": w.trace_id,
                }
                for w in self.worst_turns()
            ],
            "pipeline": {
                "spans": dict(sorted(self.spans.items())),
                "dropped": dict(sorted(self.dropped.items())),
                "turns_evicted": dict(sorted(self.evicted.items())),
                "late_spans": self.late_spans,
            },
        }

    def write_text(self, out: TextIO) -> None:
        out.write("Summary\n")
        out.write(f"  turns finished        {self.turns}")
        out.write(f" ({self.turns_with_tools} with tool calls, {self.loop_count()} with a loop)\n")
        out.write(f"  tool calls            {self.tool_calls}\n")
        out.write(
            f"  duplicate calls       {self.repeat_calls} (calls past the first of their key)\n"
        )
        out.write(
            f"  time past the cap     {self.over_cap_seconds:.0f} s (what a loop breaker saves)\n"
        )
        out.write(f"  turns with a loop     {kinds_text(self.loops_by_kind)}\n")
        for kind, meaning in LOOP_KINDS:
            out.write(f"    {kind:<12} {meaning}\n")
        out.write(
            "  loops found (agent, tool, error class, kind: turns of the turns using the tool)\n"
        )
        if not self.loops:
            out.write("    none\n")
        for (agent, tool, error_class, kind), n in sorted(self.loops.items()):
            uses = self.tool_uses[(agent, tool)]
            out.write(f"    {agent:<14} {tool:<18} {error_class:<18} {kind:<11} {n} of {uses}\n")
        out.write(f"  tokens of loops       {tokens_text(self.token_totals())}\n")
        out.write(f"    {TOKENS_MEANING}\n")
        for (agent, tool, error_class, kind), cell in sorted(self.loop_tokens.items()):
            out.write(f"    {agent:<14} {tool:<18} {error_class:<18} {kind:<11} ")
            out.write(f"{tokens_text(cell)}\n")
        out.write("  max attempts per turn, by model (attempts:turns)\n")
        for (agent, model), dist in sorted(self.by_model.items()):
            out.write(f"    {agent:<14} {model:<24} {_dist_text(dist)}\n")
        out.write("  max attempts per tool use, by tool version (attempts:uses)\n")
        for (agent, tool, version), dist in sorted(self.by_version.items()):
            out.write(f"    {agent:<14} {tool:<18} {version or '-':<9} {_dist_text(dist)}\n")
        out.write("  worst turns (key = tool/identity-hash/outcome; values are never shown)\n")
        for w in self.worst_turns():
            attempts = plural(w.max_attempts, "attempt")
            out.write(f"    {w.max_attempts:>3} {attempts:<8}  {w.key:<36} agent={w.agent} ")
            out.write(f"model={w.model} trace={w.trace_id}\n")


TOKENS_MEANING = (
    "(the model calls that asked for a loop's calls past its first, each once; the tokens "
    "their spans report)"
)


def tokens_text(cell: list[int]) -> str:
    """``13,910 input, 741 output tokens of 13 model calls`` (and the unsplit, if any)."""
    calls, input_tokens, output_tokens, unsplit = cell
    extra = f", {unsplit:,} unsplit" if unsplit else ""
    plural = "" if calls == 1 else "s"
    tokens = f"{input_tokens:,} input, {output_tokens:,} output{extra} tokens"
    return f"{tokens} of {calls} model call{plural}"


def kinds_text(by_kind: Counter[str]) -> str:
    """Turns with a loop of each kind, in LOOP_KINDS' order: ``repeat 3, no_rows 1, ...``."""
    return ", ".join(f"{kind} {by_kind[kind]}" for kind, _ in LOOP_KINDS)


def _distribution(dist: Counter[int]) -> dict[str, Any]:
    return {
        "turns": sum(dist.values()),
        "distribution": {str(k): dist[k] for k in sorted(dist)},
        "p50": percentile(dist, 0.5),
        "p90": percentile(dist, 0.9),
        "p99": percentile(dist, 0.99),
        "max": max(dist) if dist else 0,
    }


def _dist_text(dist: Counter[int]) -> str:
    return " ".join(f"{k}:{dist[k]}" for k in sorted(dist))


class ReportSink:
    """The core's Sink: every finished turn into a Report, then on to ``forward``."""

    def __init__(self, report: Report, forward: Sink | None = None) -> None:
        self.report = report
        self.forward = forward

    def turn(self, summary: TurnSummary) -> None:
        self.report.add(summary)
        if self.forward is not None:
            self.forward.turn(summary)

    def span(self, kind: str, count: int = 1) -> None:
        self.report.spans[kind] += count
        if self.forward is not None:
            self.forward.span(kind, count)

    def dropped(self, reason: str, count: int = 1) -> None:
        self.report.dropped[reason] += count
        if self.forward is not None:
            self.forward.dropped(reason, count)

    def evicted(self, reason: str) -> None:
        self.report.evicted[reason] += 1
        if self.forward is not None:
            self.forward.evicted(reason)

    def late(self) -> None:
        self.report.late_spans += 1
        if self.forward is not None:
            self.forward.late()

    def malformed(self, reason: str, count: int = 1) -> None:
        if self.forward is not None:
            self.forward.malformed(reason, count)

    def open_turns(self, count: int) -> None:
        if self.forward is not None:
            self.forward.open_turns(count)
