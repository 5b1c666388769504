"""``loopwatch replay``: stored traces give exactly the numbers the in-process processor gave on
the same spans, in every stored format; the incidents' exact figures; the report's output."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from loopwatch.cli import main
from tests.service_support import snapshot, value
from tests.test_replay_support import (
    batches,
    incident_turns,
    jaeger_document,
    record,
    replay_registry,
    tempo_document,
    write_collector_json,
    write_collector_proto,
)

TURNS = 3 * 12  # incident_turns in three conventions


@pytest.fixture(scope="module")
def recorded() -> tuple[list, dict]:  # type: ignore[type-arg]
    spans, p = record(incident_turns(random.Random(7)))
    expected = snapshot(p.registry)
    assert value(p.registry, "loopwatch_turns_total") == TURNS
    p.close()
    return spans, expected


def _write(kind: str, directory: Path, spans: list) -> list[Path]:  # type: ignore[type-arg]
    requests = batches(spans)
    if kind == "collector-json":
        return [write_collector_json(directory / "traces.json", requests)]
    if kind == "collector-json-gzip":
        return [write_collector_json(directory / "traces.json.gz", requests, compress=True)]
    if kind == "collector-proto":
        return [write_collector_proto(directory / "traces.binpb", requests)]
    if kind == "protobuf-single":
        path = directory / "request.pb"
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        path.write_bytes(encode_spans(spans).SerializeToString())
        return [path]
    if kind == "jaeger":
        path = directory / "jaeger.json"
        path.write_text(json.dumps(jaeger_document(spans)))
        return [path]
    if kind == "jaeger-pretty":
        path = directory / "jaeger.json"
        path.write_text(json.dumps(jaeger_document(spans), indent=2))
        return [path]
    if kind == "tempo":  # one trace-by-id answer per trace
        by_trace: dict[int, list] = {}  # type: ignore[type-arg]
        for s in spans:
            by_trace.setdefault(s.context.trace_id, []).append(s)
        paths = []
        for n, members in enumerate(by_trace.values()):
            path = directory / f"tempo-{n:03}.json"
            path.write_text(json.dumps(tempo_document(members)))
            paths.append(path)
        return paths
    raise AssertionError(kind)


FORMATS = [
    "collector-json",
    "collector-json-gzip",
    "collector-proto",
    "protobuf-single",
    "jaeger",
    "jaeger-pretty",
    "tempo",
]


@pytest.mark.parametrize("kind", FORMATS)
def test_replay_gives_the_processors_numbers(recorded, tmp_path: Path, kind: str) -> None:  # type: ignore[no-untyped-def]
    spans, expected = recorded
    paths = _write(kind, tmp_path, spans)
    registry, outcome = replay_registry(paths)
    assert outcome.stats.problems == []
    assert outcome.stats.spans == len(spans)
    assert snapshot(registry) == expected
    report = outcome.report
    assert report.turns == TURNS
    # the fourteen tickets: one key, 14 attempts, 13 duplicates, in each convention
    assert value(registry, "loopwatch_turn_max_attempts_bucket", le="12.0") == TURNS - 3
    assert value(registry, "loopwatch_turn_max_attempts_count") == TURNS
    worst = report.worst_turns()
    assert [w.max_attempts for w in worst[:3]] == [14, 14, 14]
    assert {w.key.split("/")[0] for w in worst[:3]} == {"create_ticket"}
    assert report.loops[("support", "create_ticket", "timeout", "repeat")] >= 3
    # the eleven empty searches: a no-rows streak of 11, a loop of kind no_rows, each convention
    assert report.loops[("support", "search_orders", "ok", "no_rows")] == 3
    assert value(registry, "loopwatch_no_rows_streak_bucket", le="8.0", tool="search_orders") < (
        value(registry, "loopwatch_no_rows_streak_bucket", le="12.0", tool="search_orders")
    )


def test_files_in_any_order_and_split_anywhere(recorded, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Spans of one trace spread over files given out of order: every turn is finalized at
    the end of input, with the same numbers (a grace longer than the whole input)."""
    spans, expected = recorded
    requests = batches(spans, size=7)
    half = len(requests) // 2
    second = write_collector_json(tmp_path / "b.json", requests[:half])
    first = write_collector_json(tmp_path / "a.json", requests[half:])
    from dataclasses import replace

    from tests.test_replay_support import CONFIG

    registry, outcome = replay_registry(
        [first, second], replace(CONFIG, grace_seconds=1e9, idle_timeout_seconds=1e9)
    )
    assert snapshot(registry) == expected
    assert outcome.report.late_spans == 0


def test_the_incidents_exact_figures(tmp_path: Path) -> None:
    """design.md's incidents alone: 14 attempts, 13 duplicates, 330 s past the cap; a no-rows
    streak of 11."""
    from loopwatch.demo.scenarios import eleven_empty_searches, fourteen_tickets

    spans, p = record([fourteen_tickets(), eleven_empty_searches()])
    p.close()
    path = write_collector_json(tmp_path / "incidents.json", batches(spans))
    registry, outcome = replay_registry([path])
    r = outcome.report
    assert r.turns == 6
    # 13 duplicate tickets per convention; the reworded searches are distinct keys (they
    # succeed), caught by their streak instead
    assert r.repeat_calls == 3 * 13
    assert round(r.over_cap_seconds) == 3 * 330
    assert r.by_model[("support", "gpt-4.1")] == {14: 3, 1: 3}
    assert r.loops[("support", "search_orders", "ok", "no_rows")] == 3
    assert value(registry, "loopwatch_repeat_calls_total", tool="create_ticket") == 3 * 13
    assert value(registry, "loopwatch_no_rows_streak_sum", tool="search_orders") == 3 * 11


def test_command_summary_and_json(recorded, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    spans, _ = recorded
    path = write_collector_json(tmp_path / "t.json", batches(spans))
    config = tmp_path / "loopwatch.toml"
    config.write_text('[tools.create_ticket]\nidentity = ["customer_id", "order_id"]\n')
    assert main(["replay", str(path), "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"{len(spans):,} spans (0 skipped), {TURNS} turns" in out
    assert "14 attempts  create_ticket/" in out
    assert "search_orders      ok                 no_rows  3 of" in out
    # values never appear: only hashes and trace ids
    for secret in ("c_40912", "88214", "boots", "refund"):
        assert secret not in out
    assert main(["replay", str(path), "--config", str(config), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["turns"] == TURNS
    assert document["input"]["spans"] == len(spans)
    assert document["worst_turns"][0]["max_attempts"] == 14
    assert len(document["worst_turns"][0]["trace_id"]) == 32
    text = json.dumps(document)
    for secret in ("c_40912", "88214", "boots", "refund"):
        assert secret not in text


def test_the_json_fast_path_builds_the_services_span_views(recorded) -> None:  # type: ignore[no-untyped-def]
    """replay reads the file exporter's JSON without protobuf's ParseDict; every span view is
    the one the service's OTLP/JSON conversion builds, for every kind of attribute value."""
    from loopwatch.history.formats import fast_views, otlp_request
    from loopwatch.service.otlp import span_views
    from tests.test_replay_support import collector_json_line

    spans, _ = recorded
    lines = [collector_json_line(r) for r in batches(spans)]
    # every AnyValue kind, an event, a status message, a remote parent, base64 ids
    document = json.loads(lines[0])
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["attributes"] += [
        {"key": "x.int", "value": {"intValue": "-12"}},
        {"key": "x.double", "value": {"doubleValue": 1.5}},
        {"key": "x.nan", "value": {"doubleValue": "NaN"}},
        {"key": "x.bool", "value": {"boolValue": False}},
        {"key": "x.bytes", "value": {"bytesValue": "AAEC"}},
        {"key": "x.empty", "value": {}},
        {"key": "x.none"},
        {"key": "x.array", "value": {"arrayValue": {"values": [{"stringValue": "a"}, {}]}}},
        {"key": "x.kv", "value": {"kvlistValue": {"values": [{"key": "k", "value": {}}]}}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "7"}},
    ]
    span["events"] = [{"timeUnixNano": "5", "name": "e", "attributes": [span["attributes"][0]]}]
    span["status"] = {"code": "STATUS_CODE_ERROR", "message": "boom"}
    span["flags"] = 0x300
    span["parentSpanId"] = "00000000000000aa"
    for line in [json.dumps(document).encode(), *lines]:
        fast, rejected, _ = fast_views(json.loads(line))
        request, _ = otlp_request(json.loads(line))
        strict = span_views(request)
        assert rejected == strict.rejected
        assert [repr(v) for v in fast] == [repr(v) for v in strict.spans]
