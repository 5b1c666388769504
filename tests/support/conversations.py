"""Three scripted turns of a support conversation, as GenAI message attributes on model-call
spans."""

from __future__ import annotations

import json
from typing import Any

from loopwatch.core.config import Config
from loopwatch.core.declarations import declaration_from_mapping

TIMEOUT_TEXT = "Error: TimeoutError: ticket service timed out after 30s"


Msg = dict[str, Any]


Call = tuple[str, str, dict[str, Any]]  # (id, tool, arguments)


def _ticket(n: int) -> dict[str, Any]:
    return {"customer_id": "c_40912", "order_id": "88214", "summary": f"refund missing, try {n}"}


def conversation_script() -> list[tuple[str, list[list[Call]], list[Any]]]:
    """Three turns: (user text, the calls of each model response, each call's result)."""
    loop = [[(f"call_t{i}", "create_ticket", _ticket(i))] for i in range(6)]
    search = [[(f"call_s{i}", "search_orders", {"query": f"boots refund {i}"})] for i in range(4)]
    bulk = [
        [(f"call_b{i}", "create_ticket", {**_ticket(i), "order_id": f"9000{i}"}) for i in range(6)]
    ]
    return [
        ("Open a ticket for my missing refund", loop, [TIMEOUT_TEXT] * 6),
        ("Find my boots order", search, [[]] * 4),
        ("Open tickets for my six orders", bulk, [{"ticket_id": f"T-{i}"} for i in range(6)]),
    ]


def genai_message(role: str, text: str = "", calls: list[Call] = (), results: Any = ()) -> Msg:  # type: ignore[assignment]
    parts: list[dict[str, Any]] = []
    if text:
        parts.append({"type": "text", "content": text})
    parts += [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
    parts += [{"type": "tool_call_response", "id": i, "response": r} for i, r in results]
    return {"role": role, "parts": parts}


def genai_attributes(history: list[Msg], answer: Msg) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-scripted",
        "gen_ai.input.messages": json.dumps(history),
        "gen_ai.output.messages": json.dumps([answer]),
    }


def conversation_config() -> Config:
    ticket = declaration_from_mapping("create_ticket", {"identity": ["customer_id", "order_id"]})
    search = declaration_from_mapping("search_orders", {"result": "rows"})
    return Config(tools={"create_ticket": ticket, "search_orders": search})
