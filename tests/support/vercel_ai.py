"""The Vercel AI SDK's recorded exports (tests/fixtures/vercel_ai), as OTLP/JSON requests."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vercel_ai"


RECORDINGS = ("ai6.jsonl", "ai7-legacy.jsonl")


def requests(recording: str) -> list[bytes]:
    """The recording's ExportTraceServiceRequests (OTLP/JSON), one a turn."""
    return (FIXTURES / recording).read_bytes().splitlines()
