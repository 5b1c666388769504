"""A one-line progress display on a terminal for ``loopwatch replay``: reading
(file, spans, MiB, spans/s), grouping by trace (bucket of buckets), replaying (spans of spans,
spans/s). Redrawn at most every ``_PROGRESS_SECONDS``; nothing without a terminal."""

from __future__ import annotations

import time
from typing import TextIO

from loopwatch.core.words import counted
from loopwatch.history.formats import ReadStats

_PROGRESS_SECONDS = 0.5


class Progress:
    def __init__(self, out: TextIO | None, stats: ReadStats) -> None:
        self.out = out
        self.stats = stats
        self.started = time.monotonic()
        self.next = self.started + _PROGRESS_SECONDS
        self.file = ""
        self.shown = False
        self._replay_started: float | None = None

    def on_file(self, index: int, name: str) -> None:
        self.file = f"file {index + 1}/{self.stats.files}"

    def _due(self) -> float | None:
        """The time now when a redraw is due, else None."""
        if self.out is None:
            return None
        now = time.monotonic()
        if now < self.next:
            return None
        self.next = now + _PROGRESS_SECONDS
        return now

    def _show(self, text: str) -> None:
        assert self.out is not None
        self.out.write(f"\r  {text}\x1b[K")
        self.out.flush()
        self.shown = True

    def tick(self) -> None:
        """Reading (the first pass): after each request read."""
        now = self._due()
        if now is None:
            return
        rate = self.stats.spans / max(now - self.started, 1e-9)
        mib = self.stats.bytes_read / (1 << 20)
        self._show(
            f"reading {self.file}: {counted(self.stats.spans, 'span', grouped=True)}, "
            f"{mib:,.1f} MiB read, "
            f"{rate:,.0f} spans/s"
        )

    def sorting(self, bucket: int, buckets: int) -> None:
        """Grouping by trace: before each bucket is sorted."""
        if self._due() is not None:
            spans = counted(self.stats.spans, "span", grouped=True)
            self._show(f"grouping {spans} by trace: bucket {bucket}/{buckets}")

    def replaying(self, spans: int) -> None:
        """The second pass: after each chunk of traces went through the pipeline."""
        if self._replay_started is None:
            self._replay_started = time.monotonic()
        now = self._due()
        if now is None:
            return
        rate = spans / max(now - self._replay_started, 1e-9)
        total = counted(self.stats.spans, "span", grouped=True)
        self._show(f"replaying: {spans:,} of {total}, {rate:,.0f} spans/s")

    def done(self) -> None:
        if self.out is not None and self.shown:
            self.out.write("\r\x1b[K")
            self.out.flush()
