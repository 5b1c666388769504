"""/metrics has a bound in bytes: a series budget per family, label values cut to a length.

Both cardinality attacks go through the service pipeline (real reading, assembling, metrics):
20,000 turns whose service, agent, model and tool are each within 200 values (the per-label
bound alone lets 88.5 MB through), and 200 turns with 20 KB names (616 MiB without these bounds)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from loopwatch.core.config import Config
from loopwatch.core.span_view import SpanView
from loopwatch.core.summary import ToolSummary, TurnSummary
from loopwatch.metrics.exporter import (
    LABEL_CHARS,
    OTHER,
    SERIES_LIMIT,
    LoopwatchMetrics,
    bounded_value,
)
from loopwatch.service.pipeline import Pipeline

MB = 1_000_000
ROOT = Path(__file__).resolve().parent.parent


def turn_spans(i: int, service: str, agent: str, model: str, tool: str) -> list[SpanView]:
    trace = 10**6 + i
    root = SpanView(
        trace,
        1,
        None,
        f"invoke_agent {agent}",
        0,
        10,
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.request.model": model,
        },
        service=service,
    )
    call = SpanView(
        trace,
        2,
        1,
        f"execute_tool {tool}",
        1,
        2,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": '{"q": 1}',
            "gen_ai.tool.call.result": "[]",
        },
        service=service,
    )
    return [call, root]


def run(turns: Iterator[list[SpanView]], **config: int) -> tuple[LoopwatchMetrics, bytes, bytes]:
    registry = CollectorRegistry()
    settings = Config(grace_seconds=0.0, **config)  # type: ignore[arg-type]
    metrics = LoopwatchMetrics(
        registry,
        label_limit=settings.label_limit,
        series_limit=settings.series_limit,
        label_chars=settings.label_chars,
    )
    pipeline = Pipeline(settings, metrics)
    batch: list[SpanView] = []
    for spans in turns:
        batch.extend(spans)
        if len(batch) >= 2000:
            while not pipeline.submit(batch):  # the queue is full: as an exporter, retry
                pipeline.flush()
            batch = []
    assert pipeline.submit(batch)
    assert pipeline.flush(timeout=300) and pipeline.stop(timeout=300)
    return metrics, generate_latest(registry), generate_openmetrics(registry)


def series_per_family(registry_text: bytes) -> Counter[str]:
    """Series per family, from the text exposition's _count/_total/plain samples."""
    families: Counter[str] = Counter()
    for line in registry_text.decode().splitlines():
        if line.startswith("#") or "{" not in line:
            continue
        name = line.split("{", 1)[0]
        if name.endswith(("_bucket", "_sum", "_created")):
            continue
        families[name.removesuffix("_count")] += 1
    return families


def value(text: bytes, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.decode().splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def test_the_default_bound_is_tens_of_megabytes_as_documented() -> None:
    bound = LoopwatchMetrics(CollectorRegistry()).exposition_bound_bytes()
    assert 10 * MB < bound <= 60 * MB, bound
    assert (SERIES_LIMIT, LABEL_CHARS) == (500, 64)
    # the documents quote it: a new metric family moves it, and they must follow
    quoted = f"{round(bound / MB)} MB"
    assert f"**{quoted}**" in (ROOT / "docs" / "service.md").read_text(), quoted
    assert f"at most {quoted}" in (ROOT / "docs" / "metrics.md").read_text(), quoted


@pytest.mark.slow
def test_twenty_thousand_combinations_stay_within_the_budget() -> None:
    def labels(i: int) -> tuple[str, str, str, str]:  # each within 200 values
        return f"svc-{i % 200}", f"agent-{i // 7 % 200}", f"model-{i // 49 % 200}", f"t-{i % 197}"

    metrics, text, openmetrics = run(turn_spans(i, *labels(i)) for i in range(20_000))
    bound = metrics.exposition_bound_bytes()
    print(f"exposition {len(text)} bytes, OpenMetrics {len(openmetrics)}, bound {bound}")
    assert len(text) < bound and len(openmetrics) < bound
    assert len(openmetrics) < 12 * MB  # the per-label bound alone let 88.5 MB through
    families = series_per_family(text)
    # every span-derived family is full: its budget, plus its one overflow series
    for family in ("loopwatch_turns_total", "loopwatch_tool_calls_total"):
        assert families[family] == SERIES_LIMIT + 1, (family, families[family])
    assert families["loopwatch_tool_max_attempts"] == SERIES_LIMIT + 1
    # nothing is lost: the overflow series holds the turns of the combinations past the first
    # 500 (turns are finalized in the order they came)
    admitted: set[tuple[str, str, str]] = set()
    overflow = 0
    for i in range(20_000):
        turn = labels(i)[:3]
        if turn not in admitted and len(admitted) < SERIES_LIMIT:
            admitted.add(turn)
        overflow += turn not in admitted
    assert value(text, "loopwatch_turns_total") == 20_000
    assert value(text, "loopwatch_tool_calls_total") == 20_000
    assert (
        value(text, 'loopwatch_turns_total{agent="other",model="other",service="other"}')
        == overflow
        == value(text, 'loopwatch_series_overflow_total{metric="loopwatch_turns_total"}')
    )
    # the closed vocabularies stay as they are in the overflow series
    assert b'error_class="ok",model="other",service="other",tool="other"} ' in text


def test_twenty_kilobyte_names_are_cut_and_stay_distinct() -> None:
    def name(kind: str, i: int) -> str:
        return f"{kind}-{i:03d}-" + "x" * 20_000

    def turns() -> Iterator[list[SpanView]]:
        for i in range(200):
            yield turn_spans(i, name("svc", i), name("agent", i), name("model", i), name("tool", i))

    metrics, text, openmetrics = run(turns())
    bound = metrics.exposition_bound_bytes()
    print(f"exposition {len(text)} bytes, OpenMetrics {len(openmetrics)}, bound {bound}")
    assert len(text) < bound and len(openmetrics) < bound
    assert len(openmetrics) < 6 * MB  # it was 616 MiB
    tools = {
        line.split('tool="', 1)[1].split('"', 1)[0]
        for line in text.decode().splitlines()
        if line.startswith("loopwatch_tool_calls_total{")
    }
    assert len(tools) == 200  # all distinct, all cut to the same length, with their hash
    assert {len(t) for t in tools} == {LABEL_CHARS}
    assert bounded_value(name("tool", 7)) in tools
    assert bounded_value(name("tool", 7)).startswith("tool-007-xxx")
    assert value(text, "loopwatch_series_overflow_total") == 0  # 200 series: within budget


def test_below_the_budget_nothing_changes() -> None:
    def turns() -> Iterator[list[SpanView]]:
        for i in range(300):
            yield turn_spans(i, f"svc-{i % 3}", f"agent-{i % 5}", f"model-{i % 2}", f"t-{i % 10}")

    def samples(text: bytes) -> list[str]:
        # first-seen gauges and _created hold clock times; everything else must be equal
        return [
            line
            for line in text.decode().splitlines()
            if "_created" not in line and "first_seen" not in line
        ]

    _, budgeted, _ = run(turns())
    _, unbounded, _ = run(turns(), series_limit=10**9, label_chars=10**6)
    assert samples(budgeted) == samples(unbounded)
    for label in ("service", "agent", "model", "tool", "tool_version"):
        assert f'{label}="{OTHER}"'.encode() not in budgeted
    assert value(budgeted, "loopwatch_turns_total") == 300


def test_the_bound_holds_for_the_worst_labels() -> None:
    """Every family past a small budget, every label value at its longest in the widest
    characters, a guard decision, a loop of each kind: the formula still bounds both formats."""
    registry = CollectorRegistry()
    metrics = LoopwatchMetrics(registry, series_limit=5, label_chars=16)
    wide = "\U0001f600" * 40
    for i in range(12):
        label = f"{i}{wide}"
        tool = ToolSummary(
            tool=label,
            tool_version=label,
            max_attempts=14,
            no_rows_streak=11,
            calls=(("timeout", 14), ("invalid_arguments", 1)),
            repeats=(("timeout", 13),),
            loops=(("timeout", "repeat"), ("ok", "no_rows")),
            over_cap_seconds=330.0,
            calls_without_arguments=1,
            guard_decisions=(("budget_exhausted", 1),),
        )
        metrics.turn(TurnSummary(2**127 + i, label, label, label, 0, 1, 14, None, (tool,)))
    bound = metrics.exposition_bound_bytes()
    for text in (generate_latest(registry), generate_openmetrics(registry)):
        assert len(text) < bound, (len(text), bound)
        assert wide.encode() not in text  # cut: 16 characters at most
