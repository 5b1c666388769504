"""OpenLLMetry / Traceloop: ``traceloop.span.kind`` and ``traceloop.entity.*``.

Read from traceloop/openllmetry 0.62 source (shared reference, span-conventions.md); no
framework test drives it."""

from loopwatch.conventions.family import ANY, Family

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

TOOL_NAME_SUFFIX = ".tool"
