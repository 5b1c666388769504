"""Thin helpers over the Foundation SDK: stable panel ids, refIds and grid positions.

The SDK leaves panel ids unset, rows at id 0 and refIds empty; Grafana needs all three, and
explicit positions keep the generated JSON's diffs readable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import heatmap, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.models import common, dashboard
from grafana_foundation_sdk.models import heatmap as heatmap_m
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from loopwatch.metrics.catalog import TOOL_CALLS, TURNS
from mixin.config import PROMETHEUS_UID

DS = dashboard.DataSourceRef(type_val="prometheus", uid="${datasource}")
WIDTH = 24


@dataclass(frozen=True)
class Query:
    """One PromQL target."""

    expr: str
    legend: str = ""
    instant: bool = False
    table: bool = False
    heatmap: bool = False
    exemplar: bool = False

    def build(self, ref_id: str) -> prometheus.Dataquery:
        q = prometheus.Dataquery().ref_id(ref_id).datasource(DS).expr(self.expr)
        if self.legend:
            q = q.legend_format(self.legend)
        q = q.instant() if self.instant else q.range()
        if self.table:
            q = q.format(PromQueryFormat.TABLE)
        if self.heatmap:
            q = q.format(PromQueryFormat.HEATMAP)
        if self.exemplar:
            q = q.exemplar(True)
        return q


@dataclass
class Layout:
    """Assigns ids and positions left to right, wrapping at 24 columns."""

    board: dash_b.Dashboard
    next_id: int = 1
    x: int = 0
    y: int = 0
    line_height: int = 0
    ids: list[int] = field(default_factory=list)

    def _take_id(self) -> int:
        panel_id = self.next_id
        self.next_id += 1
        self.ids.append(panel_id)
        return panel_id

    def row(self, title: str) -> None:
        self._newline()
        grid = dashboard.GridPos(h=1, w=WIDTH, x=0, y=self.y)
        self.board.with_row(dash_b.Row(title).id(self._take_id()).grid_pos(grid))
        self.y += 1

    def _newline(self) -> None:
        if self.x:
            self.y += self.line_height
            self.x = 0
            self.line_height = 0

    def add(self, panel: cogbuilder.Builder[dashboard.Panel], w: int, h: int) -> None:
        if self.x + w > WIDTH:
            self._newline()
        grid = dashboard.GridPos(h=h, w=w, x=self.x, y=self.y)
        panel.id(self._take_id()).grid_pos(grid)  # type: ignore[attr-defined]
        self.board.with_panel(panel)
        self.x += w
        self.line_height = max(self.line_height, h)


def _targets(panel: cogbuilder.Builder[dashboard.Panel], queries: Sequence[Query]) -> None:
    for i, q in enumerate(queries):
        panel.with_target(q.build(chr(ord("A") + i)))  # type: ignore[attr-defined]


def ts(
    title: str, description: str, unit: str, queries: Sequence[Query], *, minimum: float = 0
) -> timeseries.Panel:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .unit(unit)
        .min(minimum)
        .fill_opacity(10)
        .show_points(common.VisibilityMode.NEVER)
        .legend(
            common_b.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.TABLE)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
            .calcs(["lastNotNull", "max"])
        )
        .tooltip(common_b.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI))
    )
    _targets(panel, queries)
    return panel


def single_stat(
    title: str,
    description: str,
    unit: str,
    query: Query,
    thresholds: Sequence[tuple[float | None, str]] = ((None, "green"),),
) -> stat.Panel:
    steps = [dashboard.Threshold(value=v, color=c) for v, c in thresholds]
    panel = (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .unit(unit)
        .no_value("0")
        .graph_mode(common.BigValueGraphMode.NONE)
        .color_mode(common.BigValueColorMode.VALUE)
        .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .thresholds(dash_b.ThresholdsConfig().mode(dashboard.ThresholdsMode.ABSOLUTE).steps(steps))
    )
    _targets(panel, [query])
    return panel


def data_table(title: str, description: str, unit: str, queries: Sequence[Query]) -> table.Panel:
    panel = (
        table.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .unit(unit)
        .show_header(True)
        .with_transformation(
            dashboard.DataTransformerConfig(
                id_val="organize", options={"excludeByName": {"Time": True}}
            )
        )
    )
    _targets(panel, queries)
    return panel


def bucket_heatmap(title: str, description: str, query: Query) -> heatmap.Panel:
    panel = (
        heatmap.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .unit("short")
        .calculate(False)  # Prometheus buckets are already bucketed
        .y_axis(heatmap.YAxisConfig().unit("short"))
        .cell_values(heatmap.CellValues().unit("short"))
        .color(
            heatmap.HeatmapColorOptions()
            .mode(heatmap_m.HeatmapColorMode.SCHEME)
            .scheme("Oranges")
            .scale(heatmap_m.HeatmapColorScale.EXPONENTIAL)
            .exponent(0.5)
        )
    )
    _targets(panel, [query])
    return panel


def annotation(name: str, color: str, expr: str) -> dash_b.AnnotationQuery:
    return (
        dash_b.AnnotationQuery().name(name).datasource(DS).enable(True).icon_color(color).expr(expr)
    )


def variables() -> list[cogbuilder.Builder[dashboard.VariableModel]]:
    """Data source first (mixin style), then the label filters, each narrowing the next."""
    current_ds = dashboard.VariableOption(text="Prometheus", value=PROMETHEUS_UID)
    out: list[cogbuilder.Builder[dashboard.VariableModel]] = [
        dash_b.DatasourceVariable("datasource")
        .label("Data source")
        .type("prometheus")
        .current(current_ds)
    ]
    chain = [
        ("service", "Service", TURNS.name, ""),
        ("agent", "Agent", TURNS.name, 'service=~"$service"'),
        ("model", "Model", TURNS.name, 'service=~"$service", agent=~"$agent"'),
        ("tool", "Tool", TOOL_CALLS.name, 'service=~"$service", agent=~"$agent"'),
    ]
    for name, label, metric, selector in chain:
        query = (
            f"label_values({metric}{{{selector}}}, {name})"
            if selector
            else (f"label_values({metric}, {name})")
        )
        out.append(
            dash_b.QueryVariable(name)
            .label(label)
            .datasource(DS)
            .query(query)
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .current(dashboard.VariableOption(text="All", value="$__all"))
            .refresh(dashboard.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(dashboard.VariableSort.ALPHABETICAL_ASC)
        )
    return out
