"""``loopwatch mcp-guard`` in front of a real stdio MCP server (tests/fixtures/mcp_guard/server.py),
driven by the Python ``mcp`` client: reworded duplicates make one ticket, the circuit opens after
three suppressed duplicates, tools/list is passed through byte for byte, an undeclared tool is
keyed by inference and warned about, and the guard's decisions reach its /metrics."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from loopwatch.mcp_guard import AGENT, add_arguments
from tests.support.helpers import exposition_sum
from tests.support.mcp_guard import CONFIG, ROOT, SERVER

SUMMARIES = [
    "Order 4411 arrived damaged",
    "Customer reports order 4411 was damaged in transit",
    "Damaged delivery for order 4411",
    "Please open a ticket: order 4411 damaged",
    "Order 4411: box crushed, items broken",
    "Ticket for the damaged order 4411",
]
DEADLINE_SECONDS = 30.0


def _env(tmp_path: Path, port: int) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "TICKETS_FILE": str(tmp_path / "tickets.txt"),
        "LOOPWATCH_METRICS_PORT": str(port),
        "OTEL_TRACES_EXPORTER": "none",
    }


def _guarded(tmp_path: Path, port: int, idle: float | None = None) -> StdioServerParameters:
    """The guard in front of the server; ``idle``: its turns' idle timeout (a turn's metrics
    are exported when it ends)."""
    limits = f"\n[limits]\nidle_timeout_seconds = {idle}\n" if idle is not None else ""
    (tmp_path / "loopwatch.toml").write_text(CONFIG + limits)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "loopwatch.cli", "mcp-guard", "--", sys.executable, str(SERVER)],
        env=_env(tmp_path, port),
        cwd=tmp_path,
    )


def _direct(tmp_path: Path, port: int) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=[str(SERVER)], env=_env(tmp_path, port), cwd=tmp_path
    )


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def _wait_for_counts(port: int, expected: dict[str, float]) -> dict[str, float]:
    """create_ticket's counts on the guard's /metrics once they reach ``expected`` (or the last
    seen at the deadline): its processor counts a turn's calls when the turn ends. Keys are
    guard decisions, and "executed" for the calls that ran."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        text = _metrics(port)
        seen = {
            name: exposition_sum(text, "loopwatch_tool_calls_total", tool="create_ticket")
            if name == "executed"
            else exposition_sum(
                text, "loopwatch_guard_decisions_total", tool="create_ticket", decision=name
            )
            for name in expected
        }
        if seen == expected or time.monotonic() > deadline:
            return seen
        time.sleep(0.05)


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


async def _session(params: StdioServerParameters, errlog: Any, body: Callable[..., Any]) -> Any:
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await body(session)


def test_six_reworded_calls_make_one_ticket_and_open_the_circuit(
    tmp_path: Path, free_port: Callable[[], int]
) -> None:
    port = free_port()

    async def six_calls(session: ClientSession) -> tuple[list[Any], dict[str, float]]:
        results = []
        for summary in SUMMARIES:
            arguments = {"customer_id": "C-1042", "order_id": "4411", "summary": summary}
            results.append(await session.call_tool("create_ticket", arguments))
        expected = {"executed": 1.0, "suppressed": 3.0, "circuit_open": 2.0}
        return results, _wait_for_counts(port, expected)

    with open(tmp_path / "stderr.txt", "w") as errlog:
        params = _guarded(tmp_path, port, idle=1.0)
        results, decisions = asyncio.run(_session(params, errlog, six_calls))

    assert (tmp_path / "tickets.txt").read_text().count("\n") == 1
    first = results[0].model_dump(mode="json")
    assert results[0].is_error is False and _text(results[0]) == "T-1"
    # calls 2-4: the first result replayed, unchanged
    assert [r.model_dump(mode="json") for r in results[1:4]] == [first] * 3
    # calls 5-6: past three suppressed duplicates, the circuit is open
    assert [r.is_error for r in results] == [False, False, False, False, True, True]
    for stopped in results[4:]:
        assert _text(stopped) == (
            "STOPPED by loopwatch: create_ticket was not run. The same request was already "
            "made and 3 duplicates of it were refused. Do not call it again. Report the first "
            "outcome to the user."
        )
    # one call ran (an attempt the monitor counts), five were answered by the guard
    assert decisions == {"executed": 1.0, "suppressed": 3.0, "circuit_open": 2.0}


def test_undeclared_tool_is_keyed_by_inference_and_warned(
    tmp_path: Path, free_port: Callable[[], int]
) -> None:
    port = free_port()

    async def four_searches(session: ClientSession) -> list[Any]:
        return [
            await session.call_tool("search_orders", {"query": "damaged order 4411"})
            for _ in range(4)
        ]

    with open(tmp_path / "stderr.txt", "w") as errlog:
        results = asyncio.run(_session(_guarded(tmp_path, port), errlog, four_searches))

    # the breaker's cap: three identical empty searches run (the loop threshold), the fourth
    # is stopped
    assert [r.is_error for r in results] == [False, False, False, True]
    assert _text(results[3]).startswith(
        "STOPPED by loopwatch: search_orders was not run again. The last 3 attempts with the "
        "same arguments returned nothing each time."
    )
    log = (tmp_path / "stderr.txt").read_text()
    assert log.count("tool 'search_orders' has no identity declaration") == 1
    assert "damaged order 4411" not in log  # names only, never values


def test_tools_list_is_identical_to_the_servers_own(
    tmp_path: Path, free_port: Callable[[], int]
) -> None:
    async def tools(session: ClientSession) -> Any:
        return (await session.list_tools()).model_dump(mode="json", by_alias=True)

    with open(tmp_path / "stderr.txt", "w") as errlog:
        direct = asyncio.run(_session(_direct(tmp_path, free_port()), errlog, tools))
        guarded = asyncio.run(_session(_guarded(tmp_path, free_port()), errlog, tools))
    assert [t["name"] for t in direct["tools"]] == ["create_ticket", "search_orders"]
    assert json.dumps(guarded, sort_keys=True) == json.dumps(direct, sort_keys=True)


def _raw_tools_list(command: list[str], env: dict[str, str], cwd: Path) -> bytes:
    """The tools/list response line exactly as written to the client's stdin."""
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]
    with subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        for line in lines:
            process.stdin.write(json.dumps(line).encode() + b"\n")
            process.stdin.flush()
        found = b""
        for _ in range(2):  # the initialize response, then the tools/list response
            found = process.stdout.readline()
        process.stdin.close()
        process.wait(timeout=DEADLINE_SECONDS)
    return found


def test_tools_list_is_byte_identical(tmp_path: Path, free_port: Callable[[], int]) -> None:
    (tmp_path / "loopwatch.toml").write_text(CONFIG)
    env = _env(tmp_path, free_port())
    server = [sys.executable, str(SERVER)]
    direct = _raw_tools_list(server, env, tmp_path)
    guard = [sys.executable, "-m", "loopwatch.cli", "mcp-guard", "--", *server]
    guarded = _raw_tools_list(guard, env, tmp_path)
    assert json.loads(direct)["id"] == 2 and b'"create_ticket"' in direct
    assert guarded == direct


def test_a_sqlite_store_replays_across_guard_restarts(
    tmp_path: Path, free_port: Callable[[], int]
) -> None:
    """Two guard processes one after the other (a client restarted), sharing a SQLite file
    given by --store, with the declarations from --config: still one ticket."""
    config = tmp_path / "declared.toml"
    config.write_text(CONFIG)
    store = f"sqlite:///{tmp_path / 'guards.db'}"

    def guard(port: int) -> StdioServerParameters:
        args = ["-m", "loopwatch.cli", "mcp-guard", "--config", str(config), "--store", store]
        args += ["--", sys.executable, str(SERVER)]
        return StdioServerParameters(
            command=sys.executable, args=args, env=_env(tmp_path, port), cwd=ROOT
        )

    async def one_call(session: ClientSession) -> Any:
        arguments = {"customer_id": "C-1042", "order_id": "4411", "summary": SUMMARIES[0]}
        return await session.call_tool("create_ticket", arguments)

    with open(tmp_path / "stderr.txt", "w") as errlog:
        first = asyncio.run(_session(guard(free_port()), errlog, one_call))
        again = asyncio.run(_session(guard(free_port()), errlog, one_call))
    assert (tmp_path / "tickets.txt").read_text().count("\n") == 1
    assert _text(first) == _text(again) == "T-1"
    assert again.is_error is False


def test_a_call_without_its_identity_fields_reaches_the_server(
    tmp_path: Path, free_port: Callable[[], int]
) -> None:
    """The arbiter cannot key it; the server judges the arguments, and the session goes on."""
    port = free_port()

    async def calls(session: ClientSession) -> list[Any]:
        missing = await session.call_tool("create_ticket", {"customer_id": "C-1042"})
        arguments = {"customer_id": "C-1042", "order_id": "4411", "summary": SUMMARIES[0]}
        return [missing, await session.call_tool("create_ticket", arguments)]

    with open(tmp_path / "stderr.txt", "w") as errlog:
        missing, made = asyncio.run(_session(_guarded(tmp_path, port), errlog, calls))
    assert missing.is_error is True and "order_id" in _text(missing)
    assert "loopwatch" not in _text(missing)  # the server's own answer
    assert made.is_error is False and _text(made) == "T-1"


def test_the_guard_exits_with_its_server(tmp_path: Path) -> None:
    """A server that exits ends the guard with its exit code, while the client still holds
    the guard's stdin open; a command that cannot start is exit 2, named."""
    env = _env(tmp_path, 0)
    guard = [sys.executable, "-m", "loopwatch.cli", "mcp-guard", "--"]
    with subprocess.Popen(
        [*guard, sys.executable, "-c", "import sys; sys.exit(3)"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    ) as process:
        assert process.wait(timeout=DEADLINE_SECONDS) == 3
        assert process.stdout is not None and process.stdout.read() == b""
        assert process.stdin is not None
        process.stdin.close()
    missing = subprocess.run(
        [*guard, str(tmp_path / "no-such-server")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=DEADLINE_SECONDS,
    )
    assert missing.returncode == 2
    assert f"loopwatch mcp-guard: cannot start {tmp_path / 'no-such-server'}:" in missing.stderr
    nothing = subprocess.run(
        [*guard[:-1]], capture_output=True, text=True, env=env, timeout=DEADLINE_SECONDS
    )
    assert nothing.returncode == 2
    assert "loopwatch mcp-guard: give the MCP server to start after --" in nothing.stderr


def test_a_long_request_line_arrives_whole(tmp_path: Path, free_port: Callable[[], int]) -> None:
    """A request far longer than one read of the guard's stdin (2 MiB of summary) reaches the
    server as one line, and its duplicate is still recognised."""
    port = free_port()
    summary = "x" * (2 * 1024 * 1024)

    async def calls(session: ClientSession) -> list[Any]:
        arguments = {"customer_id": "C-1042", "order_id": "4411", "summary": summary}
        first = await session.call_tool("create_ticket", arguments)
        return [first, await session.call_tool("create_ticket", {**arguments, "summary": "y"})]

    with open(tmp_path / "stderr.txt", "w") as errlog:
        first, again = asyncio.run(_session(_guarded(tmp_path, port), errlog, calls))
    assert _text(first) == _text(again) == "T-1"
    assert (tmp_path / "tickets.txt").read_text() == f"C-1042\t4411\t{summary}\n"


def test_a_turn_ends_after_the_idle_timeout() -> None:
    """The breaker's turn ends when no call has come for idle_timeout_seconds (clock
    injected): a fourth identical search right away is stopped, one after the pause runs."""
    from loopwatch.core.config import Config
    from loopwatch.guards.arbiter import IdempotencyArbiter
    from loopwatch.guards.breaker import LoopBreaker
    from loopwatch.mcp_guard import Guard

    now = [0.0]
    config = Config(idle_timeout_seconds=300.0)
    guard = Guard(config, IdempotencyArbiter(config), LoopBreaker(config), clock=lambda: now[0])

    def search(request_id: int) -> bool:
        """True when the call is forwarded (its empty result then answered by the server)."""
        params = {"name": "search_orders", "arguments": {"query": "damaged order 4411"}}
        request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        answer = guard.request(request)
        if answer is not None:
            assert answer["result"]["isError"] is True
            return False
        result = {"content": [], "structuredContent": {"result": []}, "isError": False}
        guard.response({"jsonrpc": "2.0", "id": request_id, "result": result})
        return True

    forwarded = []
    for request_id in range(1, 5):
        now[0] += 10.0
        forwarded.append(search(request_id))
    now[0] += 300.0  # not past the timeout yet
    forwarded.append(search(5))
    now[0] += 300.5
    forwarded.append(search(6))
    assert forwarded == [True, True, True, False, False, True]


def test_a_duplicate_while_the_first_runs_gets_in_progress(tmp_path: Path) -> None:
    """In process, on a SQLite store: the second call arrives before the server answered the
    first; after the answer, duplicates get the first result. A cancelled call leaves its key
    claimed (its outcome is unknown) and ends its span."""
    from loopwatch.core.config import load_config
    from loopwatch.guards.arbiter import IdempotencyArbiter
    from loopwatch.guards.breaker import LoopBreaker
    from loopwatch.mcp_guard import Guard

    (tmp_path / "loopwatch.toml").write_text(CONFIG)
    config = load_config(tmp_path / "loopwatch.toml")
    arbiter = IdempotencyArbiter(config, store=f"sqlite:///{tmp_path / 'guards.db'}")
    guard = Guard(config, arbiter, LoopBreaker(config))

    def call(request_id: int, order_id: str) -> dict[str, Any] | None:
        arguments = {"customer_id": "C-1042", "order_id": order_id, "summary": SUMMARIES[0]}
        params = {"name": "create_ticket", "arguments": arguments}
        return guard.request(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        )

    assert call(1, "4411") is None  # forwarded
    running = call(2, "4411")
    assert running is not None and running["result"]["isError"] is True
    assert running["result"]["content"][0]["text"].startswith(
        "SUPPRESSED by loopwatch: create_ticket was not run. The same request is already in "
        "progress"
    )
    first = {"content": [{"type": "text", "text": "T-1"}], "isError": False}
    guard.response({"jsonrpc": "2.0", "id": 1, "result": first})
    assert call(3, "4411") == {"jsonrpc": "2.0", "id": 3, "result": first}

    assert call(4, "9000") is None
    guard.cancelled(4)
    unknown = call(5, "9000")
    assert unknown is not None and "already in progress" in unknown["result"]["content"][0]["text"]
    arbiter.close()


def test_x_loopwatch_in_the_servers_tools_list_declares_an_identity(
    caplog: Any,
) -> None:
    """In process: before the server has listed its tools, open_case is undeclared (the arbiter
    cannot key it); once its tools/list answer carries x-loopwatch, a reworded duplicate gets
    the first result. A broken x-loopwatch is warned about and changes nothing."""
    from loopwatch.core.config import Config
    from loopwatch.guards.arbiter import IdempotencyArbiter
    from loopwatch.guards.breaker import LoopBreaker
    from loopwatch.mcp_guard import Guard

    config = Config()
    guard = Guard(config, IdempotencyArbiter(config), LoopBreaker(config))
    first = {"content": [{"type": "text", "text": "CASE-1"}], "isError": False}

    def call(request_id: int, text: str) -> dict[str, Any] | None:
        arguments = {"account": "A-7", "text": text}
        params = {"name": "open_case", "arguments": arguments}
        request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        answer = guard.request(request)
        if answer is None:
            guard.response({"jsonrpc": "2.0", "id": request_id, "result": first})
        return answer

    def tools(request_id: int, extension: Any) -> None:
        schema = {
            "type": "object",
            "properties": {"account": {"type": "string"}, "text": {"type": "string"}},
            "x-loopwatch": extension,
        }
        guard.listing(request_id)
        listed = {"tools": [{"name": "open_case", "inputSchema": schema}]}
        guard.response({"jsonrpc": "2.0", "id": request_id, "result": listed})

    assert call(1, "Printer is broken") is None
    assert call(2, "The printer does not work") is None  # undeclared: forwarded
    tools(3, "not a table")
    assert "x-loopwatch of the server's tools not read" in caplog.text
    assert call(4, "Printer broken again") is None
    tools(5, {"identity": ["account"]})
    assert call(6, "Printer still broken") is None  # the first call of the declared key
    assert call(7, "Printer: still broken") == {"jsonrpc": "2.0", "id": 7, "result": first}


def test_the_calls_of_a_session_are_one_turn_in_the_metrics(
    tmp_path: Path, free_port: Callable[[], int]
) -> None:
    """Six reworded create_ticket calls and four identical searches, one after the other: one
    turn (one trace under the guard's invoke_agent span), ended by the idle timeout while the
    session is still open, with the searches' three attempts counted as repeats of one key."""
    port = free_port()
    idle = 2.0
    params = _guarded(tmp_path, port, idle)
    names = {
        "turns": ("loopwatch_turns_total", {}),
        "max_attempts_sum": ("loopwatch_turn_max_attempts_sum", {}),
        "max_attempts_count": ("loopwatch_turn_max_attempts_count", {}),
        "tickets_run": ("loopwatch_tool_calls_total", {"tool": "create_ticket"}),
        "searches_run": ("loopwatch_tool_calls_total", {"tool": "search_orders"}),
        "search_repeats": ("loopwatch_repeat_calls_total", {"tool": "search_orders"}),
        "decisions": ("loopwatch_guard_decisions_total", {}),
    }

    def read() -> dict[str, float]:
        text = _metrics(port)
        seen = {k: exposition_sum(text, n, agent=AGENT, **lb) for k, (n, lb) in names.items()}
        seen["other_agents"] = exposition_sum(text, "loopwatch_turns_total") - seen["turns"]
        return seen

    async def calls(session: ClientSession) -> tuple[dict[str, float], dict[str, float], float]:
        for summary in SUMMARIES:
            arguments = {"customer_id": "C-1042", "order_id": "4411", "summary": summary}
            await session.call_tool("create_ticket", arguments)
        for _ in range(4):
            await session.call_tool("search_orders", {"query": "damaged order 4411"})
        last_call = time.monotonic()
        during = read()  # the turn is not over yet: no turn counted
        deadline = time.monotonic() + DEADLINE_SECONDS + idle
        while (after := read())["turns"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        return during, after, time.monotonic() - last_call

    with open(tmp_path / "stderr.txt", "w") as errlog:
        during, after, waited = asyncio.run(_session(params, errlog, calls))

    assert during["turns"] == 0
    assert waited >= idle
    assert after == {
        "turns": 1.0,
        "max_attempts_sum": 3.0,  # the search's key: 3 attempts in the one turn
        "max_attempts_count": 1.0,
        "tickets_run": 1.0,
        "searches_run": 3.0,
        "search_repeats": 2.0,
        "decisions": 6.0,  # 3 suppressed, 2 circuit_open, 1 search stopped
        "other_agents": 0.0,
    }


def test_help_names_where_the_config_comes_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one line per option
    parser = argparse.ArgumentParser(prog="loopwatch mcp-guard")
    add_arguments(parser)
    [line] = [x for x in parser.format_help().splitlines() if x.startswith("  --config")]
    assert " ".join(line.split()) == (
        "--config PATH loopwatch.toml (default: $LOOPWATCH_CONFIG or ./loopwatch.toml)"
    )
