"""Both HTTP endpoints: a tornado ``HTTPServer`` on its own thread and asyncio loop.

tornado enforces the header deadline, the header size cap and RFC 9112 framing (Content-Length
with Transfer-Encoding, unequal Content-Lengths, non-digit lengths: 400, connection closed) and
reads chunked bodies. Added here: a listen backlog in the thousands, a cap on open connections,
and a body deadline that answers 408 (tornado's own closes without an answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Generic, TypeVar

from tornado import httputil
from tornado.httpserver import HTTPServer
from tornado.iostream import IOStream, StreamClosedError
from tornado.netutil import bind_sockets

from loopwatch.service.addresses import BindError, join_address, split_address

log = logging.getLogger(__name__)
T = TypeVar("T")
F = TypeVar("F", bound="Front")

# Linux caps the backlog at net.core.somaxconn (4096 by default since 5.4).
BACKLOG = 4096
# tornado reads a connection in pieces of this size: what a connection holds past the header cap
READ_CHUNK_BYTES = 16 * 1024
# The answer to a connection past the cap (read nothing, close): exporters retry a 503.
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n"
    b"Connection: close\r\n\r\n"
)
TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Limits:
    max_connections: int
    max_header_bytes: int
    header_timeout_seconds: float  # all headers of a request, and a keep-alive connection's idle
    body_timeout_seconds: float  # the whole body, from the end of the headers


class Request(httputil.HTTPMessageDelegate, Generic[F]):
    """One request on one connection, of the endpoint ``front``. Subclasses implement
    ``received`` (start line and headers), ``data_received``, ``complete`` (the body is in) and
    ``closed``; ``respond`` answers once. Every callback runs on the endpoint's event loop."""

    def __init__(self, front: F, connection: httputil.HTTPConnection) -> None:
        self.front = front
        self.connection = connection
        self.method = ""
        self.path = ""
        self.headers = httputil.HTTPHeaders()
        self.answered = False
        self._body_timeout = front.body_timeout
        self._deadline: asyncio.TimerHandle | None = None

    # -- tornado's side ---------------------------------------------------------------------------
    def headers_received(
        self,
        start_line: httputil.RequestStartLine | httputil.ResponseStartLine,
        headers: httputil.HTTPHeaders,
    ) -> None:
        assert isinstance(start_line, httputil.RequestStartLine)
        self.method = start_line.method
        self.path = start_line.path.split("?", 1)[0]
        self.headers = headers
        self._deadline = asyncio.get_running_loop().call_later(self._body_timeout, self._late)
        self.received()

    def finish(self) -> None:
        self._stop_deadline()
        if not self.answered:
            self.complete()

    def on_connection_close(self) -> None:
        self._stop_deadline()
        self.closed()

    # -- the subclass's side ----------------------------------------------------------------------
    def received(self) -> None:
        pass

    def complete(self) -> None:
        pass

    def closed(self) -> None:
        pass

    def respond(
        self,
        code: int,
        body: bytes,
        content_type: str = TEXT,
        headers: dict[str, str] | None = None,
    ) -> None:
        if self.answered:
            return
        self.answered = True
        fields = httputil.HTTPHeaders(
            {"Content-Type": content_type, "Content-Length": str(len(body)), **(headers or {})}
        )
        start = httputil.ResponseStartLine("HTTP/1.1", code, HTTPStatus(code).phrase)
        # a client that left before its answer: nothing to do
        with contextlib.suppress(StreamClosedError):
            self.connection.write_headers(start, fields, b"" if self.method == "HEAD" else body)
            # before the body is in, finishing makes tornado close the connection once written
            self.connection.finish()

    def _late(self) -> None:
        self._deadline = None
        # tornado closes the connection once this is written; on_connection_close follows
        self.respond(408, f"request body not received within {self._body_timeout:g}s\n".encode())

    def _stop_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None


class Workers:
    """``n`` daemon threads running calls for an event loop. Unlike ThreadPoolExecutor, whose
    threads the interpreter joins at exit, a call still running then (a huge exposition) does
    not hold up the exit after SIGTERM."""

    def __init__(self, n: int, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None]
        self._jobs = queue.SimpleQueue()
        self._n = n
        self._closed = False
        for i in range(n):
            threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True).start()

    def run(self, call: Callable[[], T]) -> asyncio.Future[T]:
        """``call()`` on a worker; awaitable on the running loop. RuntimeError once closed."""
        if self._closed:
            raise RuntimeError("workers closed")
        future: Future[T] = Future()
        self._jobs.put((future, call))
        return asyncio.wrap_future(future)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, call = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except BaseException as e:
                    future.set_exception(e)

    def close(self) -> None:
        self._closed = True
        for _ in range(self._n):
            self._jobs.put(None)


class Front(httputil.HTTPServerConnectionDelegate):
    """What the requests of one endpoint share: worker threads for slow calls, and the answers
    being worked on, the body deadline. Subclasses make each request's Request in
    ``start_request``."""

    def __init__(self, workers: int, name: str, body_timeout: float) -> None:
        self.workers = Workers(workers, name)
        self.body_timeout = body_timeout
        self._answering: set[asyncio.Task[None]] = set()

    def spawn(self, answer: Coroutine[Any, Any, None]) -> None:
        """Run ``answer`` on the event loop, holding a reference until it is done."""
        task = asyncio.ensure_future(answer)
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    def busy(self) -> int:
        """Answers being worked on: stopping lets them finish."""
        return len(self._answering)

    def close(self) -> None:
        """The endpoint has stopped."""
        self.workers.close()


class _CappedServer(HTTPServer):
    """tornado's HTTPServer, answering 503 to connections past ``cap`` (no request read) and
    reporting each to ``refused``."""

    cap = 0
    open = 0
    refused: Callable[[], None]  # set before it serves

    def handle_stream(self, stream: IOStream, address: tuple[Any, ...]) -> None:
        if self.open >= self.cap:
            self.refused()
            with contextlib.suppress(StreamClosedError):
                stream.write(_BUSY)
            stream.close()
            return
        self.open += 1
        super().handle_stream(stream, address)

    def on_close(self, server_conn: object) -> None:
        self.open -= 1
        super().on_close(server_conn)


class Endpoint:
    """One HTTP server on its own daemon thread and event loop."""

    def __init__(
        self,
        what: str,
        app: Front,
        limits: Limits,
        max_body_bytes: int,
        refused: Callable[[], None],
    ) -> None:
        """``max_body_bytes`` is tornado's own bound: a longer body gets 400 unread.
        ``refused`` is called on the endpoint's thread for each connection refused at the cap."""
        self.what = what
        self.app = app
        self.limits = limits
        self.max_body_bytes = max_body_bytes
        self.refused = refused
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._grace = 0.0
        self._ready = threading.Event()
        self._server: _CappedServer | None = None

    @property
    def open_connections(self) -> int:
        return self._server.open if self._server is not None else 0

    def start(self, address: str) -> str:
        """Bind (or raise BindError) and serve; returns the bound ``HOST:PORT``."""
        host, port = split_address(address, f"{self.what} address")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            sockets = bind_sockets(port, host, family=family, backlog=BACKLOG)
        except OSError as e:
            message = f"cannot listen for {self.what} on {address}: {e.strerror or e}"
            raise BindError(message) from None
        bound = sockets[0].getsockname()[1]
        self._thread = threading.Thread(
            target=asyncio.run, args=(self._serve(sockets),), name=f"loopwatch-{self.what}"
        )
        self._thread.daemon = True
        self._thread.start()
        self._ready.wait(10)
        return join_address(host, bound)

    async def _serve(self, sockets: list[socket.socket]) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        limits = self.limits
        server = _CappedServer(
            self.app,
            chunk_size=READ_CHUNK_BYTES,
            max_header_size=limits.max_header_bytes,
            idle_connection_timeout=limits.header_timeout_seconds,
            max_body_size=self.max_body_bytes,
        )
        server.cap = limits.max_connections
        server.refused = self.refused
        server.add_sockets(sockets)
        self._server = server
        self._ready.set()
        await self._stop.wait()
        server.stop()  # no new connections
        deadline = time.monotonic() + self._grace
        while self.app.busy() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.close_all_connections(), 1.0)
        self.app.close()

    def stop(self, grace: float = 2.0) -> None:
        """Stop accepting, let requests being answered finish (up to ``grace`` seconds),
        close every connection."""
        if self._loop is None or self._stop is None or self._thread is None:
            return
        self._grace = grace
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(grace + 2.0)
