"""What a loop span says: its name, attributes and links, from the core's LoopMark (hashes and
span ids only, never an argument, result or identity value)."""

from __future__ import annotations

from typing import Final

from opentelemetry.trace import Link, SpanContext, TraceFlags
from opentelemetry.util.types import AttributeValue

from loopwatch.core.loop_marks import LoopMark
from loopwatch.core.outcomes import OK
from loopwatch.core.records import OWN_SCOPE

# The instrumentation scope of every loop span and event: what tells loopwatch's own spans from
# an agent's wherever they come back (serve skips a scope of this name whole).
SCOPE: Final = OWN_SCOPE
EVENT_NAME: Final = "loopwatch.loop"
NAME_PREFIX: Final = "loopwatch.loop "

TOOL: Final = "gen_ai.tool.name"
ERROR_TYPE: Final = "error.type"
KIND: Final = "loopwatch.loop.kind"
ATTEMPTS: Final = "loopwatch.loop.attempts"
KEY: Final = "loopwatch.loop.key"
GUARD_STOPPED: Final = "loopwatch.loop.guard_stopped"
MODEL_CALLS: Final = "loopwatch.loop.model_calls"
INPUT_TOKENS: Final = "loopwatch.loop.input_tokens"
OUTPUT_TOKENS: Final = "loopwatch.loop.output_tokens"
TOTAL_TOKENS: Final = "loopwatch.loop.total_tokens"
_SPAN_ID_END: Final = 1 << 64
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)


def span_name(mark: LoopMark) -> str:
    return NAME_PREFIX + mark.tool


def attributes(mark: LoopMark) -> dict[str, AttributeValue]:
    """The loop span's (and event's) attributes: error.type only for a loop of failures."""
    calls, input_tokens, output_tokens, unsplit = mark.tokens
    out: dict[str, AttributeValue] = {
        TOOL: mark.tool,
        KIND: mark.kind,
        ATTEMPTS: mark.attempts,
        GUARD_STOPPED: mark.guard_stopped,
        MODEL_CALLS: calls,
        INPUT_TOKENS: input_tokens,
        OUTPUT_TOKENS: output_tokens,
        # a model call that reports only a total counts there, as in loopwatch_loop_tokens_total
        TOTAL_TOKENS: input_tokens + output_tokens + unsplit,
    }
    if mark.error_class != OK:
        out[ERROR_TYPE] = mark.error_class
    if mark.key_hash:
        out[KEY] = mark.key_hash
    return out


def links(trace_id: int, mark: LoopMark) -> list[Link]:
    """Links to the loop's calls (a stand-in id of a call read from messages is no span's:
    only valid span ids are linked)."""
    return [
        Link(SpanContext(trace_id, span_id, is_remote=True, trace_flags=_SAMPLED))
        for span_id in mark.span_ids
        if 0 < span_id < _SPAN_ID_END
    ]


def parent(trace_id: int, anchor: int) -> SpanContext:
    """The turn's root span as a parent: a non-recording span context from its ids."""
    return SpanContext(trace_id, anchor, is_remote=False, trace_flags=_SAMPLED)
