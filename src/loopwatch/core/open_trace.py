"""One open trace's buffers: its records by span id, the index of each parent's children, the
spans inside a turn, and the bytes they are estimated to hold; and a turn's subtree in them."""

from __future__ import annotations

from dataclasses import dataclass, field

from loopwatch.core.buffer_budget import TRACE_BYTES
from loopwatch.core.records import Record, TurnMark


@dataclass(init=False, slots=True)
class OpenTrace:
    service: str
    last_seen: float
    records: dict[int, Record] = field(default_factory=dict)
    # parent span id -> ids of the records under it: a turn's subtree without walking the trace
    children: dict[int, dict[int, None]] = field(default_factory=dict)
    # in process, from span starts: agent/workflow spans and every span started inside one, so
    # an agent span that ends can tell whether it is outermost (its parent is not in here)
    in_turn: set[int] = field(default_factory=set)
    # parents of the records kept; in process a plain span is kept only if one of them
    referenced: set[int] = field(default_factory=set)
    turns_emitted: int = 0
    # model calls whose messages show their turn (a hand-rolled loop), and whether any span
    # of the trace executed a tool: its tool spans then win over the messages
    conversing: bool = False
    tool_spans: bool = False
    size: int = TRACE_BYTES  # estimated bytes held, counted in the BufferBudget too
    # in serve, only plain spans so far: their records kept without the children index (built
    # when a GenAI span comes, by ``index``), not counted as an open turn
    plain: bool = False

    # written out (init=False): compiled, dataclass's generated __init__ is Python code that
    # sets each field through its descriptor; this one is C
    def __init__(
        self,
        service: str,
        last_seen: float,
        records: dict[int, Record] | None = None,
        children: dict[int, dict[int, None]] | None = None,
        in_turn: set[int] | None = None,
        referenced: set[int] | None = None,
        turns_emitted: int = 0,
        conversing: bool = False,
        tool_spans: bool = False,
        size: int = TRACE_BYTES,
        plain: bool = False,
    ) -> None:
        self.service = service
        self.last_seen = last_seen
        self.records = {} if records is None else records
        self.children = {} if children is None else children
        self.in_turn = set() if in_turn is None else in_turn
        self.referenced = set() if referenced is None else referenced
        self.turns_emitted = turns_emitted
        self.conversing = conversing
        self.tool_spans = tool_spans
        self.size = size
        self.plain = plain

    def index(self) -> int:
        """Index the records kept while the trace was plain: each under its parent, in the
        order they came (as each would have been indexed as it came). How many it indexed."""
        children, referenced = self.children, self.referenced
        indexed = 0
        for span_id, record in self.records.items():
            parent_id = record.parent_id
            if parent_id is not None:
                indexed += 1
                referenced.add(parent_id)
                siblings = children.get(parent_id)
                if siblings is None:
                    children[parent_id] = {span_id: None}
                else:
                    siblings[span_id] = None
        self.plain = False
        return indexed

    def unlink(self, record: Record) -> None:
        """Take ``record`` out of its parent's children."""
        if record.parent_id is not None:
            siblings = self.children.get(record.parent_id)
            if siblings is not None:
                siblings.pop(record.span_id, None)

    def subtree(self, anchor: int) -> list[int]:
        """The spans whose outermost turn span is ``anchor`` (``anchor`` included): its
        descendants among the records, unless a turn span above it holds them all."""
        records = self.records
        seen = {anchor}
        node = records[anchor].parent_id
        while node is not None and node in records and node not in seen:
            if type(records[node]) is TurnMark:
                return [anchor]
            seen.add(node)
            node = records[node].parent_id
        inside = [anchor]
        seen = {anchor}
        stack = [anchor]
        children = self.children
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in seen and child in records:
                    seen.add(child)
                    inside.append(child)
                    stack.append(child)
        return inside
