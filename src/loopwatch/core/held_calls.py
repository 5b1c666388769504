"""Lone tool spans held for the model call that asked for them: in the order they came, and by
(service, tool), at most ``limit`` (the oldest then lets go, a turn of its own)."""

from __future__ import annotations

from collections import OrderedDict
from itertools import count

from loopwatch.core.records import ToolCall
from loopwatch.core.turns import TurnGroup

# a lone tool span no open turn asked for yet: (trace id, service, its group, when it came)
Held = tuple[int, str, TurnGroup, float]


class HeldCalls:
    """Not thread-safe: the assembler's caller serialises it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: OrderedDict[int, Held] = OrderedDict()  # oldest first
        self._by_tool: dict[tuple[str, str], dict[int, None]] = {}
        self._numbers = count()

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, trace_id: int, service: str, group: TurnGroup, now: float) -> list[Held]:
        """Keep a lone tool span; the held spans let go to make room, oldest first."""
        released: list[Held] = []
        while len(self._held) >= self.limit:
            released.append(self.remove(next(iter(self._held))))
        number = next(self._numbers)
        self._held[number] = (trace_id, service, group, now)
        self._by_tool.setdefault((service, group.calls[0].tool), {})[number] = None
        return released

    def of_tool(self, service: str, tool: str) -> dict[int, None] | None:
        """The numbers of the spans held of ``tool`` in ``service``, oldest first."""
        return self._by_tool.get((service, tool))

    def call(self, number: int) -> ToolCall:
        """The tool call of the span held as ``number``."""
        return self._held[number][2].calls[0]

    def remove(self, number: int) -> Held:
        """Stop holding the span held as ``number``."""
        held = self._held.pop(number)
        key = (held[1], held[2].calls[0].tool)
        numbers = self._by_tool[key]
        del numbers[number]
        if not numbers:
            del self._by_tool[key]
        return held

    def release(self, deadline: float) -> list[Held]:
        """The held spans that came at ``deadline`` or before, let go."""
        out: list[Held] = []
        while self._held:
            number, held = next(iter(self._held.items()))
            if held[3] > deadline:
                break
            out.append(self.remove(number))
        return out
