"""Write docs/metrics.md's tables from the metric catalog (``python -m docs_gen.metrics``;
``--check`` for drift). Only the text between the two markers is generated."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from docs_gen.blocks import replace_block
from loopwatch.metrics.catalog import CHANGE, FAMILIES, HEALTH, PER_TURN, Metric
from mixin.generate import command_line

ROOT = Path(__file__).resolve().parent.parent
METRICS_DOC = "docs/metrics.md"
BEGIN = (
    "<!-- metrics tables: generated from src/loopwatch/metrics/catalog.py by "
    "`python -m docs_gen.metrics`; edit the catalog, not the tables -->\n"
)
END = "<!-- end of the generated metrics tables -->\n"
# label values listed in the table up to this many; longer vocabularies are in the note
LISTED_VALUES = 6
INTROS = {
    PER_TURN: "Per finished turn (the product):",
    CHANGE: "Change markers (gauges, set once, so dashboards can annotate upgrades):",
    HEALTH: (
        'Self-health (series "at 0 from the start" are there before anything happens, so '
        '"nothing arrived" differs from "not attached"):'
    ),
}


def _labels(family: Metric) -> str:
    out = []
    for label in family.labels:
        values = family.values.get(label, ())
        if values and len(values) <= LISTED_VALUES:
            label += f" ({', '.join(values)})"
        out.append(label)
    return ", ".join(out) or "none"


def _meaning(family: Metric) -> str:
    parts = [family.help]
    if family.note:
        parts.append(family.note)
    if family.buckets:
        parts.append(f"Buckets: {', '.join(f'{b:g}' for b in family.buckets)}.")
    if family.at_zero:
        parts.append("At 0 from the start" + (", one per value." if family.labels else "."))
    if family.serve_only:
        parts.append("`loopwatch serve` only.")
    return " ".join(parts)


def table(families: Iterable[Metric]) -> str:
    """One markdown table: metric, type, labels, meaning."""
    rows = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for f in families:
        rows.append(f"| `{f.name}` | {f.type} | {_labels(f)} | {_meaning(f)} |")
    return "\n".join(rows) + "\n"


def tables(families: Iterable[Metric] = FAMILIES) -> str:
    """The generated block, markers included: one table per section."""
    chosen = list(families)
    blocks = [
        f"{INTROS[section]}\n\n{table(f for f in chosen if f.section == section)}"
        for section in (PER_TURN, CHANGE, HEALTH)
    ]
    return BEGIN + "\n" + "\n".join(blocks) + "\n" + END


def replace_tables(text: str, generated: str) -> str:
    """``text`` with the block between the markers replaced by ``generated``."""
    return replace_block(text, BEGIN, END, generated)


def render() -> dict[str, str]:
    """docs/metrics.md with its tables as the catalog says."""
    text = (ROOT / METRICS_DOC).read_text(encoding="utf-8")
    return {METRICS_DOC: replace_tables(text, tables())}


def main(argv: list[str] | None = None) -> int:
    return command_line(__doc__, ROOT, render, argv)


if __name__ == "__main__":
    sys.exit(main())
