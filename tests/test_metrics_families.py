"""loopwatch keeps its metrics as plain numbers and hands them to prometheus_client at scrape
time (loopwatch.metrics.collectors): a scrape during turns sees each series whole, and
prometheus_client's switch for _created lines still holds."""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry, disable_created_metrics, enable_created_metrics
from prometheus_client import metrics as client_metrics
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from loopwatch.core.summary import ToolSummary, TurnSummary
from loopwatch.metrics.exporter import LoopwatchMetrics

TURNS = 3000


def summary(i: int) -> TurnSummary:
    tool = ToolSummary(
        tool="search_orders",
        tool_version="",
        max_attempts=14,
        no_rows_streak=11,
        calls=(("timeout", 14),),
        repeats=(("timeout", 13),),
        loops=(("timeout", "repeat"),),
        over_cap_seconds=330.0,
        calls_without_arguments=1,
    )
    return TurnSummary(2**100 + i, "svc", "support", "gpt-4.1", 0, 1, 14, None, (tool,))


def samples(registry: CollectorRegistry) -> dict[str, float]:
    text = generate_latest(registry).decode()
    return {
        s.name + str(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_scrape_during_turns_sees_every_series_whole() -> None:
    registry = CollectorRegistry()
    metrics = LoopwatchMetrics(registry)

    def write() -> None:
        for i in range(TURNS):
            metrics.turn(summary(i))

    writer = threading.Thread(target=write)
    writer.start()
    scrapes: list[dict[str, float]] = []
    while writer.is_alive() or not scrapes:
        scrapes.append(samples(registry))
    writer.join()
    scrapes.append(samples(registry))
    for seen in scrapes:
        for family, value in (
            ("loopwatch_turn_max_attempts", 14),
            ("loopwatch_no_rows_streak", 11),
        ):
            labels = [("agent", "support"), ("model", "gpt-4.1"), ("service", "svc")]
            if family == "loopwatch_no_rows_streak":
                labels.append(("tool", "search_orders"))
            count = seen.get(f"{family}_count{labels}", 0.0)
            assert seen.get(f"{family}_sum{labels}", 0.0) == value * count
            inf = sorted([*labels, ("le", "+Inf")])
            assert seen.get(f"{family}_bucket{inf}", 0.0) == count
    last = scrapes[-1]
    assert sum(v for k, v in last.items() if k.startswith("loopwatch_turns_total")) == TURNS


def test_the_created_switch_of_prometheus_client_holds() -> None:
    registry = CollectorRegistry()
    LoopwatchMetrics(registry).turn(summary(0))
    assert b"loopwatch_tool_max_attempts_created{" in generate_latest(registry)
    assert b"loopwatch_turns_created{" in generate_latest(registry)
    was = client_metrics._use_created
    disable_created_metrics()
    try:
        assert b"_created" not in generate_latest(registry)
    finally:
        if was:
            enable_created_metrics()
