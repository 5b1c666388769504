"""What a loop cost, through the real SDK and processor: the tokens of the model calls that asked
for a loop's extra attempts (core.cost's rule), under the three conventions' usage attributes.
Exact numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from loopwatch.conventions.usage import token_usage
from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.emit import CONVENTIONS, emit_turn
from loopwatch.demo.scenarios import Call, Turn, fourteen_tickets
from tests.support.helpers import Pipeline, S

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

DECLARED = Config(tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))})
TOKENS = "loopwatch_loop_tokens_total"


def usage(i: int) -> tuple[int, int]:
    """Model call i: 1000 + 10 i tokens in, 50 + i out."""
    return 1000 + 10 * i, 50 + i


# The fourteen tickets: model calls 1..13 asked for the 13 attempts past the first.
INPUT_CHARGED = sum(1000 + 10 * i for i in range(1, 14))  # 13,910
OUTPUT_CHARGED = sum(50 + i for i in range(1, 14))  # 741


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_the_seed_incident_charges_the_thirteen_model_calls_past_the_first(
    convention: str,
) -> None:
    p = Pipeline(DECLARED)
    emit_turn(p.tracer, fourteen_tickets(), 1000 * S, convention, usage)
    assert p.value("loopwatch_repeat_calls_total", error_class="timeout") == 13
    assert (INPUT_CHARGED, OUTPUT_CHARGED) == (13_910, 741)
    cell = {"tool": "create_ticket", "error_class": "timeout", "kind": "repeat"}
    assert p.value(TOKENS, **cell, token_type="input") == 13_910
    assert p.value(TOKENS, **cell, token_type="output") == 741
    assert p.value(TOKENS, token_type="unsplit") == 0
    assert p.value(TOKENS) == 13_910 + 741  # the first model call and the final answer: not
    assert p.value(TOKENS, model="gpt-4.1", agent="support") == 13_910 + 741
    p.close()


def test_a_failing_streak_is_charged_under_its_kind() -> None:
    """Identity "*": fourteen keys failing alike, a failing loop; the same 13 model calls."""
    p = Pipeline(Config(tools={"create_ticket": ToolDeclaration(identity=("*",))}))
    emit_turn(p.tracer, fourteen_tickets(), 1000 * S, usage=usage)
    assert p.value(TOKENS, kind="failing", error_class="timeout", token_type="input") == 13_910
    assert p.value(TOKENS, kind="failing", token_type="output") == 741
    assert p.value(TOKENS, kind="repeat") == 0
    p.close()


def test_a_turn_without_a_loop_charges_nothing() -> None:
    p = Pipeline(DECLARED)
    calls = tuple(
        Call("create_ticket", {"customer_id": "c_1", "order_id": str(880 + i)}, 100, {"t": i})
        for i in range(5)
    )
    emit_turn(p.tracer, Turn("support", "gpt-4.1", calls), 1000 * S, usage=usage)
    assert p.value("loopwatch_turns_total") == 1
    assert p.value("loopwatch_loops_total") == 0
    assert p.value(TOKENS) == 0
    assert not [line for line in _exposition(p) if line.startswith(TOKENS)]
    p.close()


def test_model_calls_without_usage_charge_nothing_and_are_no_error() -> None:
    p = Pipeline(DECLARED)
    emit_turn(p.tracer, fourteen_tickets(), 1000 * S)  # no usage attributes at all
    assert p.value("loopwatch_loops_total", kind="repeat") == 1
    assert p.value(TOKENS) == 0
    assert p.value("loopwatch_spans_dropped_total") == 0
    p.close()


def test_only_the_model_calls_that_report_usage_count() -> None:
    """Every other model call reports usage: of the 13 charged, 1, 3, ..., 13 (7 calls)."""
    p = Pipeline(DECLARED)
    emit_turn(
        p.tracer,
        fourteen_tickets(),
        1000 * S,
        usage=lambda i: usage(i) if i % 2 else (0, 0),
    )
    odd = range(1, 14, 2)
    assert p.value(TOKENS, token_type="input") == sum(1000 + 10 * i for i in odd) == 7_490
    assert p.value(TOKENS, token_type="output") == sum(50 + i for i in odd) == 399
    p.close()


def _exposition(p: Pipeline) -> list[str]:
    from prometheus_client import generate_latest

    p.flush()
    return generate_latest(p.registry).decode().splitlines()


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        ({"gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 3}, (7, 3, 0)),
        ({"llm.token_count.prompt": 7, "llm.token_count.total": 10}, (7, 0, 0)),
        ({"llm.token_count.total": 10}, (0, 0, 10)),
        ({"llm.usage.total_tokens": 10}, (0, 0, 10)),
        ({"gen_ai.usage.prompt_tokens": "7", "gen_ai.usage.completion_tokens": 3.0}, (7, 3, 0)),
        ({"gen_ai.usage.input_tokens": -1, "gen_ai.usage.output_tokens": True}, (0, 0, 0)),
        ({"gen_ai.usage.input_tokens": "seven", "llm.token_count.prompt": 7}, (7, 0, 0)),
        ({"gen_ai.usage.input_tokens": 2.5, "gen_ai.usage.output_tokens": [1]}, (0, 0, 0)),
        ({}, (0, 0, 0)),
    ],
)
def test_usage_is_read_from_each_convention_and_bad_values_are_ignored(
    attributes: dict[str, object], expected: tuple[int, int, int]
) -> None:
    assert token_usage(attributes) == expected


def _recorded(turns: list[tuple[Turn, str, bool]]) -> list[ReadableSpan]:
    """The spans of ``turns`` ((turn, convention, with usage)), as the SDK exports them."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    t = 1_767_225_600 * S
    for turn, convention, with_usage in turns:
        t = emit_turn(
            provider.get_tracer("eval"), turn, t, convention, usage if with_usage else None
        )
        t += S
    provider.shutdown()
    return list(memory.get_finished_spans())


def _healthy() -> Turn:
    calls = tuple(
        Call("search_orders", {"query": f"order {i}", "customer_id": "c_1"}, 300, [{"id": i}])
        for i in range(3)
    )
    return Turn("support", "gpt-4.1", calls)


# the seed incident under each convention, with usage: three times the charge
INCIDENTS = [(fourteen_tickets(), convention, True) for convention in CONVENTIONS]


def test_the_service_charges_the_same_tokens() -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from tests.support.service import post, running, settle, value

    body = encode_spans(_recorded(INCIDENTS)).SerializeToString()
    with running(Config(grace_seconds=0.0)) as service:
        assert service.bound is not None
        status, _, _ = post(service.bound.http, body)
        assert status == 200
        settle(service)
        r = service.registry
        cell = {"tool": "create_ticket", "error_class": "timeout", "kind": "repeat"}
        assert value(r, "loopwatch_turns_total") == 3
        assert value(r, TOKENS, **cell, token_type="input") == 3 * 13_910
        assert value(r, TOKENS, **cell, token_type="output") == 3 * 741
        assert value(r, TOKENS) == 3 * (13_910 + 741)


def test_replay_and_compare_report_the_tokens_of_loops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from loopwatch.cli import main
    from testkit.stored import write_collector_json
    from tests.support.replay import batches

    base = write_collector_json(
        tmp_path / "base.json", batches(_recorded([(_healthy(), "genai", True)] * 3))
    )
    cand = write_collector_json(
        tmp_path / "cand.json", batches(_recorded([(_healthy(), "genai", True), *INCIDENTS]))
    )
    out = tmp_path / "replay.om"
    assert main(["replay", str(cand), "--json", "--openmetrics", str(out)]) == 0
    tokens = json.loads(capsys.readouterr().out)["loop_tokens"]
    assert tokens == {
        "model_calls": 39,
        "input": 41_730,
        "output": 2_223,
        "unsplit": 0,
        "by_loop": [
            {
                "agent": "support",
                "tool": "create_ticket",
                "error_class": "timeout",
                "kind": "repeat",
                "model_calls": 39,
                "input": 41_730,
                "output": 2_223,
                "unsplit": 0,
            }
        ],
    }
    # the last scrape of the OpenMetrics file holds every turn
    samples = [line for line in out.read_text().splitlines() if line.startswith(TOKENS + "{")]
    last = {line.split("}")[0]: float(line.split()[1]) for line in samples}
    assert sorted(last.values()) == [2_223.0, 41_730.0]
    assert main(["replay", str(cand)]) == 0
    text = capsys.readouterr().out
    assert "  tokens of loops       41,730 input, 2,223 output tokens of 39 model calls\n" in text
    assert (
        "    support        create_ticket      timeout            repeat      "
        "41,730 input, 2,223 output tokens of 39 model calls\n" in text
    )
    assert main(["compare", str(base), str(cand), "--markdown", "-"]) == 0
    text = capsys.readouterr().out
    assert "  baseline  0 input, 0 output tokens of 0 model calls\n" in text
    assert "  candidate 41,730 input, 2,223 output tokens of 39 model calls\n" in text
    assert "| baseline | 0 | 0 | 0 | 0 |\n" in text
    assert "| candidate | 39 | 41,730 | 2,223 | 0 |\n" in text
    assert main(["compare", str(base), str(cand), "--json"]) == 0
    compared = json.loads(capsys.readouterr().out)
    assert compared["candidate"]["loop_tokens"]["input"] == 41_730
    assert compared["baseline"]["loop_tokens"]["model_calls"] == 0
