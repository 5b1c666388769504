"""Spans in the shapes each convention and framework writes (GenAI semantic conventions,
OpenInference, OpenLLMetry, frameworks' own), as span views: failed create_ticket calls per
shape, results, error classes, turn marks and MCP spans."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loopwatch.conventions import read_span
from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.records import ToolCall
from loopwatch.core.span_view import STATUS_ERROR, STATUS_OK, STATUS_UNSET, EventView, SpanView

DECLARED = Config(
    tools={
        "create_ticket": ToolDeclaration(identity=("customer_id", "order_id")),
        "search_orders": ToolDeclaration(result="rows"),
    }
)


TICKET = {"customer_id": "c_40912", "order_id": "88214"}


SUMMARY_A = "Customer has not received refund for returned boots"


SUMMARY_B = "Refund not received for returned boots - customer following up"


TIMEOUT_TEXT = "ticket service did not answer"


_ids = itertools.count(1)


Event = tuple[str, dict[str, Any]]


def view(
    name: str,
    attributes: dict[str, Any],
    events: tuple[Event, ...] = (),
    status: int = STATUS_UNSET,
    description: str = "",
) -> SpanView:
    return SpanView(
        trace_id=1,
        span_id=next(_ids),
        parent_id=None,
        name=name,
        start_ns=0,
        end_ns=1,
        attributes=attributes,
        events=tuple(EventView(n, a) for n, a in events),
        status_code=status,
        status_description=description,
    )


def exception(type_name: str, message: str) -> Event:
    return (
        "exception",
        {"exception.type": type_name, "exception.message": message, "exception.escaped": "False"},
    )


def tool_call(span: SpanView, config: Config = DECLARED) -> ToolCall:
    record = read_span(span, config)
    assert isinstance(record, ToolCall), record
    return record


def py_repr(value: Any) -> str:
    """What LangChain writes: ``str(dict)``, single quotes."""
    return str(value)


def tool_message(content: Any, status: str = "success", name: str = "search_orders") -> str:
    """A LangChain ToolMessage as OpenInference serializes it (``message_to_dict``)."""
    data = {"content": content, "type": "tool", "name": name, "tool_call_id": "call_1"}
    return json.dumps({"type": "tool", "data": {**data, "status": status}})


def lc_serialized_tool_message(content: Any, status: str = "success") -> str:
    """OpenLLMetry's LangChain output: ``{"output": ToolMessage.to_json(), "kwargs": ...}``."""
    message = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "ToolMessage"],
        "kwargs": {"content": content, "type": "tool", "tool_call_id": "call_1", "status": status},
    }
    return json.dumps({"output": message, "kwargs": {"color": "green", "name": "search_orders"}})


Builder = Callable[[dict[str, Any], int], SpanView]


def genai(args: dict[str, Any], step: int) -> SpanView:  # §1.7
    return view(
        "execute_tool create_ticket",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "create_ticket",
            "gen_ai.tool.call.id": f"call_{step}",
            "gen_ai.tool.call.arguments": json.dumps(args, separators=(",", ":")),
            "error.type": "TimeoutError",
        },
        (exception("TimeoutError", TIMEOUT_TEXT),),
        STATUS_ERROR,
        TIMEOUT_TEXT,
    )


def genai_mapping(args: dict[str, Any], step: int) -> SpanView:  # P2: newer SDKs keep dicts
    return view(
        "execute_tool create_ticket",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "create_ticket",
            "gen_ai.tool.call.arguments": dict(args),
            "error.type": "TimeoutError",
        },
        status=STATUS_ERROR,
    )


def mcp(args: dict[str, Any], step: int) -> SpanView:  # §1.3, opt-in arguments
    return view(
        "tools/call create_ticket",
        {
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.call.arguments": json.dumps(args),
            "jsonrpc.request.id": str(step),
            "error.type": "tool_error",
            "gen_ai.tool.call.result": json.dumps(
                {"content": [{"type": "text", "text": "upstream timed out"}], "isError": True}
            ),
        },
        status=STATUS_ERROR,
    )


def pydantic_ai_v2(args: dict[str, Any], step: int) -> SpanView:  # §4.3, read from v2.68.0
    return view(
        "running tool",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "create_ticket",
            "tool_arguments": json.dumps(args, separators=(",", ":")),
            "tool_response": f"timeout: {TIMEOUT_TEXT}",
            "logfire.msg": "running tool: create_ticket",
            "pydantic_ai.tool.retry.cause": "model_retry",
        },
        (exception("pydantic_ai.exceptions.ToolRetryError", f"timeout: {TIMEOUT_TEXT}"),),
        STATUS_ERROR,
    )


def openinference_langchain(args: dict[str, Any], step: int) -> SpanView:  # §4.2
    return view(
        "create_ticket",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "create_ticket",
            "tool.description": "Open a support ticket.",
            "input.value": py_repr(args),
            "input.mime_type": "application/json",
            "metadata": json.dumps({"langgraph_step": step, "langgraph_node": "tools"}),
        },
        (exception("TimeoutError", TIMEOUT_TEXT),),
        STATUS_ERROR,
        f"TimeoutError('{TIMEOUT_TEXT}')Traceback (most recent call last): ...",
    )


def openinference_handled(args: dict[str, Any], step: int) -> SpanView:
    """LangChain ``handle_tool_error``: status OK, ToolMessage status error."""
    return view(
        "create_ticket",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "create_ticket",
            "input.value": py_repr(args),
            "output.value": tool_message(
                f"Error: TimeoutError('{TIMEOUT_TEXT}')\n Please fix your mistakes.",
                status="error",
                name="create_ticket",
            ),
        },
        status=STATUS_OK,
    )


def smolagents(args: dict[str, Any], step: int) -> SpanView:  # §4.5
    return view(
        "CreateTicketTool",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "create_ticket",
            "tool.parameters": json.dumps(
                {"customer_id": {"type": "string", "description": "customer"}}
            ),
            "input.value": json.dumps(
                {"args": [], "sanitize_inputs_outputs": False, "kwargs": args}
            ),
        },
        (exception("TimeoutError", TIMEOUT_TEXT),),
        STATUS_ERROR,
    )


def traceloop_decorator(args: dict[str, Any], step: int) -> SpanView:  # §3
    return view(
        "create_ticket.tool",
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "create_ticket",
            "traceloop.workflow.name": "support",
            "traceloop.entity.input": json.dumps({"args": [], "kwargs": args}),
        },
        (exception("TimeoutError", TIMEOUT_TEXT),),
        STATUS_ERROR,
        TIMEOUT_TEXT,
    )


def openllmetry_langchain(args: dict[str, Any], step: int) -> SpanView:  # §4.2
    envelope = json.dumps(
        {
            "input_str": py_repr(args),
            "tags": [f"seq:step:{step}"],
            "metadata": {"langgraph_step": step, "checkpoint_ns": f"tools:{step}"},
            "inputs": args,
            "kwargs": {"color": "green", "name": "create_ticket"},
        }
    )
    return view(
        "execute_tool create_ticket",
        {
            "traceloop.span.kind": "tool",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "create_ticket",
            "gen_ai.provider.name": "langgraph",
            "gen_ai.tool.call.arguments": envelope,
            "traceloop.entity.input": envelope,
            "error.type": "TimeoutError",
        },
        (exception("TimeoutError", TIMEOUT_TEXT),),
        STATUS_ERROR,
    )


def adk(args: dict[str, Any], step: int) -> SpanView:  # §4.8
    return view(
        "execute_tool create_ticket",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "create_ticket",
            "gen_ai.tool.type": "FunctionTool",
            "gen_ai.agent.name": "support",
            "gen_ai.tool.call.id": "<not specified>",
            "gcp.vertex.agent.tool_call_args": json.dumps(args, ensure_ascii=False),
            "gcp.vertex.agent.tool_response": "{}",
            "gcp.vertex.agent.llm_request": "{}",
            "error.type": "TimeoutError",
        },
        status=STATUS_ERROR,
    )


def strands(args: dict[str, Any], step: int) -> SpanView:  # §4.7, legacy events
    return view(
        "execute_tool create_ticket",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "create_ticket",
            "gen_ai.tool.call.id": f"tooluse_{step}",
            "gen_ai.system": "strands-agents",
            "gen_ai.tool.status": "error",
        },
        (
            ("gen_ai.tool.message", {"role": "tool", "content": json.dumps(args), "id": "t"}),
            (
                "gen_ai.choice",
                {"message": json.dumps([{"text": f"Error: TimeoutError - {TIMEOUT_TEXT}"}])},
            ),
            exception("TimeoutError", TIMEOUT_TEXT),
        ),
        STATUS_ERROR,
    )


def strands_latest(args: dict[str, Any], step: int) -> SpanView:  # §4.7, latest semconv
    call = {"type": "tool_call", "name": "create_ticket", "id": "t", "arguments": args}
    response = {"type": "tool_call_response", "id": "t", "response": [{"text": "Error: x"}]}
    return view(
        "execute_tool create_ticket",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "create_ticket",
            "gen_ai.provider.name": "strands-agents",
            "gen_ai.tool.status": "error",
        },
        (
            (
                "gen_ai.client.inference.operation.details",
                {
                    "gen_ai.input.messages": json.dumps([{"role": "tool", "parts": [call]}]),
                    "gen_ai.output.messages": json.dumps([{"role": "tool", "parts": [response]}]),
                },
            ),
        ),
        STATUS_ERROR,
        f"Read timed out: {TIMEOUT_TEXT}",
    )


def logfire_openai_agents(args: dict[str, Any], step: int) -> SpanView:  # §4.1 Logfire
    # the raw model string: the model's own whitespace and key order
    raw = "{ " + ", ".join(f'"{k}" : {json.dumps(v)}' for k, v in reversed(args.items())) + " }"
    return view(
        "Function: {name}",
        {
            "name": "create_ticket",
            "input": raw,
            "output": "An error occurred while running the tool. Please try again.",
            "gen_ai.system": "openai",
            "logfire.msg": "Function: create_ticket",
            "logfire.level_num": 17,
            "error": json.dumps(
                {
                    "message": "Error running tool (non-fatal)",
                    "data": {"tool_name": "create_ticket", "error": TIMEOUT_TEXT},
                }
            ),
        },
        (exception("TimeoutError", TIMEOUT_TEXT),),
    )


def openinference_openai_agents(args: dict[str, Any], step: int) -> SpanView:  # read from 0.24
    data = {"tool_name": "create_ticket", "error": TIMEOUT_TEXT}
    return view(
        "create_ticket",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "create_ticket",
            "input.value": json.dumps(args),
            "input.mime_type": "application/json",
            "output.value": f"TimeoutError: {TIMEOUT_TEXT}",
            "tool.parameters": json.dumps(
                {"properties": {"customer_id": {"type": "string"}}, "type": "object"}
            ),
        },
        status=STATUS_ERROR,
        description=f"Error running tool (non-fatal): {data!r}",
    )


def openinference_parameters_values(args: dict[str, Any], step: int) -> SpanView:
    """Instrumentations that put argument values (not a schema) in tool.parameters."""
    return view(
        "create_ticket",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "create_ticket",
            "tool.parameters": json.dumps(args),
        },
        (exception("builtins.TimeoutError", TIMEOUT_TEXT),),
        STATUS_ERROR,
    )


BUILDERS: dict[str, Builder] = {
    "genai": genai,
    "genai-mapping": genai_mapping,
    "mcp": mcp,
    "pydantic-ai-v2": pydantic_ai_v2,
    "openinference-langchain": openinference_langchain,
    "openinference-handled-error": openinference_handled,
    "smolagents": smolagents,
    "traceloop-decorator": traceloop_decorator,
    "openllmetry-langchain": openllmetry_langchain,
    "adk": adk,
    "strands": strands,
    "strands-latest": strands_latest,
    "logfire-openai-agents": logfire_openai_agents,
    "openinference-openai-agents": openinference_openai_agents,
    "openinference-parameters-values": openinference_parameters_values,
}


def search(attributes: dict[str, Any], name: str = "execute_tool search_orders") -> SpanView:
    return view(name, attributes, status=STATUS_OK)


GENAI_SEARCH = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "search_orders",
    "gen_ai.tool.call.arguments": '{"query":"boots refund"}',
}


OI_SEARCH = {
    "openinference.span.kind": "TOOL",
    "tool.name": "search_orders",
    "input.value": "boots refund",  # LangGraph, one-argument tool: a bare string
}


ROW = '[{"order_id": "88214"}]'


@dataclass(frozen=True)
class ResultCase:
    span: SpanView
    result: str
    arguments_known: bool = True


RESULTS: dict[str, ResultCase] = {
    "genai-empty-list": ResultCase(
        search({**GENAI_SEARCH, "gen_ai.tool.call.result": "[]"}), "empty"
    ),
    "genai-empty-wrapped": ResultCase(
        search({**GENAI_SEARCH, "gen_ai.tool.call.result": '{"results": [], "total": 0}'}),
        "empty",
    ),
    "genai-rows": ResultCase(search({**GENAI_SEARCH, "gen_ai.tool.call.result": ROW}), "rows"),
    "genai-null": ResultCase(search({**GENAI_SEARCH, "gen_ai.tool.call.result": "null"}), "empty"),
    "genai-no-result": ResultCase(search(GENAI_SEARCH), "unknown"),
    "genai-error-word-inside-rows": ResultCase(
        search({**GENAI_SEARCH, "gen_ai.tool.call.result": '[{"note": "error in shipping"}]'}),
        "rows",
    ),
    "mcp-content-blocks": ResultCase(
        search(
            {
                "mcp.method.name": "tools/call",
                "gen_ai.tool.name": "search_orders",
                "gen_ai.tool.call.arguments": '{"query": "boots"}',
                "gen_ai.tool.call.result": json.dumps(
                    {"content": [{"type": "text", "text": "[]"}], "isError": False}
                ),
            },
            "tools/call search_orders",
        ),
        "empty",
    ),
    "pydantic-ai-v2": ResultCase(
        search(
            {
                "gen_ai.tool.name": "search_orders",
                "tool_arguments": '{"query":"boots"}',
                "tool_response": "[]",
            },
            "running tool",
        ),
        "empty",
    ),
    "openinference-toolmessage-list": ResultCase(
        search({**OI_SEARCH, "output.value": tool_message([])}, "search_orders"), "empty"
    ),
    "openinference-toolmessage-json-text": ResultCase(
        search({**OI_SEARCH, "output.value": tool_message("[]")}, "search_orders"), "empty"
    ),
    "openinference-toolmessage-rows": ResultCase(
        search({**OI_SEARCH, "output.value": tool_message(ROW)}, "search_orders"), "rows"
    ),
    "openinference-python-repr-input": ResultCase(
        search(
            {
                **OI_SEARCH,
                "input.value": py_repr({"query": "boots refund"}),
                "output.value": "[]",
            },
            "search_orders",
        ),
        "empty",
    ),
    "smolagents": ResultCase(
        search(
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "search_orders",
                "input.value": json.dumps(
                    {"args": ["boots"], "sanitize_inputs_outputs": False, "kwargs": {}}
                ),
                "output.value": "[]",
                "output.mime_type": "application/json",
            },
            "SearchOrdersTool",
        ),
        "empty",
    ),
    "traceloop-decorator": ResultCase(
        search(
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "search_orders",
                "traceloop.entity.input": '{"args": [], "kwargs": {"query": "boots"}}',
                "traceloop.entity.output": "[]",
            },
            "search_orders.tool",
        ),
        "empty",
    ),
    "openllmetry-langchain-empty": ResultCase(
        search(
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "search_orders",
                "traceloop.entity.input": json.dumps(
                    {"input_str": "boots", "tags": [], "metadata": {}, "inputs": None}
                ),
                "traceloop.entity.output": lc_serialized_tool_message("[]"),
            },
            "search_orders.tool",
        ),
        "empty",
    ),
    "openllmetry-langchain-rows": ResultCase(
        search(
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "search_orders",
                "traceloop.entity.input": json.dumps({"input_str": "boots", "inputs": None}),
                "traceloop.entity.output": lc_serialized_tool_message(ROW),
            },
            "search_orders.tool",
        ),
        "rows",
    ),
    "adk-result-wrapper": ResultCase(
        search(
            {
                **GENAI_SEARCH,
                "gen_ai.tool.call.arguments": None,
                "gcp.vertex.agent.tool_call_args": '{"query": "boots"}',
                "gcp.vertex.agent.tool_response": '{"result": []}',
            }
        ),
        "empty",
    ),
    "adk-content-disabled": ResultCase(
        search(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_orders",
                "gcp.vertex.agent.tool_call_args": "{}",
                "gcp.vertex.agent.tool_response": "{}",
                "gcp.vertex.agent.llm_request": "{}",
                "gcp.vertex.agent.llm_response": "{}",
            }
        ),
        "unknown",
        arguments_known=False,
    ),
    "strands-text-blocks": ResultCase(
        view(
            "execute_tool search_orders",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_orders",
                "gen_ai.tool.status": "success",
            },
            (
                ("gen_ai.tool.message", {"role": "tool", "content": '{"query": "boots"}'}),
                ("gen_ai.choice", {"message": '[{"text": "[]"}]', "id": "t"}),
            ),
        ),
        "empty",
    ),
    "logfire": ResultCase(
        search(
            {"name": "search_orders", "input": '{"query":"boots"}', "output": "[]"},
            "Function: {name}",
        ),
        "empty",
    ),
    "openinference-redacted": ResultCase(
        search(
            {**OI_SEARCH, "input.value": "__REDACTED__", "output.value": "__REDACTED__"},
            "search_orders",
        ),
        "unknown",
        arguments_known=False,
    ),
    "openinference-parameters-schema-only": ResultCase(
        search(
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "search_orders",
                "tool.parameters": json.dumps(
                    {"type": "object", "properties": {"query": {"type": "string"}}}
                ),
                "output.value": "[]",
            },
            "search_orders",
        ),
        "empty",
        arguments_known=False,
    ),
    "openinference-parameters-values": ResultCase(
        search(
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "search_orders",
                "tool.parameters": '{"query": "boots"}',
                "output.value": "[]",
            },
            "search_orders",
        ),
        "empty",
    ),
}


def failed(
    *events: Event,
    attrs: dict[str, Any] | None = None,
    status: int = STATUS_ERROR,
    description: str = "",
    result: str | None = None,
    name: str = "execute_tool create_ticket",
    tool: str = "create_ticket",
) -> SpanView:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.arguments": json.dumps(TICKET),
        **(attrs or {}),
    }
    if result is not None:
        attributes["gen_ai.tool.call.result"] = result
    return view(name, attributes, events, status, description)


ERRORS: dict[str, tuple[SpanView, str]] = {
    "pydantic-ai ToolRetryError timeout message": (
        failed(exception("pydantic_ai.exceptions.ToolRetryError", f"timeout: {TIMEOUT_TEXT}")),
        "timeout",
    ),
    "pydantic-ai retry prompt only (no exception message)": (
        failed(
            ("exception", {"exception.type": "pydantic_ai.exceptions.ToolRetryError"}),
            result="Timed out after 30 seconds.",
        ),
        "timeout",
    ),
    "TimeoutError": (failed(exception("TimeoutError", TIMEOUT_TEXT)), "timeout"),
    "httpx.ReadTimeout": (
        failed(exception("httpx.ReadTimeout", "The read operation timed out")),
        "timeout",
    ),
    "DeadlineExceeded": (
        failed(exception("google.api_core.exceptions.DeadlineExceeded", "Deadline Exceeded")),
        "timeout",
    ),
    "504 as error.type": (failed(attrs={"error.type": "504"}), "timeout"),
    "504 in a generic exception message": (
        failed(exception("RuntimeError", "upstream answered 504 Gateway Timeout")),
        "timeout",
    ),
    "504 in the status description": (failed(description="HTTP 504"), "timeout"),
    "util-genai bare error.type": (failed(attrs={"error.type": "ReadTimeout"}), "timeout"),
    "openai-agents non-fatal dict repr": (
        failed(
            description="Error running tool (non-fatal): "
            "{'tool_name': 'create_ticket', 'error': 'Read timed out.'}"
        ),
        "timeout",
    ),
    "openai-agents non-fatal redacted, tool name says timeout": (
        failed(
            description="Error running tool (non-fatal): {'tool_name': 'check_timeout', "
            "'error': 'Tool execution failed. Error details are redacted.'}",
            result="An error occurred while running the tool. Please try again.",
            tool="check_timeout",
        ),
        "tool_error",
    ),
    "openai-agents sdk timeout as result (status OK)": (
        failed(status=STATUS_OK, result="Tool 'create_ticket' timed out after 30 seconds."),
        "timeout",
    ),
    "openai-agents argument parsing": (
        failed(
            description="Error running tool: {'tool_name': 'create_ticket', 'error': "
            "'Expecting value: line 1 column 1 (char 0)'}",
            result="An error occurred while parsing tool arguments. Please try again with valid "
            "JSON. Error: Expecting value",
        ),
        "invalid_arguments",
    ),
    "mcp tool_error": (failed(attrs={"error.type": "tool_error"}), "tool_error"),
    "mcp isError result": (
        failed(
            attrs={"mcp.method.name": "tools/call"},
            status=STATUS_UNSET,
            result=json.dumps(
                {"content": [{"type": "text", "text": "rate limit exceeded"}], "isError": True}
            ),
        ),
        "rate_limited",
    ),
    "error string returned as the result": (
        failed(status=STATUS_UNSET, result="Error: ticket service timed out"),
        "timeout",
    ),
    "langchain ToolMessage status error": (
        failed(
            status=STATUS_OK,
            result=tool_message(
                "Error: ConnectionRefusedError()\n Please fix your mistakes.", "error"
            ),
        ),
        "unavailable",
    ),
    "strands text without exception": (
        failed(
            attrs={"gen_ai.tool.status": "error"},
            status=STATUS_ERROR,
            description="Error: ValueError - order 88214 not found",
        ),
        "not_found",
    ),
    "logfire claude: error.type is the message, level error, no status": (
        failed(
            attrs={"error.type": "Request timed out", "logfire.level_num": 17}, status=STATUS_UNSET
        ),
        "timeout",
    ),
    "openai.RateLimitError": (failed(exception("openai.RateLimitError", "429")), "rate_limited"),
    "ValueError invalid": (
        failed(exception("ValueError", "invalid priority")),
        "invalid_arguments",
    ),
    "PermissionError": (failed(exception("PermissionError", "nope")), "unauthorized"),
    "unknown exception": (failed(exception("mypkg.Boom", "kaboom")), "tool_error"),
}


TURNS: dict[str, tuple[SpanView, str | None]] = {
    "genai invoke_agent": (
        view("invoke_agent support", {"gen_ai.operation.name": "invoke_agent"}),
        "support",
    ),
    "pydantic-ai agent span": (
        view(
            "invoke_agent support",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
        ),
        "support",
    ),
    "pydantic-ai v2 agent run": (view("agent run", {"agent_name": "support"}), "support"),
    "openinference AGENT": (
        view("support", {"openinference.span.kind": "AGENT", "agent.name": "support"}),
        "support",
    ),
    "traceloop workflow": (
        view(
            "support.workflow",
            {"traceloop.span.kind": "workflow", "traceloop.entity.name": "support"},
        ),
        "support",
    ),
    "langgraph graph under openinference": (
        view(
            "support",
            {"openinference.span.kind": "CHAIN", "metadata": '{"ls_integration": "langgraph"}'},
        ),
        "support",
    ),
}


# MCP: the conventions' client span (loopwatch's own call_tool span writes it), the MCP SDK's own
# client span (mcp 2.3: the method and JSON-RPC id only) and OpenLLMetry's span (mcp 1.30).
MCP_TIMEOUT_TEXT = "Error executing tool create_ticket: TimeoutError: ticket service timed out"


MCP_SPANS = {
    "conventions": view(
        "tools/call create_ticket",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "create_ticket",
            "mcp.method.name": "tools/call",
            "gen_ai.tool.call.arguments": json.dumps({**TICKET, "summary": SUMMARY_A}),
            "gen_ai.tool.call.result": MCP_TIMEOUT_TEXT,
            "error.type": "tool_error",
        },
        status=STATUS_ERROR,
        description=MCP_TIMEOUT_TEXT,
    ),
    "sdk": view(
        "MCP send tools/call create_ticket",
        {"mcp.method.name": "tools/call", "jsonrpc.request.id": "2"},
    ),
    "sdk-untargeted": view("MCP send tools/call", {"mcp.method.name": "tools/call"}),
    "openllmetry": view(
        "create_ticket.tool",
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "create_ticket",
            "traceloop.entity.input": json.dumps(
                {"tool_name": "create_ticket", "arguments": {**TICKET, "summary": SUMMARY_B}}
            ),
            "traceloop.entity.output": json.dumps(
                {"content": [{"type": "text", "text": MCP_TIMEOUT_TEXT}], "isError": True}
            ),
            "error.type": "tool_error",
        },
        status=STATUS_ERROR,
    ),
}
