"""The fingerprint of a result: what tells a repeat that made progress from one that did not.

A result is hashed whole (a text as it is, any other value as canonical JSON) without its
volatile values (core.volatile: ids, sessions, processes, clocks, durations), which change on
every answer without being news.

Bounded: the first MAX_HASHED_CHARS characters are normalized and hashed together with the whole
length (a log that grows changes its length), so the work is linear in the result's size and the
memory taken is at most that many characters more. A value nested too deep for the JSON encoder
is walked without recursion.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from loopwatch.core.identity import canonical_json, short_hash
from loopwatch.core.volatile import without_volatile, without_volatile_keys

# Characters of a result normalized and hashed (the whole length is hashed too).
MAX_HASHED_CHARS: Final = 64 * 1024
# Scalars a walk of a value too deep for the JSON encoder visits at most.
MAX_WALKED_VALUES: Final = 1_000_000
# Fingerprints that are no result's: the result was not known (or the call failed), or empty.
NOT_KNOWN: Final = 0
EMPTY: Final = 1
_RESERVED: Final = 2

# isinstance's type tuples, built once (``dict | list`` builds a new union on every call)
_CONTAINERS: Final = (dict, list)
_SEQUENCES: Final = (list, tuple)


def normalized(text: str, json_text: bool) -> str:
    """``text`` (at most MAX_HASHED_CHARS of it) without its volatile values."""
    head = text if len(text) <= MAX_HASHED_CHARS else text[:MAX_HASHED_CHARS]
    return without_volatile(head, json_text)


def result_text(value: Any) -> tuple[str, bool]:
    """``(text, is JSON)``: a text result as it is, any other value as canonical JSON (walked
    without recursion when it is nested too deep for the encoder; never raises)."""
    if isinstance(value, str):
        return value, False
    try:
        return canonical_json(value), True
    except Exception:  # too deep, or a value JSON cannot hold: walked below
        return _walked(value), True


def _head(value: Any) -> tuple[str, int]:
    """``(normalized head, whole length)`` of a result's text; never raises."""
    # (try, not contextlib.suppress: a context manager object per result costs more)
    try:  # noqa: SIM105
        value = without_volatile_keys(value)
    except Exception:  # a mapping changed while read: compared whole
        pass
    text, json_text = result_text(value)
    try:
        return normalized(text, json_text), len(text)
    except Exception:  # never raised on any text tried; the host must not meet one if it did
        return text[:MAX_HASHED_CHARS], len(text)


def fingerprint(value: Any) -> int:
    """The fingerprint of a result, normalized (module docstring): never NOT_KNOWN or EMPTY,
    never raises. Compared only within one process (Python's randomized string hash: fast,
    and nothing outside the process ever sees it)."""
    head, size = _head(value)
    # the part past MAX_HASHED_CHARS still counts by its length
    found = hash(head) if size <= MAX_HASHED_CHARS else hash((head, size))
    if found in (NOT_KNOWN, EMPTY):
        found += _RESERVED
    return found


def stable_fingerprint(value: Any, length: int) -> str:
    """The same fingerprint as a short SHA-256 hex digest, equal in every process (an attempt
    key's outcome, which a guard's shared store compares across processes)."""
    head, size = _head(value)
    return short_hash(head if size <= MAX_HASHED_CHARS else f"{head}\x00{size}", length)


def carries_data(value: Any) -> bool:
    """Whether a non-empty result is data (rows, a nested record, several lines of text) rather
    than an acknowledgement (a scalar, a flat mapping such as ``{"status": "sent"}``, one line
    of text such as ``Message sent.``): a write answers the same acknowledgement every time,
    so the same one again says nothing of progress."""
    if isinstance(value, list):
        return len(value) > 0
    if isinstance(value, dict):
        for v in value.values():  # noqa: SIM110 (any() over a generator costs more here)
            if isinstance(v, _CONTAINERS) and len(v) > 0:
                return True
        return False
    if isinstance(value, str):
        return "\n" in value.strip()
    return False


def _walked(value: Any) -> str:
    """A JSON-like text of ``value`` built with a stack of iterators (no recursion), for values
    the encoder refuses: at most MAX_HASHED_CHARS characters written and MAX_WALKED_VALUES
    values and keys visited (a cycle ends there), after the count of those seen."""
    parts: list[str] = []
    written = seen = 0
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack and seen < MAX_WALKED_VALUES:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
            piece = ")"
            seen -= 1  # (counted below as a value: a close is none)
        elif isinstance(item, dict):
            stack.append(_entries(item))
            piece = "{"
        elif isinstance(item, _SEQUENCES):
            stack.append(iter(item))
            piece = "["
        elif isinstance(item, _Key):
            piece = item.name + ":"
        else:
            try:
                piece = canonical_json(item) + ","
            except Exception:
                piece = type(item).__name__ + ","
        seen += 1
        if written < MAX_HASHED_CHARS:
            parts.append(piece)
            written += len(piece)
    return f"#{seen}:" + "".join(parts)  # the count first: inside what is hashed


def _entries(mapping: dict[Any, Any]) -> Iterator[Any]:
    for k, v in mapping.items():
        yield _Key(str(k))
        yield v


class _Key:
    """A mapping key on the walk's stack."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


_END: Final = object()
