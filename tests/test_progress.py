"""Progress read from results, through the real SDK and processor: text results, the repeats
that progress, and the loops that make none (failing and same-result streaks). Exact numbers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode, Tracer

from loopwatch.core.config import Config, ConfigError, config_from_mapping
from loopwatch.core.declarations import ToolDeclaration
from tests.support.helpers import Pipeline, S

MS = 1_000_000


@dataclass(frozen=True)
class Raw:
    """One tool call as its span records it: ``result`` is the attribute's text as written
    (None: not recorded), ``error`` an exception message (the span fails)."""

    tool: str
    arguments: Any
    result: str | None = None
    error: str | None = None
    error_type: str = "ToolError"
    ms: int = 50


def text(value: Any) -> str:
    return json.dumps(value)


def emit(tracer: Tracer, calls: Sequence[Raw], start: int, parallel: bool = False) -> int:
    """One turn of GenAI spans: a model call before each tool call (all tool calls after one
    model call when ``parallel``), then the final answer; returns the turn's end."""
    root = tracer.start_span(
        "invoke_agent support",
        start_time=start,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
    )
    t = start + MS
    with trace.use_span(root, end_on_exit=False):
        for i, call in enumerate(calls):
            if not parallel or i == 0:
                llm = tracer.start_span(
                    "chat m1",
                    start_time=t,
                    attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m1"},
                )
                t += 300 * MS
                llm.end(end_time=t)
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.tool,
                "gen_ai.tool.call.id": f"call_{i}",
                "gen_ai.tool.call.arguments": text(call.arguments),
            }
            if call.result is not None:
                attrs["gen_ai.tool.call.result"] = call.result
            span = tracer.start_span(f"execute_tool {call.tool}", start_time=t, attributes=attrs)
            end = t + call.ms * MS
            if call.error is not None:
                span.set_attribute("error.type", call.error_type)
                span.set_status(Status(StatusCode.ERROR, call.error))
            span.end(end_time=end)
            t = t + MS if parallel else end
        final = tracer.start_span(
            "chat m1", start_time=t, attributes={"gen_ai.request.model": "m1"}
        )
        t += 300 * MS
        final.end(end_time=t)
    root.end(end_time=t + MS)
    return t + MS


def run(config: Config, calls: Sequence[Raw], parallel: bool = False) -> Pipeline:
    p = Pipeline(config)
    emit(p.tracer, calls, 1000 * S, parallel)
    p.flush()
    return p


# -- results as text ----------------------------------------------------------------------------
GREPS = [Raw("grep", {"pattern": p, "path": "src"}, "") for p in ("retry", "backoff", "429", "x")]


@pytest.mark.parametrize("empty", ["", "   \n", "[]", "{}"])
def test_four_greps_that_print_nothing_are_a_no_rows_streak_of_four(empty: str) -> None:
    p = run(Config(), [Raw(c.tool, c.arguments, empty) for c in GREPS])
    assert p.value("loopwatch_no_rows_streak_sum", tool="grep") == 4
    assert p.value("loopwatch_no_rows_streak_count", tool="grep") == 1
    assert p.value("loopwatch_loops_total", tool="grep", error_class="ok", kind="no_rows") == 1
    assert p.value("loopwatch_loops_total") == 1
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    p.close()


def test_a_grep_that_printed_lines_resets_the_streak() -> None:
    calls = list(GREPS)
    calls[2] = Raw("grep", {"pattern": "429"}, "src/http.py:12: if status == 429:\n")
    p = run(Config(), calls)
    assert p.value("loopwatch_no_rows_streak_sum", tool="grep") == 2
    assert p.value("loopwatch_loops_total") == 0
    p.close()


def _shell(output: str) -> Raw:
    return Raw("shell", {"command": "tail -n 3 build.log"}, output)


def test_a_declared_regular_expression_keys_a_text_result_on_its_match() -> None:
    """``re:`` and a pattern: the match (its groups) is what the outcome is; no match is no
    rows. The same command four times, two of them at 40%: two keys of 2, then no rows."""
    config = config_from_mapping({"tools": {"shell": {"result": r"re:progress (\d+)%"}}})
    outputs = ["step 3: progress 40%", "step 4: progress 40%", "progress 80%", "progress 80%"]
    p = run(config, [_shell(o) for o in outputs])
    assert p.value("loopwatch_turn_max_attempts_sum") == 2
    assert p.value("loopwatch_repeat_calls_total", tool="shell") == 2
    assert p.value("loopwatch_no_rows_streak_sum", tool="shell") == 0
    assert p.value("loopwatch_loops_total") == 0
    p.close()
    p = run(config, [_shell("done") for _ in range(3)])
    assert p.value("loopwatch_no_rows_streak_sum", tool="shell") == 3
    assert p.value("loopwatch_loops_total", kind="no_rows") == 1
    p.close()


def test_the_whole_text_declared_is_normalized() -> None:
    """``result = "*"``: the whole text fingerprints the result, its timestamps and durations
    left out: three answers that differ only there are one key of 3 attempts (a loop)."""
    config = config_from_mapping({"tools": {"shell": {"result": "*"}}})
    outputs = [
        f"2025-05-01T12:00:0{i}Z build still running (request id: r-{i}, took {i}.2s)"
        for i in range(3)
    ]
    p = run(config, [_shell(o) for o in outputs])
    assert p.value("loopwatch_turn_max_attempts_sum") == 3
    assert p.value("loopwatch_loops_total", tool="shell", kind="repeat") == 1
    p.close()


@pytest.mark.parametrize(
    ("result", "message"),
    [
        ("re:(unclosed", "is not a regular expression"),
        ("", 'result must be "rows", "*"'),
        (3, 'result must be "rows", "*"'),
    ],
)
def test_a_bad_result_declaration_is_a_clear_error(result: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        config_from_mapping({"tools": {"shell": {"result": result}}})
    assert "[tools.shell]" in str(raised.value)


# -- bad input stays harmless ----------------------------------------------------------------------
def _hostile() -> list[str]:
    deep = "[" * 100_000 + "]" * 100_000
    shallow_deep = "[" * 900 + "1" + "]" * 900
    return [
        "x" * (4 * 1024 * 1024),  # megabytes of text
        text([{"row": i, "name": f"item {i}"} for i in range(20_000)]),  # a large JSON answer
        deep,  # nesting no parser takes
        shallow_deep,  # nesting the parser takes and the encoder may not
        "\udcff\udcfe not UTF-8 \x00\x01\x02 binary",
        "\x00" * 1000,
    ]


def test_hostile_results_are_read_and_counted() -> None:
    calls = [Raw("fetch", {"url": f"https://example.com/{i}"}, r) for i, r in enumerate(_hostile())]
    p = run(Config(), calls)
    assert p.value("loopwatch_tool_calls_total", tool="fetch", error_class="ok") == 6
    assert p.value("loopwatch_spans_dropped_total") == 0
    assert p.value("loopwatch_turns_total") == 1
    assert p.value("loopwatch_loops_total") == 0
    p.close()


def test_declared_parts_of_hostile_results_are_read_and_counted() -> None:
    for part in ("*", r"re:(\d+)", "row.name"):
        config = Config(tools={"fetch": ToolDeclaration(result=part)})
        calls = [Raw("fetch", {"url": str(i)}, r) for i, r in enumerate(_hostile())]
        p = run(config, calls)
        assert p.value("loopwatch_tool_calls_total", tool="fetch", error_class="ok") == 6
        assert p.value("loopwatch_spans_dropped_total") == 0
        p.close()


# -- the fingerprint's rules -----------------------------------------------------------------------
def test_what_changes_on_every_answer_does_not_change_the_fingerprint() -> None:
    from loopwatch.core.fingerprint import fingerprint

    def poll(request: str, at: str, took: int, lines: int) -> dict[str, Any]:
        return {"requestId": request, "status": {"at": at, "lines": lines}, "took": took}

    first = fingerprint(poll("r-1", "2025-05-01T12:00:01Z", 12, 40))
    assert fingerprint(poll("r-2", "2025-05-01 12:00:04.5+02:00", 40, 40)) == first
    assert fingerprint(poll("r-3", "2025-05-01T12:00:07Z", 9, 41)) != first
    # a key order is no change; ids of rows are content, not noise (a request's are noise)
    assert fingerprint({"b": 1, "a": [1, 2]}) == fingerprint({"a": [1, 2], "b": 1})
    assert fingerprint([{"id": "doc-1"}]) != fingerprint([{"id": "doc-2"}])
    assert fingerprint({"id": "q-1", "rows": []}) == fingerprint({"id": "q-2", "rows": []})
    log = "[12:00:0{0}] job 3f2a1b4c-1234-4abc-8def-01234567890{0} running, 3 of 10 done in 0.{0}s"
    assert fingerprint(log.format(1)) == fingerprint(log.format(2))
    assert fingerprint(log.format(1)) != fingerprint(log.format(1).replace("3 of", "4 of"))


def test_fingerprints_are_bounded_and_never_raise() -> None:
    from loopwatch.core.fingerprint import MAX_HASHED_CHARS, fingerprint

    head = "a" * MAX_HASHED_CHARS
    # past the bound only the length counts
    assert fingerprint(head + "b" * 1000) == fingerprint(head + "c" * 1000)
    assert fingerprint(head + "b" * 1000) != fingerprint(head + "b" * 1001)
    deep: list[Any] = []
    node = deep
    for _ in range(200_000):
        node.append([])
        node = node[0]
    cycle: list[Any] = [1]
    cycle.append(cycle)
    for value in (deep, cycle, b"\xff\xfe", "\udcff", object(), float("nan"), {1: {2: set()}}):
        assert isinstance(fingerprint(value), int)
    assert fingerprint(deep) != fingerprint(deep[0])


def test_acknowledgements_are_not_data() -> None:
    from loopwatch.core.fingerprint import carries_data

    acknowledgements = [{"status": "sent"}, {"ticket": "T-1", "ok": True}, "Message sent.", 1, True]
    assert [carries_data(a) for a in acknowledgements] == [False] * 5
    rows = [[{"id": "doc-1"}], {"results": [1]}, {"job": {"state": "running"}}, "a\nb"]
    assert [carries_data(r) for r in rows] == [True] * 4


# -- repeats that progress ----------------------------------------------------------------------
POLL = {"action": "poll", "id": "job_7"}


def _growing_polls() -> list[Raw]:
    """Twenty-four polls of a running job whose log grows a line each time, then its end."""
    lines = [f"[2025-05-01T12:00:{i:02d}Z] compiled module {i} of 24" for i in range(24)]
    polls = [Raw("process", POLL, "\n".join(lines[: i + 1])) for i in range(24)]
    return [*polls, Raw("process", POLL, "\n".join([*lines, "exit code 0"]))]


@pytest.mark.parametrize(
    "config",
    [Config(), Config(tools={"process": ToolDeclaration(identity=("action", "id"))})],
    ids=["undeclared", "declared"],
)
def test_twenty_five_polls_that_progress_are_no_loop(config: Config) -> None:
    p = run(config, _growing_polls())
    assert p.value("loopwatch_tool_calls_total", tool="process", error_class="ok") == 25
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    assert p.value("loopwatch_tool_max_attempts_sum", tool="process") == 1
    assert p.value("loopwatch_repeat_calls_total") == 0
    assert p.value("loopwatch_over_cap_seconds_total") == 0
    assert p.value("loopwatch_loops_total") == 0
    p.close()


def _unchanged_polls() -> list[Raw]:
    """Eleven polls whose answer changes only in its request id, time and duration."""
    return [
        Raw(
            "process",
            POLL,
            text(
                {
                    "request_id": f"req_{i}",
                    "status": "running",
                    "checked_at": f"2025-05-01T12:00:{i:02d}Z",
                    "elapsed_ms": 1000 * i,
                    "log": ["compiled module 1 of 24"],
                }
            ),
            ms=100,
        )
        for i in range(11)
    ]


@pytest.mark.parametrize(
    "config",
    [Config(), Config(tools={"process": ToolDeclaration(identity=("action", "id"))})],
    ids=["undeclared", "declared"],
)
def test_eleven_polls_with_unchanged_output_are_a_repeat_loop(config: Config) -> None:
    p = run(config, _unchanged_polls())
    assert p.value("loopwatch_turn_max_attempts_sum") == 11
    assert p.value("loopwatch_repeat_calls_total", tool="process", error_class="ok") == 10
    assert p.value("loopwatch_loops_total", tool="process", error_class="ok", kind="repeat") == 1
    assert p.value("loopwatch_loops_total") == 1
    # the eight polls past the threshold of 3, at 100 ms each
    assert p.value("loopwatch_over_cap_seconds_total", tool="process") == pytest.approx(0.8)
    p.close()


def test_a_declared_result_path_narrows_what_counts_as_progress() -> None:
    """The log grows, the declared status does not change: eleven attempts of one key."""
    config = Config(tools={"process": ToolDeclaration(result="status")})
    polls = [
        Raw("process", POLL, text({"status": "running", "log": ["line"] * i})) for i in range(11)
    ]
    p = run(config, polls)
    assert p.value("loopwatch_turn_max_attempts_sum") == 11
    assert p.value("loopwatch_loops_total", kind="repeat") == 1
    p.close()
    p = run(Config(), polls)  # undeclared: the whole result, which grows
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    assert p.value("loopwatch_loops_total") == 0
    p.close()


def test_progress_then_no_progress_counts_the_longest_run() -> None:
    """A file read, edited, then read four times unchanged: runs of 1 and 4 (a loop of 4, three
    repeats); re-reads that alternate between two contents always progress."""
    read = {"path": "src/app.py"}
    calls = [
        Raw("read_file", read, "def main():\n    pass\n"),
        Raw("edit_file", {"path": "src/app.py", "line": 2}, "ok"),
        *[Raw("read_file", read, "def main():\n    run()\n") for _ in range(4)],
    ]
    p = run(Config(), calls)
    assert p.value("loopwatch_tool_max_attempts_sum", tool="read_file") == 4
    assert p.value("loopwatch_repeat_calls_total", tool="read_file") == 3
    assert p.value("loopwatch_loops_total", tool="read_file", kind="repeat") == 1
    p.close()
    flip = [Raw("read_file", read, f"version {i % 2}\n") for i in range(6)]
    p = run(Config(), flip)
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    assert p.value("loopwatch_loops_total") == 0
    p.close()


# -- failing streaks ------------------------------------------------------------------------------
def _unknown_tool_calls() -> list[Raw]:
    """The model calls a tool the agent does not have, twenty times, never with the same
    arguments: each call fails at once with the runtime's "not found"."""
    return [
        Raw(
            "lookup_invoice",
            {"invoice_id": f"INV-{1000 + i}", "customer_id": f"c_{i % 3}"},
            error=f"Tool 'lookup_invoice' not found in agent 'support' (call {i})",
            error_type="ModelBehaviorError",
            ms=2,
        )
        for i in range(20)
    ]


UNKNOWN_DECLARED = Config(tools={"lookup_invoice": ToolDeclaration(identity=("invoice_id",))})


@pytest.mark.parametrize("config", [Config(), UNKNOWN_DECLARED], ids=["undeclared", "declared"])
def test_an_unknown_tool_called_twenty_times_is_a_failing_loop(config: Config) -> None:
    p = run(config, _unknown_tool_calls())
    assert (
        p.value("loopwatch_tool_calls_total", tool="lookup_invoice", error_class="not_found") == 20
    )
    # every call a key of its own: no repeat
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    assert p.value("loopwatch_repeat_calls_total") == 0
    assert p.value("loopwatch_failing_streak_sum", tool="lookup_invoice") == 20
    assert p.value("loopwatch_failing_streak_count", tool="lookup_invoice") == 1
    assert p.observations("loopwatch_failing_streak", tool="lookup_invoice")[16.0] == 0
    loops = dict(kind="failing", tool="lookup_invoice", error_class="not_found")
    assert p.value("loopwatch_loops_total", **loops) == 1
    assert p.value("loopwatch_loops_total") == 1
    p.close()


def test_the_failing_threshold_is_configurable_and_a_success_ends_a_streak() -> None:
    calls = _unknown_tool_calls()[:4]
    p = run(Config(), calls)  # 4 < the default of 5
    assert p.value("loopwatch_failing_streak_sum") == 4
    assert p.value("loopwatch_loops_total") == 0
    p.close()
    config = config_from_mapping({"defaults": {"failing_threshold": 4}})
    p = run(config, calls)
    assert p.value("loopwatch_loops_total", kind="failing") == 1
    p.close()
    per_tool = config_from_mapping({"tools": {"lookup_invoice": {"failing_threshold": 3}}})
    p = run(per_tool, calls)
    assert p.value("loopwatch_loops_total", kind="failing") == 1
    p.close()
    # two failures, a success, two failures; then two of another class: runs of 2 at most
    mixed = [
        *calls[:2],
        Raw("lookup_invoice", {"invoice_id": "INV-1"}, text({"total": 3})),
        *calls[2:],
    ]
    mixed.append(Raw("lookup_invoice", {"invoice_id": "INV-2"}, error="timed out", ms=30))
    mixed.append(Raw("lookup_invoice", {"invoice_id": "INV-3"}, error="timed out", ms=30))
    p = run(config_from_mapping({"defaults": {"failing_threshold": 2}}), mixed)
    assert p.value("loopwatch_failing_streak_sum") == 2
    assert p.value("loopwatch_loops_total", kind="failing", error_class="not_found") == 1
    assert p.value("loopwatch_loops_total", kind="failing", error_class="timeout") == 1
    p.close()


def test_one_key_failing_again_is_a_repeat_loop_not_a_failing_one() -> None:
    """The seed incident's shape: fourteen timeouts of one key are its attempts (a repeat
    loop); the failing streak of 14 is observed, but is no second loop."""
    calls = [
        Raw(
            "create_ticket",
            {"order_id": "88214", "summary": f"refund, take {i}"},
            error="timed out",
        )
        for i in range(14)
    ]
    p = run(Config(), calls)
    assert p.value("loopwatch_turn_max_attempts_sum") == 14
    assert p.value("loopwatch_failing_streak_sum") == 14
    assert p.value("loopwatch_loops_total", kind="repeat", error_class="timeout") == 1
    assert p.value("loopwatch_loops_total") == 1
    p.close()


def test_an_unknown_tool_through_the_service_is_the_same_failing_loop() -> None:
    """The same spans as OTLP to the service: the same numbers."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.support.service import post, running, settle, value

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    emit(provider.get_tracer("test"), _unknown_tool_calls(), 1000 * S)
    provider.shutdown()
    body = encode_spans(list(memory.get_finished_spans())).SerializeToString()
    with running(Config(grace_seconds=0.0)) as service:
        assert service.bound is not None
        status, _, _ = post(service.bound.http, body)
        assert status == 200
        settle(service)
        r = service.registry
        assert value(r, "loopwatch_tool_calls_total", error_class="not_found") == 20
        assert value(r, "loopwatch_turn_max_attempts_sum") == 1
        assert value(r, "loopwatch_failing_streak_sum", tool="lookup_invoice") == 20
        loops = dict(kind="failing", tool="lookup_invoice", error_class="not_found")
        assert value(r, "loopwatch_loops_total", **loops) == 1
        assert value(r, "loopwatch_loops_total") == 1


def test_a_failing_loop_is_logged_with_its_streak_and_class(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging
    import re

    caplog.set_level(logging.INFO, logger="loopwatch")
    run(Config(), _unknown_tool_calls()).close()
    lines = [r.getMessage() for r in caplog.records if "loop found" in r.getMessage()]
    assert len(lines) == 1
    assert re.fullmatch(
        r"loop found: tool=lookup_invoice failing_streak=20 error_class=not_found "
        r"service=support-agent agent=support trace_id=[0-9a-f]{32}",
        lines[0],
    )


# -- same-result streaks ---------------------------------------------------------------------------
DOCUMENTS = [
    {"id": "kb-114", "title": "Refunds for returned items", "updated": "2025-04-02T09:00:00Z"},
    {"id": "kb-207", "title": "Return shipping labels", "updated": "2025-03-11T16:20:00Z"},
]
REWORDINGS = ("boots refund", "refund for returned boots", "where is my boots refund")


def _searches(answer: Any = DOCUMENTS) -> list[Raw]:
    return [Raw("search_kb", {"query": q, "limit": 5}, text(answer)) for q in REWORDINGS]


@pytest.mark.parametrize(
    "config",
    [
        Config(),
        Config(tools={"search_kb": ToolDeclaration(identity=("query",))}),
        Config(tools={"search_kb": ToolDeclaration(result="rows")}),
    ],
    ids=["undeclared", "declared", "rows"],
)
def test_three_reworded_searches_with_the_same_documents_are_a_same_result_loop(
    config: Config,
) -> None:
    p = run(config, _searches())
    assert p.value("loopwatch_same_result_streak_sum", tool="search_kb") == 3
    assert p.value("loopwatch_same_result_streak_count", tool="search_kb") == 1
    assert p.value("loopwatch_no_rows_streak_sum", tool="search_kb") == 0
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    loops = dict(tool="search_kb", error_class="ok", kind="same_result")
    assert p.value("loopwatch_loops_total", **loops) == 1
    assert p.value("loopwatch_loops_total") == 1
    p.close()


def test_a_same_result_streak_ends_where_the_answer_changes() -> None:
    calls = _searches()
    calls.insert(2, Raw("search_kb", {"query": "boots", "limit": 5}, text(DOCUMENTS[:1])))
    p = run(Config(), calls)  # same, same, other, same: runs of 2 and 1
    assert p.value("loopwatch_same_result_streak_sum", tool="search_kb") == 2
    assert p.value("loopwatch_loops_total") == 0
    p.close()
    threshold = config_from_mapping({"defaults": {"same_result_threshold": 2}})
    p = run(threshold, calls)
    assert p.value("loopwatch_loops_total", kind="same_result") == 1
    p.close()


def test_the_same_data_for_other_targets_is_no_streak() -> None:
    """Three directories that hold the same two files: other requests, not rewordings."""
    calls = [Raw("list_dir", {"path": d}, "README.md\nsetup.py\n") for d in ("a", "b", "c")]
    p = run(Config(), calls)
    assert p.value("loopwatch_same_result_streak_sum", tool="list_dir") == 1
    assert p.value("loopwatch_loops_total") == 0
    p.close()


def _one_order_again() -> list[Raw]:
    """Four reworded tickets for one order, each answered with a new ticket id: a write done
    four times."""
    notes = ("Refund missing", "Refund still missing", "Customer chasing refund", "Refund?")
    return [
        Raw(
            "create_ticket",
            {"customer_id": "c_40912", "order_id": "88214", "summary": note},
            text({"ticket_id": f"T-{4101 + i}"}),
        )
        for i, note in enumerate(notes)
    ]


def _bulk(answer: Any) -> list[Raw]:
    return [
        Raw(
            "create_ticket",
            {"customer_id": "c_40912", "order_id": str(88210 + i), "summary": "Refund missing"},
            text(answer(i)),
        )
        for i in range(6)
    ]


@pytest.mark.parametrize(
    "answer",
    [lambda i: {"ticket_id": f"T-{i}"}, lambda i: {"status": "created"}, lambda i: None],
    ids=["ticket-ids", "acknowledgement", "nothing"],
)
@pytest.mark.parametrize(
    "config",
    [
        Config(),
        Config(tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))}),
    ],
    ids=["undeclared", "declared"],
)
def test_the_parallel_bulk_turn_is_no_loop(answer: Any, config: Config) -> None:
    """Six different orders in one model step, answered with ticket ids, the same
    acknowledgement or nothing: work, never a loop."""
    p = run(config, _bulk(answer), parallel=True)
    assert p.value("loopwatch_tool_calls_total", tool="create_ticket", error_class="ok") == 6
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    assert p.value("loopwatch_repeat_calls_total") == 0
    assert p.value("loopwatch_same_result_streak_sum") == 0
    assert p.value("loopwatch_failing_streak_sum") == 0
    assert p.value("loopwatch_loops_total") == 0
    p.close()


def test_the_same_acknowledgement_for_reworded_messages_is_no_loop() -> None:
    """Twenty-one different messages to one channel, each answered "sent": the text is the
    work, and one acknowledgement again is no sign of a loop."""
    calls = [
        Raw(
            "message",
            {"action": "send", "target": "#support", "text": f"Update {i} on the refund"},
            text({"ok": True, "status": "sent"}),
        )
        for i in range(21)
    ]
    p = run(Config(), calls)
    assert p.value("loopwatch_same_result_streak_sum", tool="message") == 0
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    assert p.value("loopwatch_loops_total") == 0
    p.close()


# -- replay and compare ----------------------------------------------------------------------------
def _stored(path: Any, turns: Sequence[Sequence[Raw]]) -> Any:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from testkit.stored import write_collector_json
    from tests.support.replay import batches

    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    t = 1_767_225_600 * S
    for calls in turns:
        t = emit(provider.get_tracer("eval"), calls, t) + S
    provider.shutdown()
    return write_collector_json(path, batches(memory.get_finished_spans(), size=200))


def test_replay_and_compare_report_each_kind_of_loop(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from loopwatch.cli import main

    healthy = [_growing_polls(), _bulk(lambda i: {"ticket_id": f"T-{i}"})]
    looping = [
        *healthy,
        _unknown_tool_calls(),
        _searches(),
        _unchanged_polls(),
        GREPS,
        _one_order_again(),
    ]
    base = _stored(tmp_path / "base.json", healthy * 3)
    cand = _stored(tmp_path / "cand.json", looping)
    assert main(["replay", str(cand), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["turns"] == 7
    assert report["turns_with_a_loop"] == 5
    assert report["turns_with_a_loop_by_kind"] == {
        "repeat": 1,
        "duplicate": 1,
        "no_rows": 1,
        "same_result": 1,
        "failing": 1,
    }
    loops = {(x["tool"], x["error_class"], x["kind"]): x["turns"] for x in report["loops"]}
    assert loops == {
        ("lookup_invoice", "not_found", "failing"): 1,
        ("search_kb", "ok", "same_result"): 1,
        ("process", "ok", "repeat"): 1,
        ("grep", "ok", "no_rows"): 1,
        ("create_ticket", "ok", "duplicate"): 1,
    }
    assert main(["replay", str(cand)]) == 0
    text_report = capsys.readouterr().out
    assert (
        "turns with a loop     repeat 1, duplicate 1, no_rows 1, same_result 1, failing 1\n"
        in text_report
    )
    assert "    failing      consecutive failures of one class, whatever the arguments\n" in (
        text_report
    )
    # one turn of each is too few to be a significant regression: exit 0, every kind named
    assert main(["compare", str(base), str(cand), "--markdown", "-"]) == 0
    out = capsys.readouterr().out
    counts = "repeat {}, duplicate {}, no_rows {}, same_result {}, failing {}\n"
    assert "  baseline turns with a loop:  " + counts.format(0, 0, 0, 0, 0) in out
    assert "  candidate turns with a loop: " + counts.format(1, 1, 1, 1, 1) in out
    duplicate = "a write that succeeded again on one identity: its side effect twice"
    assert f"| duplicate | {duplicate} | 0 | 1 |" in out
    assert "| failing | consecutive failures of one class, whatever the arguments | 0 | 1 |" in out
    assert "| support | `lookup_invoice` | not_found | failing | 0/" in out
