"""OpenInference (Arize): ``openinference.span.kind`` plus ``input.value``/``output.value``.

Seen from openinference-instrumentation-openai-agents 2.6, -langchain 0.1.80, -smolagents 0.1.43,
-llama-index 4.6.1, -autogen-agentchat 0.1.22, -agno 1.0.15 and -crewai 1.1.21."""

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
    # graph.node.id: the agent-graph node; CrewAI (1.15) names its AGENT span after a method
    # (``support._execute_core``) and puts the role here
    agent=("agent.name", "graph.node.id"),
    model=("llm.model_name", "llm.request.model_name", "llm.response.model_name"),
    tool_definitions=(),  # llm.tools.N.tool.json_schema, read by index in read.py
)
