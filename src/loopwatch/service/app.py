"""The running service: pipeline, OTLP receivers (gRPC and HTTP) and the metrics endpoint."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from loopwatch.core.config import Config
from loopwatch.loopspans.export import LoopExport, loop_export_for
from loopwatch.metrics.catalog import ENDPOINT_METRICS, ENDPOINT_OTLP_HTTP
from loopwatch.metrics.exporter import LoopwatchMetrics
from loopwatch.service.grpc_server import start_grpc
from loopwatch.service.http_base import Endpoint, Limits
from loopwatch.service.http_server import start_otlp_http
from loopwatch.service.metrics_server import start_metrics
from loopwatch.service.pipeline import Pipeline

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Addresses:
    grpc: str
    http: str
    metrics: str


class Service:
    """``loopwatch serve`` in one object. ``start()`` binds everything or raises BindError
    (nothing left listening); ``stop()`` stops accepting, finalizes open turns, returns."""

    def __init__(
        self,
        config: Config,
        addresses: Addresses,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.config = config
        self.requested = addresses
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = LoopwatchMetrics(
            self.registry,
            label_limit=config.label_limit,
            series_limit=config.series_limit,
            label_chars=config.label_chars,
            serve=True,
        )
        self.pipeline: Pipeline | None = None
        self.loop_export: LoopExport | None = None  # with serve.export_otlp set
        self.bound: Addresses | None = None
        self._grpc: Any = None
        self._http: Endpoint | None = None
        self._metrics_server: Endpoint | None = None
        self._stopping = False

    def ready(self) -> str | None:
        """None when the service takes spans, else why it does not."""
        if self._stopping:
            return "stopping"
        if self.pipeline is None or self.bound is None:
            return "starting"
        if not self.pipeline.worker.alive:
            return "pipeline worker stopped"
        if self.pipeline.worker.queued >= self.config.queue_spans:
            return "span queue full"
        return None

    def start(self) -> Addresses:
        config, self.loop_export = loop_export_for(self.config, self.metrics.loop_spans_dropped)
        self.pipeline = Pipeline(config, self.metrics, loop_spans=self.loop_export)
        config = self.config
        limits = Limits(
            max_connections=config.max_connections,
            max_header_bytes=config.max_header_bytes,
            header_timeout_seconds=config.header_timeout_seconds,
            body_timeout_seconds=config.body_timeout_seconds,
        )
        try:
            # metrics first: /healthz answers (and /readyz says "starting") while binding
            self._metrics_server, metrics = start_metrics(
                self.requested.metrics, self.registry, self.ready, limits, self._refused_metrics
            )
            self._grpc, grpc_address = start_grpc(self.requested.grpc, self.pipeline, config)
            self._http, http_address = start_otlp_http(
                self.requested.http,
                self.pipeline,
                config.max_request_bytes,
                limits,
                self._refused_otlp_http,
            )
        except BaseException:
            self.stop(timeout=2.0)
            raise
        self.bound = Addresses(grpc_address, http_address, metrics)
        return self.bound

    def _refused_metrics(self) -> None:
        self.metrics.refused(ENDPOINT_METRICS)

    def _refused_otlp_http(self) -> None:
        self.metrics.refused(ENDPOINT_OTLP_HTTP)

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop accepting, let in-flight requests finish, finalize every open turn.
        True when everything finished within ``timeout`` seconds."""
        self._stopping = True
        deadline = time.monotonic() + timeout
        grace = max(0.0, min(2.0, timeout / 4))
        if self._grpc is not None:
            self._grpc.stop(grace).wait(grace + 1)
        if self._http is not None:
            self._http.stop(grace)
        done = True
        if self.pipeline is not None:
            done = self.pipeline.stop(max(0.1, deadline - time.monotonic()))
        if self.loop_export is not None:  # the loop spans of the turns finalized at the stop
            done = self.loop_export.shutdown(max(0.1, deadline - time.monotonic())) and done
        if self._metrics_server is not None:
            self._metrics_server.stop(0.5)
        return done
