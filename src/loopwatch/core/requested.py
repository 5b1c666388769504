"""Tool calls whose spans carry no arguments, completed from the model calls that asked for them.

Some tool spans name the tool and nothing else: the MCP SDK's own client spans, or a framework's
with content capture off while the model instrumentation records messages. Where the turn's
model calls carry their messages, the calls they requested hold the arguments (and the results
they were sent, with any error), in order. Each argument-less tool span is paired with the next
requested call of the same tool and merged with it as two layers of one call (core.layers). The
messages are read only for such a turn."""

from __future__ import annotations

import logging
from collections import defaultdict, deque

from loopwatch.core.layers import merge
from loopwatch.core.records import UNREADABLE_HISTORY, ToolCall, UnreadableHistory
from loopwatch.core.sink import Sink
from loopwatch.core.turns import TurnGroup

log = logging.getLogger(__name__)


def needs_completing(group: TurnGroup) -> bool:
    """The turn has a call without arguments and a model call whose messages could name them."""
    return any(not c.arguments_known for c in group.calls) and any(
        m.messages is not None for m in group.llms
    )


def complete(group: TurnGroup, sink: Sink) -> None:
    """Merge each argument-less call of ``group`` with the call its model calls requested."""
    requested = _requested(group, sink)
    if not requested:
        return
    queues: dict[str, deque[ToolCall]] = defaultdict(deque)
    for call in requested:
        queues[call.tool].append(call)
    calls = sorted(group.calls, key=lambda c: c.start_ns)
    completed: list[ToolCall] = []
    for call in calls:
        queue = queues.get(call.tool)
        asked = queue.popleft() if queue else None
        if asked is None or call.arguments_known or not asked.arguments_known:
            completed.append(call)
        else:
            completed.append(merge([call, asked]))
    group.calls = completed


def _requested(group: TurnGroup, sink: Sink) -> list[ToolCall]:
    """The calls the turn's model calls asked for, in the order asked, each as read from the
    last model call that carried it (the one sent its result, where any was)."""
    latest: dict[int, ToolCall] = {}  # in first-seen order: the order asked
    for mark in sorted(group.llms, key=lambda m: m.start_ns):
        if mark.messages is None:
            continue
        try:
            conversation = mark.messages.read()
        except UnreadableHistory:
            sink.malformed(UNREADABLE_HISTORY)
            continue
        except Exception:  # a bad history completes nothing, and loses nothing else
            log.debug("messages not read", exc_info=True)
            continue
        if conversation is not None:
            for call in conversation.calls(()):
                latest[call.span_id] = call
    return list(latest.values())
