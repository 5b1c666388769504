"""A threaded ``http.server`` on ``HOST:PORT`` in a daemon thread (both HTTP endpoints)."""

from __future__ import annotations

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from loopwatch.service.addresses import BindError, join_address, split_address

log = logging.getLogger("loopwatch.service")


class Server(ThreadingHTTPServer):
    daemon_threads = True  # an idle keep-alive connection must not hold up shutdown
    state: Any = None  # what the handlers need (pipeline, registry, limits)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: exporters reuse their connection
    server_version = "loopwatch"
    timeout = 30  # a client that stops sending mid-body does not hold a thread forever
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def reply(
        self,
        code: int,
        body: bytes,
        content_type: str = "text/plain; charset=utf-8",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def start_http(
    address: str, handler: type[Handler], state: Any, what: str
) -> tuple[Server, str, threading.Thread]:
    """Bind and serve in a daemon thread; returns the server, the bound address, the thread."""
    host, port = split_address(address, f"{what} address")

    class _Bound(Server):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    try:
        server = _Bound((host, port), handler)
    except OSError as e:
        raise BindError(f"cannot listen for {what} on {address}: {e.strerror or e}") from None
    server.state = state
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.2}, name=f"loopwatch-{what}"
    )
    thread.daemon = True
    thread.start()
    return server, join_address(host, server.server_address[1]), thread
