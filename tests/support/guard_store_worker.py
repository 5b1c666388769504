"""One worker process of the guard store tests:
``python -m tests.support.guard_store_worker MODE DIR STORE INDEX``. It guards ``create_ticket``
with an arbiter on STORE and writes what it got to DIR/answer-INDEX.json. Files in DIR are the
only channel between the workers and the test.

race: wait for DIR/go (``early`` workers) or DIR/done (the others), then call; the call that
runs writes DIR/effects (one line a ticket), holds until 3 in-progress answers are written,
then DIR/done. circuit: wait for DIR/turn-INDEX, make CALLS reworded calls (default arbiter:
circuit_after=3), write their answers to DIR/answer-INDEX.json, then DIR/turn-INDEX+1.
hang: claim, write DIR/started with the claim time, then hold until killed.
breaker: a retried task's turn (``breaker.turn(scope=SCOPE)``, the 5th argument; cap 2): wait
for DIR/turn-INDEX, make CALLS reworded create_ticket calls that time out, write what each got
to DIR/answer-INDEX.json, then DIR/turn-INDEX+1.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.guards import IdempotencyArbiter, LoopBreaker, TerminalResult
from loopwatch.guards.stores import StoreError

CONFIG = Config(tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))})
DEADLINE_S = 60.0
HOLD_UNTIL_IN_PROGRESS = 3


def wait_for(check: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"worker gave up waiting for {what}")
        time.sleep(0.01)


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)  # readers never see half a file


def in_progress_answers(folder: Path) -> int:
    n = 0
    for p in folder.glob("answer-*.json"):
        if json.loads(p.read_text())["kind"] == "in_progress":
            n += 1
    return n


def create_ticket(folder: Path, summary: str) -> str:
    with (folder / "effects").open("a") as f:
        f.write(summary + "\n")
    ticket = f"T-{len((folder / 'effects').read_text().splitlines())}"
    wait_for(lambda: in_progress_answers(folder) >= HOLD_UNTIL_IN_PROGRESS, "in-progress answers")
    return ticket


def store_opened(arbiter: IdempotencyArbiter) -> bool:
    """Whether the arbiter's store answers (its connection opened, a SQLite file's schema set
    up); a busy store is asked again."""
    try:
        len(arbiter)
    except StoreError:
        return False
    return True


def race(folder: Path, store: str, index: int) -> None:
    arbiter = IdempotencyArbiter(CONFIG, store=store, circuit_after=None)
    # opened before the start: the race is the claims, not eight first connections at once (on
    # a busy machine their set-up can outlast a claim's busy timeout, and a call the store
    # cannot check runs: on_store_error="allow")
    wait_for(lambda: store_opened(arbiter), "the store")
    args = {"customer_id": "c_40912", "order_id": "88214", "summary": f"worded {index} way"}
    ran: list[bool] = []

    def run() -> str:
        ran.append(True)
        return create_ticket(folder, args["summary"])

    (folder / f"ready-{index}").touch()
    early = index % 2 == 0
    wait_for(lambda: (folder / ("go" if early else "done")).exists(), "the start")
    answer = arbiter.call("create_ticket", args, run)
    if ran:
        kind = "ran"
        (folder / "done").touch()
    elif isinstance(answer, TerminalResult):
        kind = "in_progress" if "already in progress" in str(answer) else answer.decision
    else:
        kind = "replayed"
    write_json(folder / f"answer-{index}.json", {"kind": kind, "value": str(answer)})


CALLS = 2


def circuit(folder: Path, store: str, index: int) -> None:
    arbiter = IdempotencyArbiter(CONFIG, store=store)
    (folder / f"ready-{index}").touch()
    wait_for(lambda: (folder / f"turn-{index}").exists(), "this worker's turn")
    kinds = []
    for call in range(CALLS):
        args = {"customer_id": "c_40912", "order_id": "88214", "summary": f"way {index}.{call}"}
        ran: list[bool] = []

        def run(summary: str = args["summary"], ran: list[bool] = ran) -> str:
            ran.append(True)
            with (folder / "effects").open("a") as f:
                f.write(summary + "\n")
            return "T-1"

        answer = arbiter.call("create_ticket", args, run)
        if ran:
            kinds.append("ran")
        elif isinstance(answer, TerminalResult):
            kinds.append(answer.decision)
        else:
            kinds.append("replayed")
    write_json(folder / f"answer-{index}.json", {"kinds": kinds})
    (folder / f"turn-{index + 1}").touch()


def hang(folder: Path, store: str, lease: float) -> None:
    arbiter = IdempotencyArbiter(CONFIG, store=store, lease_seconds=lease)
    args = {"customer_id": "c_40912", "order_id": "88214", "summary": "first"}
    verdict = arbiter.admit("create_ticket", args)
    assert not isinstance(verdict, TerminalResult)
    write_json(folder / "started", {"first_at": getattr(verdict, "first_at", None)})
    time.sleep(DEADLINE_S)  # mid-call: the test kills this process with SIGKILL


def breaker(folder: Path, store: str, index: int, scope: str) -> None:
    guard = LoopBreaker(CONFIG, cap=2, store=store)
    (folder / f"ready-{index}").touch()
    wait_for(lambda: (folder / f"turn-{index}").exists(), "this worker's turn")
    got: list[dict[str, Any]] = []
    with guard.turn(scope=scope) as turn:
        for call in range(CALLS):
            args = {"customer_id": "c_40912", "order_id": "88214", "summary": f"way {index}.{call}"}

            def run(summary: str = args["summary"]) -> str:
                with (folder / "effects").open("a") as f:
                    f.write(summary + "\n")
                raise TimeoutError("ticket service did not answer within 30s")

            try:
                answer = turn.call("create_ticket", args, run)
            except TimeoutError:
                got.append({"kind": "timeout"})
                continue
            assert isinstance(answer, TerminalResult)
            got.append(
                {
                    "kind": answer.decision,
                    "error_class": answer.error_class,
                    "attempts": answer.attempts,
                }
            )
    write_json(folder / f"answer-{index}.json", {"got": got, "errors": dict(guard.store_errors)})
    (folder / f"turn-{index + 1}").touch()


if __name__ == "__main__":
    mode, folder, store, extra = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    if mode == "race":
        race(folder, store, int(extra))
    elif mode == "circuit":
        circuit(folder, store, int(extra))
    elif mode == "breaker":
        breaker(folder, store, int(extra), sys.argv[5])
    else:
        hang(folder, store, float(extra))
