"""Span attributes that remember every key read_span asks for."""

from __future__ import annotations

from typing import Any


class Recording(dict[str, Any]):
    """Attributes that remember every key read_span asks for."""

    asked: set[str]

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.asked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return super().__contains__(key)
