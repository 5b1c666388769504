"""``loopwatch compare BASELINE CANDIDATE``: an eval run's traces against a baseline's, for CI.

Both are replayed through the service's pipeline. For every agent, tool, error class and kind
that loops in the candidate, the share of the turns using the tool in which it looped is set
against the baseline's with a one-sided Fisher exact test; the candidate regresses when a
share is higher with p at most ``alpha`` divided by the number of shares tested (Bonferroni:
the chance of any false alarm on identical behaviour stays at most ``alpha``). Exit 1 on a
regression, 0 otherwise, 2 when either side has nothing readable."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any, TextIO

from loopwatch.core.config import Config
from loopwatch.core.words import counted
from loopwatch.history.by_trace import GroupingError
from loopwatch.history.replay import (
    EXIT_UNREADABLE,
    ReplayResult,
    add_input_arguments,
    command,
    input_lines,
    run_replay,
    stdout_gone,
)
from loopwatch.history.report import (
    LOOP_KINDS,
    TOKENS_MEANING,
    Report,
    kinds_text,
    percentile,
    tokens_text,
)

DEFAULT_ALPHA = 0.05
EXIT_NEUTRAL = 0
EXIT_REGRESSION = 1
TEST_NAME = "one-sided Fisher exact test per tool, error class and kind, Bonferroni-corrected"
TOOL, AGENT, ALL = "tool", "agent", "all"  # what a baseline share is measured on


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_greater(a: int, n1: int, b: int, n2: int) -> float:
    """P(X >= a) for X the first sample's count under the hypergeometric law: the one-sided
    Fisher exact p-value that ``a`` of ``n1`` is a higher share than ``b`` of ``n2``."""
    if n1 <= 0:
        return 1.0
    total, hits = n1 + n2, a + b
    low, high = max(a, hits - n2, 0), min(hits, n1)
    if low > high:
        return 1.0
    denominator = _log_comb(total, n1)
    p = sum(
        math.exp(_log_comb(hits, x) + _log_comb(total - hits, n1 - x) - denominator)
        for x in range(low, high + 1)
    )
    return min(1.0, p)


@dataclass(frozen=True)
class Cell:
    agent: str
    tool: str
    error_class: str
    kind: str
    baseline_loops: int
    baseline_turns: int
    basis: str  # TOOL, AGENT or ALL: what the baseline share was measured on
    candidate_loops: int
    candidate_turns: int
    p_value: float
    threshold: float  # alpha / shares tested
    regression: bool
    models: tuple[tuple[str, int, bool], ...]  # looping turns' models: (model, turns, new)
    versions: tuple[tuple[str, int, bool], ...]  # and the tool's versions

    @property
    def baseline_share(self) -> float:
        return self.baseline_loops / self.baseline_turns if self.baseline_turns else 0.0

    @property
    def candidate_share(self) -> float:
        return self.candidate_loops / self.candidate_turns if self.candidate_turns else 0.0

    def changed(self) -> str:
        """The models and tool versions of the candidate's looping turns, new ones marked."""
        parts = [f"model {m}{' (new)' if new else ''}" for m, _, new in self.models if new] + [
            f"{self.tool} version {v or '-'} (new)" for v, _, new in self.versions if new
        ]
        if not parts:
            parts = [f"model {m}" for m, _, _ in self.models[:2]]
            parts += [f"{self.tool} version {v or '-'}" for v, _, _ in self.versions[:1]]
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "tool": self.tool,
            "error_class": self.error_class,
            "kind": self.kind,
            "baseline": {
                "loops": self.baseline_loops,
                "turns": self.baseline_turns,
                "share": round(self.baseline_share, 6),
                "measured_on": self.basis,
            },
            "candidate": {
                "loops": self.candidate_loops,
                "turns": self.candidate_turns,
                "share": round(self.candidate_share, 6),
            },
            "p_value": self.p_value,
            "threshold": self.threshold,
            "regression": self.regression,
            "models": [{"model": m, "turns": n, "new": new} for m, n, new in self.models],
            "tool_versions": [
                {"tool_version": v, "turns": n, "new": new} for v, n, new in self.versions
            ],
        }


@dataclass(frozen=True)
class Comparison:
    baseline: Report
    candidate: Report
    cells: tuple[Cell, ...]
    alpha: float
    new_models: tuple[tuple[str, str], ...]  # (agent, model) in the candidate only
    new_versions: tuple[tuple[str, str], ...]  # (tool, version) in the candidate only

    @property
    def regressions(self) -> list[Cell]:
        return [c for c in self.cells if c.regression]


def _baseline_share(
    base: Report, agent: str, tool: str, cell: tuple[str, str, str, str]
) -> tuple[int, int, str]:
    uses = base.tool_uses[(agent, tool)]
    if uses:
        return base.loops[cell], uses, TOOL
    if base.agent_turns[agent]:  # a tool the baseline never used: the agent's loop share
        return base.looping_turns[agent], base.agent_turns[agent], AGENT
    return base.loop_count(), base.turns, ALL


def _marked(counts: Counter[str], known: set[str]) -> tuple[tuple[str, int, bool], ...]:
    return tuple((v, n, v not in known) for v, n in counts.most_common())


def known_models(baseline: Report, agent: str) -> set[str]:
    """The baseline's models for ``agent``; for an agent the baseline lacks, all its models (an
    agent seen first is no model change)."""
    return baseline.models(agent) or baseline.models()


def basis_note(cell: Cell) -> str:
    """Why the baseline's share is not the tool's: what the baseline lacks."""
    if cell.basis == AGENT:
        return f"agent's turns: {cell.agent} never used {cell.tool} in the baseline"
    return f"all turns: no turn of agent {cell.agent} in the baseline"


def compare(baseline: Report, candidate: Report, alpha: float = DEFAULT_ALPHA) -> Comparison:
    tested = sorted(candidate.loops)
    threshold = alpha / max(1, len(tested))
    cells = []
    for key in tested:
        agent, tool, error_class, kind = key
        b_loops, b_turns, basis = _baseline_share(baseline, agent, tool, key)
        c_loops, c_turns = candidate.loops[key], candidate.tool_uses[(agent, tool)]
        if basis != TOOL:
            c_turns = candidate.agent_turns[agent]
        p = fisher_greater(c_loops, c_turns, b_loops, b_turns)
        higher = c_loops * b_turns > b_loops * c_turns
        models: Counter[str] = Counter()
        versions: Counter[str] = Counter()
        for (a, t, e, k, model, version), n in candidate.loops_detail.items():
            if (a, t, e, k) == key:
                models[model] += n
                versions[version] += n
        cells.append(
            Cell(
                agent,
                tool,
                error_class,
                kind,
                b_loops,
                b_turns,
                basis,
                c_loops,
                c_turns,
                p,
                threshold,
                higher and p <= threshold,
                _marked(models, known_models(baseline, agent)),
                _marked(versions, baseline.versions(tool)),
            )
        )
    new_models = sorted(
        (agent, model)
        for agent, model in candidate.by_model
        if model not in known_models(baseline, agent)
    )
    new_versions = sorted(
        {(tool, v) for _, tool, v in candidate.by_version if v not in baseline.versions(tool)}
    )
    return Comparison(
        baseline, candidate, tuple(cells), alpha, tuple(new_models), tuple(new_versions)
    )


# -- output ----------------------------------------------------------------------------------------
def _pct(share: float) -> str:
    return f"{100 * share:.1f}%"


def _p(p: float) -> str:
    return f"{p:.2g}" if p < 0.01 else f"{p:.3f}"


def _attempts(dist: Counter[int] | None, threshold: int) -> str:
    if not dist:
        return "-"
    total = sum(dist.values())
    over = sum(n for k, n in dist.items() if k >= threshold)
    return (
        f"{percentile(dist, 0.5)} / {percentile(dist, 0.9)} / {percentile(dist, 0.99)} / "
        f"{max(dist)}; {_pct(over / total)} at >= {threshold} ({counted(total, 'turn')})"
    )


def verdict_line(c: Comparison) -> str:
    regressions = c.regressions
    if not regressions:
        tested = len(c.cells)
        return (
            f"no regression: {counted(tested, 'looping tool / error class / kind combination')} "
            "tested, none significantly "
            f"above the baseline at alpha {c.alpha:g}"
        )
    parts = []
    for cell in regressions:
        parts.append(
            f"{cell.tool} {cell.error_class} {cell.kind} (agent {cell.agent}) loops in "
            f"{cell.candidate_loops} of {counted(cell.candidate_turns, 'turn')} "
            f"({_pct(cell.candidate_share)}) against {cell.baseline_loops} of "
            f"{cell.baseline_turns} ({_pct(cell.baseline_share)}), p = {_p(cell.p_value)}; "
            f"looping turns: {cell.changed()}"
        )
    return "REGRESSION: " + "; ".join(parts)


def _rows(c: Comparison, threshold: int) -> list[tuple[str, str, str, str]]:
    """(agent, model, baseline, candidate) max-attempts rows."""
    keys = sorted(set(c.baseline.by_model) | set(c.candidate.by_model))
    return [
        (
            agent,
            model,
            _attempts(c.baseline.by_model.get((agent, model)), threshold),
            _attempts(c.candidate.by_model.get((agent, model)), threshold),
        )
        for agent, model in keys
    ]


def write_text(c: Comparison, out: TextIO, threshold: int) -> None:
    sides = f"baseline: {counted(c.baseline.turns, 'turn')}; candidate: "
    out.write(f"{sides}{counted(c.candidate.turns, 'turn')}\n\n")
    out.write(
        "Loops: turns in which a key of the tool and error class looped, of the turns using "
        "the tool\n"
    )
    out.write(f"  baseline turns with a loop:  {kinds_text(c.baseline.loops_by_kind)}\n")
    out.write(f"  candidate turns with a loop: {kinds_text(c.candidate.loops_by_kind)}\n")
    if not c.cells:
        out.write("  none in the candidate\n")
    for cell in c.cells:
        basis = "" if cell.basis == TOOL else f" ({basis_note(cell)})"
        out.write(
            f"  {cell.agent:<12} {cell.tool:<18} {cell.error_class:<14} {cell.kind:<11} "
            f"baseline {cell.baseline_loops}/{cell.baseline_turns} "
            f"({_pct(cell.baseline_share)}){basis}  candidate {cell.candidate_loops}/"
            f"{cell.candidate_turns} ({_pct(cell.candidate_share)})  p {_p(cell.p_value)}"
            f"{'  REGRESSION' if cell.regression else ''}\n"
        )
    out.write(f"\nTokens of loops {TOKENS_MEANING}\n")
    out.write(f"  baseline  {tokens_text(c.baseline.token_totals())}\n")
    out.write(f"  candidate {tokens_text(c.candidate.token_totals())}\n")
    out.write("\nMax attempts per turn (p50 / p90 / p99 / max; share at the loop threshold)\n")
    for agent, model, base, cand in _rows(c, threshold):
        out.write(f"  {agent:<12} {model:<22} baseline {base}\n")
        out.write(f"  {'':<12} {'':<22} candidate {cand}\n")
    if c.new_models or c.new_versions:
        out.write(f"\nNew in the candidate: {_new_in_candidate(c, '')}\n")
    out.write(f"\nTest: {TEST_NAME}, alpha {c.alpha:g}\n")
    out.write(f"\n{verdict_line(c)}\n")


def _new_in_candidate(c: Comparison, quote: str) -> str:
    """The models and tool versions only the candidate has, names between ``quote``s."""
    q = quote
    return ", ".join(
        [f"model {q}{m}{q} (agent {a})" for a, m in c.new_models]
        + [f"{q}{t}{q} version {q}{v or '-'}{q}" for t, v in c.new_versions]
    )


def write_markdown(c: Comparison, out: TextIO, threshold: int) -> None:
    verdict = "❌ loop regression" if c.regressions else "✅ no loop regression"
    out.write(f"## loopwatch compare: {verdict}\n\n")
    out.write(f"{verdict_line(c)}\n\n")
    out.write(
        f"Baseline {counted(c.baseline.turns, 'turn')}, "
        f"candidate {counted(c.candidate.turns, 'turn')}. "
    )
    out.write(f"Test: {TEST_NAME}, alpha {c.alpha:g}.\n\n")
    out.write("| kind | what loops | baseline turns | candidate turns |\n|---|---|---|---|\n")
    for kind, meaning in LOOP_KINDS:
        out.write(
            f"| {kind} | {meaning} | {c.baseline.loops_by_kind[kind]} | "
            f"{c.candidate.loops_by_kind[kind]} |\n"
        )
    out.write("\n| agent | tool | error class | kind | baseline | candidate | p | |\n")
    out.write("|---|---|---|---|---|---|---|---|\n")
    for cell in c.cells:
        basis = "" if cell.basis == TOOL else f" ({cell.basis})"
        note = f"**regression**: {cell.changed()}" if cell.regression else ""
        out.write(
            f"| {cell.agent} | `{cell.tool}` | {cell.error_class} | {cell.kind} | "
            f"{cell.baseline_loops}/{cell.baseline_turns} ({_pct(cell.baseline_share)}){basis} | "
            f"{cell.candidate_loops}/{cell.candidate_turns} ({_pct(cell.candidate_share)}) | "
            f"{_p(cell.p_value)} | {note} |\n"
        )
    if not c.cells:
        out.write("| | | | | | no loops in the candidate | | |\n")
    out.write(f"\n**Tokens of loops** {TOKENS_MEANING}\n\n")
    out.write("| | model calls | input | output | unsplit |\n|---|---|---|---|---|\n")
    for side, report in (("baseline", c.baseline), ("candidate", c.candidate)):
        calls, input_tokens, output_tokens, unsplit = report.token_totals()
        out.write(f"| {side} | {calls} | {input_tokens:,} | {output_tokens:,} | {unsplit:,} |\n")
    out.write(
        "\n**Max attempts per turn** (p50 / p90 / p99 / max; share at the loop threshold)\n\n"
    )
    out.write("| agent | model | baseline | candidate |\n|---|---|---|---|\n")
    for agent, model, base, cand in _rows(c, threshold):
        out.write(f"| {agent} | {model} | {base} | {cand} |\n")
    if c.new_models or c.new_versions:
        out.write(f"\nNew in the candidate: {_new_in_candidate(c, '`')}\n")


def to_json(c: Comparison, baseline: ReplayResult, candidate: ReplayResult) -> dict[str, Any]:
    return {
        "regression": bool(c.regressions),
        "verdict": verdict_line(c),
        "test": TEST_NAME,
        "alpha": c.alpha,
        "cells": [cell.to_json() for cell in c.cells],
        "new_models": [{"agent": a, "model": m} for a, m in c.new_models],
        "new_tool_versions": [{"tool": t, "tool_version": v} for t, v in c.new_versions],
        "baseline": {**c.baseline.to_json(), "spans": baseline.stats.spans},
        "candidate": {**c.candidate.to_json(), "spans": candidate.stats.spans},
    }


# -- the command -----------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "baseline", metavar="BASELINE", help="traces of the baseline run (as replay)"
    )
    parser.add_argument("candidate", metavar="CANDIDATE", help="traces of the candidate run")
    add_input_arguments(parser)
    parser.add_argument(
        "--alpha",
        type=float,
        default=DEFAULT_ALPHA,
        help=f"false-alarm rate on identical behaviour (default {DEFAULT_ALPHA:g})",
    )
    parser.add_argument("--json", action="store_true", help="the comparison as JSON on stdout")
    parser.add_argument(
        "--markdown",
        metavar="FILE",
        help="also write a Markdown report (- for stdout), e.g. >> $GITHUB_STEP_SUMMARY",
    )


def _side(name: str, path: str, config: Config, forced: str) -> ReplayResult:
    outcome = run_replay([path], config, forced)
    for line in input_lines(outcome, name):
        print(f"loopwatch compare: {line}", file=sys.stderr)
    return outcome


def _run(args: argparse.Namespace, config: Config) -> int:
    if not 0 < args.alpha < 1:
        print("loopwatch compare: --alpha must be between 0 and 1", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        baseline = _side("baseline", args.baseline, config, args.format)
        candidate = _side("candidate", args.candidate, config, args.format)
    except GroupingError as e:
        print(f"loopwatch compare: {e}", file=sys.stderr)
        return EXIT_UNREADABLE
    unreadable = [
        name for name, o in (("baseline", baseline), ("candidate", candidate)) if not o.stats.spans
    ]
    if unreadable:
        print(
            f"loopwatch compare: no spans could be read from the {' or the '.join(unreadable)}",
            file=sys.stderr,
        )
        return EXIT_UNREADABLE
    c = compare(baseline.report, candidate.report, args.alpha)
    code = EXIT_REGRESSION if c.regressions else EXIT_NEUTRAL
    try:
        return _write(args, c, baseline, candidate, config.loop_threshold) or code
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        stdout_gone()
        return code


run = command("compare", _run)


def _write(
    args: argparse.Namespace,
    c: Comparison,
    baseline: ReplayResult,
    candidate: ReplayResult,
    threshold: int,
) -> int:
    """Write the comparison; EXIT_UNREADABLE when the Markdown file cannot be written."""
    if args.json:
        json.dump(to_json(c, baseline, candidate), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        write_text(c, sys.stdout, threshold)
    if args.markdown:
        try:
            if args.markdown == "-":
                write_markdown(c, sys.stdout, threshold)
            else:
                with open(args.markdown, "a", encoding="utf-8") as f:
                    write_markdown(c, f, threshold)
        except OSError as e:
            print(f"loopwatch compare: cannot write {args.markdown}: {e}", file=sys.stderr)
            return EXIT_UNREADABLE
    sys.stdout.flush()
    return 0
