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
from loopwatch.guards import IdempotencyArbiter, TerminalResult
from loopwatch.guards.stores import Outcome, open_store
from loopwatch.guards.stores.outcome_json import ReplayedError, decode, encode
from tests.guard_store_worker import CONFIG
from tests.helpers import ROOT, Pipeline, keep_build, require_tool
from tests.redis_process import RedisProcess

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
        [sys.executable, "-m", "tests.guard_store_worker", *args],
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
    from loopwatch.guards.stores import sqlite_store

    for i in range(sqlite_store.SWEEP_EVERY + 1):
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
            return lambda: effects.append(order) or f"T-{len(effects)}"

        args = {**ARGS, "order_id": "1"}
        assert allow.call("create_ticket", args, create("1")) == "T-1"
        assert deny.call("create_ticket", args, create("1")) == "T-1"  # replayed across arbiters
        redis_server.stop()
        with caplog.at_level(logging.WARNING, logger="loopwatch.guards"):
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
    assert [allow.call("create_ticket", ARGS, lambda: ran.append(1) or "T") for _ in range(2)] == [
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
                    arbiter.call("create_ticket", ARGS, lambda i=i: ran.append(i) or "T-1")
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
    from tests.guard_store_worker import CALLS

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
