"""The guards' shared stores: SQLite files and a real redis-server, raced by real processes."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwatch.core.config import ConfigError, load_config
from loopwatch.guards import IdempotencyArbiter, LoopBreaker, TerminalResult
from loopwatch.guards.arbiter import Admitted
from loopwatch.guards.stores import Outcome, open_store
from loopwatch.guards.stores.memory_counts import MemoryCounts
from loopwatch.guards.stores.outcome_json import ReplayedError, decode, encode
from tests.support.guard_store_worker import CONFIG
from tests.support.helpers import ROOT, Pipeline, keep_build, require_tool
from tests.support.redis_process import RedisProcess
from tests.support.stand_ins import logged

ARGS = {"customer_id": "c_40912", "order_id": "88214", "summary": "Refund for order 88214"}


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(require_tool("redis-server"), tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/guards.db"
    server: RedisProcess = request.getfixturevalue("redis_server")
    return server.url


def worker(*args: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPWATCH_"))}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.guard_store_worker", *args],
        cwd=ROOT,
        env=keep_build(env, ROOT),
        stderr=subprocess.PIPE,
    )


def wait_for(check: Callable[[], bool], what: str, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_eight_processes_race_one_ticket(tmp_path: Path, store_url: str) -> None:
    procs = [worker("race", str(tmp_path), store_url, str(i)) for i in range(8)]
    try:
        wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == 8, "8 workers ready")
        (tmp_path / "go").touch()
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    answers = [json.loads((tmp_path / f"answer-{i}.json").read_text()) for i in range(8)]
    assert len((tmp_path / "effects").read_text().splitlines()) == 1  # the tool ran once
    kinds = Counter(a["kind"] for a in answers)
    # 4 workers call at once: 1 runs, 3 find it in progress; 4 call after it is done: replayed
    assert kinds == {"ran": 1, "in_progress": 3, "replayed": 4}
    assert {a["value"] for a in answers if a["kind"] in ("ran", "replayed")} == {"T-1"}


def test_a_killed_worker_frees_its_key_after_the_lease(tmp_path: Path, store_url: str) -> None:
    lease = 1.5
    proc = worker("hang", str(tmp_path), store_url, str(lease))
    try:
        wait_for(lambda: (tmp_path / "started").exists(), "the worker's claim")
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
    claimed_at = json.loads((tmp_path / "started").read_text())["first_at"]
    arbiter = IdempotencyArbiter(CONFIG, store=store_url, lease_seconds=lease, circuit_after=None)
    refused = arbiter.admit("create_ticket", ARGS)
    assert isinstance(refused, TerminalResult) and "already in progress" in str(refused)
    refusals = 1
    deadline = time.monotonic() + 30
    while True:  # poll the key itself until the lease lets it go
        verdict = arbiter.admit("create_ticket", ARGS)
        if not isinstance(verdict, TerminalResult):
            break
        assert "already in progress" in str(verdict)
        refusals += 1
        assert time.monotonic() < deadline, "the key was never freed"
        time.sleep(0.05)
    # claimed again in the store's own clock no earlier than the lease after the dead claim
    assert isinstance(verdict, Admitted)
    assert verdict.first_at >= claimed_at + lease
    assert verdict.first_at < claimed_at + lease + 10


def test_sqlite_lease_with_an_injected_clock(tmp_path: Path) -> None:
    now = [1000.0]
    url = f"sqlite:///{tmp_path}/g.db"
    store = open_store(url, clock=lambda: now[0])
    assert store.claim("k", "a", 1.5, 600).state == "claimed"
    now[0] = 1001.499
    assert store.claim("k", "b", 1.5, 600).state == "running"
    now[0] = 1001.5
    again = store.claim("k", "c", 1.5, 600)
    assert (again.state, again.token, again.first_at) == ("claimed", "c", 1001.5)
    store.finish("k", "a", Outcome("ok", "late"))  # the dead claim's outcome is not taken
    assert store.claim("k", "d", 1.5, 600).state == "running"
    store.finish("k", "c", Outcome("ok", {"ticket": "T-2"}))
    done = store.claim("k", "e", 1.5, 600)
    assert done.state == "done" and done.outcome == Outcome("ok", {"ticket": "T-2"})
    assert done.duplicates == 2
    now[0] = 1001.5 + 600  # the window is over: a new first call
    assert store.claim("k", "f", 1.5, 600).state == "claimed"
    store.close()


def test_sqlite_is_bounded(tmp_path: Path) -> None:
    now = [0.0]
    store = open_store(f"sqlite:///{tmp_path}/g.db", max_keys=5, clock=lambda: now[0])
    from loopwatch.guards.stores import sqlite_file

    for i in range(sqlite_file.SWEEP_EVERY + 1):
        now[0] += 1
        store.claim(f"k{i}", "t", 10, 100)
    # the sweep at claim 257 (t=257) deleted the 157 expired rows (first_at <= 157), then the
    # 95 oldest of the 99 left, to leave room for the new one under max_keys
    assert len(store) == 5
    assert store.evicted == 95
    store.close()


def test_what_is_stored_is_json_and_never_a_pickle() -> None:
    assert decode(encode(Outcome("ok", {"id": "T-1", "n": [1, 2]}))) == Outcome(
        "ok", {"id": "T-1", "n": [1, 2]}
    )
    opaque = decode(encode(Outcome("ok", object())))
    assert opaque == Outcome("ok", shared=False)
    timeout = decode(encode(Outcome("timeout", error=TimeoutError("no answer in 30s"))))
    assert isinstance(timeout.error, TimeoutError) and str(timeout.error) == "no answer in 30s"

    class PaymentDeclined(Exception):
        pass

    other = decode(encode(Outcome("tool_error", error=PaymentDeclined("card 4242 declined"))))
    assert isinstance(other.error, ReplayedError)
    assert str(other.error) == "PaymentDeclined: card 4242 declined"
    assert "pickle" not in encode(Outcome("ok", object()))
    assert decode("not json") == Outcome("ok", shared=False)


def test_an_unshareable_result_gets_already_done(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/g.db"
    first = IdempotencyArbiter(CONFIG, store=url)
    second = IdempotencyArbiter(CONFIG, store=url)  # another worker
    ticket = object()
    assert first.call("create_ticket", ARGS, lambda: ticket) is ticket
    answer = second.call("create_ticket", ARGS, lambda: pytest.fail("ran twice"))
    assert isinstance(answer, TerminalResult) and answer.decision == "suppressed"
    assert "already made" in str(answer)


def test_an_error_is_replayed_in_another_worker(tmp_path: Path, store_url: str) -> None:
    first = IdempotencyArbiter(CONFIG, store=store_url)
    second = IdempotencyArbiter(CONFIG, store=store_url)

    def times_out() -> Any:
        raise TimeoutError("ticket service did not answer within 30s")

    with pytest.raises(TimeoutError):
        first.call("create_ticket", ARGS, times_out)
    with pytest.raises(TimeoutError, match="did not answer within 30s"):
        second.call("create_ticket", ARGS, lambda: pytest.fail("ran twice"))
    for _ in range(2):  # duplicates 2 and 3 are replayed too, then the circuit opens
        with pytest.raises(TimeoutError):
            second.call("create_ticket", ARGS, lambda: pytest.fail("ran twice"))
    circuit = second.call("create_ticket", ARGS, lambda: pytest.fail("ran twice"))
    assert isinstance(circuit, TerminalResult)
    assert (circuit.decision, circuit.error_class, circuit.attempts) == (
        "circuit_open",
        "timeout",
        3,
    )


def test_redis_down_then_back(redis_server: RedisProcess, caplog: pytest.LogCaptureFixture) -> None:
    p = Pipeline(CONFIG)
    try:
        allow = IdempotencyArbiter(CONFIG, store=redis_server.url, on_store_error="allow")
        deny = IdempotencyArbiter(
            CONFIG, store=redis_server.url, on_store_error="deny", tracer_provider=p.provider
        )
        effects: list[str] = []

        def create(order: str) -> Callable[[], str]:
            def run() -> str:
                effects.append(order)
                return f"T-{len(effects)}"

            return run

        args = {**ARGS, "order_id": "1"}
        assert allow.call("create_ticket", args, create("1")) == "T-1"
        assert deny.call("create_ticket", args, create("1")) == "T-1"  # replayed across arbiters
        redis_server.stop()
        with caplog.at_level(logging.WARNING, logger="loopwatch"):
            for i in range(3):  # the same request: unguarded, each runs
                assert allow.call("create_ticket", args, create("1")) == f"T-{2 + i}"
            refused = [deny.call("create_ticket", args, create("1")) for _ in range(2)]
        assert all(isinstance(r, TerminalResult) for r in refused)
        assert {r.decision for r in refused if isinstance(r, TerminalResult)} == {
            "store_unavailable"
        }
        assert allow.store_errors == {"allowed": 3}
        assert deny.store_errors == {"denied": 2}
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 2  # once per arbiter
        assert "88214" not in caplog.text and "c_40912" not in caplog.text
        assert p.value("loopwatch_guard_decisions_total", decision="store_unavailable") == 2
        assert len(effects) == 4

        redis_server.start()  # same port, empty: the arbiters were not restarted
        args = {**ARGS, "order_id": "2"}
        assert allow.call("create_ticket", args, create("2")) == "T-5"
        assert deny.call("create_ticket", args, create("2")) == "T-5"
        assert allow.call("create_ticket", args, create("2")) == "T-5"
        assert len(effects) == 5
        assert allow.store_errors == {"allowed": 3} and deny.store_errors == {"denied": 2}
    finally:
        p.close()


def test_memory_stays_the_default_and_the_setting_is_read(tmp_path: Path) -> None:
    assert IdempotencyArbiter(CONFIG)._store.url == "memory"
    toml = tmp_path / "loopwatch.toml"
    toml.write_text(
        f'[guards]\nstore = "sqlite:///{tmp_path}/g.db"\nlease_seconds = 30\n'
        'on_store_error = "deny"\n'
    )
    config = load_config(toml, environ={})
    assert (config.guards_store, config.guards_lease_seconds, config.guards_on_store_error) == (
        f"sqlite:///{tmp_path}/g.db",
        30.0,
        "deny",
    )
    arbiter = IdempotencyArbiter(config)
    assert arbiter._store.url == f"sqlite:///{tmp_path}/g.db"
    env = load_config(toml, environ={"LOOPWATCH_GUARDS_STORE": "redis://127.0.0.1:1/0"})
    assert env.guards_store == "redis://127.0.0.1:1/0"
    for text, message in [
        ('[guards]\nstore = "postgres://x"\n', "not a guard store"),
        ('[guards]\non_store_error = "maybe"\n', "expected one of allow, deny"),
        ("[guards]\nlease_seconds = 0\n", "must be at least"),
    ]:
        toml.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_config(toml, environ={})


def test_an_unopenable_sqlite_file_follows_the_policy(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}"  # a directory: SQLite cannot open it
    ran: list[int] = []
    allow = IdempotencyArbiter(CONFIG, store=url)  # allow is the default
    deny = IdempotencyArbiter(CONFIG, store=url, on_store_error="deny")
    assert [allow.call("create_ticket", ARGS, logged(ran, 1, "T")) for _ in range(2)] == [
        "T",
        "T",
    ]
    refused = deny.call("create_ticket", ARGS, lambda: ran.append(1))
    assert isinstance(refused, TerminalResult) and refused.decision == "store_unavailable"
    assert len(ran) == 2
    assert (allow.store_errors, deny.store_errors) == ({"allowed": 2}, {"denied": 1})


def test_both_store_error_policies_are_series_of_the_decisions_counter(tmp_path: Path) -> None:
    """Unreachable store: under allow each call runs and is both an attempt and a
    store_unchecked decision; under deny it is a store_unavailable decision and no attempt."""
    url = f"sqlite:///{tmp_path}"  # a directory: SQLite cannot open it
    p = Pipeline(CONFIG)
    try:
        allow = IdempotencyArbiter(CONFIG, store=url, tracer_provider=p.provider)
        deny = IdempotencyArbiter(
            CONFIG, store=url, on_store_error="deny", tracer_provider=p.provider
        )
        turn = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_ticket"}
        ran: list[int] = []
        with p.tracer.start_as_current_span("invoke_agent support", attributes=turn):
            for i, arbiter in enumerate([allow, allow, allow, deny, deny]):
                attributes = {**tool, "gen_ai.tool.call.arguments": json.dumps(ARGS)}
                with p.tracer.start_as_current_span(
                    "execute_tool create_ticket", attributes=attributes
                ):
                    arbiter.call("create_ticket", ARGS, logged(ran, i, "T-1"))
        assert ran == [0, 1, 2]

        def decisions(decision: str) -> float:
            return p.value(
                "loopwatch_guard_decisions_total",
                agent="support",
                tool="create_ticket",
                decision=decision,
            )

        assert decisions("store_unchecked") == 3
        assert decisions("store_unavailable") == 2
        assert p.value("loopwatch_guard_decisions_total") == 5
        # the three that ran are attempts of one key; the two refused are not
        assert p.value("loopwatch_tool_calls_total", tool="create_ticket") == 3
        assert p.value("loopwatch_turn_max_attempts_sum") == 3
        assert (allow.store_errors, deny.store_errors) == ({"allowed": 3}, {"denied": 2})
    finally:
        p.close()


def test_six_processes_open_one_circuit_after_three_duplicates_in_all(
    tmp_path: Path, store_url: str
) -> None:
    """The duplicates behind circuit_after are counted in the store: six processes, two
    reworded calls each, one after the other: one run, three replays, then the circuit is open
    for every process, including those that had not seen a duplicate themselves."""
    from tests.support.guard_store_worker import CALLS

    procs = [worker("circuit", str(tmp_path), store_url, str(i)) for i in range(6)]
    try:
        wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == 6, "6 workers ready")
        (tmp_path / "turn-0").touch()
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    kinds = [json.loads((tmp_path / f"answer-{i}.json").read_text())["kinds"] for i in range(6)]
    assert CALLS == 2
    assert kinds == [
        ["ran", "replayed"],
        ["replayed", "replayed"],
        ["circuit_open", "circuit_open"],
        ["circuit_open", "circuit_open"],
        ["circuit_open", "circuit_open"],
        ["circuit_open", "circuit_open"],
    ]
    assert len((tmp_path / "effects").read_text().splitlines()) == 1


def test_a_retried_task_is_stopped_across_processes(tmp_path: Path, store_url: str) -> None:
    """A task's turn retried on three workers in sequence, one scope, two reworded
    create_ticket calls each that time out: with cap 2 three attempts run in all and every
    later one is stopped, in whichever process it comes; a fourth worker on another scope with
    the same key runs both of its calls."""
    from tests.support.guard_store_worker import CALLS

    scopes = ["celery-task-7f3a", "celery-task-7f3a", "celery-task-7f3a", "celery-task-9b21"]
    procs = [
        worker("breaker", str(tmp_path), store_url, str(i), scope) for i, scope in enumerate(scopes)
    ]
    try:
        wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == 4, "4 workers ready")
        (tmp_path / "turn-0").touch()
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    answers = [json.loads((tmp_path / f"answer-{i}.json").read_text()) for i in range(4)]
    stopped = {"kind": "stopped", "error_class": "timeout", "attempts": 3}
    timeout = {"kind": "timeout"}
    assert CALLS == 2
    assert [a["got"] for a in answers] == [
        [timeout, timeout],
        [timeout, stopped],  # the fourth attempt of the task, in its second process
        [stopped, stopped],  # the third process runs nothing
        [timeout, timeout],  # another task: its own counts
    ]
    assert Counter(g["kind"] for a in answers for g in a["got"]) == {"timeout": 5, "stopped": 3}
    assert [a["errors"] for a in answers] == [{}, {}, {}, {}]
    assert (tmp_path / "effects").read_text().splitlines() == [
        "way 0.0",
        "way 0.1",
        "way 1.0",
        "way 3.0",
        "way 3.1",
    ]


SEARCH = "search_orders"  # undeclared: each query is its own key, only the streak stops it


def _empty_searches(turn: Any, queries: range) -> list[str]:
    kinds = []
    for q in queries:
        answer = turn.call(SEARCH, {"query": f"refund {q}"}, lambda: [])
        kinds.append(answer.decision if isinstance(answer, TerminalResult) else "ran")
    return kinds


def test_no_rows_in_a_row_is_counted_across_the_workers_of_a_scope(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/g.db"
    first, second = LoopBreaker(CONFIG, store=url), LoopBreaker(CONFIG, store=url)  # 2 workers
    with first.turn(scope="task-1") as turn:
        assert _empty_searches(turn, range(2)) == ["ran", "ran"]
    with second.turn(scope="task-1") as turn:  # the retry: the third empty result, then stop
        assert _empty_searches(turn, range(2, 5)) == ["ran"] + ["no_rows_stopped"] * 2
        assert turn.decisions[0].attempts == 3 and turn.tools_disabled
    with second.turn(scope="task-2") as turn:
        assert _empty_searches(turn, range(4)) == ["ran"] * 3 + ["no_rows_stopped"]
    with second.turn() as turn:  # no scope: this turn's own counts, in memory
        assert _empty_searches(turn, range(3)) == ["ran"] * 3
    # a result with rows ends the streak for the scope
    with first.turn(scope="task-3") as turn:
        assert _empty_searches(turn, range(2)) == ["ran", "ran"]
        turn.call(SEARCH, {"query": "refund 88214"}, lambda: [{"order": "88214"}])
    with second.turn(scope="task-3") as turn:
        assert _empty_searches(turn, range(4)) == ["ran"] * 3 + ["no_rows_stopped"]


def test_a_turn_without_scope_never_opens_the_store(tmp_path: Path) -> None:
    breaker = LoopBreaker(CONFIG, store=f"sqlite:///{tmp_path}/g.db")
    with breaker.turn() as turn:
        assert _empty_searches(turn, range(4)) == ["ran"] * 3 + ["no_rows_stopped"]
    assert list(tmp_path.iterdir()) == []


def test_a_dead_workers_call_is_in_flight_until_its_lease_ends(tmp_path: Path) -> None:
    now = [1000.0]
    url = f"sqlite:///{tmp_path}/g.db"

    def breaker() -> LoopBreaker:
        return LoopBreaker(
            CONFIG, cap=0, store=url, lease_seconds=30, window_seconds=600, clock=lambda: now[0]
        )

    dead = breaker().new_turn(scope="task-1")
    assert not isinstance(dead.before("create_ticket", ARGS), TerminalResult)  # never ends
    retry = breaker().new_turn(scope="task-1")
    now[0] = 1029.9
    held = retry.before("create_ticket", ARGS)
    assert isinstance(held, TerminalResult)
    assert (held.decision, held.error_class, held.attempts) == ("stopped", "in_flight", 1)
    now[0] = 1030.0  # the lease is over: the retry runs it, times out, and the cap holds
    with pytest.raises(TimeoutError):
        retry.call("create_ticket", ARGS, _times_out)
    again = breaker().new_turn(scope="task-1").call("create_ticket", ARGS, _times_out)
    assert isinstance(again, TerminalResult)
    assert (again.decision, again.error_class, again.attempts) == ("stopped", "timeout", 1)
    now[0] = 1030.0 + 600  # the scope's window after its last counted call: counts are gone
    with pytest.raises(TimeoutError):
        breaker().new_turn(scope="task-1").call("create_ticket", ARGS, _times_out)


def _times_out() -> Any:
    raise TimeoutError("ticket service did not answer within 30s")


def test_turns_of_one_scope_share_counts_in_memory_too() -> None:
    breaker = LoopBreaker(CONFIG, cap=1)  # store memory: the turns of this process
    answers = []
    for _ in range(3):
        with breaker.turn(scope="conversation-12") as turn:
            try:
                answers.append(turn.call("create_ticket", ARGS, _times_out))
            except TimeoutError:
                answers.append("timeout")
    assert [a if isinstance(a, str) else a.decision for a in answers] == [
        "timeout",
        "timeout",
        "stopped",
    ]


def test_the_breakers_store_error_policies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An unreachable store: under allow a scoped call runs, is a store_unchecked decision and
    an attempt; under deny it is stopped as store_unavailable; one warning per breaker."""
    url = f"sqlite:///{tmp_path}"  # a directory: SQLite cannot open it
    p = Pipeline(CONFIG)
    try:
        allow = LoopBreaker(CONFIG, store=url, tracer_provider=p.provider)
        deny = LoopBreaker(CONFIG, store=url, on_store_error="deny", tracer_provider=p.provider)
        ran: list[int] = []
        with caplog.at_level(logging.WARNING, logger="loopwatch"):
            with allow.turn(scope="task-1") as turn:
                for i in range(4):  # unchecked: the cap cannot stop them
                    assert turn.call("create_ticket", ARGS, logged(ran, i, "T")) == "T"
                assert turn.decisions == () and not turn.tools_disabled
            with deny.turn(scope="task-1") as turn:
                refused = [
                    turn.call("create_ticket", ARGS, lambda: ran.append(9)) for _ in range(2)
                ]
                assert turn.tools_disabled
        assert ran == [0, 1, 2, 3]
        assert {r.decision for r in refused if isinstance(r, TerminalResult)} == {
            "store_unavailable"
        }
        assert (allow.store_errors, deny.store_errors) == ({"allowed": 4}, {"denied": 2})
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 2
        assert "88214" not in caplog.text and "task-1" not in caplog.text
        assert p.value("loopwatch_guard_decisions_total", decision="store_unchecked") == 4
        assert p.value("loopwatch_guard_decisions_total", decision="store_unavailable") == 2
    finally:
        p.close()


def test_the_breaker_goes_on_when_redis_stops_and_comes_back(redis_server: RedisProcess) -> None:
    breaker = LoopBreaker(CONFIG, cap=0, store=redis_server.url)
    with pytest.raises(TimeoutError):
        breaker.new_turn(scope="task-1").call("create_ticket", ARGS, _times_out)
    redis_server.stop()
    with pytest.raises(TimeoutError):  # allow (the default): run unchecked, counted
        breaker.new_turn(scope="task-1").call("create_ticket", ARGS, _times_out)
    assert breaker.store_errors == {"allowed": 1}
    redis_server.start()  # empty again, same port; the breaker was not made anew
    turn = breaker.new_turn(scope="task-1")
    with pytest.raises(TimeoutError):
        turn.call("create_ticket", ARGS, _times_out)
    stop = turn.call("create_ticket", ARGS, _times_out)
    assert isinstance(stop, TerminalResult) and stop.decision == "stopped"
    assert breaker.store_errors == {"allowed": 1}


def test_the_breakers_scopes_are_bounded() -> None:
    now = [0.0]
    breaker = LoopBreaker(CONFIG, store="memory", max_scopes=3, clock=lambda: now[0])
    for i in range(5):
        now[0] += 1
        with pytest.raises(TimeoutError):
            breaker.new_turn(scope=f"task-{i}").call("create_ticket", ARGS, _times_out)
    assert breaker.evicted == 2
    counts = breaker._shared.counts
    assert isinstance(counts, MemoryCounts)
    assert len(counts) == 3
