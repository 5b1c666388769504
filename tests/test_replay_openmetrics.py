"""``loopwatch replay --openmetrics``: the series a live replica's /metrics would have shown,
with the spans' own times, accepted by ``promtool tsdb create-blocks-from openmetrics``."""

from __future__ import annotations

import random
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopwatch.cli import main
from loopwatch.demo.emit import emit_turn
from loopwatch.demo.scenarios import healthy
from testkit.stored import write_collector_json
from tests.support.helpers import S, require_tool
from tests.support.replay import batches, incident_turns, record
from tests.support.service import snapshot

START = 1_767_225_600  # the first turn's start (seconds)
LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+) (\d+)$")
PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, list[Any]]:
    spans, p = record(incident_turns(random.Random(5)), start=START)
    expected = snapshot(p.registry)
    p.close()
    work = tmp_path_factory.mktemp("om")
    path = write_collector_json(work / "traces.json", batches(spans))
    out = work / "replay.om"
    config = work / "loopwatch.toml"
    config.write_text('[tools.create_ticket]\nidentity = ["customer_id", "order_id"]\n')
    code = main(["replay", str(path), "--config", str(config), "--openmetrics", str(out), "--json"])
    assert code == 0
    return out, expected, spans


def _end_seconds(span: ReadableSpan) -> float:
    assert span.end_time is not None  # a finished span
    return span.end_time / 1e9


def _samples(path: Path) -> list[tuple[str, dict[str, str], float, int]]:
    lines = path.read_text().splitlines()
    assert lines[-1] == "# EOF"
    out = []
    for line in lines[:-1]:
        match = LINE.match(line)
        assert match, line
        name, labels, value, at = match.groups()
        out.append((name, dict(PAIR.findall(labels)), float(value), int(at)))
    return out


def test_the_last_scrape_is_what_the_processor_shows(replayed: Any) -> None:
    out, expected, spans = replayed
    samples = _samples(out)
    times = sorted({at for *_, at in samples})
    assert all(at % 60 == 0 for at in times)  # every 60 s of span time
    first_end = min(s.end_time for s in spans) / 1e9
    last_end = max(s.end_time for s in spans) / 1e9
    assert first_end <= times[0] < first_end + 60 + 3600  # span time, not the clock
    assert last_end <= times[-1] < last_end + 120
    final = {}
    for name, labels, value, at in samples:
        assert labels.pop("job") == "loopwatch" and labels.pop("instance") == "replay"
        if at == times[-1]:
            final[(name, tuple(sorted(labels.items())))] = value
    for key, value in expected.items():
        if key[0] == "loopwatch_open_turns":
            continue  # the replay's own buffer at the last scrape
        assert final.get(key) == value, key
    # first-seen markers carry the time of the turn that first showed them
    for (name, _), value in final.items():
        if name.endswith("_first_seen_timestamp_seconds"):
            assert first_end <= value <= last_end
    text = out.read_text()
    for secret in ("c_40912", "88214", "boots"):
        assert secret not in text


def test_counters_only_grow_and_scrapes_follow_the_turns(replayed: Any) -> None:
    out, _, _ = replayed
    last: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[int, float]] = {}
    for name, labels, value, at in _samples(out):
        key = (name, tuple(sorted(labels.items())))
        if key in last:
            before_at, before = last[key]
            assert at > before_at
            if name.endswith(("_total", "_bucket", "_count", "_sum")):
                assert value >= before, key
        last[key] = (at, value)
    turns = [
        (at, value)
        for name, labels, value, at in _samples(out)
        if name == "loopwatch_turns_total" and labels["model"] == "gpt-4.1"
    ]
    assert turns[0][1] < turns[-1][1]  # turns arrive over the scrapes, not all at once


@pytest.mark.live
def test_promtool_backfills_it(replayed: Any, tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    out, expected, _ = replayed
    data = tmp_path / "data"
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(out), str(data)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (data / "wal").mkdir()  # promtool's dump reads a WAL too; a backfill writes none
    dump = subprocess.run(
        [promtool, "tsdb", "dump", str(data)], capture_output=True, text=True, timeout=120
    )
    assert dump.returncode == 0, dump.stderr
    turns: dict[str, float] = {}
    for line in dump.stdout.splitlines():
        if '__name__="loopwatch_turns_total"' in line:
            labels, value, _ = line.rsplit(" ", 2)
            turns[labels] = max(turns.get(labels, 0.0), float(value))
    total = sum(v for (name, _), v in expected.items() if name == "loopwatch_turns_total")
    assert turns and sum(turns.values()) == total == 36
    assert all('job="loopwatch"' in labels and 'instance="replay"' in labels for labels in turns)


def test_a_turn_lands_in_the_scrape_after_it_ended_however_wide_the_requests(
    tmp_path: Path,
) -> None:
    """Quiet traffic: a turn every two minutes, exported in requests of 200 spans, so one
    request spans over an hour of span time and a turn's root arrives long after it ended.
    Every scrape still holds exactly the turns that ended by its time."""
    rng = random.Random(3)
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    for i in range(60):
        emit_turn(provider.get_tracer("t"), healthy(rng, "gpt-4.1"), (START + 120 * i) * S)
    spans = list(memory.get_finished_spans())
    path = write_collector_json(tmp_path / "quiet.json", batches(spans, size=200))
    out = tmp_path / "quiet.om"
    assert main(["replay", str(path), "--openmetrics", str(out), "--json", "--no-progress"]) == 0
    ends = sorted(_end_seconds(s) for s in spans if s.parent is None)
    scraped: dict[int, float] = {}
    for name, _, value, at in _samples(out):
        if name == "loopwatch_turns_total":
            scraped[at] = scraped.get(at, 0.0) + value
    assert len(scraped) > 100
    for at, turns in scraped.items():
        assert turns == sum(end <= at for end in ends), at
