"""What the quick-start runners share (tests/framework_runs/gemini.py, responses.py,
litellm_loop.py): a scripted model on a loopback HTTP port, the tools under
``@loopwatch.tool`` as the README's quick start decorates them, and the runs of the three turns
in every order, each with a fresh LoopwatchSpanProcessor whose metric samples are kept."""

from __future__ import annotations

import itertools
import json
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from tests.framework_runs.handrolled import (
    LOOPWATCH_TOML,
    Switch,
    TicketService,
    Tools,
    create_ticket,
    samples,
    search_orders,
)

ORDERS = list(itertools.permutations(range(3)))
# (status, content type, body, extra headers) for one request's (path, JSON body)
Reply = tuple[int, str, str, dict[str, str]]
Answer = Callable[[str, dict[str, Any]], Reply]


class _Handler(BaseHTTPRequestHandler):
    server: Loopback

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length))
        try:
            status, content_type, text, headers = self.server.answer(self.path, body)
        except AssertionError as e:  # the loop sent what the script did not expect
            self.server.failures.append(str(e))
            status, content_type = 400, "application/json"
            text, headers = json.dumps({"error": {"message": str(e)}}), {}
        data = text.encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet


class Loopback(ThreadingHTTPServer):
    """A model API on 127.0.0.1: ``answer`` (set per run) replies to each POST; an
    AssertionError it raises is a 400 and is kept in ``failures``."""

    daemon_threads = True
    answer: Answer
    failures: list[str]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def loopback() -> Iterator[Loopback]:
    server = Loopback(("127.0.0.1", 0), _Handler)
    server.failures = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def sse(events: Sequence[dict[str, Any]], named: bool = False, done: bool = False) -> str:
    """Server-sent events, each a JSON ``data:`` line (``named``: with its ``event:`` type;
    ``done``: ended by ``data: [DONE]`` as Chat Completions ends a stream)."""
    out = "".join(
        (f"event: {e['type']}\n" if named else "") + f"data: {json.dumps(e)}\n\n" for e in events
    )
    return out + ("data: [DONE]\n\n" if done else "")


def global_provider() -> tuple[TracerProvider, Switch]:
    """The global provider (where ``@loopwatch.tool`` traces), its one processor a Switch that
    each run points at its own LoopwatchSpanProcessor."""
    switch = Switch()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(switch)
    trace.set_tracer_provider(provider)
    return provider, switch


def quickstart_tools() -> Tools:
    import loopwatch

    return {
        "create_ticket": loopwatch.tool(identity=["customer_id", "order_id"])(create_ticket),
        "search_orders": loopwatch.tool(result="rows")(search_orders),
    }


def run_orders(
    switch: Switch,
    modes: Sequence[str],
    play: Callable[[Sequence[int], str], None],
) -> dict[str, Any]:
    """Each order of the three turns in each mode, played by ``play(order, mode)`` with a fresh
    processor: ``{"012-mode": samples}`` (``play`` returns once every span has ended)."""
    from prometheus_client import CollectorRegistry

    import loopwatch

    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        toml = Path(tmp) / "loopwatch.toml"
        toml.write_text(LOOPWATCH_TOML, encoding="utf-8")
        config = loopwatch.load_config(toml)
        for order in ORDERS:
            for mode in modes:
                registry = CollectorRegistry()
                processor = loopwatch.LoopwatchSpanProcessor(config=config, registry=registry)
                switch.targets = [processor]
                try:
                    TicketService.opened = 0
                    play(order, mode)
                    processor.force_flush(10_000)
                finally:
                    switch.targets = []
                processor.shutdown()  # a turn still open is counted now (the idle timeout's way)
                runs[f"{''.join(map(str, order))}-{mode}"] = samples(registry)
    return runs
