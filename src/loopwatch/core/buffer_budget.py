"""What the assembler's buffers cost, estimated per record, and the byte budget they share: the
open traces' records and the open conversations (``config.buffer_bytes``)."""

from __future__ import annotations

from typing import Final

from loopwatch.core.records import Link, LlmMark, Record, ToolCall, TurnMark

# What the buffers cost, estimated (CPython 3.11, 64-bit ids, measured with tracemalloc): a
# record is a slotted object with its ids, times and names (plus the names' length); a record
# under a parent is also an entry of the children index and of the referenced set; a span id in
# a set; a trace's own objects.
RECORD_BYTES: dict[type, int] = {ToolCall: 610, TurnMark: 300, LlmMark: 300, Link: 280}
CHILD_BYTES: Final = 140
SET_ENTRY_BYTES: Final = 70
TRACE_BYTES: Final = 1000


def record_bytes(record: Record) -> int:
    """The estimated memory one buffered record holds (see RECORD_BYTES)."""
    size = RECORD_BYTES[type(record)]
    if record.parent_id is not None:
        size += CHILD_BYTES
    if isinstance(record, ToolCall):
        size += len(record.tool) + len(record.agent or "") + len(record.tool_version)
    elif isinstance(record, LlmMark):
        size += len(record.model or "")
        if record.messages is not None:
            size += record.messages.size
        versions = record.tool_versions
        if versions:
            # a list, not a generator: a Python call per element less
            size += SET_ENTRY_BYTES * len(versions) + sum([len(name) for name, _ in versions])
    elif isinstance(record, TurnMark):
        size += len(record.agent or "") + len(record.model or "")
    return size


class BufferBudget:
    """The estimated bytes held over every open trace and conversation, against ``limit``.

    The conversations' part is synced from them (``sync``) at the points where they changed:
    the traces' part is charged here as each record comes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.conversations = 0  # the conversations' part of held

    def sync(self, conversation_bytes: int) -> None:
        """Take the open conversations' bytes as they are now."""
        self.held += conversation_bytes - self.conversations
        self.conversations = conversation_bytes

    def conversations_first(self) -> bool:
        """Whether eviction takes an open conversation before a trace: when they hold half the
        bytes or more."""
        return 2 * self.conversations >= self.held
