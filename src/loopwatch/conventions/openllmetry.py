"""OpenLLMetry / Traceloop: ``traceloop.span.kind`` and ``traceloop.entity.*``; its model-call
spans carry the GenAI conventions' ``gen_ai.input.messages`` / ``gen_ai.output.messages``.

Read from traceloop/openllmetry 0.62 source and its openai and anthropic instrumentations'
spans."""

from __future__ import annotations

from loopwatch.conventions import genai
from loopwatch.conventions.emitter import Emitter
from loopwatch.conventions.family import ANY, Family
from loopwatch.core.span_view import SpanView

KIND = "traceloop.span.kind"

OPENLLMETRY = Family(
    name="openllmetry",
    tool=((KIND, "tool"),),
    turn=((KIND, "workflow"), (KIND, "agent")),
    llm=(("llm.request.type", ANY),),
    tool_name=("traceloop.entity.name",),
    arguments=("traceloop.entity.input",),
    result=("traceloop.entity.output",),
    description=(),
    agent=("traceloop.entity.name", "traceloop.workflow.name"),
    model=("gen_ai.request.model", "gen_ai.response.model"),
)

# Its tool spans are named ``{tool}.tool``.
TOOL_NAME_SUFFIX = ".tool"


def _tool_name(span: SpanView) -> str | None:
    if span.name.endswith(TOOL_NAME_SUFFIX):
        return span.name[: -len(TOOL_NAME_SUFFIX)] or "unknown"
    return None


EMITTER = Emitter(
    OPENLLMETRY,
    tool_name=_tool_name,
    held_messages=genai.held_messages,
    read_messages=genai.read_messages,
)
