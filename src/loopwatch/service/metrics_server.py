"""``/metrics`` (Prometheus text or OpenMetrics, so exemplars show), ``/healthz``, ``/readyz``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from tornado import httputil

from loopwatch.service.http_base import Endpoint, Front, Limits, Request

# Scrapers and probes, not exporters: a few connections each.
MAX_CONNECTIONS = 256
MAX_BODY_BYTES = 64 * 1024  # these endpoints read no body


class MetricsFront(Front):
    def __init__(
        self, registry: CollectorRegistry, ready: Callable[[], str | None], body_timeout: float
    ) -> None:
        # a large exposition is built off the loop
        super().__init__(1, "loopwatch-metrics", body_timeout)
        self.registry = registry
        self.ready = ready  # None when ready, else why not
        # scrapes that arrive while one is being built share it (per format): a scraper that
        # times out and retries does not queue exposition after exposition
        self.building: dict[str, asyncio.Future[bytes]] = {}

    async def exposition(self, accept: str) -> tuple[bytes, str]:
        # OpenMetrics when the scraper asks for it: the only format that carries exemplars
        encoder, content_type = choose_encoder(accept)
        future = self.building.get(content_type)
        if future is None:
            future = self.workers.run(lambda: bytes(encoder(self.registry)))
            self.building[content_type] = future
            future.add_done_callback(lambda _: self.building.pop(content_type, None))
        return await asyncio.shield(future), content_type

    def start_request(
        self, server_conn: object, request_conn: httputil.HTTPConnection
    ) -> httputil.HTTPMessageDelegate:
        return _Get(self, request_conn)


class _Get(Request[MetricsFront]):
    def data_received(self, chunk: bytes) -> None:
        pass  # no endpoint here takes a body

    def complete(self) -> None:
        if self.method not in ("GET", "HEAD"):
            self.respond(405, b"GET /metrics, /healthz, /readyz\n", headers={"Allow": "GET, HEAD"})
        elif self.path == "/metrics":
            self.front.spawn(self._scrape())
        elif self.path == "/healthz":
            self.respond(200, b"ok\n")
        elif self.path == "/readyz":
            why = self.front.ready()
            self.respond(503 if why else 200, f"{why or 'ready'}\n".encode())
        else:
            self.respond(404, b"see /metrics, /healthz, /readyz\n")

    async def _scrape(self) -> None:
        try:
            body, content_type = await self.front.exposition(self.headers.get("Accept", ""))
        except RuntimeError:  # the workers are closed: stopping
            self.respond(503, b"stopping\n")
            return
        self.respond(200, body, content_type)


def start_metrics(
    address: str,
    registry: CollectorRegistry,
    ready: Callable[[], str | None],
    limits: Limits,
    refused: Callable[[], None],
) -> tuple[Endpoint, str]:
    """Serve /metrics, /healthz and /readyz on ``address``; returns the endpoint and the bound
    address. ``refused`` is called for each connection refused at MAX_CONNECTIONS."""
    front = MetricsFront(registry, ready, limits.body_timeout_seconds)
    capped = replace(limits, max_connections=MAX_CONNECTIONS)
    endpoint = Endpoint("metrics", front, capped, MAX_BODY_BYTES, refused)
    return endpoint, endpoint.start(address)
