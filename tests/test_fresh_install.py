"""Day one, as a new user: a fresh virtual environment outside the repository, loopwatch
installed the README's way (pip install of the clone), a pydantic-ai agent attached with the
README's lines and no loopwatch.toml. Its reworded ticket loop must show, the one warning must
name the undeclared tool, the loop breaker with no config must stop it at three tickets with an
honest answer, and a bulk turn of twelve different orders must not look like a loop. The same
install replays and compares stored traces."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from testkit.serve_process import free_port
from tests.support.helpers import exposition_sum

pytestmark = [pytest.mark.frameworks, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
PYDANTIC_AI = "pydantic-ai-slim==2.68.0"  # as pinned in the frameworks extra

AGENT = """
    import json
    import logging
    import os
    import urllib.request

    import loopwatch

    logging.basicConfig(level=logging.INFO)
    loopwatch.instrument()

    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from loopwatch.guards import LoopBreaker
    from loopwatch.guards.pydantic_ai import LoopBreakerCapability

    from loopwatch.demo.scenarios import TICKET_SUMMARIES  # fourteen rewordings

    tickets = []  # what the ticket service committed


    def ticket(step, order="88214"):
        summary = TICKET_SUMMARIES[step]
        args = {"customer_id": "c_40912", "order_id": order, "summary": summary}
        return ToolCallPart("create_ticket", args, tool_call_id=f"call_{order}_{step}")


    def play(messages, info):
        # regenerates create_ticket after every error while tools are offered (up to 14),
        # then answers with the last thing a tool told it
        step = sum(1 for m in messages if m.kind == "response")
        if info.function_tools and step < 14:
            return ModelResponse(parts=[ticket(step)])
        told = [p for m in messages for p in getattr(m, "parts", ())
                if p.part_kind in ("tool-return", "retry-prompt")]
        return ModelResponse(parts=[TextPart(f"Update on your refund: {told[-1].content}")])


    def bulk(messages, info):
        if not any(m.kind == "response" for m in messages):
            return ModelResponse(parts=[ticket(0, order=str(88200 + i)) for i in range(12)])
        return ModelResponse(parts=[TextPart("Twelve tickets opened.")])


    def agent(name, model, capabilities=(), fail=True):
        a = Agent(FunctionModel(model, model_name="scripted-v1"), name=name, retries=20,
                  tool_timeout=30, capabilities=list(capabilities))

        @a.tool_plain
        def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
            \"\"\"Open a support ticket for an order.\"\"\"
            tickets.append(order_id)  # committed, but the answer does not come back in time
            if fail:
                raise TimeoutError("ticket service did not answer within 30 s")
            return f"TCK-{len(tickets)}"

        return a


    result = {}
    agent("looping", play).run_sync("Where is my refund for the boots?")
    result["looping_tickets"] = len(tickets)
    tickets.clear()
    guarded = agent("guarded", play, [LoopBreakerCapability(LoopBreaker())])
    result["guarded_answer"] = guarded.run_sync("Where is my refund for the boots?").output
    result["guarded_tickets"] = len(tickets)
    tickets.clear()
    agent("bulk", bulk, fail=False).run_sync("Open a ticket for each of my twelve orders.")
    result["bulk_tickets"] = len(tickets)

    from opentelemetry import trace
    trace.get_tracer_provider().force_flush()
    port = os.environ.get("LOOPWATCH_METRICS_PORT", "9464")
    result["metrics"] = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv outside the repository (``home/venv``), loopwatch installed the README's
    way beside the user's own framework."""
    home = tmp_path_factory.mktemp("user")
    venv = home / "venv"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    # the README's way: pip install /path/to/loopwatch, beside the user's own framework
    install = subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            str(ROOT),
            PYDANTIC_AI,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    print(f"fresh venv + pip install: {time.monotonic() - started:.1f} s")
    return home


@pytest.fixture(scope="module")
def user(home: Path) -> tuple[dict[str, object], str]:
    """The agent run in the fresh venv: (its result, stderr)."""
    python = str(home / "venv" / "bin" / "python")
    app = home / "app"
    app.mkdir()
    (app / "agent.py").write_text(textwrap.dedent(AGENT))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", str(home)),
        "LOOPWATCH_METRICS_PORT": str(free_port()),
    }
    run = subprocess.run(
        [python, "agent.py"], cwd=app, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert not (app / "loopwatch.toml").exists()
    return json.loads(run.stdout.strip().splitlines()[-1]), run.stderr


def _metric(result: dict[str, object], name: str, **labels: str) -> float:
    return exposition_sum(str(result["metrics"]), name, **labels)


def test_fresh_install_attaches_with_the_readme_lines_and_counts(
    user: tuple[dict[str, object], str],
) -> None:
    result, stderr = user
    assert "INFO:loopwatch.attach.instrument:config none, defaults" in stderr
    assert "switched on GenAI instrumentation: pydantic_ai" in stderr
    for agent in ("looping", "guarded", "bulk"):
        assert _metric(result, "loopwatch_turns_total", agent=agent) == 1, agent
    assert result["looping_tickets"] == 14  # nothing stopped the unguarded run
    assert (
        _metric(result, "loopwatch_tool_calls_total", agent="looping", error_class="timeout") == 14
    )
    # the bulk turn: twelve different orders, all successful, is no loop
    assert result["bulk_tickets"] == 12
    assert _metric(result, "loopwatch_tool_calls_total", agent="bulk", error_class="ok") == 12
    assert _metric(result, "loopwatch_turn_max_attempts_sum", agent="bulk") == 1
    assert _metric(result, "loopwatch_loops_total", agent="bulk") == 0


def test_fresh_install_sees_and_stops_the_reworded_loop_with_no_config(
    user: tuple[dict[str, object], str],
) -> None:
    result, stderr = user
    assert _metric(result, "loopwatch_turn_max_attempts_sum", agent="looping") >= 6
    loops = _metric(result, "loopwatch_loops_total", agent="looping", tool="create_ticket")
    assert loops == 1
    assert re.search(
        r"INFO:loopwatch.core.loop_log:loop found: tool=create_ticket key=\S+ attempts=14 ", stderr
    )
    warnings = [x for x in stderr.splitlines() if x.startswith("WARNING") and "create_ticket" in x]
    assert len(warnings) == 1, stderr
    # the breaker with no config: three tickets, then an answer that says what is known
    assert result["guarded_tickets"] == 3
    answer = str(result["guarded_answer"])
    assert "may have succeeded" in answer and "Do not retry" in answer


def test_fresh_install_replays_and_compares_stored_traces(home: Path) -> None:
    """The plain install runs ``loopwatch replay`` and ``compare`` on the file exporter's JSON
    and a Jaeger download, with no extra."""
    from loopwatch.demo.scenarios import eleven_empty_searches, fourteen_tickets
    from testkit.stored import write_collector_json
    from tests.support.replay import batches, jaeger_document, record

    spans, p = record([fourteen_tickets(), eleven_empty_searches()])
    p.close()
    stored = write_collector_json(home / "traces.json", batches(spans))
    jaeger = home / "jaeger.json"
    jaeger.write_text(json.dumps(jaeger_document(spans)))
    loopwatch = str(home / "venv" / "bin" / "loopwatch")
    for path in (stored, jaeger):
        done = subprocess.run(
            [loopwatch, "replay", str(path), "--json"],
            cwd=home,  # no loopwatch.toml
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        # the incidents in three conventions: 14 attempts, 13 duplicates each, 330 s past the cap
        assert report["turns"] == 6 and report["duplicate_calls"] == 3 * 13
        assert report["worst_turns"][0]["max_attempts"] == 14
        assert round(report["over_cap_seconds"]) == 3 * 330
    done = subprocess.run(
        [loopwatch, "compare", str(stored), str(jaeger)],
        cwd=home,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "none significantly above the baseline" in done.stdout
