"""The metric catalog is the one place metric names live: the registry exports exactly it, the
docs/metrics.md.s tables are generated from it, and dashboards, rules and docs name nothing else."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from loopwatch.metrics import catalog
from loopwatch.metrics.exporter import LoopwatchMetrics
from loopwatch.service import metrics_server

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # mixin/ and docs_gen/ are source, not an installed package
    sys.path.insert(0, str(ROOT))

from docs_gen import metrics as metrics_doc  # noqa: E402

NAME = re.compile(r"\bloopwatch_[a-z_]+")
SAMPLE_SUFFIXES = ("", "_bucket", "_count", "_sum", "_created")


def families(serve: bool) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """(name, type, help, labels) of every family a real registry exposes, in order."""
    registry = CollectorRegistry()
    LoopwatchMetrics(registry, serve=serve)
    out = []
    for family in registry.collect():
        labels = {k for s in family.samples for k in s.labels if k not in ("le",)}
        out.append((family.name, family.type, family.documentation, tuple(sorted(labels))))
    return out


def expected(serve: bool) -> list[tuple[str, str, str, tuple[str, ...]]]:
    return [
        (m.family, m.type, m.help, tuple(sorted(m.labels)))
        for m in catalog.FAMILIES
        if serve or not m.serve_only
    ]


@pytest.mark.parametrize("serve", [False, True], ids=["in process", "loopwatch serve"])
def test_the_registry_exports_exactly_the_catalog(serve: bool) -> None:
    got = families(serve)
    # a family with no series yet shows no labels: compare those by name, type and help only
    for (name, kind, help_, labels), want in zip(got, expected(serve), strict=True):
        assert (name, kind, help_) == want[:3]
        assert labels in ((), want[3]), name


def test_catalog_entries_are_whole() -> None:
    names = [m.name for m in catalog.FAMILIES]
    assert len(set(names)) == len(names)
    for m in catalog.FAMILIES:
        assert m.name.startswith(catalog.PREFIX)
        assert m.type in {"counter", "gauge", "histogram", "info"}
        assert m.help.strip() and m.help.endswith("."), m.name
        assert bool(m.buckets) == (m.type == "histogram"), m.name
        assert set(m.values) <= set(m.labels), m.name
        if m.at_zero:  # its series are the values of its one closed label
            assert len(m.labels) <= 1 and all(label in m.values for label in m.labels), m.name
    # every budgeted family has its overflow counter present from the start
    budgeted = [m.name for m in catalog.FAMILIES if m.budgeted]
    assert list(catalog.SERIES_OVERFLOW.values["metric"]) == budgeted


def test_the_refused_help_states_the_metrics_endpoints_cap() -> None:
    assert f"metrics: {metrics_server.MAX_CONNECTIONS})" in catalog.HTTP_CONNECTIONS_REFUSED.help


# -- the metrics reference's tables -------------------------------------------------------------
def test_metrics_doc_tables_match_the_catalog() -> None:
    readme = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    assert metrics_doc.render() == {"docs/metrics.md": readme}, (
        "docs/metrics.md's tables are stale: run python -m docs_gen.metrics"
    )
    done = subprocess.run(
        [sys.executable, "-m", "docs_gen.metrics", "--check"], cwd=ROOT, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    for m in catalog.FAMILIES:
        assert f"| `{m.name}` | {m.type} |" in readme


def test_a_changed_help_changes_the_metrics_doc() -> None:
    """The drift test can fail: the tables follow the catalog."""
    changed = dataclasses.replace(catalog.TURNS, help="Turns, changed.")
    families = [changed if m is catalog.TURNS else m for m in catalog.FAMILIES]
    readme = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    regenerated = metrics_doc.replace_tables(readme, metrics_doc.tables(families))
    assert regenerated != readme and "| Turns, changed. |" in regenerated


# -- nobody else spells a metric name --------------------------------------------------------------
def test_dashboards_rules_and_mixin_take_names_from_the_catalog() -> None:
    for path in sorted(
        p
        for folder in ("dashboards", "alerts", "mixin", "docs_gen")
        for p in (ROOT / folder).glob("*.py")
    ):
        text = path.read_text(encoding="utf-8")
        # recording rules (level:metric:operations) are named where they are defined
        literals = [m for m in NAME.finditer(text) if text[m.start() - 1] != ":"]
        assert not literals, f"{path.relative_to(ROOT)}: {[m[0] for m in literals]}"


def test_every_name_the_docs_mention_is_in_the_catalog() -> None:
    known = {m.name + suffix for m in catalog.FAMILIES for suffix in SAMPLE_SUFFIXES}
    docs = [
        ROOT / "README.md",
        ROOT / "alerts" / "runbook.md",
        *sorted((ROOT / "docs").glob("*.md")),
    ]
    for path in docs:
        text = path.read_text(encoding="utf-8")
        unknown = {m[0] for m in NAME.finditer(text) if text[m.start() - 1] != ":"} - known
        assert not unknown, f"{path.relative_to(ROOT)}: {sorted(unknown)}"
