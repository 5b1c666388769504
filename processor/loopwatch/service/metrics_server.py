"""``/metrics`` (Prometheus text or OpenMetrics, so exemplars show), ``/healthz``, ``/readyz``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from loopwatch.service.http_base import Handler, Server, start_http


@dataclass(frozen=True)
class MetricsState:
    registry: CollectorRegistry
    ready: Callable[[], str | None]  # None when ready, else why not


class MetricsHandler(Handler):
    def do_GET(self) -> None:
        state: MetricsState = self.server.state
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            # OpenMetrics when the scraper asks for it: the only format that carries exemplars
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            self.reply(200, encoder(state.registry), content_type)
        elif path == "/healthz":
            self.reply(200, b"ok\n")
        elif path == "/readyz":
            why = state.ready()
            self.reply(503 if why else 200, f"{why or 'ready'}\n".encode())
        else:
            self.reply(404, b"see /metrics, /healthz, /readyz\n")

    do_HEAD = do_GET


def start_metrics(
    address: str, registry: CollectorRegistry, ready: Callable[[], str | None]
) -> tuple[Server, str, Any]:
    return start_http(address, MetricsHandler, MetricsState(registry, ready), "metrics")
