"""One tool call recorded by two instrumentation layers is one call.

A tool span nested directly in a tool span of the same tool records the same execution twice
(AutoGen's own ``execute_tool`` span under OpenInference's TOOL span, when both write to one
provider). Each layer knows part of it, so the layers are merged: the arguments from the one
that has them, the error from the one that saw it, the result from the one that read it."""

from __future__ import annotations

from dataclasses import replace

from loopwatch.core.effects import READ
from loopwatch.core.keys import AttemptKey, unknown_identity
from loopwatch.core.outcomes import OK
from loopwatch.core.records import ToolCall

# The tool name of a span that executes its parent tool span's call without naming the tool
# (Claude Code's, named so where it stands alone): a layer of the parent's call, whatever its tool.
INNER_LAYER = "claude_code.tool.execution"
_UNKNOWN = "unknown"  # ToolCall.result when the result was not readable
_GENERIC_ERROR = "tool_error"


def merge_layers(calls: list[ToolCall]) -> list[ToolCall]:
    """``calls`` with every chain of directly nested same-tool spans folded into its outermost
    span (its id, parent and times stay, so it sorts where the call started)."""
    if len(calls) < 2:
        return calls
    by_id = {c.span_id: c for c in calls}
    # the common case, no call directly under a call of its own tool: nothing to fold
    for c in calls:
        parent = by_id.get(c.parent_id) if c.parent_id is not None else None
        if parent is not None and _same_call(parent, c):
            break
    else:
        return calls
    # span id -> (its outermost same-tool layer, depth below it); each span is walked once, so a
    # hostile chain of thousands of nested same-tool spans costs linear time, not quadratic
    tops: dict[int, tuple[ToolCall, int]] = {}
    layers: dict[int, list[tuple[int, ToolCall]]] = {}
    nested = False
    for call in calls:
        path: list[ToolCall] = []
        seen: set[int] = set()
        node = call
        while True:
            known = tops.get(node.span_id)
            if known is not None:
                top, depth = known
                break
            seen.add(node.span_id)
            parent = by_id.get(node.parent_id) if node.parent_id is not None else None
            if parent is None or not _same_call(parent, node) or parent.span_id in seen:
                top, depth = node, 0
                tops[node.span_id] = (node, 0)
                break
            path.append(node)
            node = parent
        for above, below in enumerate(reversed(path), start=1):
            tops[below.span_id] = (top, depth + above)
        call_depth = tops[call.span_id][1]
        nested = nested or call_depth > 0
        layers.setdefault(top.span_id, []).append((call_depth, call))
    if not nested:
        return calls
    out: list[ToolCall] = []
    for group in layers.values():
        ordered = [c for _, c in sorted(group, key=lambda item: item[0])]
        out.append(ordered[0] if len(ordered) == 1 else merge(ordered))
    return out


def _same_call(parent: ToolCall, child: ToolCall) -> bool:
    """Whether ``child``, directly under ``parent``, records the same call."""
    return parent.span_id != child.span_id and (
        parent.tool == child.tool or child.tool == INNER_LAYER
    )


def merge(layers: list[ToolCall]) -> ToolCall:
    """Merge layers ordered outermost first."""
    outer = layers[0]
    failed = [c.error_class for c in layers if c.error_class != OK]
    # a named class (timeout) over the generic one a layer falls back to
    error_class = next((e for e in failed if e != _GENERIC_ERROR), failed[0]) if failed else OK
    source = next((c for c in layers if c.arguments_known), outer)
    identity, inferred = source.key.identity, source.key.inferred
    fingerprint = same_result = 0
    if error_class != OK:
        if source.failed_identity is not None:
            identity, inferred = source.failed_identity, True
        result, outcome = _UNKNOWN, error_class
    else:
        read = next((c for c in layers if c.result != _UNKNOWN), None)
        result = _UNKNOWN if read is None else read.result
        # a write's success is keyed "ok" whatever it answered (core.keys), in every layer
        outcome = result if result != _UNKNOWN and source.effect == READ else OK
        if read is not None:
            fingerprint, same_result = read.fingerprint, read.same_result
    if not source.arguments_known:
        identity = unknown_identity(outcome, outer.span_id)
    return replace(
        outer,
        key=AttemptKey(outer.tool, identity, outcome, inferred),
        error_class=error_class,
        result=result,
        arguments_known=source.arguments_known,
        tool_version=next((c.tool_version for c in layers if c.tool_version), ""),
        agent=next((c.agent for c in layers if c.agent), None),
        guard=next((c.guard for c in layers if c.guard), None),
        failed_identity=None,
        fingerprint=fingerprint,
        same_result=same_result,
        effect=source.effect,
    )


def executed_outcome(read: ToolCall, executed: ToolCall) -> ToolCall:
    """A call read from model calls' messages, with its outcome from the tool span that
    executed it (its status, error type and result over the message's text) where that span
    saw one: a span that neither failed nor read the result (an MCP SDK's span knows only the
    tool's name) leaves the message's outcome. The read call's id and times stay (the turn's
    order and timing are the messages')."""
    failed = executed.error_class != OK
    if not failed and executed.result == _UNKNOWN:
        return read
    source = executed if executed.arguments_known else read
    identity, inferred = source.key.identity, source.key.inferred
    if failed and source.error_class == OK and source.failed_identity is not None:
        identity, inferred = source.failed_identity, True
    if failed:
        result, outcome = _UNKNOWN, executed.error_class
        fingerprint, same_result = executed.fingerprint, executed.same_result
    else:
        result = executed.result
        outcome = result if source.effect == READ else OK  # a write's success: "ok"
        fingerprint, same_result = executed.fingerprint, executed.same_result
    arguments_known = executed.arguments_known or read.arguments_known
    if not arguments_known:
        identity = unknown_identity(outcome, read.span_id)
    return replace(
        read,
        key=AttemptKey(read.tool, identity, outcome, inferred),
        error_class=executed.error_class,
        result=result,
        arguments_known=arguments_known,
        tool_version=read.tool_version or executed.tool_version,
        agent=read.agent or executed.agent,
        guard=executed.guard or read.guard,
        failed_identity=None if failed else source.failed_identity,
        fingerprint=fingerprint,
        same_result=same_result,
    )
