"""Write a scripted turn as real SDK spans in one of three conventions, with explicit times."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode, Tracer

from loopwatch.demo.scenarios import Call, Turn

GENAI = "genai"
OPENINFERENCE = "openinference"
OPENLLMETRY = "openllmetry"
CONVENTIONS = (GENAI, OPENINFERENCE, OPENLLMETRY)
_MS = 1_000_000
LLM_MS = 400  # each model call before a tool call


def _turn_attributes(convention: str, turn: Turn) -> tuple[str, dict[str, Any]]:
    if convention == GENAI:
        return f"invoke_agent {turn.agent}", {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": turn.agent,
            "gen_ai.provider.name": "openai",
        }
    if convention == OPENINFERENCE:
        return turn.agent, {"openinference.span.kind": "AGENT", "agent.name": turn.agent}
    return f"{turn.agent}.workflow", {
        "traceloop.span.kind": "workflow",
        "traceloop.entity.name": turn.agent,
        "traceloop.workflow.name": turn.agent,
    }


def _llm_attributes(convention: str, model: str) -> tuple[str, dict[str, Any]]:
    if convention == GENAI:
        return f"chat {model}", {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
    if convention == OPENINFERENCE:
        return "ChatCompletion", {"openinference.span.kind": "LLM", "llm.model_name": model}
    return "openai.chat", {"llm.request.type": "chat", "gen_ai.request.model": model}


def usage_attributes(convention: str, input_tokens: int, output_tokens: int) -> dict[str, int]:
    """A model call's token usage, as each convention's instrumentations write it."""
    if convention == GENAI:
        return {
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": output_tokens,
        }
    if convention == OPENINFERENCE:
        return {
            "llm.token_count.prompt": input_tokens,
            "llm.token_count.completion": output_tokens,
            "llm.token_count.total": input_tokens + output_tokens,
        }
    return {
        "gen_ai.usage.prompt_tokens": input_tokens,
        "gen_ai.usage.completion_tokens": output_tokens,
        "llm.usage.total_tokens": input_tokens + output_tokens,
    }


def growing_history(index: int) -> tuple[int, int]:
    """The tokens of a turn's model call ``index``, as a chat whose history grows: each call is
    sent the calls and results before it (about 180 tokens a step over a 1,200-token prompt)
    and answers with one call (60 tokens)."""
    return 1_200 + 180 * index, 60


def _tool_attributes(convention: str, call: Call, index: int) -> tuple[str, dict[str, Any]]:
    args = json.dumps(call.arguments)
    if convention == GENAI:
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.tool,
            "gen_ai.tool.call.id": f"call_{index}",
            "gen_ai.tool.call.arguments": args,
        }
        if call.error is None:
            attrs["gen_ai.tool.call.result"] = json.dumps(call.result)
        return f"execute_tool {call.tool}", attrs
    if convention == OPENINFERENCE:
        return call.tool, {
            "openinference.span.kind": "TOOL",
            "tool.name": call.tool,
            "input.value": args,
            "input.mime_type": "application/json",
            "output.value": json.dumps(call.result) if call.error is None else str(call.error),
        }
    attrs = {
        "traceloop.span.kind": "tool",
        "traceloop.entity.name": call.tool,
        "traceloop.entity.input": json.dumps({"args": [], "kwargs": call.arguments}),
    }
    if call.error is None:
        attrs["traceloop.entity.output"] = json.dumps(call.result)
    return f"{call.tool}.tool", attrs


def emit_turn(
    tracer: Tracer,
    turn: Turn,
    start_ns: int,
    convention: str = GENAI,
    usage: Callable[[int], tuple[int, int]] | None = None,
) -> int:
    """Emit one turn starting at ``start_ns``; returns its end. Spans end children-first.
    ``usage(i)``: the (input, output) tokens of the i-th model call (the one before call i; the
    last, the final answer), written as the convention writes usage."""
    name, attrs = _turn_attributes(convention, turn)
    root = tracer.start_span(name, start_time=start_ns, attributes=attrs)
    t = start_ns + _MS
    with trace.use_span(root, end_on_exit=False):
        for i, call in enumerate(turn.calls):
            llm_name, llm_attrs = _llm_attributes(convention, turn.model)
            if usage is not None:
                llm_attrs.update(usage_attributes(convention, *usage(i)))
            llm = tracer.start_span(llm_name, start_time=t, attributes=llm_attrs)
            t += LLM_MS * _MS
            llm.end(end_time=t)
            tool_name, tool_attrs = _tool_attributes(convention, call, i)
            if call.tool in turn.description:
                key = (
                    "tool.description" if convention == OPENINFERENCE else "gen_ai.tool.description"
                )
                tool_attrs[key] = turn.description[call.tool]
            span = tracer.start_span(tool_name, start_time=t, attributes=tool_attrs)
            t += call.elapsed_ms * _MS
            if call.error is not None:
                span.record_exception(call.error, timestamp=t)
                span.set_status(Status(StatusCode.ERROR, str(call.error)))
                if convention == GENAI:
                    span.set_attribute("error.type", type(call.error).__qualname__)
            span.end(end_time=t)
        llm_name, llm_attrs = _llm_attributes(convention, turn.model)
        if usage is not None:
            llm_attrs.update(usage_attributes(convention, *usage(len(turn.calls))))
        final = tracer.start_span(llm_name, start_time=t, attributes=llm_attrs)
        t += LLM_MS * _MS
        final.end(end_time=t)
    root.end(end_time=t + _MS)
    return t + _MS
