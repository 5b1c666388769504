"""A generated block inside a hand-written file: the text between two marker lines."""

from __future__ import annotations


def replace_block(text: str, begin: str, end: str, generated: str) -> str:
    """``text`` with the block from ``begin`` to ``end`` (markers included) replaced by
    ``generated``, which carries the markers itself."""
    start = text.index(begin)
    stop = text.index(end, start) + len(end)
    return text[:start] + generated + text[stop:]
