"""The runnable examples, run as a user runs them (one command each, from the repository root,
no loopwatch.toml): the agent answers and loopwatch's metrics show its loops."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.serve_process import free_port
from tests.support.helpers import exposition_sum as value

pytestmark = [pytest.mark.frameworks, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = (
    "pydantic_ai_agent.py",
    "openai_agents_agent.py",
    "langgraph_agent.py",
    "raw_openai_loop.py",
    "raw_anthropic_loop.py",
)
# the agent label: pydantic-ai and LangGraph name the turn after the agent, the OpenAI Agents
# SDK after its workflow
AGENTS = {
    "pydantic_ai_agent.py": "support",
    "openai_agents_agent.py": "Agent workflow",
    "langgraph_agent.py": "support",
    "raw_openai_loop.py": "support",
    "raw_anthropic_loop.py": "support",
}


def run_example(name: str) -> str:
    """stdout and stderr of one example run as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPWATCH_"))}
    env["LOOPWATCH_METRICS_PORT"] = str(free_port())
    out = subprocess.run(
        [sys.executable, f"examples/{name}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


@pytest.fixture(scope="module")
def ran() -> dict[str, str]:
    return {name: run_example(name) for name in EXAMPLES}


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_answers_and_shows_the_empty_searches_and_the_timeouts(
    name: str, ran: dict[str, str]
) -> None:
    text = ran[name]
    assert "agent: I have escalated your refund." in text
    agent = AGENTS[name]
    assert value(text, "loopwatch_turns_total", agent=agent) == 1
    assert value(text, "loopwatch_turn_max_attempts_count", agent=agent) == 1
    calls = value(text, "loopwatch_tool_calls_total", tool="create_ticket", error_class="timeout")
    assert calls == 6
    assert value(text, "loopwatch_tool_calls_total", tool="search_orders", error_class="ok") == 3
    assert value(text, "loopwatch_no_rows_streak_sum", tool="search_orders") == 3
    assert value(text, "loopwatch_loops_total", tool="search_orders", kind="no_rows") == 1
    # the INFO line for the loop: tool and trace id, never an argument value
    line = next(x for x in text.splitlines() if "loop found: tool=search_orders" in x)
    assert re.search(r"no_rows_streak=3 .*trace_id=[0-9a-f]{32}$", line)
    assert "boots" not in line and "c_40912" not in line


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_shows_the_reworded_tickets_as_one_looping_key(
    name: str, ran: dict[str, str]
) -> None:
    text = ran[name]
    agent = AGENTS[name]
    assert value(text, "loopwatch_turn_max_attempts_sum", agent=agent) == 6
    assert value(text, "loopwatch_repeat_calls_total", tool="create_ticket") == 5
    assert value(text, "loopwatch_loops_total", tool="create_ticket", kind="repeat") == 1
    assert re.search(
        r"loop found: tool=create_ticket key=create_ticket/\w+/timeout attempts=6", text
    )
