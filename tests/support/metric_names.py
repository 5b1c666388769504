"""Every sample name a real registry exposes after the two demo incidents."""

from __future__ import annotations

from functools import cache

from prometheus_client import CollectorRegistry

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.emit import emit_turn
from loopwatch.demo.scenarios import eleven_empty_searches, fourteen_tickets
from loopwatch.metrics.exporter import LoopwatchMetrics
from tests.support.helpers import Pipeline, S


@cache
def exported_metric_names() -> frozenset[str]:
    """Every sample name a real LoopwatchMetrics registry exposes after the two incidents."""
    declared = Config(
        tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))}
    )
    p = Pipeline(declared)
    t = emit_turn(p.tracer, fourteen_tickets(), 1000 * S)
    emit_turn(p.tracer, eleven_empty_searches(), t)
    p.flush()
    names: set[str] = set()
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_count", "_sum", "_created"),
        "gauge": ("",),
        "info": ("_info",),
    }
    # and what only `loopwatch serve` adds (the registry its Service builds)
    serve = CollectorRegistry()
    LoopwatchMetrics(serve, serve=True)
    for family in [*p.registry.collect(), *serve.collect()]:
        names.update(family.name + s for s in suffixes[family.type])
        names.update(sample.name for sample in family.samples)
    p.close()
    return frozenset(names)
