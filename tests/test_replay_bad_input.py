"""``loopwatch replay`` on bad input: every case a clear message naming the file (and line),
never a traceback; the good rest is read; exit 2 only when nothing could be read."""

from __future__ import annotations

import gzip
import io
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from loopwatch.cli import main
from testkit.stored import (
    collector_json_line,
    jaeger_v3_answer,
    jaeger_v3_stream,
    write_collector_json,
    write_collector_proto,
)
from tests.support.replay import CONFIG, batches, incident_turns, record, replay_registry
from tests.support.service import snapshot


@pytest.fixture(scope="module")
def recorded() -> tuple[list[Any], dict[Any, float]]:
    spans, p = record(incident_turns(random.Random(3)))
    expected = snapshot(p.registry)
    p.close()
    return spans, expected


def _replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["replay", "--no-progress", *args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, captured.out, captured.err


def test_a_corrupt_and_a_truncated_line_are_skipped_and_named(
    recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, expected = recorded
    lines = [collector_json_line(r) for r in batches(spans)]
    path = tmp_path / "t.json"
    # a corrupt line third, and a last line cut off as by a crash while writing
    tail = collector_json_line(batches(spans[:3])[0])
    path.write_bytes(b"".join([*lines[:2], b"{not json\n", *lines[2:], tail[: len(tail) // 2]]))
    registry, outcome = replay_registry([path])
    assert snapshot(registry) == expected  # every good line read, nothing counted twice
    assert outcome.stats.skipped == 2
    code, out, err = _replay(capsys, str(path))
    assert code == 0
    assert f"skipped {path}:3: not JSON" in err
    assert f"skipped {path}:{len(lines) + 2}: not JSON" in err
    assert "(2 skipped)" in out


def test_a_line_nested_too_deeply_is_skipped_and_named(
    recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An attribute value nested 100,000 arrays deep (2.8 MB) overflows any recursive
    decoder: that line is skipped and named, the rest read, no traceback."""
    spans, expected = recorded
    lines = [collector_json_line(r) for r in batches(spans)]
    levels = 100_000
    value = b'{"arrayValue":{"values":[' * levels + b'{"stringValue":"x"}' + b"]}}" * levels
    deep = b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"' + b"ab" * 16
    deep += b'","spanId":"' + b"cd" * 8 + b'","attributes":[{"key":"k","value":' + value
    deep += b"}]}]}]}]}\n"
    path = tmp_path / "t.json"
    path.write_bytes(b"".join([lines[0], deep, *lines[1:]]))
    registry, outcome = replay_registry([path])
    assert snapshot(registry) == expected
    assert outcome.stats.skipped == 1
    code, _, err = _replay(capsys, str(path))
    assert code == 0
    assert f"skipped {path}:2: not JSON: nested too deeply" in err


def test_a_line_message_or_document_over_the_bound_is_not_held(
    recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """A line, protobuf message or whole JSON document is held whole to be read, so each is
    bounded in bytes (``MAX_UNIT_BYTES``, lowered here): a line past it is skipped a chunk at a
    time, never held, and named; the lines around it are read. A document or single message
    past it is named and not read."""
    import tracemalloc

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from loopwatch.history import formats
    from tests.support.replay import jaeger_document

    spans, expected = recorded
    lines = [collector_json_line(r) for r in batches(spans)]
    bound = max(map(len, lines))
    monkeypatch.setattr(formats, "MAX_UNIT_BYTES", bound)
    hostile = b'{"resourceSpans":[{"x":"' + b"a" * (32 << 20) + b'"}]}\n'  # 32 MiB, one line
    path = tmp_path / "t.json"
    path.write_bytes(b"".join([lines[0], hostile, *lines[1:]]))
    tracemalloc.start()
    try:
        registry, outcome = replay_registry([path])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert snapshot(registry) == expected  # every other line read
    assert outcome.stats.skipped == 1
    assert peak < 8 << 20  # the 32 MiB line was never held
    code, _, err = _replay(capsys, str(path))
    assert code == 0
    assert f"skipped {path}:2: a line over {bound:,} bytes: skipped" in err

    pretty = tmp_path / "jaeger.json"
    pretty.write_text(json.dumps(jaeger_document(spans), indent=2))
    assert pretty.stat().st_size > bound
    code, _, err = _replay(capsys, str(pretty))
    assert code == 2
    assert f"{pretty}: a JSON document over {bound:,} bytes: not read" in err

    single = tmp_path / "one.binpb"
    single.write_bytes(encode_spans(spans).SerializeToString())  # every span in one message
    assert single.stat().st_size > bound
    code, _, err = _replay(capsys, str(single))
    assert code == 2
    assert f"{single}: one protobuf message over {bound:,} bytes: not read" in err


def test_empty_wrong_and_missing_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    code, _, err = _replay(capsys, str(empty))
    assert code == 2
    assert f"skipped {empty}: empty file" in err
    assert "no spans could be read" in err

    picture = tmp_path / "photo.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    code, _, err = _replay(capsys, str(picture))
    assert code == 2
    assert "not a trace file (OTLP JSON or protobuf, Jaeger or Tempo JSON" in err

    other = tmp_path / "metrics.json"
    other.write_text(json.dumps({"resourceMetrics": []}) + "\n")
    code, _, err = _replay(capsys, str(other))
    assert code == 2
    assert f"{other}:1: not a trace document (OTLP JSON, Jaeger or Tempo); its keys: " in err

    code, _, err = _replay(capsys, str(tmp_path / "nowhere.json"), str(tmp_path / "*.none"))
    assert code == 2
    assert "nowhere.json: no such file or directory" in err
    assert "*.none: no file matches this pattern" in err


def test_one_good_file_among_bad_ones_is_read(
    recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, _ = recorded
    (tmp_path / "0-empty.json").write_bytes(b"")
    write_collector_json(tmp_path / "1-good.json", batches(spans))
    code, out, err = _replay(capsys, str(tmp_path))
    assert code == 0
    assert "1 of 2 files" in out
    assert "0-empty.json: empty file" in err


def test_globs_and_a_forced_format(
    recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, expected = recorded
    requests = batches(spans)
    half = len(requests) // 2
    write_collector_json(tmp_path / "traces-1.json", requests[:half])
    write_collector_json(tmp_path / "traces-2.json", requests[half:])
    proto = write_collector_proto(tmp_path / "traces.bin", requests)
    registry, outcome = replay_registry([tmp_path / "traces-*.json"])
    assert outcome.stats.files == 2 and snapshot(registry) == expected
    registry, outcome = replay_registry([proto], forced="otlp-proto")
    assert snapshot(registry) == expected
    # a format forced on a file in another: named, nothing read
    code, _, err = _replay(capsys, "--format", "jaeger", str(proto))
    assert code == 2
    assert f"skipped {proto}: not JSON, which --format jaeger reads (starts with bytes 0000" in err
    code, _, err = _replay(capsys, "--format", "jaeger", str(tmp_path / "traces-1.json"))
    assert code == 2
    assert "traces-1.json:1: --format jaeger, but this document is otlp-json" in err


def test_jaeger_api_v3_errors_and_answers_without_traces(
    recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, expected = recorded
    requests = batches(spans)
    # a streamed answer cut short by the storage: what came before it is read, the error named
    cut = tmp_path / "cut.ndjson"
    error = b'{"error":{"httpCode":500,"message":"storage: connection reset"}}'
    cut.write_bytes(jaeger_v3_stream(requests, last=error))
    registry, outcome = replay_registry([cut])
    assert snapshot(registry) == expected
    assert [(p.where, p.message) for p in outcome.stats.problems] == [
        (
            f"{cut}:{len(requests) + 1}",
            "Jaeger API v3 answered an error 500: storage: connection reset",
        )
    ]
    code, _, err = _replay(capsys, str(cut))
    assert code == 0 and "answered an error 500: storage: connection reset" in err
    # nothing found (saved as the body of a 404), a search's summaries: named, nothing read
    missing = tmp_path / "missing.json"
    missing.write_text('{"error":{"httpCode":404,"message":"No traces found"}}')
    summaries = tmp_path / "summaries.json"
    summaries.write_text('{"result":{"summaries":[],"nextPageToken":""}}')
    code, _, err = _replay(capsys, str(missing), str(summaries))
    assert code == 2
    assert f"{missing}:1: Jaeger API v3 answered an error 404: No traces found" in err
    without = "a Jaeger API v3 answer without traces (its result: nextPageToken, summaries)"
    assert f"{summaries}:1: {without}" in err
    # a forced format: jaeger and otlp-json read it (OTLP JSON inside), tempo names it
    answer = tmp_path / "answer.json"
    answer.write_bytes(jaeger_v3_answer(requests))
    for forced in ("jaeger", "otlp-json"):
        registry, outcome = replay_registry([answer], forced=forced)
        assert snapshot(registry) == expected, forced
    code, _, err = _replay(capsys, "--format", "tempo", str(answer))
    assert code == 2 and f"{answer}:1: --format tempo, but this document is jaeger" in err


def test_the_progress_line_on_a_terminal(
    recorded: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both passes show progress: reading (and grouping by trace), then replaying."""
    from loopwatch.history import progress, replay

    spans, _ = recorded
    path = write_collector_json(tmp_path / "t.json", batches(spans))
    monkeypatch.setattr(progress, "_PROGRESS_SECONDS", 0.0)
    terminal = io.StringIO()
    replay.run_replay([str(path)], CONFIG, progress=terminal)
    shown = terminal.getvalue()
    assert f"reading file 1/1: {len(spans):,} spans" in shown and "spans/s" in shown
    assert f"grouping {len(spans):,} spans by trace: bucket " in shown
    assert f"replaying: {len(spans):,} of {len(spans):,} spans" in shown
    assert shown.endswith("\r\x1b[K")  # cleared before the report


def test_base64_ids_beside_hex_ids(recorded: Any, tmp_path: Path) -> None:
    """protobuf's JSON mapping (base64 ids) on some lines, the OTLP file format (hex) on the
    others: each id is read as its length says, with a note."""
    spans, expected = recorded
    requests = batches(spans)
    lines = []
    for n, request in enumerate(requests):
        if n % 2:
            lines.append(json.dumps(json_format.MessageToDict(request)).encode() + b"\n")
        else:
            lines.append(collector_json_line(request))
    path = tmp_path / "mixed.json"
    path.write_bytes(b"".join(lines))
    registry, outcome = replay_registry([path])
    assert snapshot(registry) == expected
    assert any("ids in base64 (protobuf's JSON mapping)" in note for note in outcome.stats.notes)


def test_bad_ids_and_malformed_structure_name_the_span(
    recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, _ = recorded
    good = collector_json_line(batches(spans[:5])[0])
    document = json.loads(good)
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["spanId"] = "zz" * 8
    broken = json.dumps(document).encode() + b"\n"
    structure = b'{"resourceSpans": "not a list"}\n'
    path = tmp_path / "t.json"
    path.write_bytes(good + broken + structure + b"[1, 2]\n")
    code, _, err = _replay(capsys, str(path))
    assert code == 0
    assert "t.json:2: resourceSpans[0].scopeSpans[0].spans[1].spanId: not a hex or base64 id" in err
    assert "t.json:3: resourceSpans: expected an array or null, got a string" in err
    assert "t.json:4: not a trace document: a JSON list, not an object" in err


def test_missing_parents_are_finalized_as_cut_with_a_message(
    recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace without its root is finalized once it has been read whole, its turns counted
    as cut short; the same however its spans are ordered."""
    spans, _ = recorded
    without_roots = [s for s in spans if s.parent is not None]
    path = write_collector_json(tmp_path / "t.json", batches(without_roots))
    _, outcome = replay_registry([path])
    assert outcome.report.turns == 36  # each trace's tool calls still make its turn
    assert outcome.replay.rootless == 36
    assert outcome.report.evicted == {"shutdown": 36}
    assert outcome.report.late_spans == 0
    shuffled = list(reversed(without_roots))
    reordered = write_collector_json(tmp_path / "r.json", batches(shuffled, size=3))
    _, again = replay_registry([reordered])
    assert again.report.to_json() == outcome.report.to_json()
    code, _, err = _replay(capsys, str(path))
    assert code == 0
    assert "36 traces had no root span in the input (a parent span missing)" in err
    assert "counted as cut short (turns evicted: shutdown)" in err
    assert "idle timeout" not in err


def test_truncated_compressed_and_protobuf_files(
    recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, _ = recorded
    requests = batches(spans)
    gz = write_collector_json(tmp_path / "t.json.gz", requests, compress=True)
    gz.write_bytes(gz.read_bytes()[:-200])
    code, _, err = _replay(capsys, str(gz))
    assert code == 0  # the lines before the cut are read
    assert f"{gz}: compressed data is truncated (read up to the cut)" in err

    proto = write_collector_proto(tmp_path / "t.binpb", requests)
    proto.write_bytes(proto.read_bytes()[:-100])
    code, _, err = _replay(capsys, str(proto))
    assert code == 0
    assert f"{proto}: message {len(requests)} (byte " in err
    assert "truncated:" in err

    zstd = tmp_path / "t.json.zst"
    zstd.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(32))  # a frame header, then nothing
    code, _, err = _replay(capsys, str(zstd))
    assert code == 2
    assert f"{zstd}: compressed data is truncated before any content" in err
    assert "empty file" not in err

    single = tmp_path / "one.pb"
    single.write_bytes(b"\x0a\xff\xff\xff\x0f" + bytes(10))
    code, _, err = _replay(capsys, str(single))
    assert code == 2
    assert f"{single}: not an OTLP protobuf trace request" in err


def test_stdin_and_a_bad_config(recorded: Any, tmp_path: Path) -> None:
    spans, _ = recorded
    data = gzip.compress(b"".join(collector_json_line(r) for r in batches(spans)))
    done = subprocess.run(
        [sys.executable, "-m", "loopwatch.cli", "replay", "-", "--json"],
        input=data,
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["input"]["spans"] == len(spans)
    bad = tmp_path / "bad.toml"
    bad.write_text("[defaults\n")
    done = subprocess.run(
        [sys.executable, "-m", "loopwatch.cli", "replay", "-", "--config", str(bad)],
        input=data,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.decode().startswith("loopwatch replay: ")
    assert b"Traceback" not in done.stderr
