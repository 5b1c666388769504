"""Configs a test needs below a setting's minimum (a byte budget small enough for a few spans
to overflow): a Config refuses such values when it is made, so they are set after."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from loopwatch.core.config import Config


def below_minimums(config: Config, **changes: Any) -> Config:
    """``config`` with ``changes`` set as they are, unchecked (for tests only)."""
    out = replace(config)
    for name, value in changes.items():
        object.__setattr__(out, name, value)
    return out
