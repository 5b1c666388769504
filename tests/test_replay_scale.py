"""``loopwatch replay``'s memory is bounded, not the input's size: the grouping by trace holds
at most its stated bound (``Limits.memory``), and the whole replay's peak barely grows with the
input.

The grouping alone, under tracemalloc, on a stored stream whose spans, pickled into the
temporary files, take more than four times the bound (a trace's spans lines apart: requests of
40 spans, each copy's lines shuffled): its peak stays within the bound above what reading the
file alone peaks at (the reader's buffers and one request).

Two stored files of the realistic stream (bench_service.py's: spans with 15-30 attributes, turns
in three conventions, HTTP traffic beside them), one ten times the other, both as a long stored
period would hold them (copies in time order under new trace ids, one every hour of span time),
gzipped file exporter JSON; each replayed with ``--openmetrics`` in a fresh process. Between the
two, the input grows by about 90,000 spans (160 MB of JSON); holding them would take well over
150 MB (a span view with its attributes is about 2 kB of objects). The peak resident set may
grow by the bounded memories that fill as traces pass (the finalized trace ids kept to count
late spans, caches of attribute keys), a few MB, and no more.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from testkit.stored import stored_stream

ROOT = Path(__file__).resolve().parent.parent
SMALL, LARGE = 10_000, 100_000  # spans
GROWTH_MIB = 16


def _peak(tmp_path: Path, spans: int) -> dict[str, Any]:
    path = tmp_path / f"traces-{spans}.json.gz"
    written, size = stored_stream(path, spans)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_replay.py"),
            "memory-child",
            str(path),
            str(tmp_path / "backfill.om"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0 and result["spans"] == written
    return {**result, "json_bytes": size}


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc")
def test_peak_memory_does_not_follow_the_input(tmp_path: Path) -> None:
    small, large = _peak(tmp_path, SMALL), _peak(tmp_path, LARGE)
    assert large["spans"] >= 9 * small["spans"]
    grown = (large["peak_kib"] - small["peak_kib"]) / 1024
    more_json = (large["json_bytes"] - small["json_bytes"]) / (1 << 20)
    assert more_json > 100
    assert grown < GROWTH_MIB, (
        f"peak grew {grown:.1f} MiB for {more_json:.0f} MiB more input: {small} {large}"
    )


GROUPING_MEMORY = 4 << 20  # bytes: the bound the grouping runs under here
GROUPING_SPANS = 30_000  # their pickled spans: over four times that bound


@pytest.mark.slow
def test_the_grouping_stays_within_its_bound_on_four_times_as_much(tmp_path: Path) -> None:
    path = tmp_path / "shuffled.json.gz"
    written, size = stored_stream(path, GROUPING_SPANS, shuffled=True)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_replay.py"),
            "grouping-child",
            str(path),
            str(GROUPING_MEMORY),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["spans"] == written == 29_612 and result["traces"] == 6_600
    assert result["spilled_bytes"] > 4 * GROUPING_MEMORY
    assert size > 4 * GROUPING_MEMORY
    grown = result["peak_bytes"] - result["reading_peak_bytes"]
    assert grown <= GROUPING_MEMORY, result
