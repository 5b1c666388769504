"""``loopwatch mcp-guard -- COMMAND [ARGS...]``: a stdio MCP server in front of another.

It starts COMMAND as the real server and passes every JSON-RPC line through unchanged (so
``initialize``, ``tools/list``, resources and prompts are byte-identical to the server's own),
except ``tools/call``: a declared tool is first decided by the idempotency arbiter (a duplicate
gets the first result, past ``circuit_after`` an ``isError`` result telling the model to stop),
then every call that would run by the loop breaker (undeclared tools on the inferred key, with
the usual warning from the processor). Each call is an ``execute_tool`` span read by the
in-process loopwatch processor, whose metrics are served as ``loopwatch.instrument()`` does.
The calls of one breaker turn are the children of one ``invoke_agent mcp-guard`` span, so the
processor's per-turn metrics (attempts, repeats, loops) see them as one turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from mcp.types import CallToolRequestParams
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode

from loopwatch.attach import own_spans
from loopwatch.attach.instrument import instrument
from loopwatch.core.config import Config, ConfigError, load_config
from loopwatch.core.declarations import DeclarationError
from loopwatch.core.effects import learn_tool_list
from loopwatch.core.log_names import PackageFormatter
from loopwatch.guards.arbiter import Admitted, IdempotencyArbiter, Replay
from loopwatch.guards.breaker import BreakerTurn, LoopBreaker, Pending
from loopwatch.guards.stores import StoreError
from loopwatch.guards.terminal import TerminalResult

log = logging.getLogger(__name__)
_TRACER = "loopwatch.mcp_guard"
# result text kept on a span: enough for the error class and the no-rows reading
_MAX_RESULT_CHARS = 4096
# tools/call requests forwarded and not yet answered; past this the oldest is forgotten
_MAX_PENDING = 10_000
_MAX_LISTINGS = 100
# how long the real server gets to exit after the client has gone
_EXIT_GRACE_SECONDS = 5.0
# the agent name on the turn spans (an MCP server does not know its client's)
AGENT = "mcp-guard"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="loopwatch.toml (default: $LOOPWATCH_CONFIG or ./loopwatch.toml)",
    )
    parser.add_argument(
        "--store",
        help="where the arbiter's keys live: memory, sqlite:///path.db or redis://host:port/db "
        "(default: [guards] store)",
    )
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]: the real MCP server"
    )


@dataclass(slots=True)
class _Call:
    """A forwarded tools/call waiting for the server's answer."""

    span: Span
    admitted: Admitted | None
    pending: Pending
    turn: BreakerTurn


class Guard:
    """Decides each ``tools/call`` request; plain data in and out, no I/O.

    The breaker counts per turn, and an MCP server sees no turns: a turn here ends when no call
    has come for ``idle_timeout_seconds``, as the processor ends a trace whose root never ends.
    Its calls' spans share one trace under a turn span, ended with the turn (:meth:`end_turn`).
    """

    def __init__(
        self,
        config: Config,
        arbiter: IdempotencyArbiter,
        breaker: LoopBreaker,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.arbiter = arbiter
        self.breaker = breaker
        self.turn = breaker.new_turn()
        self._clock = clock
        self._last_call: float | None = None
        self._tracer = trace.get_tracer(_TRACER)
        self._turn_span: Span | None = None
        self._calls: dict[Any, _Call] = {}
        # tools/list requests forwarded, whose answers may carry x-loopwatch declarations
        self._listings: dict[Any, None] = {}

    def listing(self, request_id: Any) -> None:
        """A tools/list request on its way to the server."""
        if len(self._listings) >= _MAX_LISTINGS:
            del self._listings[next(iter(self._listings))]
        self._listings[_id_key(request_id)] = None

    def _learn(self, tools: list[Any]) -> None:
        """Declarations from the ``x-loopwatch`` of the server's tool schemas (the file's
        declarations are merged under them, as everywhere else), and each tool's effect from
        its MCP annotations."""
        learn_tool_list(tools)
        try:
            config = self.config.with_tool_definitions(tools)
        except DeclarationError as e:
            log.warning("x-loopwatch of the server's tools not read: %s", e)
            return
        if config.schema_tools == self.config.schema_tools:
            return
        self.config = config
        self.arbiter.config = config
        self.breaker = replace(self.breaker, config=config)
        self.turn.breaker = self.breaker

    def _current_turn(self) -> BreakerTurn:
        now = self._clock()
        last, self._last_call = self._last_call, now
        # (a call still running keeps its turn going)
        if last is not None and now - last > self.config.idle_timeout_seconds and not self._calls:
            self.end_turn()
        return self.turn

    @property
    def busy(self) -> bool:
        """Calls forwarded and not yet answered: their turn is still going."""
        return bool(self._calls)

    def end_turn(self) -> None:
        """End the turn: the breaker's counts start again and its span ends, so the processor
        finalizes the turn now. Calls still forwarded are ended first, as cancelled."""
        for key in list(self._calls):
            self._forget(key)
        self.turn = self.breaker.new_turn()
        self._last_call = None
        span, self._turn_span = self._turn_span, None
        if span is not None:
            span.end()

    def request(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """A tools/call request: the response to send back instead of forwarding it, or None
        to forward it (its response then goes through :meth:`response`)."""
        request_id = message.get("id")
        try:
            params = CallToolRequestParams.model_validate(message.get("params"))
        except ValueError:  # pydantic's ValidationError: the server answers it as it would
            return None
        tool, arguments = params.name, dict(params.arguments or {})
        turn = self._current_turn()  # every call counts as activity, replayed ones too
        span = self._span(tool, arguments)
        try:
            with trace.use_span(span, end_on_exit=False):
                answer = self._decide(request_id, tool, arguments, span, turn)
        except BaseException:
            span.end()
            raise
        if answer is not None:
            span.end()
        return answer

    def _decide(
        self, request_id: Any, tool: str, arguments: dict[str, Any], span: Span, turn: BreakerTurn
    ) -> dict[str, Any] | None:
        admitted: Admitted | None = None
        declaration = self.config.declaration(tool)
        if declaration is not None and declaration.identity is not None:
            try:
                verdict = self.arbiter.admit(tool, arguments)
            except ValueError:  # an identity field missing: the server judges the arguments
                verdict = None
            if isinstance(verdict, Replay):
                if verdict.error is not None:
                    return _error_response(request_id, str(verdict.error))
                return {"jsonrpc": "2.0", "id": request_id, "result": verdict.result}
            if isinstance(verdict, TerminalResult):
                return _terminal(request_id, verdict)
            admitted = verdict
        pending = turn.before(tool, arguments)
        if isinstance(pending, TerminalResult):
            if admitted is not None:  # not run: its duplicates get the same stop
                self.arbiter.done(admitted, _terminal(request_id, pending)["result"])
            return _terminal(request_id, pending)
        if len(self._calls) >= _MAX_PENDING:  # a client that never reads its answers
            self._forget(next(iter(self._calls)))
        self._calls[_id_key(request_id)] = _Call(span, admitted, pending, turn)
        return None

    def response(self, message: dict[str, Any]) -> None:
        """The server's answer to a forwarded tools/call or tools/list (any other message is
        ignored)."""
        key = _id_key(message.get("id"))
        if self._listings.pop(key, 0) is None:
            listed = message.get("result")
            tools = listed.get("tools") if isinstance(listed, dict) else None
            if isinstance(tools, list):
                self._learn(tools)
            return
        call = self._calls.pop(key, None)
        if call is None:
            return
        if self._last_call is not None:  # an answer is activity: the idle time starts after it
            self._last_call = max(self._last_call, self._clock())
        result = message.get("result")
        error = message.get("error")
        with trace.use_span(call.span, end_on_exit=True):
            if isinstance(result, dict):
                self._finish(call, result)
            else:
                text = error.get("message") if isinstance(error, dict) else None
                failure = RuntimeError(str(text or "no result"))
                call.turn.after(call.pending, error=failure)
                if call.admitted is not None:
                    self.arbiter.done(call.admitted, error=failure)
                call.span.set_attribute("error.type", "tool_error")
                call.span.set_status(Status(StatusCode.ERROR, str(failure)[:500]))

    def cancelled(self, request_id: Any) -> None:
        """The client gave up on a call: its outcome is unknown, so its claim waits for the
        lease and the breaker counts it as a failure."""
        self._forget(_id_key(request_id))

    def _forget(self, key: Any) -> None:
        call = self._calls.pop(key, None)
        if call is not None:
            call.turn.after(call.pending, error=RuntimeError("cancelled"))
            call.span.set_attribute("error.type", "cancelled")
            call.span.end()

    def _finish(self, call: _Call, result: dict[str, Any]) -> None:
        is_error = result.get("isError") is True
        value = result if is_error else _value(result)
        call.turn.after(call.pending, value)
        if call.admitted is not None:
            self.arbiter.done(call.admitted, result)
        text = _result_text(result)
        if text is not None and own_spans.capture_content():
            call.span.set_attribute("gen_ai.tool.call.result", text[:_MAX_RESULT_CHARS])
        if is_error:
            call.span.set_attribute("error.type", "tool_error")
            call.span.set_status(Status(StatusCode.ERROR, (text or "")[:500]))

    def _span(self, tool: str, arguments: dict[str, Any]) -> Span:
        attributes: dict[str, str] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "mcp.method.name": "tools/call",
        }
        if own_spans.capture_content():
            text = own_spans.as_json(arguments)
            if text is not None:
                attributes["gen_ai.tool.call.arguments"] = text
        if self._turn_span is None:
            turn_attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT}
            # a root: each turn is its own trace, whatever context the guard was started in
            self._turn_span = self._tracer.start_span(
                f"invoke_agent {AGENT}", context=Context(), attributes=turn_attributes
            )
        context = trace.set_span_in_context(self._turn_span, Context())
        return self._tracer.start_span(f"tools/call {tool}", context=context, attributes=attributes)


def _id_key(request_id: Any) -> Any:
    """JSON-RPC ids are strings or numbers; 1 and "1" are different ids."""
    return (type(request_id).__name__, request_id)


def _terminal(request_id: Any, stop: TerminalResult) -> dict[str, Any]:
    content = [{"type": "text", "text": str(stop)}]
    return {"jsonrpc": "2.0", "id": request_id, "result": {"content": content, "isError": True}}


def _error_response(request_id: Any, message: str) -> dict[str, Any]:
    error = {"code": -32603, "message": message}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _texts(result: dict[str, Any]) -> list[str]:
    blocks = result.get("content")
    if not isinstance(blocks, list):
        return []
    return [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]


def _value(result: dict[str, Any]) -> Any:
    """What the tool returned, as the breaker reads it: the structured content, else the
    text decoded as JSON where it is JSON."""
    if "structuredContent" in result:
        return result["structuredContent"]
    texts = _texts(result)
    if len(texts) != 1:
        return texts
    try:
        return json.loads(texts[0])
    except ValueError:
        return texts[0]


def _result_text(result: dict[str, Any]) -> str | None:
    if "structuredContent" in result:
        return own_spans.as_json(result["structuredContent"])
    texts = _texts(result)
    return "\n".join(texts) if texts else None


class _Output:
    """Our stdout, the client's channel: whole lines, one writer at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._out = sys.stdout.buffer

    def write(self, line: bytes) -> None:
        with self._lock:
            self._out.write(line if line.endswith(b"\n") else line + b"\n")
            self._out.flush()


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _read_stdin(loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[bytes]) -> None:
    """Our stdin, line by line, then b"" at its end. A daemon thread reading the descriptor
    itself: a read blocked in it must neither keep the guard alive once the server has exited
    nor hold the lock of sys.stdin's buffer at exit."""
    fd = sys.stdin.fileno()
    held: list[bytes] = []  # the start of a line, in parts: a long line is joined once
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            if held:
                loop.call_soon_threadsafe(lines.put_nowait, b"".join(held))
            loop.call_soon_threadsafe(lines.put_nowait, b"")
            return
        *complete, rest = chunk.split(b"\n")
        for part in complete:
            held.append(part + b"\n")
            loop.call_soon_threadsafe(lines.put_nowait, b"".join(held))
            held = []
        if rest:
            held.append(rest)


class _IdleTimer:
    """Ends the guard's turn once ``idle_timeout_seconds`` pass without a call or an answer,
    so the turn's metrics come when it is over, not at the next call."""

    def __init__(self, guard: Guard, loop: asyncio.AbstractEventLoop) -> None:
        self._guard, self._loop = guard, loop
        self._handle: asyncio.TimerHandle | None = None

    def touch(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        delay = self._guard.config.idle_timeout_seconds
        self._handle = self._loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        if self._guard.busy:  # a call still running: wait for its answer (which touches)
            return
        try:
            self._guard.end_turn()
        except Exception as e:  # never ends the session
            log.error("turn not ended: %s", e, exc_info=True)


def _answer(guard: Guard, message: dict[str, Any]) -> dict[str, Any] | None:
    """The guard's answer to a tools/call, or None to forward it; a failure of the guard
    itself forwards the call unguarded (logged), never ends the session."""
    try:
        return guard.request(message)
    except Exception as e:
        log.error("tools/call forwarded unguarded: %s", e, exc_info=True)
        return None


async def _client_to_server(
    guard: Guard, server: asyncio.subprocess.Process, out: _Output, idle: _IdleTimer
) -> None:
    assert server.stdin is not None
    lines: asyncio.Queue[bytes] = asyncio.Queue()
    reader = threading.Thread(
        target=_read_stdin, args=(asyncio.get_running_loop(), lines), daemon=True
    )
    reader.start()
    while True:
        line = await lines.get()
        if not line:
            break
        message = _parse(line)
        if message is not None and "id" in message:
            if message.get("method") == "tools/list":
                guard.listing(message["id"])
            elif message.get("method") == "tools/call":
                answer = _answer(guard, message)
                idle.touch()
                if answer is not None:
                    out.write(json.dumps(answer, separators=(",", ":")).encode())
                    continue
        elif message is not None and message.get("method") == "notifications/cancelled":
            params = message.get("params")
            if isinstance(params, dict):
                guard.cancelled(params.get("requestId"))
        server.stdin.write(line)
        await server.stdin.drain()
    server.stdin.close()


async def _server_to_client(
    guard: Guard, server: asyncio.subprocess.Process, out: _Output, idle: _IdleTimer
) -> None:
    assert server.stdout is not None
    while True:
        line = await server.stdout.readline()
        if not line:
            return
        message = _parse(line)
        if message is not None and "method" not in message and "id" in message:
            try:
                guard.response(message)
            except Exception as e:  # the answer still reaches the client
                log.error("outcome not recorded: %s", e, exc_info=True)
            idle.touch()
        out.write(line)


async def _proxy(guard: Guard, command: list[str]) -> int:
    server = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=64 * 1024 * 1024,  # one JSON-RPC line can be a large result
    )
    out = _Output()
    idle = _IdleTimer(guard, asyncio.get_running_loop())
    reader = asyncio.create_task(_server_to_client(guard, server, out, idle))
    writer = asyncio.create_task(_client_to_server(guard, server, out, idle))
    done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
    if writer in done:  # the client has gone: give the server time to finish and exit
        try:
            await asyncio.wait_for(server.wait(), _EXIT_GRACE_SECONDS)
        except TimeoutError:
            server.terminate()
    code = await server.wait()
    await asyncio.wait({reader}, timeout=_EXIT_GRACE_SECONDS)
    for task in (reader, writer):
        if task.done() and not task.cancelled() and task.exception() is not None:
            log.error("%s", task.exception())
    return code


def run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("loopwatch mcp-guard: give the MCP server to start after --", file=sys.stderr)
        return 2
    # stdout is the MCP channel; the logger's package says what speaks
    speaker = logging.StreamHandler(sys.stderr)
    speaker.setFormatter(PackageFormatter("%(name)s: %(message)s"))
    logging.basicConfig(handlers=[speaker])
    try:
        config = load_config(args.config)
        arbiter = IdempotencyArbiter(config, store=args.store)
    except (ConfigError, StoreError, ValueError, ImportError) as e:
        print(f"loopwatch mcp-guard: {e}", file=sys.stderr)
        return 2
    instrument(config=config, frameworks=False)
    guard = Guard(config, arbiter, LoopBreaker(config))
    try:
        code = asyncio.run(_proxy(guard, command))
    except OSError as e:
        print(f"loopwatch mcp-guard: cannot start {command[0]}: {e}", file=sys.stderr)
        code = 2
    finally:
        guard.end_turn()  # the last turn's metrics, before the processor shuts down
        arbiter.close()
        provider = trace.get_tracer_provider()
        shutdown = getattr(provider, "shutdown", None)
        if callable(shutdown):
            shutdown()
    return code
