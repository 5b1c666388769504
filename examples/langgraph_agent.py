"""A LangGraph support agent that loops, watched by loopwatch. Offline: the chat model is
scripted.

    scripts/example langgraph_agent    # installs what it needs into .venv first

The model searches the customer's orders three times with reworded queries (each returns no
rows), then tries to open a ticket six times, rewording the summary after every timeout.
loopwatch is attached the README's way: it switches on the installed OpenInference
instrumentor (openinference-instrumentation-langchain). Nothing is declared (no loopwatch.toml).
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.prebuilt import ToolNode, create_react_agent
from support_incident import ANSWER, QUESTION, SCRIPT, TIMEOUT, show_metrics

import loopwatch


class ScriptedChatModel(GenericFakeChatModel):
    """Plays its messages in order; tools are bound by the script, not by the model."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@tool
def search_orders(query: str) -> list[dict[str, str]]:
    """Search the customer's orders."""
    return []


@tool
def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
    """Open a support ticket for an order."""
    raise TimeoutError(TIMEOUT)


def build_agent() -> Any:
    messages = [
        AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{i}"}])
        for i, (name, args) in enumerate(SCRIPT)
    ]
    messages.append(AIMessage(content=ANSWER))
    model = ScriptedChatModel(messages=iter(messages))
    tools = ToolNode([search_orders, create_ticket], handle_tool_errors=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of langchain
        return create_react_agent(model, tools, name="support")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    processor = loopwatch.instrument()
    result = build_agent().invoke({"messages": [("user", QUESTION)]})
    print(f"agent: {result['messages'][-1].content}")
    show_metrics(processor)


if __name__ == "__main__":
    main()
