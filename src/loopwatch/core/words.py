"""Counts in the words that go with them: "1 turn", "2 turns", "1 span was", "2 spans were"."""

from __future__ import annotations


def plural(n: int, one: str, many: str = "") -> str:
    """The word for ``n`` things: ``one`` for exactly one, else ``many`` (default ``one`` + s)."""
    return one if n == 1 else many or one + "s"


def counted(n: int, one: str, many: str = "", grouped: bool = False) -> str:
    """``n`` and its noun ("1 turn", "0 turns"); ``grouped`` writes thousands as 1,520."""
    number = f"{n:,}" if grouped else str(n)
    return f"{number} {plural(n, one, many)}"
