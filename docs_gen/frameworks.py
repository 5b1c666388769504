"""Write the frameworks tables of README.md and docs/frameworks.md from one list, with each
version read from pyproject.toml's pins (``python -m docs_gen.frameworks``; ``--check`` for
drift). Only the text between the two markers in each file is generated.

A cell names a pinned package's version as ``{package}`` (2.68.0) or ``{package:minor}`` (2.68);
a package that is not pinned cannot be named, so the tables cannot drift from the pins."""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from docs_gen.blocks import replace_block
from mixin.generate import command_line

ROOT = Path(__file__).resolve().parent.parent
README = "README.md"
DOCS = "docs/frameworks.md"
COMMAND = "python -m docs_gen.frameworks"
BEGIN = (
    f"<!-- frameworks table: generated from docs_gen/frameworks.py and pyproject.toml's pins by "
    f"`{COMMAND}`; edit the list there, not the table -->\n"
)
END = "<!-- end of the generated frameworks table -->\n"
README_HEAD = (
    "framework",
    "instrumentation",
    "arguments",
    "result",
    "error class",
    "agent",
    "model",
)
DOCS_HEAD = (
    "framework",
    "instrumentation",
    "arguments",
    "result",
    "error class",
    "agent label",
    "model label",
)
# the extras whose pins are the frameworks the tests drive
EXTRAS = ("frameworks", "frameworks-more", "adk", "crewai", "openai-v2")


@dataclass(frozen=True)
class Framework:
    """One framework set-up: its README row (a summary) and its rows in docs/frameworks.md."""

    readme: tuple[str, ...] | None
    docs: tuple[tuple[str, ...], ...] = ()


# fmt: off
FRAMEWORKS = (
    Framework(
        ("pydantic-ai {pydantic-ai-slim:minor}", "its own", "yes", "yes", "yes", "yes", "yes"),
        ((
            "pydantic-ai {pydantic-ai-slim}", "its own (GenAI `execute_tool`)", "yes", "yes",
            "yes (exception event; `ModelRetry` text)", "agent name", "yes",
        ),),
    ),
    Framework(
        (
            "OpenAI Agents SDK {openai-agents:minor}", "OpenInference", "yes", "yes",
            "hidden by the default error handler", "workflow name", "LLM spans",
        ),
        ((
            "OpenAI Agents SDK {openai-agents}",
            "OpenInference openai-agents {openinference-instrumentation-openai-agents}",
            "yes", "yes",
            "only with a `failure_error_function` that names it; the default handler hides it "
            "(`tool_error`)",
            "`Agent workflow` (the run's workflow name)", "from LLM spans",
        ),),
    ),
    Framework(
        (
            "LangGraph {langgraph:minor}", "OpenInference", "yes", "yes", "yes", "graph name",
            "LLM spans",
        ),
        ((
            "LangGraph {langgraph}",
            "OpenInference langchain {openinference-instrumentation-langchain}", "yes", "yes",
            "yes (ToolNode's error text names the class)", "graph name", "from LLM spans",
        ),),
    ),
    Framework(
        (
            "Google ADK {google-adk:minor} (current, legacy format)", "its own",
            "yes (current: with content capture on)", "yes", "yes", "yes", "yes",
        ),
        (
            (
                "Google ADK {google-adk}, current format", "its own (GenAI `execute_tool`)",
                "with `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`",
                "same switch",
                "yes (`error.type`; `ReflectAndRetryToolPlugin`'s `error_type` in the result)",
                "agent name", "yes",
            ),
            (
                "Google ADK {google-adk}, legacy format (`ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`)",
                "its own (`gcp.vertex.agent.*`)", "yes (default on)", "yes", "yes", "agent name",
                "yes",
            ),
        ),
    ),
    Framework(
        ("Strands Agents {strands-agents:minor}", "its own", "yes", "yes", "yes", "yes", "yes"),
        ((
            "Strands Agents {strands-agents}", "its own (GenAI, span events)", "yes", "yes",
            "yes (`Error: TimeoutError - ...`)", "agent name", "yes",
        ),),
    ),
    Framework(
        (
            "smolagents {smolagents:minor}", "OpenInference", "yes", "yes", "yes", "span name",
            "known model classes only",
        ),
        ((
            "smolagents {smolagents}",
            "OpenInference smolagents {openinference-instrumentation-smolagents}", "yes", "yes",
            "yes (exception event)", "span name (`support.run`)",
            "not for a custom `Model` class",
        ),),
    ),
    Framework(
        ("LlamaIndex {llama-index-core:minor}", "OpenInference", "yes", "yes", "yes", "no", "yes"),
        ((
            "LlamaIndex {llama-index-core}",
            "OpenInference llama-index {openinference-instrumentation-llama-index}", "yes",
            "yes (its `ToolOutput` unwrapped)", "yes (exception event; `is_error`)",
            "none (`unknown`)", "yes",
        ),),
    ),
    Framework(
        (
            "AutoGen AgentChat {autogen-agentchat:minor}", "OpenInference alone", "yes", "yes",
            "no (reads as success)", "yes", "no",
        ),
        ((
            "AutoGen AgentChat {autogen-agentchat}",
            "OpenInference autogen-agentchat {openinference-instrumentation-autogen-agentchat} "
            "alone",
            "yes", "yes", "**no**: a failed call reads as success", "agent name", "no",
        ),),
    ),
    Framework(
        (
            "AutoGen AgentChat {autogen-agentchat:minor}", "OpenInference + its own", "yes",
            "yes", "yes", "yes", "no",
        ),
        ((
            "AutoGen AgentChat {autogen-agentchat}", "OpenInference + AutoGen's own spans",
            "yes (outer span)", "yes", "yes (`error.type`, inner span)",
            "agent name (root span)", "no",
        ),),
    ),
    Framework(
        (
            "Agno {agno:minor}", "OpenInference", "yes", "yes", "from the message only", "yes",
            "known model classes only",
        ),
        ((
            "Agno {agno}", "OpenInference agno {openinference-instrumentation-agno}", "yes",
            "yes",
            "from the message only (no type): `tool_error` unless the message says more",
            "agent name", "not for a custom `Model` class",
        ),),
    ),
    Framework(
        ("CrewAI {crewai:minor}", "OpenInference", "yes", "yes", "yes", "role", "no"),
        ((
            "CrewAI {crewai}", "OpenInference crewai {openinference-instrumentation-crewai}",
            "yes", "yes", "yes (exception event)", "role (`graph.node.id`)",
            "no (no LLM span)",
        ),),
    ),
    # mcp 1.x, Vercel AI SDK: not pinned in pyproject.toml (crewai's mcp; the Vercel fixtures'
    # package.json), so written as they are
    Framework(
        (
            "no framework: raw openai {openai:minor} / anthropic {anthropic:minor} loop",
            "OpenInference, OpenLLMetry, OpenTelemetry's GenAI, the SDK's own",
            "from the model calls' messages", "yes", "yes", "`loopwatch.turn`", "yes",
        ),
    ),
    Framework(
        (
            "MCP tools: mcp {mcp:minor} / 1.30", "`instrument()` / OpenLLMetry", "yes", "yes",
            "yes", "`loopwatch.turn`", "from the model calls",
        ),
    ),
    Framework(
        (
            "Vercel AI SDK 6, 7 (TypeScript)", "its own `ai.*` spans, to `loopwatch serve`",
            "yes", "yes", "yes", "function id", "model id",
        ),
    ),
)
# fmt: on

# Pins of EXTRAS that name no framework row, and why
UNLISTED = {
    "langchain-core": "LangGraph's own dependency",
    "autogen-core": "part of AutoGen AgentChat",
    "autogen-ext": "part of AutoGen AgentChat",
    "httpx": "a dependency -contrib's OpenAI instrumentation does not declare",
    "opentelemetry-util-genai": "the GenAI instrumentations' helper",
    **{
        name: "the hand-rolled, google-genai and MCP set-ups, in docs/frameworks.md's later tables"
        for name in (
            "openinference-instrumentation-openai",
            "openinference-instrumentation-anthropic",
            "opentelemetry-instrumentation-openai",
            "opentelemetry-instrumentation-anthropic",
            "opentelemetry-instrumentation-genai-openai",
            "opentelemetry-instrumentation-genai-anthropic",
            "opentelemetry-instrumentation-openai-v2",
            "google-genai",
            "openinference-instrumentation-google-genai",
            "opentelemetry-instrumentation-google-generativeai",
            "opentelemetry-instrumentation-google-genai",
            "opentelemetry-instrumentation-mcp",
        )
    },
}


class Version(str):
    """A pinned version; ``{package:minor}`` gives its first two parts."""

    def __format__(self, spec: str) -> str:
        if spec == "minor":
            return ".".join(self.split(".")[:2])
        if spec:
            raise ValueError(f"unknown version format {spec!r} (only 'minor')")
        return str(self)


def pins(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, Version]:
    """``package -> version`` of every ``package==version`` in pyproject.toml."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        requirements += extra
    out: dict[str, Version] = {}
    for requirement in requirements:
        if "==" in requirement:
            name, version = requirement.split("==", 1)
            out[name.strip().lower()] = Version(version.strip())
    return out


def _row(cells: Sequence[str], versions: Mapping[str, Version]) -> str:
    return "| " + " | ".join(cell.format_map(versions) for cell in cells) + " |"


def table(
    head: Sequence[str], rows: Sequence[Sequence[str]], versions: Mapping[str, Version]
) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + [_row(r, versions) for r in rows]) + "\n"


def readme_block(frameworks: Sequence[Framework] = FRAMEWORKS) -> str:
    rows = [f.readme for f in frameworks if f.readme is not None]
    return BEGIN + "\n" + table(README_HEAD, rows, pins()) + "\n" + END


def docs_block(frameworks: Sequence[Framework] = FRAMEWORKS) -> str:
    rows = [row for f in frameworks for row in f.docs]
    return BEGIN + "\n" + table(DOCS_HEAD, rows, pins()) + "\n" + END


def render() -> dict[str, str]:
    """README.md and docs/frameworks.md with their frameworks tables as the list says."""
    readme = (ROOT / README).read_text(encoding="utf-8")
    docs = (ROOT / DOCS).read_text(encoding="utf-8")
    return {
        README: replace_block(readme, BEGIN, END, readme_block()),
        DOCS: replace_block(docs, BEGIN, END, docs_block()),
    }


def main(argv: list[str] | None = None) -> int:
    return command_line(__doc__, ROOT, render, argv)


if __name__ == "__main__":
    sys.exit(main())
