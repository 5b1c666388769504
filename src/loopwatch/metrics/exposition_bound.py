"""An upper bound on the size of ``/metrics``, from the metric catalog and the series budget."""

from __future__ import annotations

from collections.abc import Iterable

from loopwatch.metrics.catalog import SPAN_LABELS, Metric

# A family with closed labels only has at most this many series; a closed label value, a sample
# value and an exemplar at most this many bytes; HELP and TYPE lines this many.
_CLOSED_SERIES = 32
_CLOSED_CHARS = {"metric": 64}  # a family name in series_overflow; other closed values: 32
_VALUE_BYTES = 32
_EXEMPLAR_BYTES = 100
_HEADER_BYTES = 600


def lines_per_series(family: Metric) -> int:
    """A histogram's buckets, +Inf, sum, count and created; a counter's total and created; a
    gauge's or an info's one line."""
    if family.type == "histogram":
        return len(family.buckets) + 4
    return 2 if family.type == "counter" else 1


def exposition_bound_bytes(families: Iterable[Metric], series_limit: int, label_chars: int) -> int:
    """An upper bound on the text exposition (Prometheus text or OpenMetrics, with exemplars) of
    ``families`` at a series budget of ``series_limit`` and labels of ``label_chars``.

    Per family: budget + overflow series, times lines per series, times the longest line (every
    span-derived label at 4 bytes per character, the most UTF-8 takes; an exemplar's trace id
    and timestamp). A family with closed labels only (self-health) is counted at
    _CLOSED_SERIES series."""
    total = 0
    for family in families:
        series = _CLOSED_SERIES
        if family.budgeted:
            overflow = 1  # the overflow series: one per combination of the closed labels
            for label in family.labels:
                overflow *= len(family.values.get(label, ("",)))
            series = series_limit + overflow
        label_bytes = sum(
            len(label)
            + 4
            + (4 * label_chars if label in SPAN_LABELS else _CLOSED_CHARS.get(label, 32))
            for label in [*family.labels, "le"]
        )
        line = len(family.name) + len("_created{}") + label_bytes + _VALUE_BYTES
        total += _HEADER_BYTES + series * lines_per_series(family) * (line + _EXEMPLAR_BYTES)
    return total
