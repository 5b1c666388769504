"""Which spans of a trace form which turn: each outermost agent span that holds tool calls is a
turn; tool calls under no agent span belong to the trace's local root, a turn of its own when it
holds any or when nothing else in the trace is one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from loopwatch.core.layers import merge_layers
from loopwatch.core.records import LlmMark, Record, ToolCall, TurnMark


@dataclass(slots=True)
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


def _descent(
    records: Mapping[int, Record], children: Mapping[int, Mapping[int, None]]
) -> dict[int, tuple[int, int | None]] | None:
    """What ancestry gives, walked down from each top span through the children index: each
    span reached once, none walked up from. None when a span hangs under no top (a parent
    cycle), which ancestry decides."""
    up: dict[int, tuple[int, int | None]] = {}
    stack: list[int] = []
    for span_id, rec in records.items():
        parent = rec.parent_id
        if parent is not None and parent in records:
            continue
        # ancestry's top: the root, or the missing parent that anchors its children together
        up[span_id] = (
            span_id if parent is None else parent,
            span_id if isinstance(rec, TurnMark) else None,
        )
        stack.append(span_id)
        while stack:
            node = stack.pop()
            below = children.get(node)
            if below is None:  # most spans are leaves
                continue
            above = up[node]
            for child in below:
                if child not in records:
                    continue
                if child in up:  # reached twice: not the tree the index should hold
                    return None
                # the outermost turn span at or above the child: its parent's, else itself
                if above[1] is None and isinstance(records[child], TurnMark):
                    up[child] = (above[0], child)
                else:
                    up[child] = above
                stack.append(child)
    return up if len(up) == len(records) else None


def split_turns(
    records: Mapping[int, Record],
    allow_empty: bool = True,
    children: Mapping[int, Mapping[int, None]] | None = None,
) -> list[TurnGroup]:
    """Turns of the spans in ``records`` (one trace, or one local root's part of it).

    ``allow_empty``: a trace without tool calls is one turn (False once the trace has had
    turns finalized already, so its remainder does not count again). ``children`` (parent id
    -> ids of the spans under it, the assembler's index) lets it walk down the trace instead of
    up from every span, and the common shape, one turn span holding all the others, be found in
    one pass."""
    if children is not None:
        groups = _one_turn_span(records, children, allow_empty)
        if groups is not None:
            return groups
    calls, marks, root_agent = _by_kind(records)
    # A trace without tool calls is one turn if anything in it is GenAI at all.
    if not calls and not (allow_empty and marks):
        return []
    up = _descent(records, children) if children is not None else None
    if up is None:
        up = ancestry(records)
    groups_by_anchor: dict[int, TurnGroup] = {}
    for call in calls:
        top, outer = up[call.span_id]
        anchor = outer if outer is not None else top
        group = groups_by_anchor.get(anchor)
        if group is None:
            turn = records.get(anchor)
            group = groups_by_anchor[anchor] = TurnGroup(
                anchor, turn if isinstance(turn, TurnMark) else None
            )
        group.calls.append(call)
    if not groups_by_anchor:
        outermost = [t for t in marks if isinstance(t, TurnMark) and up[t.span_id][1] == t.span_id]
        first_turn = min(outermost, key=lambda t: t.start_ns) if outermost else None
        top = up[marks[0].span_id][0]
        groups_by_anchor[top] = TurnGroup(top, first_turn)
    for llm in marks:
        if isinstance(llm, LlmMark):
            top, outer = up[llm.span_id]
            group = groups_by_anchor.get(outer) if outer is not None else None
            group = group or groups_by_anchor.get(top)
            if group is not None:
                group.llms.append(llm)
    for group in groups_by_anchor.values():
        group.calls = merge_layers(group.calls)
        group.root_agent = root_agent
        anchor_record = records.get(group.anchor)
        if anchor_record is not None:
            group.start_ns, group.end_ns = anchor_record.start_ns, anchor_record.end_ns
    return list(groups_by_anchor.values())


def _by_kind(
    records: Mapping[int, Record],
) -> tuple[list[ToolCall], list[TurnMark | LlmMark], str | None]:
    """The tool calls, the turn and LLM spans, and the agent the trace's root span names."""
    calls: list[ToolCall] = []
    marks: list[TurnMark | LlmMark] = []
    root_agent: str | None = None
    for rec in records.values():
        if isinstance(rec, ToolCall):
            calls.append(rec)
        elif isinstance(rec, TurnMark | LlmMark):
            marks.append(rec)
            if isinstance(rec, TurnMark) and root_agent is None and rec.parent_id is None:
                # The agent named by the trace's root span. Its children may end after it
                # (AutoGen's ``invoke_agent`` root ends before OpenInference's AGENT span
                # under it), leaving the turn's tool calls cut off from it.
                root_agent = rec.agent or None
    return calls, marks, root_agent


def _one_turn_span(
    records: Mapping[int, Record], children: Mapping[int, Mapping[int, None]], allow_empty: bool
) -> list[TurnGroup] | None:
    """The turn when one turn span holds every other span of ``records``, found in one pass;
    None for any other shape (more than one top, a top that is no turn span, a parent cycle),
    which the walk up from every span in split_turns decides. Gives what that walk would."""
    head: Record | None = None
    calls: list[ToolCall] = []
    llms: list[LlmMark] = []
    for rec in records.values():
        parent = rec.parent_id
        if parent is None or parent not in records:
            if head is not None:
                return None
            head = rec
        if isinstance(rec, ToolCall):
            calls.append(rec)
        elif isinstance(rec, LlmMark):
            llms.append(rec)
    if not isinstance(head, TurnMark):
        return None
    # Every span must hang under the head: spans in a parent cycle would not. Each span has
    # one parent, so the walk down meets each span once; the count also bounds it. Only
    # spans with spans under them are walked further (most are leaves).
    size = len(records)
    reached, stack = 1, [head.span_id]
    while stack and reached <= size:
        for child in children.get(stack.pop(), ()):
            if child in records:
                reached += 1
                if child in children:
                    stack.append(child)
    if reached != size:
        return None
    # The walk's top: the root, or the missing parent that anchors a turn without tool calls.
    top = head.span_id if head.parent_id is None else head.parent_id
    anchor = head.span_id if calls else top
    if not (calls or allow_empty):
        return []
    anchor_record = records.get(anchor)
    return [
        TurnGroup(
            anchor,
            head,
            merge_layers(calls),
            llms,
            anchor_record.start_ns if anchor_record is not None else 0,
            anchor_record.end_ns if anchor_record is not None else 0,
            (head.agent or None) if head.parent_id is None else None,  # the root's agent
        )
    ]
