"""``loopwatch compare``: eval runs of 200 turns written as the Collector's file exporter writes
them, from real SDK spans. A candidate where one turn in 20 loops at 3-4 attempts exits 1
against a clean or a slightly noisy baseline, naming the tool, error class, kind and the new
model; a neutral candidate exits 0; unreadable input exits 2. The test's false-alarm rate on
identical distributions is measured on many seeds."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Callable
from fractions import Fraction
from math import comb
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, Tracer

from loopwatch.cli import main
from loopwatch.demo.emit import emit_turn
from loopwatch.demo.scenarios import Turn, flaky, healthy
from loopwatch.history.compare import DEFAULT_ALPHA, fisher_greater
from testkit.stored import write_collector_json
from testkit.summaries import RETRY, TURNS, false_alarm_rate
from tests.support.helpers import S
from tests.support.replay import batches

SEEDS = (1, 2, 3)
NOISY = 0.005  # a slightly noisy baseline: 0.5% of turns loop at 3 attempts


def eval_turns(
    seed: int, model: str, loop_every: int = 0, noise: float = 0.0, turns: int = TURNS
) -> list[Turn]:
    """An eval run: healthy turns and retries; with ``loop_every``, one turn in each block of
    that many loops at 3-4 attempts (at a random place in the block); with ``noise``, that
    share of turns loops at 3 attempts at random."""
    rng = random.Random(seed)
    out: list[Turn] = []
    looping_at = -1
    for i in range(turns):
        if loop_every and i % loop_every == 0:
            looping_at = i + rng.randrange(loop_every)
        r = rng.random()
        if i == looping_at:  # flaky(attempts=n): n-1 timeouts on one key, then success
            out.append(flaky(rng, model, attempts=rng.choice((3, 4)) + 1))
        elif r < noise:
            out.append(flaky(rng, model, attempts=4))
        elif r < noise + RETRY:
            out.append(flaky(rng, model, attempts=2))
        else:
            out.append(healthy(rng, model))
    return out


def write_run(path: Path, turns: list[Turn]) -> Path:
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("eval")
    t = 1_767_225_600 * S
    for turn in turns:
        t = emit_turn(tracer, turn, t) + S
    provider.shutdown()
    return write_collector_json(path, batches(memory.get_finished_spans(), size=200))


def _compare(
    capsys: pytest.CaptureFixture[str], base: Path, cand: Path, *args: str
) -> tuple[int, str]:
    code = main(["compare", str(base), str(cand), *args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out


def test_fisher_exact_matches_the_hypergeometric_sum() -> None:
    def exact(a: int, n1: int, b: int, n2: int) -> float:
        k, n = a + b, n1 + n2
        total = sum(Fraction(comb(k, x) * comb(n - k, n1 - x)) for x in range(a, min(k, n1) + 1))
        return float(total / comb(n, n1))

    for case in [(10, 200, 0, 200), (11, 200, 1, 200), (3, 200, 2, 200), (0, 50, 4, 60)]:
        assert fisher_greater(*case) == pytest.approx(exact(*case), rel=1e-9)
    assert fisher_greater(10, 200, 0, 200) < 0.001
    assert fisher_greater(2, 200, 2, 200) > 0.5


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("noise", [0.0, NOISY], ids=["clean", "noisy"])
def test_a_regressing_eval_run_exits_1_and_a_neutral_one_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: int, noise: float
) -> None:
    base = write_run(tmp_path / "base.json", eval_turns(seed, "m-old", noise=noise))
    neutral = write_run(tmp_path / "neutral.json", eval_turns(100 + seed, "m-new", noise=noise))
    regress = write_run(
        tmp_path / "regress.json", eval_turns(200 + seed, "m-new", loop_every=20, noise=noise)
    )
    code, out = _compare(capsys, base, neutral)
    assert code == 0, out
    assert "no regression" in out
    code, out = _compare(capsys, base, regress)
    assert code == 1, out
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("REGRESSION: create_ticket timeout repeat (agent support)")
    assert "model m-new (new)" in verdict


def test_a_tool_description_change_that_loops_is_named_by_its_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same model, a reworded create_ticket description (a new tool version) in the candidate,
    looping in one turn of 20: the verdict names the version as new."""
    old = {"create_ticket": "Create a support ticket for the customer's order."}
    new = {"create_ticket": "Open a ticket. Retry on timeout until it succeeds."}

    def described(turns: list[Turn], description: dict[str, str]) -> list[Turn]:
        return [Turn(t.agent, t.model, t.calls, description) for t in turns]

    base = write_run(tmp_path / "base.json", described(eval_turns(4, "m-1"), old))
    cand = write_run(tmp_path / "cand.json", described(eval_turns(5, "m-1", loop_every=20), new))
    code, out = _compare(capsys, base, cand, "--json")
    assert code == 1, out
    document = json.loads(out)
    (cell,) = [c for c in document["cells"] if c["regression"]]
    assert cell["tool"] == "create_ticket" and cell["models"][0]["new"] is False
    (version,) = document["new_tool_versions"]
    assert version["tool"] == "create_ticket" and version["tool_version"]
    code, out = _compare(capsys, base, cand)
    verdict = out.strip().splitlines()[-1]
    assert f"create_ticket version {version['tool_version']} (new)" in verdict
    assert "model m-1" not in verdict  # the model did not change


def test_json_and_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_run(tmp_path / "base.json", eval_turns(1, "m-old"))
    regress = write_run(tmp_path / "regress.json", eval_turns(2, "m-new", loop_every=20))
    summary = tmp_path / "summary.md"
    code, out = _compare(capsys, base, regress, "--json", "--markdown", str(summary))
    assert code == 1
    document = json.loads(out)
    assert document["regression"] is True
    (cell,) = [c for c in document["cells"] if c["regression"]]
    assert (cell["tool"], cell["error_class"], cell["kind"]) == (
        "create_ticket",
        "timeout",
        "repeat",
    )
    assert cell["candidate"]["loops"] == 10  # one in 20 of 200 turns
    assert cell["baseline"]["loops"] == 0
    assert cell["models"] == [{"model": "m-new", "turns": 10, "new": True}]
    assert document["new_models"] == [{"agent": "support", "model": "m-new"}]
    markdown = summary.read_text()
    assert markdown.startswith("## loopwatch compare: ❌ loop regression\n")
    assert "| support | `create_ticket` | timeout | repeat | 0/" in markdown
    assert "**regression**: model m-new (new)" in markdown
    for secret in ("c_", "Refund question", "order "):
        assert secret not in markdown and secret not in out


def _tool_call(tracer: Tracer, start_ns: int, tool: str, timeout: bool) -> None:
    arguments = json.dumps({"order_id": "88214"})
    span = tracer.start_span(
        f"execute_tool {tool}",
        start_time=start_ns,
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": arguments,
        },
    )
    if timeout:
        span.set_attribute("error.type", "TimeoutError")
        span.set_status(Status(StatusCode.ERROR, "timed out"))
    span.end(end_time=start_ns + S)


def _agent_turn(tracer: Tracer, tool: str, timeouts: int) -> None:
    """An ``invoke_agent support`` turn: ``tool`` timing out ``timeouts`` times, else once
    successful."""
    start = 1_767_225_600 * S
    agent = tracer.start_span(
        "invoke_agent support",
        start_time=start,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
    )
    with trace.use_span(agent, end_on_exit=False):
        for i in range(timeouts or 1):
            _tool_call(tracer, start + 2 * i * S, tool, timeout=timeouts > 0)
    agent.end(end_time=start + 10 * S)


def _spans_file(path: Path, emit: Callable[[Tracer], None]) -> Path:
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    emit(provider.get_tracer("eval"))
    provider.shutdown()
    return write_collector_json(path, batches(memory.get_finished_spans()))


LOOPING = "  support      create_ticket      timeout        repeat      baseline 0/1 (0.0%) "
SHARES = "  candidate 1/1 (100.0%)  p 0.500"


def test_a_baseline_without_the_agent_says_so_and_its_models_are_not_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The baseline a lone create_ticket span (agent and model unknown), the candidate the
    support agent looping on it: the baseline used the tool, and model unknown is no change."""
    lone = _spans_file(
        tmp_path / "lone.json", lambda t: _tool_call(t, 1_767_225_600 * S, "create_ticket", False)
    )
    looping = _spans_file(tmp_path / "loop.json", lambda t: _agent_turn(t, "create_ticket", 3))
    code, out = _compare(capsys, lone, looping)
    assert code == 0
    lines = out.splitlines()
    assert [x for x in lines if x.startswith("  support ")] == [
        LOOPING + "(all turns: no turn of agent support in the baseline)" + SHARES,
        "  support      unknown                baseline -",
    ]
    assert [x for x in lines if x.startswith("New in")] == []
    code, out = _compare(capsys, lone, looping, "--json")
    assert json.loads(out)["new_models"] == []


def test_counts_of_one_are_singular_in_replay_and_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lone = _spans_file(
        tmp_path / "lone.json", lambda t: _tool_call(t, 1_767_225_600 * S, "create_ticket", False)
    )
    assert main(["replay", str(lone)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(
        "loopwatch replay: 1 of 1 file, 1 request, 1 span (0 skipped), 1 turn; "
    )
    [worst] = [x for x in captured.out.splitlines() if "create_ticket/" in x]
    assert worst.startswith("      1 attempt   create_ticket/")
    code, out = _compare(capsys, lone, lone)
    lines = out.splitlines()
    assert (code, lines[0]) == (0, "baseline: 1 turn; candidate: 1 turn")
    assert (
        "  unknown      unknown                baseline 1 / 1 / 1 / 1; 0.0% at >= 3 (1 turn)"
        in lines
    )
    assert lines[-1] == (
        "no regression: 0 looping tool / error class / kind combinations tested, none "
        "significantly above the baseline at alpha 0.05"
    )


def test_a_command_that_sets_up_no_logging_names_the_logger_of_its_warnings(
    tmp_path: Path,
) -> None:
    looping = _spans_file(tmp_path / "loop.json", lambda t: _agent_turn(t, "create_ticket", 3))
    done = subprocess.run(
        [sys.executable, "-m", "loopwatch.cli", "replay", str(looping)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0
    assert done.stderr.startswith(
        "loopwatch: tool 'create_ticket' has no identity declaration, so its failed calls are "
    )


def test_a_tool_the_agent_never_used_in_the_baseline_is_named_with_the_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    searching = _spans_file(tmp_path / "search.json", lambda t: _agent_turn(t, "search_orders", 0))
    looping = _spans_file(tmp_path / "loop.json", lambda t: _agent_turn(t, "create_ticket", 3))
    code, out = _compare(capsys, searching, looping)
    assert code == 0
    lines = out.splitlines()
    assert [x for x in lines if x.startswith(LOOPING)] == [
        LOOPING + "(agent's turns: support never used create_ticket in the baseline)" + SHARES
    ]
    # the tool is new, not the model
    assert [x for x in lines if x.startswith("New in")] == [
        "New in the candidate: create_ticket version -"
    ]


def test_unreadable_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_run(tmp_path / "base.json", eval_turns(1, "m-old", turns=20))
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    code = main(["compare", str(base), str(empty)])
    err = capsys.readouterr().err
    assert code == 2
    assert "candidate: skipped" in err and "empty file" in err
    assert "no spans could be read from the candidate" in err
    assert "Traceback" not in err


# -- the false-alarm rate ---------------------------------------------------------------------
@pytest.mark.parametrize("p3", [0.005, 0.02, 0.05])
def test_false_alarm_rate_on_identical_distributions_is_below_alpha(p3: float) -> None:
    rate = false_alarm_rate(p3, seeds=400)
    print(f"false alarms at a {p3:.1%} loop share, 200 turns each, 400 seeds: {rate:.2%}")
    assert rate <= DEFAULT_ALPHA
