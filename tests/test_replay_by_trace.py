"""``loopwatch.history.by_trace``: spans grouped by trace in temporary files give every trace
whole, in order of (earliest span end, trace id), its spans in order of (end, start, span id),
the same however the spans were batched and ordered, and whatever limits it runs under
(buckets split again, runs merged in rounds, a trace larger than the sorting limit); the
temporary directory goes when the grouping ends, on error and on Ctrl-C too."""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loopwatch.core.span_view import EventView, SpanView
from loopwatch.history.by_trace import Grouping, GroupingError, Limits, Trace
from testkit.stored import stored_stream

S = 10**9
# small enough that every path runs: spans held, then written; buckets split, twice over;
# runs merged two at a time; one trace larger than a bucket may be to be sorted
TINY = Limits(memory=64 << 10, buckets=4, fan_in=2)


def _span(rng: random.Random, trace_id: int, n: int, parent: int | None) -> SpanView:
    start = 1_767_225_600 * S + rng.randrange(7200) * S + rng.randrange(S)
    attributes: dict[str, Any] = {
        "gen_ai.tool.name": rng.choice(["create_ticket", "search_orders"]),
        "n": n,
        "ratio": rng.random(),
        "nan": math.nan,
        "flag": rng.random() < 0.5,
        "blob": rng.randbytes(8),
        "list": (1, "two", 3.0, False),
        "map": {"k": "v", "inner": {"x": None}},
        "text": "x" * rng.randrange(400),
    }
    events = (EventView("exception", {"exception.type": "TimeoutError"}),) if n % 5 == 0 else ()
    return SpanView(
        trace_id,
        n + 1,
        parent,
        f"span {n}",
        start,
        start + rng.randrange(60 * S),
        attributes,
        events,
        n % 3,
        "",
        rng.choice(["shop-a", "shop-b"]),
        {"remote_parent": True} if n % 7 == 0 else {},
    )


def _spans(seed: int) -> list[SpanView]:
    """400 traces of 1 to 12 spans, and one of 600 (far larger than TINY lets a bucket be)."""
    rng = random.Random(seed)
    out: list[SpanView] = []
    for t in range(400):
        trace_id = rng.getrandbits(128) or 1
        for n in range(rng.randrange(1, 13)):
            out.append(_span(rng, trace_id, n, None if n == 0 else rng.randrange(1, n + 1)))
        if t == 200:
            big = rng.getrandbits(128)
            out.extend(_span(rng, big, n, None if n == 0 else 1) for n in range(600))
    return out


def _fields(s: SpanView) -> tuple[Any, ...]:
    events = tuple((e.name, dict(e.attributes)) for e in s.events)
    attributes = repr(sorted(s.attributes.items()))  # nan != nan: compared as text
    return (
        s.trace_id,
        s.span_id,
        s.parent_id,
        s.name,
        s.start_ns,
        s.end_ns,
        attributes,
        events,
        s.status_code,
        s.status_description,
        s.service,
        dict(s.extra),
        type(s.attributes["list"]),
    )


def _expected(spans: list[SpanView]) -> list[tuple[int, int, list[tuple[Any, ...]]]]:
    by_trace: dict[int, list[SpanView]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    out = []
    for trace_id, members in by_trace.items():
        members.sort(key=lambda s: (s.end_ns, s.start_ns, s.span_id))
        out.append((members[0].end_ns, trace_id, [_fields(s) for s in members]))
    out.sort(key=lambda t: (t[0], t[1]))
    return out


def _grouped(
    spans: list[SpanView], limits: Limits, size: int, directory: Path
) -> tuple[list[tuple[int, int, list[tuple[Any, ...]]]], Grouping]:
    traces: list[Trace] = []
    with Grouping(limits, str(directory)) as grouping:
        for i in range(0, len(spans), size):
            grouping.add(spans[i : i + size])
        traces = list(grouping.traces())
    return [(t.first_end_ns, t.trace_id, [_fields(s) for s in t.spans]) for t in traces], grouping


@pytest.mark.parametrize("limits", [Limits(), TINY], ids=["default", "tiny"])
def test_every_trace_whole_in_order_however_batched(tmp_path: Path, limits: Limits) -> None:
    spans = _spans(1)
    expected = _expected(spans)
    assert len(expected) == 401
    ordered = sorted(spans, key=lambda s: s.end_ns)  # as an exporter writes them
    shuffled = spans[:]
    random.Random(2).shuffle(shuffled)
    for layout, size in ((ordered, 512), (shuffled, 7), (shuffled, 1), (ordered, 10**6)):
        got, grouping = _grouped(layout, limits, size, tmp_path)
        assert got == expected
        assert grouping.spans == len(spans)
        assert list(tmp_path.iterdir()) == []  # the temporary directory is gone
    if limits is TINY:
        assert grouping.spilled_bytes > 16 * limits.sort_bytes  # written, split, merged


def test_the_temporary_directory_goes_on_error(tmp_path: Path) -> None:
    spans = _spans(3)
    with pytest.raises(KeyboardInterrupt), Grouping(TINY, str(tmp_path)) as grouping:
        grouping.add(spans)
        assert grouping.path is not None and any(grouping.path.iterdir())
        for n, _ in enumerate(grouping.traces()):
            if n == 10:
                raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_a_directory_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(GroupingError) as error, Grouping(directory=str(missing)):
        pass
    message = str(error.value)
    assert message.startswith("cannot create a temporary directory: No such file or directory")
    assert "set TMPDIR to a directory with room" in message


class Mark(str):
    """A value of a type marshal does not write."""


def test_spans_marshal_cannot_write_are_pickled(tmp_path: Path) -> None:
    """An attribute value of a type outside plain data still comes back as it was."""
    span = SpanView(5, 6, None, "root", 10, 20, {"mark": Mark("m")})
    with Grouping(directory=str(tmp_path)) as grouping:
        grouping.add([span])
        (trace,) = grouping.traces()
    assert type(trace.spans[0].attributes["mark"]) is Mark
    assert trace.spans[0].attributes == {"mark": "m"}


@pytest.mark.slow
def test_ctrl_c_during_a_replay_leaves_no_temporary_files(tmp_path: Path) -> None:
    """``loopwatch replay`` interrupted while it feeds the sorted traces (a run file exists):
    exit 130, and nothing left under TMPDIR."""
    path = tmp_path / "traces.json.gz"
    stored_stream(path, 40_000, shuffled=True)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "loopwatch.cli", "replay", str(path), "--no-progress"],
        env={**os.environ, "TMPDIR": str(tmpdir)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not any(p.name.startswith("run-") for p in tmpdir.glob("loopwatch-replay-*/*")):
            assert process.poll() is None, "the replay ended before it was interrupted"
            assert time.monotonic() < deadline, "no run file appeared"
            time.sleep(0.005)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert list(tmpdir.iterdir()) == []
