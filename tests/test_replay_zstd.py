"""``loopwatch replay`` on the Collector file exporter's ``compression: zstd``, both ways it
writes it: the whole file a zstd stream (its native compression: one frame per write when it
rotates files, else frames as it flushes), and each request a frame of its own after its
length (the older way, JSON or protobuf). Same numbers as the plain files; a cut-short or
corrupt file named; without the zstandard package, a message that says what to install."""

from __future__ import annotations

import io
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwatch.cli import main
from loopwatch.history import compressed
from testkit.stored import collector_json_line
from tests.support.replay import batches, incident_turns, record, replay_registry
from tests.support.service import snapshot

zstandard = pytest.importorskip("zstandard")  # the zstd extra; the test extra installs it


@pytest.fixture(scope="module")
def recorded() -> tuple[list[Any], dict[Any, float]]:
    spans, p = record(incident_turns(random.Random(11)))
    expected = snapshot(p.registry)
    p.close()
    return spans, expected


def _compressor() -> Any:
    return zstandard.ZstdCompressor(write_checksum=True)  # as the exporter's encoder does


def _frame(data: bytes) -> bytes:
    return bytes(_compressor().compress(data))


def _prefixed(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def _native(requests: list[Any], proto: bool, frame_per_write: bool) -> bytes:
    """Native compression: what the exporter writes plain, as a zstd stream."""
    if proto:
        writes = [_prefixed(r.SerializeToString()) for r in requests]
    else:  # a line, then its newline: two writes
        writes = [w for r in requests for w in (collector_json_line(r)[:-1], b"\n")]
    if frame_per_write:  # rotating files: each write a whole frame
        return b"".join(_frame(w) for w in writes)
    compressor = _compressor()
    half = len(writes) // 2  # one frame finished at a flush, the next at close
    return _frame(b"".join(writes[:half])) + bytes(compressor.compress(b"".join(writes[half:])))


def _per_message(requests: list[Any], proto: bool) -> bytes:
    """The older compression: each request a frame, after its length."""
    bodies = [r.SerializeToString() if proto else collector_json_line(r)[:-1] for r in requests]
    return b"".join(_prefixed(_frame(body)) for body in bodies)


def _replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["replay", "--no-progress", *args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "layout",
    [
        "native-json-frame-per-write",
        "native-json-stream",
        "native-proto-frame-per-write",
        "native-proto-stream",
        "per-message-json",
        "per-message-proto",
    ],
)
def test_zstd_files_give_the_processors_numbers(recorded: Any, tmp_path: Path, layout: str) -> None:
    spans, expected = recorded
    requests = batches(spans)
    proto = "proto" in layout
    if layout.startswith("native"):
        data = _native(requests, proto, frame_per_write=layout.endswith("per-write"))
    else:
        data = _per_message(requests, proto)
    path = tmp_path / "traces.zst"
    path.write_bytes(data)
    registry, outcome = replay_registry([path])
    assert outcome.stats.problems == []
    assert outcome.stats.spans == len(spans)
    assert snapshot(registry) == expected


def test_a_cut_short_zstd_file_is_read_up_to_the_cut(
    recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, _ = recorded
    requests = batches(spans)
    data = _native(requests, proto=False, frame_per_write=True)
    path = tmp_path / "traces.json.zst"
    path.write_bytes(data[: len(data) - 200])  # inside the last line's frame
    _, outcome = replay_registry([path])
    assert 0 < outcome.stats.spans < len(spans)
    code, _, err = _replay(capsys, str(path))
    assert code == 0
    assert f"{path}: compressed data is truncated (read up to the cut)" in err


def test_a_frame_that_ends_where_a_piece_ends_is_followed_by_the_next() -> None:
    """A stream is decompressed a piece at a time; a frame that ends exactly at a piece's end
    is followed by a new decompressor (zstandard's cannot be used again once its frame ends)."""
    first, second = (_compressor().compress(text) for text in (b"a" * 5000, b"b" * 3000))
    stream = compressed.Decompressing(
        io.BytesIO(first + second), zstandard.ZstdDecompressor().decompressobj, len(first)
    )
    assert stream.read() == b"a" * 5000 + b"b" * 3000
    assert not stream.truncated


def test_a_corrupt_zstd_frame_is_named(
    recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, _ = recorded
    requests = batches(spans)
    bodies = [_frame(r.SerializeToString()) for r in requests]
    broken = bytearray(bodies[1])
    broken[len(broken) // 2] ^= 0xFF
    bodies[1] = bytes(broken)
    path = tmp_path / "traces.binpb"
    path.write_bytes(b"".join(_prefixed(b) for b in bodies))
    code, _, err = _replay(capsys, str(path))
    assert code == 0  # the other messages read
    assert f"{path}: message 2 (byte " in err
    assert "skipped" in err


def test_without_the_zstandard_package_the_message_says_what_to_install(
    recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    spans, _ = recorded
    requests = batches(spans)
    native = tmp_path / "native.zst"
    native.write_bytes(_native(requests, proto=True, frame_per_write=False))
    older = tmp_path / "older.binpb"
    older.write_bytes(_per_message(requests, proto=False))
    monkeypatch.setitem(sys.modules, "zstandard", None)  # import zstandard fails
    for path in (native, older):
        code, _, err = _replay(capsys, str(path))
        assert code == 2
        assert "zstandard package is not installed: pip install 'loopwatch[zstd]'" in err
        assert str(path) in err
