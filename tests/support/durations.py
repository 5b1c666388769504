"""Prometheus durations (``1h30m``) in seconds."""

from __future__ import annotations

import re


def duration_seconds(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smhdw])", text))
