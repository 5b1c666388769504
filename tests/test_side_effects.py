"""Writes and real progress, through the real processor in every emitter family: a write's
success never makes progress and its second success on one identity is a duplicate loop; a
read's result is compared without its volatile values (ids, sessions, pids, clocks, durations),
so a poll stuck behind a fresh request id is a loop and a poll that advances is not. The loop
breaker counts a write's successes as attempts, as the monitor does."""

from __future__ import annotations

import logging
import re
from functools import partial
from typing import Any

import pytest

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.effects import IDEMPOTENT_WRITE, READ, WRITE, effect_of, written_arguments
from loopwatch.demo.emit import CONVENTIONS, emit_turn
from loopwatch.demo.scenarios import Call, Turn, five_bookings, fourteen_tickets
from loopwatch.guards.breaker import LoopBreaker
from loopwatch.guards.terminal import TerminalResult
from tests.support.helpers import Pipeline, S


def _refunds() -> Turn:
    calls = tuple(
        Call(
            "refund_payment",
            {"payment_id": "P-7"},
            200,
            result={"refund_id": f"re_{4410 + i}", "amount": 25, "state": "succeeded"},
        )
        for i in range(5)
    )
    return Turn("billing", "gpt-4.1", calls)


def _comments(bodies: list[str]) -> Turn:
    calls = tuple(
        Call(
            "post_comment",
            {"issue": 12, "body": body},
            100,
            result={"comment_id": 8800 + i, "url": f"https://tracker.example/12#c{8800 + i}"},
        )
        for i, body in enumerate(bodies)
    )
    return Turn("reviewer", "gpt-4.1", calls)


def _build_polls(positions: list[int], states: list[str]) -> Turn:
    """get_build(build_id=9) with an answer whose request id, check time and worker pid are
    fresh each time: only ``status`` and ``position`` can be news."""
    calls = tuple(
        Call(
            "get_build",
            {"build_id": 9},
            50,
            result={
                "status": state,
                "position": position,
                "requestId": f"req_{7_000_000 + 37 * i:x}",
                "checkedAt": f"2026-03-02T10:00:{10 + 3 * i:02d}Z",
                "workerPid": 41_000 + i,
                "sessionId": f"sess-{41 + i}",
                "elapsedMs": 12 + i,
            },
        )
        for i, (position, state) in enumerate(zip(positions, states, strict=True))
    )
    return Turn("ci", "gpt-4.1", calls)


def _shell(outputs: list[str]) -> Turn:
    calls = tuple(Call("run_command", {"cmd": "make test"}, 900, result=out) for out in outputs)
    return Turn("coder", "gpt-4.1", calls)


def _run(turn: Turn, convention: str, config: Config | None = None) -> Pipeline:
    p = Pipeline(config or Config())
    emit_turn(p.tracer, turn, 1000 * S, convention)
    p.flush()
    return p


def _loops(p: Pipeline) -> dict[tuple[str, str, str], float]:
    found: dict[tuple[str, str, str], float] = {}
    for metric in p.registry.collect():
        for s in metric.samples:
            if s.name == "loopwatch_loops_total" and s.value:
                key = (s.labels["tool"], s.labels["error_class"], s.labels["kind"])
                found[key] = found.get(key, 0) + s.value
    return found


# -- writes ---------------------------------------------------------------------------------------
DECLARED = Config(
    tools={
        "book_meeting": ToolDeclaration(identity=("room", "start")),
        "refund_payment": ToolDeclaration(identity=("payment_id",)),
    }
)


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("config", [Config(), DECLARED], ids=["undeclared", "declared"])
@pytest.mark.parametrize("make", [five_bookings, _refunds], ids=["book_meeting", "refund_payment"])
def test_a_write_that_succeeds_again_is_a_duplicate(
    make: Any, config: Config, convention: str
) -> None:
    turn = make()
    tool = turn.calls[0].tool
    p = _run(turn, convention, config)
    assert p.value("loopwatch_turn_max_attempts_sum") == 5
    assert p.value("loopwatch_tool_max_attempts_sum", tool=tool) == 5
    assert _loops(p) == {(tool, "ok", "duplicate"): 1}
    assert p.value("loopwatch_repeat_calls_total", tool=tool, error_class="ok") == 4
    # calls past the cap of 2: attempts 4 and 5
    past = sum(c.elapsed_ms for c in turn.calls[3:]) / 1000
    assert p.value("loopwatch_over_cap_seconds_total", tool=tool) == pytest.approx(past)
    p.processor.shutdown()


def test_the_loop_line_says_duplicate(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="loopwatch")
    p = _run(five_bookings(), "genai")
    p.processor.shutdown()
    (line,) = [r.getMessage() for r in caplog.records if "loop found" in r.getMessage()]
    assert re.fullmatch(
        r"loop found: tool=book_meeting key=book_meeting/[0-9a-f]{8}/ok attempts=5 "
        r"kind=duplicate service=support-agent agent=office trace_id=[0-9a-f]{32}",
        line,
    )
    assert "4B" not in line and "Q2" not in line


@pytest.mark.parametrize("make", [five_bookings, _refunds], ids=["book_meeting", "refund_payment"])
@pytest.mark.parametrize("cap", [2, 1])
def test_the_breaker_counts_a_writes_successes_as_attempts(make: Any, cap: int) -> None:
    """cap 2 lets three calls of a key run (the seed's rule: three tickets, the fourth stopped);
    cap 1 lets two, so calls 3 to 5 of five are stopped."""
    turn = make()
    ran: list[int] = []

    def run(i: int, call: Call) -> Any:
        ran.append(i)
        return call.result

    with LoopBreaker(Config(), cap=cap).turn() as guard:
        answers = [
            guard.call(c.tool, c.arguments, partial(run, i, c)) for i, c in enumerate(turn.calls)
        ]
    stopped = [i + 1 for i, a in enumerate(answers) if isinstance(a, TerminalResult)]
    assert stopped == list(range(cap + 2, 6))
    assert ran == list(range(cap + 1))
    message = str(answers[-1])
    assert "already succeeded, and each call does it again" in message
    assert "P-7" not in message and "4B" not in message


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_text_that_is_the_effect_stays_in_the_key(convention: str) -> None:
    p = _run(_comments(["LGTM"] * 4), convention)
    assert p.value("loopwatch_turn_max_attempts_sum") == 4
    assert _loops(p) == {("post_comment", "ok", "duplicate"): 1}
    p.processor.shutdown()
    bodies = ["LGTM", "Needs a test for the retry path", "Rename the flag", "Ship it after CI"]
    p = _run(_comments(bodies), convention)
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    assert _loops(p) == {}
    p.processor.shutdown()


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_a_bulk_of_writes_never_loops(convention: str) -> None:
    calls = tuple(
        Call(
            "create_ticket",
            {"customer_id": "c_40912", "order_id": str(88200 + i), "summary": "Refund missing"},
            120,
            result={"ticket_id": f"T-{4101 + i}"},
        )
        for i in range(6)
    )
    p = _run(Turn("support", "gpt-4.1", calls), convention)
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    assert _loops(p) == {}
    p.processor.shutdown()


def test_a_declared_effect_wins_over_the_name() -> None:
    # book_meeting declared a read: its fresh booking ids are progress, as for any read
    as_read = Config(tools={"book_meeting": ToolDeclaration(effect="read")})
    p = _run(five_bookings(), "genai", as_read)
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    assert _loops(p) == {}
    p.processor.shutdown()
    # a poll declared a write: its advancing answers are no progress, and it succeeded again
    as_write = Config(tools={"get_build": ToolDeclaration(effect="write")})
    p = _run(_build_polls([3, 2, 1, 0], ["queued"] * 3 + ["running"]), "genai", as_write)
    assert p.value("loopwatch_turn_max_attempts_sum") == 4
    assert _loops(p) == {("get_build", "ok", "duplicate"): 1}
    p.processor.shutdown()


def test_the_seed_incident_is_unchanged() -> None:
    p = _run(fourteen_tickets(), "genai")
    assert p.value("loopwatch_turn_max_attempts_sum") == 14
    assert p.value("loopwatch_repeat_calls_total", tool="create_ticket") == 13
    assert p.value("loopwatch_over_cap_seconds_total") == pytest.approx(330.0, abs=0.1)
    assert _loops(p) == {("create_ticket", "timeout", "repeat"): 1}
    p.processor.shutdown()


# -- volatile values ------------------------------------------------------------------------------
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_a_poll_stuck_behind_fresh_ids_and_clocks_is_a_loop(convention: str) -> None:
    p = _run(_build_polls([3] * 8, ["queued"] * 8), convention)
    assert p.value("loopwatch_turn_max_attempts_sum") == 8
    assert _loops(p) == {("get_build", "ok", "repeat"): 1}
    p.processor.shutdown()


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_a_poll_that_advances_is_no_loop(convention: str) -> None:
    p = _run(_build_polls([3, 2, 1, 0], ["queued"] * 3 + ["running"]), convention)
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    assert _loops(p) == {}
    p.processor.shutdown()


LOCKED = (
    "waiting for the lock on .build/cache held by pid {pid}\n"
    "lock still held after {s}s, giving up (12 ms spent in cleanup)"
)


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_command_output_that_changes_only_in_a_pid_and_a_duration_is_a_loop(
    convention: str,
) -> None:
    outputs = [LOCKED.format(pid=4312 + i, s=f"{10 + i}.{i}") for i in range(5)]
    p = _run(_shell(outputs), convention)
    assert p.value("loopwatch_turn_max_attempts_sum") == 5
    assert _loops(p) == {("run_command", "ok", "repeat"): 1}
    p.processor.shutdown()


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_command_output_that_grows_is_progress(convention: str) -> None:
    lines = [f"test_{n} PASSED" for n in range(5)]
    outputs = ["\n".join(lines[: i + 1]) for i in range(5)]
    p = _run(_shell(outputs), convention)
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    assert _loops(p) == {}
    p.processor.shutdown()


# -- the rules, one function each -----------------------------------------------------------------
def test_each_tool_is_a_read_or_a_write_and_says_why() -> None:
    assert effect_of("create_ticket", {}, None) == (
        WRITE,
        "its name's verb is 'create', which writes",
    )
    assert effect_of("get_message", {}, None)[0] == READ
    assert effect_of("slackPostMessage", {}, None)[0] == WRITE
    assert effect_of("search_posts", {}, None)[0] == READ
    assert effect_of("weather", {}, None) == (READ, "no verb that writes in its name")
    assert effect_of("channel", {"action": "send"}, None) == (
        WRITE,
        "its action's verb is 'send', which writes",
    )
    assert effect_of("channel", {"action": "history"}, None)[0] == READ
    assert effect_of("create_ticket", {}, "read") == (READ, "declared")


def test_a_writes_identity_keeps_names_and_leaves_prose_out() -> None:
    kept = written_arguments(
        "create_contact",
        {"name": "Mary Ann de Vries", "title": "Order 19", "notes": "VIP", "city": "Utrecht"},
    )
    assert kept == {"name": "Mary Ann de Vries", "title": "Order 19", "city": "Utrecht"}
    long_title = {"title": "Quarterly business review with the whole design team"}
    assert written_arguments("book_meeting", long_title) == {}
    message = {"channel": "ops", "text": "Deploy done"}
    assert written_arguments("send_message", message) == message


def test_mcp_annotations_are_read_before_the_name() -> None:
    from loopwatch.core.effects import forget_learned, learn_tool_list

    tools = [
        {"name": "lw_delete_file", "annotations": {"destructiveHint": True}},
        {"name": "lw_stat", "annotations": {"readOnlyHint": True}},
        {"name": "lw_set_cursor", "annotations": {"readOnlyHint": True}},
        {"name": "lw_put_object", "annotations": {"idempotentHint": True}},
        {"name": "lw_plain", "inputSchema": {}},
    ]
    try:
        learn_tool_list(tools)
        assert effect_of("lw_delete_file", {}, None) == (WRITE, "MCP destructiveHint")
        assert effect_of("lw_stat", {}, None) == (READ, "MCP readOnlyHint")
        assert effect_of("lw_set_cursor", {}, None) == (READ, "MCP readOnlyHint")
        assert effect_of("lw_put_object", {}, None) == (IDEMPOTENT_WRITE, "MCP idempotentHint")
        assert effect_of("lw_set_cursor", {}, "write") == (WRITE, "declared")
    finally:
        forget_learned()
    assert effect_of("lw_set_cursor", {}, None)[0] == WRITE


def test_an_idempotent_write_repeats_but_is_no_duplicate() -> None:
    from loopwatch.core.effects import forget_learned, learn_tool_list

    learn_tool_list([{"name": "put_object", "annotations": {"idempotentHint": True}}])
    try:
        calls = tuple(
            Call("put_object", {"key": "a.txt"}, 40, result={"etag": f"{i:x}" * 8})
            for i in range(2)
        )
        p = _run(Turn("sync", "gpt-4.1", calls), "genai")
        assert p.value("loopwatch_turn_max_attempts_sum") == 2
        assert _loops(p) == {}  # below the loop threshold, and no duplicate side effect
        p.processor.shutdown()
    finally:
        forget_learned()


def test_volatile_values_are_one_rule() -> None:
    from loopwatch.core.identity import canonical_json
    from loopwatch.core.volatile import without_volatile, without_volatile_keys

    answer = {
        "id": 1,
        "message_id": "m-1",
        "runId": "r",
        "pid": 7,
        "session": "s",
        "created_at": "x",
        "updatedAt": "y",
        "ts": 1,
        "elapsed_ms": 4,
        "latencyMs": 4,
        "took": 3,
        "cwd": "/tmp/a",
        "state": "running",
        "job": {"requestId": "q", "percent": 45},
        "rows": [{"id": 1, "name": "boots"}, {"id": 2, "name": "laces"}],
    }
    assert canonical_json(without_volatile_keys(answer)) == (
        '{"created_at":"~","cwd":"~","elapsed_ms":"~","id":"~","job":{"percent":45,'
        '"requestId":"~"},"latencyMs":"~","message_id":"~","pid":"~","rows":[{"id":1,'
        '"name":"boots"},{"id":2,"name":"laces"}],"runId":"~","session":"~","state":"running",'
        '"took":"~","ts":"~","updatedAt":"~"}'
    )
    text = (
        "msg_8f3a sess-41 1764600000 1764600000123 3f2a1b4c-1234-4abc-8def-0123456789ab "
        "deadbeefcafebabe0001 2026-03-02 10:00:03 pid 4312 took 0.4s (12 ms) 45% step 3 of 10"
    )
    assert without_volatile(text, False) == "~ ~ ~ ~ ~ ~ ~ pid ~ took ~ (~) 45% step 3 of 10"


# -- what real tool names and answers hold --------------------------------------------------------
@pytest.mark.parametrize(
    ("tool", "effect"),
    [
        ("refund_status", READ),
        ("message_history", READ),
        ("deploy_status", READ),
        ("comment_count", READ),
        ("address_book_lookup", READ),
        ("flight_schedule", READ),
        ("get_or_create_user", READ),
        ("update_status", WRITE),
        ("github_create_issue", WRITE),
        ("restart_service", WRITE),
        ("slack_send", WRITE),
    ],
)
def test_names_that_read_about_a_thing_are_reads(tool: str, effect: str) -> None:
    assert effect_of(tool, {}, None)[0] == effect


def _one(tool: str, calls: list[tuple[dict[str, Any], Any]]) -> dict[tuple[str, str, str], float]:
    turn = Turn("agent", "gpt-4.1", tuple(Call(tool, a, 50, result=r) for a, r in calls))
    p = _run(turn, "genai")
    try:
        return _loops(p)
    finally:
        p.processor.shutdown()


def test_distinct_writes_stay_distinct() -> None:
    bodies = ["LGTM", "Needs a test for the retry path", "Rename the flag", "Ship it after CI"]
    comments = [
        ({"owner": "o", "repo": "r", "issue_number": 12, "body": b}, {"id": i})
        for i, b in enumerate(bodies)
    ]
    assert _one("add_issue_comment", comments) == {}
    edits = [
        ({"path": "src/app.py", "old_string": f"x = {i}", "new_string": f"x = {i + 1}"}, "ok")
        for i in range(4)
    ]
    assert _one("edit_file", edits) == {}
    paths = [
        ({"bucket": "b", "path": f"/reports/2026/03/{'q' * 70}-{i}.csv"}, {"etag": i})
        for i in range(4)
    ]
    assert _one("upload_file", paths) == {}


def test_a_reworded_memo_does_not_hide_a_second_payment() -> None:
    memos = ["for the March invoice", "March invoice payment, thanks", "paying invoice 2026-03"]
    sends = [
        ({"recipient": "ACME", "amount": 50, "memo": m}, {"payment_id": f"pay_{i}"})
        for i, m in enumerate(memos)
    ]
    assert _one("send_payment", sends) == {("send_payment", "ok", "duplicate"): 1}


def test_a_writes_empty_answers_are_no_empty_search() -> None:
    deletes = [({"path": f"/tmp/{i}.csv"}, "") for i in range(4)]
    assert _one("delete_file", deletes) == {}


def test_an_idempotent_delete_is_no_duplicate() -> None:
    from loopwatch.core.effects import forget_learned, learn_tool_list

    hints = {"destructiveHint": True, "idempotentHint": True}
    learn_tool_list([{"name": "lw_delete_file", "annotations": hints}])
    try:
        assert effect_of("lw_delete_file", {}, None) == (IDEMPOTENT_WRITE, "MCP idempotentHint")
        assert _one("lw_delete_file", [({"path": "/tmp/a"}, "deleted")] * 2) == {}
    finally:
        forget_learned()


def test_volatile_values_in_rows_and_what_stays() -> None:
    stuck = [
        (
            {"build_id": 9},
            [{"status": "queued", "position": 3, "workerPid": 40 + i, "elapsedMs": i}],
        )
        for i in range(5)
    ]
    assert _one("get_builds", stuck) == {("get_builds", "ok", "repeat"): 1}
    downloading = [
        ({"id": "d1"}, {"downloaded_bytes": 1_288_490_188 + 1_048_576 * i}) for i in range(5)
    ]
    assert _one("get_download", downloading) == {}
    queue = [({"queue": "q"}, {"task": f"task-{7 + i}"}) for i in range(5)]
    assert _one("peek_queue", queue) == {}
