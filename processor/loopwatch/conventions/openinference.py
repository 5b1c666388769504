"""OpenInference (Arize): ``openinference.span.kind`` plus ``input.value``/``output.value``."""

from loopwatch.conventions.family import Family

KIND = "openinference.span.kind"

OPENINFERENCE = Family(
    name="openinference",
    tool=((KIND, "TOOL"),),
    turn=((KIND, "AGENT"),),
    llm=((KIND, "LLM"),),
    tool_name=("tool.name",),
    # tool.parameters is last: several instrumentations put a JSON Schema there, not values.
    arguments=("input.value", "tool.parameters"),
    result=("output.value",),
    description=("tool.description",),
    agent=("agent.name",),
    model=("llm.model_name", "llm.request.model_name", "llm.response.model_name"),
    tool_definitions=(),  # llm.tools.N.tool.json_schema, read by index in read.py
)
