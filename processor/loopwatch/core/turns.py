"""Which spans of a trace form which turn (design.md, "Words: turn")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from loopwatch.core.layers import merge_layers
from loopwatch.core.records import LlmMark, Record, ToolCall, TurnMark


@dataclass
class TurnGroup:
    """The spans of one turn: ``turn`` is its agent span, None when the local root holds it."""

    anchor: int  # span id of the turn span, or of the local root
    turn: TurnMark | None
    calls: list[ToolCall] = field(default_factory=list)
    llms: list[LlmMark] = field(default_factory=list)
    start_ns: int = 0
    end_ns: int = 0
    # the agent of the trace's root span, for a turn whose own spans name none
    root_agent: str | None = None


def ancestry(records: Mapping[int, Record]) -> dict[int, tuple[int, int | None]]:
    """span id -> (top-most known ancestor, outermost turn span at or above it); cycle-safe."""
    done: dict[int, tuple[int, int | None]] = {}
    for start in records:
        path: list[int] = []
        on_path: set[int] = set()
        node: int | None = start
        top: int | None = None
        outer: int | None = None
        while node is not None and node in records and node not in on_path:
            if node in done:
                top, outer = done[node]
                break
            path.append(node)
            on_path.add(node)
            node = records[node].parent_id
        if top is None:
            # The root; or a parent not (yet) seen, which then anchors its children together
            # (siblings under a missing agent span are one turn, not one turn each); or a cycle.
            top = node if node is not None and node not in records else path[-1]
        for span_id in reversed(path):
            if outer is None and isinstance(records[span_id], TurnMark):
                outer = span_id
            done[span_id] = (top, outer)
    return done


def split_turns(records: Mapping[int, Record], allow_empty: bool = True) -> list[TurnGroup]:
    """Turns of the spans in ``records`` (one trace, or one local root's part of it).

    ``allow_empty``: a trace without tool calls is one turn (False once the trace has had
    turns finalized already, so its remainder does not count again)."""
    up = ancestry(records)
    groups: dict[int, TurnGroup] = {}
    for span_id, rec in records.items():
        if isinstance(rec, ToolCall):
            top, outer = up[span_id]
            anchor = outer if outer is not None else top
            group = groups.get(anchor)
            if group is None:
                turn = records.get(anchor)
                group = groups[anchor] = TurnGroup(
                    anchor, turn if isinstance(turn, TurnMark) else None
                )
            group.calls.append(rec)
    if not groups and allow_empty:
        # A trace without tool calls is one turn if anything in it is GenAI at all.
        marks = [r for r in records.values() if isinstance(r, TurnMark | LlmMark)]
        if not marks:
            return []
        turns = [r for r in marks if isinstance(r, TurnMark)]
        outermost = [t for t in turns if up[t.span_id][1] == t.span_id]
        turn = min(outermost, key=lambda t: t.start_ns) if outermost else None
        top = up[marks[0].span_id][0]
        groups[top] = TurnGroup(top, turn)
    for span_id, rec in records.items():
        if isinstance(rec, LlmMark):
            top, outer = up[span_id]
            group = groups.get(outer) if outer is not None else None
            group = group or groups.get(top)
            if group is not None:
                group.llms.append(rec)
    root_agent = _root_agent(records)
    for group in groups.values():
        group.calls = merge_layers(group.calls)
        group.root_agent = root_agent
        anchor_record = records.get(group.anchor)
        if anchor_record is not None:
            group.start_ns, group.end_ns = anchor_record.start_ns, anchor_record.end_ns
    return list(groups.values())


def _root_agent(records: Mapping[int, Record]) -> str | None:
    """The agent named by the trace's root span when it is an agent span. Its children may
    end after it (AutoGen's ``invoke_agent`` root ends before OpenInference's AGENT span under
    it), leaving the turn's tool calls cut off from it."""
    for rec in records.values():
        if rec.parent_id is None and isinstance(rec, TurnMark) and rec.agent:
            return rec.agent
    return None
