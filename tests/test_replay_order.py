"""``loopwatch replay`` and ``compare`` are batch jobs: the same numbers for any order of the
lines and any split of the spans across files, as the Collector writes them (batches across
traces) and as several replicas do (a file each).

A two-hour stream of real SDK spans (a turn starting every 90 s in three conventions, the two
incidents among healthy turns and retries; the long turns overlap the next ones), written four
ways: as one request; as requests of 40 spans, the lines in a random order; those requests
dealt to three files in turn (three replicas); and the spans themselves shuffled into requests
of 7. The report (text and JSON), the OpenMetrics output and compare's verdict are the same
for all four, and the numbers are what the in-process processor counted on the same spans; so
are a hand-rolled loop's, whose turns span traces.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from loopwatch import LoopwatchSpanProcessor
from loopwatch.cli import main
from loopwatch.demo.emit import CONVENTIONS, emit_turn
from loopwatch.demo.scenarios import eleven_empty_searches, flaky, fourteen_tickets, healthy
from testkit.stored import collector_json_line
from testkit.streams import CONFIG as STREAM_CONFIG
from testkit.streams import emit_handrolled
from testkit.streams import provider as stream_provider
from tests.support.helpers import Pipeline, S
from tests.support.replay import CONFIG, batches, replay_registry
from tests.support.service import snapshot

START = 1_767_225_600
TURNS = 80
EVERY = 90  # seconds between turn starts: two hours in all
TOML = '[tools.create_ticket]\nidentity = ["customer_id", "order_id"]\n'  # = CONFIG's
LAYOUTS = ("one-request", "shuffled-lines", "three-replicas", "scattered-spans")


def two_hours(seed: int, loops: int) -> tuple[list[ReadableSpan], dict[Any, float]]:
    """The stream's spans in the order they ended, and what the in-process processor counted.
    ``loops``: one turn in that many is an incident (fourteen tickets, eleven searches)."""
    rng = random.Random(seed)
    p = Pipeline(CONFIG)
    memory = InMemorySpanExporter()
    p.provider.add_span_processor(SimpleSpanProcessor(memory))
    for i in range(TURNS):
        if i % loops == 0:
            turn = fourteen_tickets() if i % (2 * loops) == 0 else eleven_empty_searches()
        elif i % 3 == 0:
            turn = flaky(rng, "gpt-4.1", attempts=rng.randint(2, 5))
        else:
            turn = healthy(rng, rng.choice(["gpt-4.1", "claude-sonnet-4"]))
        emit_turn(p.tracer, turn, (START + i * EVERY) * S, CONVENTIONS[i % 3])
    p.flush()
    expected = snapshot(p.registry)
    p.close()
    spans = sorted(memory.get_finished_spans(), key=lambda s: s.end_time or 0)
    return spans, expected


def write_layout(directory: Path, layout: str, spans: list[ReadableSpan]) -> list[Path]:
    directory.mkdir(parents=True)
    rng = random.Random(layout)
    if layout == "one-request":
        path = directory / "traces.json"
        path.write_bytes(collector_json_line(encode_spans(spans)))
        return [path]
    lines = [collector_json_line(r) for r in batches(spans)]
    if layout == "shuffled-lines":
        rng.shuffle(lines)
        path = directory / "traces.json"
        path.write_bytes(b"".join(lines))
        return [path]
    if layout == "three-replicas":
        paths = []
        for k in range(3):
            path = directory / f"replica-{k + 1}.json"
            path.write_bytes(b"".join(lines[k::3]))
            paths.append(path)
        return paths
    assert layout == "scattered-spans"
    scattered = spans[:]
    rng.shuffle(scattered)
    path = directory / "traces.json"
    path.write_bytes(b"".join(collector_json_line(r) for r in batches(scattered, size=7)))
    return [path]


@pytest.fixture(scope="module")
def streams(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("order")
    config = work / "loopwatch.toml"
    config.write_text(TOML)
    out: dict[str, Any] = {"config": config}
    for name, seed, loops in (("baseline", 3, 20), ("candidate", 4, 4)):
        spans, expected = two_hours(seed, loops)
        out[name] = {
            "spans": spans,
            "expected": expected,
            **{layout: write_layout(work / name / layout, layout, spans) for layout in LAYOUTS},
        }
    return out


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _replay(streams: dict[str, Any], layout: str, work: Path) -> dict[str, Any]:
    paths = [str(p) for p in streams["baseline"][layout]]
    config = str(streams["config"])
    om = work / f"{layout}.om"
    args = ("--config", config, "--no-progress", "--json", "--openmetrics", str(om))
    code, out, err = _run("replay", *paths, *args)
    assert code == 0 and "Traceback" not in err, err
    document = json.loads(out)
    for how_read in ("files", "files_read", "requests"):  # how the input was laid out
        document["input"].pop(how_read)
    code, text, _ = _run("replay", *paths, "--config", config, "--no-progress")
    assert code == 0
    return {"json": document, "text": text.split("\n", 1)[1], "om": om.read_bytes(), "err": err}


def test_replay_gives_the_same_report_and_series_for_any_layout(
    streams: dict[str, Any], tmp_path: Path
) -> None:
    runs = {layout: _replay(streams, layout, tmp_path) for layout in LAYOUTS}
    first = runs["one-request"]
    for layout in LAYOUTS[1:]:
        assert runs[layout]["json"] == first["json"], layout
        assert runs[layout]["text"] == first["text"], layout
        assert runs[layout]["om"] == first["om"], layout
    document = first["json"]
    spans = len(streams["baseline"]["spans"])
    assert document["turns"] == TURNS
    assert document["input"]["spans"] == spans
    assert document["input"]["traces"] == TURNS
    assert document["input"]["traces_without_root"] == 0
    assert document["pipeline"]["late_spans"] == 0
    assert document["pipeline"]["turns_evicted"] == {}
    assert document["openmetrics"]["late_turns"] == 0
    assert first["err"] == ""
    assert "turns finished        80 (80 with tool calls, 15 with a loop)" in first["text"]
    assert document["tool_calls"] == 217


@pytest.mark.parametrize("layout", LAYOUTS)
def test_replay_counts_what_the_processor_counted(streams: dict[str, Any], layout: str) -> None:
    registry, outcome = replay_registry(streams["baseline"][layout])
    assert snapshot(registry) == streams["baseline"]["expected"]
    assert outcome.report.turns == TURNS


def test_compare_gives_the_same_verdict_for_any_layout(streams: dict[str, Any]) -> None:
    config = str(streams["config"])
    pairs = [
        ("one-request", "one-request"),
        ("shuffled-lines", "three-replicas"),
        ("three-replicas", "scattered-spans"),
        ("scattered-spans", "shuffled-lines"),
    ]
    outputs = []
    for base, cand in pairs:
        sides = []
        for name, layout in (("baseline", base), ("candidate", cand)):
            paths = streams[name][layout]
            sides.append(str(paths[0] if len(paths) == 1 else paths[0].parent))  # a directory
        code, text, err = _run("compare", *sides, "--config", config)
        assert code == 1 and err == "", err
        json_code, document, _ = _run("compare", *sides, "--config", config, "--json")
        assert json_code == 1
        outputs.append((text, json.loads(document)))
    assert all(output == outputs[0] for output in outputs[1:])
    text, document = outputs[0]
    verdict = text.rstrip().splitlines()[-1]
    assert verdict.startswith("REGRESSION: search_orders ok no_rows (agent support) loops in 10")
    assert document["baseline"]["turns"] == document["candidate"]["turns"] == TURNS


def test_hand_rolled_turns_across_traces_for_any_layout(tmp_path: Path) -> None:
    """A hand-rolled loop (each model call a trace of its own, its turn gathered across them by
    call id) counts what the processor counted however its lines are laid out: its traces go
    through the pipeline in time order."""
    registry = CollectorRegistry()
    processor = LoopwatchSpanProcessor(config=STREAM_CONFIG, registry=registry)
    memory = InMemorySpanExporter()
    provider = stream_provider(11, SimpleSpanProcessor(memory), processor)
    emit_handrolled(provider.get_tracer("agent"), 40, seed=5)
    assert processor.force_flush(10_000)
    expected = snapshot(registry)
    spans = sorted(memory.get_finished_spans(), key=lambda s: s.end_time or 0)
    for layout in LAYOUTS:
        paths = write_layout(tmp_path / layout, layout, spans)
        replayed, outcome = replay_registry(paths, STREAM_CONFIG)
        assert snapshot(replayed) == expected, layout
        assert outcome.report.turns == 40 and outcome.report.loop_count() == 8
        assert outcome.report.late_spans == 0
