"""``loopwatch replay``: stored traces give exactly the numbers the in-process processor gave on
the same spans, in every stored format; the incidents' exact figures; the report's output."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest

from loopwatch.cli import main
from testkit.stored import (
    jaeger_v3_answer,
    jaeger_v3_stream,
    write_collector_json,
    write_collector_proto,
)
from tests.support.replay import (
    batches,
    incident_turns,
    jaeger_document,
    record,
    replay_registry,
    tempo_document,
)
from tests.support.service import snapshot, value

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
    if kind == "jaeger-v3":
        path = directory / "jaeger-v3.json"
        path.write_bytes(jaeger_v3_answer(requests))
        return [path]
    if kind == "jaeger-v3-stream":
        path = directory / "jaeger-v3.ndjson"
        path.write_bytes(jaeger_v3_stream(requests))
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
    "jaeger-v3",
    "jaeger-v3-stream",
    "tempo",
]


@pytest.mark.parametrize("kind", FORMATS)
def test_replay_gives_the_processors_numbers(recorded, tmp_path: Path, kind: str) -> None:
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


def test_files_in_any_order_and_split_anywhere(recorded, tmp_path: Path) -> None:
    """Spans of one trace spread over files given out of order: every turn is finalized at
    the end of input, with the same numbers (a grace longer than the whole input)."""
    spans, expected = recorded
    requests = batches(spans, size=7)
    half = len(requests) // 2
    second = write_collector_json(tmp_path / "b.json", requests[:half])
    first = write_collector_json(tmp_path / "a.json", requests[half:])
    from dataclasses import replace

    from tests.support.replay import CONFIG

    registry, outcome = replay_registry(
        [first, second], replace(CONFIG, grace_seconds=1e9, idle_timeout_seconds=1e9)
    )
    assert snapshot(registry) == expected
    assert outcome.report.late_spans == 0


def test_the_incidents_exact_figures(tmp_path: Path) -> None:
    """The two incidents alone: 14 attempts, 13 duplicates, 330 s past the cap; a no-rows
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


def test_command_summary_and_json(recorded, tmp_path: Path, capsys) -> None:
    spans, _ = recorded
    path = write_collector_json(tmp_path / "t.json", batches(spans))
    config = tmp_path / "loopwatch.toml"
    config.write_text('[tools.create_ticket]\nidentity = ["customer_id", "order_id"]\n')
    assert main(["replay", str(path), "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"{len(spans):,} spans (0 skipped), {TURNS} turns" in out
    assert "14 attempts  create_ticket/" in out
    assert "search_orders      ok                 no_rows     3 of" in out
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


def _for_protobuf(document: dict[str, Any]) -> str:
    """An OTLP JSON document as protobuf's JSON mapping writes it: its ids in base64."""
    for rs in document["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key) and len(span[key]) in (32, 16):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json.dumps(document)


def test_replay_reads_otlp_json_into_the_views_protobufs_parser_gives(
    recorded, tmp_path: Path
) -> None:
    """The file exporter's lines are read by the service's OTLP/JSON decoder: every span view is
    the one protobuf's JSON parser and the service's conversion give, for every kind of
    attribute value, numbers and nulls where text is usual, base64 ids, an invalid span id
    (left out, counted), a resource written after its spans, and several resources a line."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from loopwatch.history.formats import Reader
    from loopwatch.service.otlp import span_views
    from testkit.stored import collector_json_line

    spans, _ = recorded
    lines = [collector_json_line(r) for r in batches(spans)]
    document = json.loads(lines[0])
    group = document["resourceSpans"][0]
    span = group["scopeSpans"][0]["spans"][0]
    span["attributes"] += [
        {"key": "x.int", "value": {"intValue": "-12"}},
        {"key": "x.int.number", "value": {"intValue": 12}},
        {"key": "x.double", "value": {"doubleValue": 1.5}},
        {"key": "x.double.int", "value": {"doubleValue": 2}},
        {"key": "x.nan", "value": {"doubleValue": "NaN"}},
        {"key": "x.bool", "value": {"boolValue": False}},
        {"key": "x.bytes", "value": {"bytesValue": "AAEC"}},
        {"key": "x.empty", "value": {}},
        {"key": "x.none"},
        {"key": "x.null", "value": None},
        {"key": "x.array", "value": {"arrayValue": {"values": [{"stringValue": "a"}, {}]}}},
        {"key": "x.array.empty", "value": {"arrayValue": {}}},
        {"key": "x.kv", "value": {"kvlistValue": {"values": [{"key": "k", "value": {}}]}}},
        {"key": "x.unknown.field", "value": {"stringValue": "s", "futureValue": 1}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "7"}},
    ]
    span["events"] = [{"timeUnixNano": "5", "name": "e", "attributes": [span["attributes"][0]]}]
    span["status"] = {"code": "STATUS_CODE_ERROR", "message": "boom"}
    span["flags"] = 0x300
    span["parentSpanId"] = "00000000000000aa"
    span["startTimeUnixNano"] = int(span["startTimeUnixNano"])  # a number, not text
    span["name"] = None
    second = group["scopeSpans"][0]["spans"][1]
    second["traceId"] = base64.b64encode(bytes.fromhex(second["traceId"])).decode()
    second["spanId"] = base64.b64encode(bytes.fromhex(second["spanId"])).decode()
    group["scopeSpans"][0]["spans"][2]["spanId"] = "0" * 16  # invalid: rejected
    billing = json.loads(json.dumps(group))
    billing["resource"] = {
        "attributes": [{"key": "service.name", "value": {"stringValue": "billing"}}]
    }
    billing = {"scopeSpans": billing["scopeSpans"], "resource": billing["resource"]}  # after
    bare = json.loads(json.dumps(group))
    del bare["resource"]
    document["resourceSpans"] += [billing, bare]
    path = tmp_path / "t.json"
    path.write_bytes(b"".join([json.dumps(document).encode() + b"\n", *lines[1:]]))
    reader = Reader([str(path)])
    read = list(reader.batches())
    assert len(read) == len(lines)
    expected = [
        span_views(
            json_format.Parse(
                _for_protobuf(json.loads(line)),
                ExportTraceServiceRequest(),
                ignore_unknown_fields=True,
            )
        )
        for line in [json.dumps(document).encode(), *lines[1:]]
    ]
    assert [[repr(v) for v in batch] for batch in read] == [
        [repr(v) for v in decoded.spans] for decoded in expected
    ]  # repr: NaN is not equal to itself
    assert reader.stats.rejected_spans == sum(d.rejected for d in expected) == 3
    assert any("ids in base64" in note for note in reader.stats.notes)
    services = [v.service for v in read[0]]
    third = len(services) // 3
    assert services[third:] == ["billing"] * third + ["unknown"] * third
    assert services[0] not in ("billing", "unknown")


def test_jaeger_api_v3_lines_are_read_by_the_same_decoder(recorded) -> None:
    """Jaeger 2's API v3 answer, buffered or a line of its stream, is read by the service's
    decoder (the request under ``result``) into the views its request gives; its other lines
    (the end, an error, a result without traces) are left to the general path."""
    from loopwatch.history.formats import api_v3_traces, decoded_line
    from loopwatch.service.otlp_json import JsonDecoded, decode

    spans, _ = recorded
    requests = batches(spans)
    lines = [*jaeger_v3_stream(requests).splitlines()[:-1], jaeger_v3_answer(requests)]
    for line in lines:
        read = decoded_line(line)
        assert isinstance(read, JsonDecoded)
        inner = decode(json.dumps(api_v3_traces(json.loads(line))).encode())
        assert read == inner and read.spans
        assert (read.rejected, read.base64_ids) == (0, False)
    counted = 0
    for line in lines[:-1]:
        read = decoded_line(line)
        assert isinstance(read, JsonDecoded)
        counted += len(read.spans)
    assert counted == len(spans)
    for other in (
        b'{"end":true}',
        b'{"error":{"httpCode":500,"message":"storage: connection reset"}}',
        b'{"result":{"summaries":[],"nextPageToken":""}}',
    ):
        assert decoded_line(other) is None


def test_lines_in_less_usual_forms_give_the_same_numbers(
    recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file of lines in less usual forms (OTLP's legacy scope name, nulls, a resource after
    its spans) among the file exporter's gives the processor's numbers; a corrupt line among
    them is skipped and named."""
    spans, expected = recorded
    from testkit.stored import collector_json_line

    lines = []
    for n, request in enumerate(batches(spans)):
        line = collector_json_line(request)
        if n % 4 == 1:
            document = json.loads(line)
            for rs in document["resourceSpans"]:
                rs["instrumentationLibrarySpans"] = rs.pop("scopeSpans")
            line = json.dumps(document).encode() + b"\n"
        elif n % 4 == 2:
            document = json.loads(line)
            for span in document["resourceSpans"][0]["scopeSpans"][0]["spans"]:
                span.setdefault("events", None)  # null: as if absent
            line = json.dumps(document).encode() + b"\n"
        elif n % 4 == 3:
            document = json.loads(line)
            for rs in document["resourceSpans"]:
                rs["resource"] = rs.pop("resource")  # after its spans
            line = json.dumps(document).encode() + b"\n"
        lines.append(line)
    assert len(lines) >= 4
    path = tmp_path / "mixed.json"
    path.write_bytes(b"".join([lines[0], b'{"resourceSpans": [{"scopeSp\n', *lines[1:]]))
    registry, outcome = replay_registry([path])
    assert snapshot(registry) == expected
    assert outcome.stats.skipped == 1
    assert outcome.stats.problems[0].where == f"{path}:2"
    code = main(["replay", "--no-progress", str(path)])
    assert code == 0
    assert f"skipped {path}:2: not JSON" in capsys.readouterr().err
