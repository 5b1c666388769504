"""Attaching loopwatch: ``loopwatch.instrument()`` and the ``opentelemetry-instrument`` hook."""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from opentelemetry import trace
from prometheus_client import start_http_server

from loopwatch.core.config import Config, load_config
from loopwatch.processor import LoopwatchSpanProcessor

log = logging.getLogger("loopwatch")
_lock = threading.Lock()
_servers: dict[tuple[str, int], Any] = {}
# provider -> its processor, so a second instrument() call does not count every span twice
_attached: weakref.WeakKeyDictionary[Any, LoopwatchSpanProcessor] = weakref.WeakKeyDictionary()


def serve_metrics(host: str, port: int) -> None:
    """Serve prometheus_client's default registry on ``http://host:port/metrics`` (once)."""
    with _lock:
        if (host, port) in _servers:
            return
        _servers[(host, port)] = start_http_server(port, addr=host)


def instrument(
    tracer_provider: Any = None,
    config: Config | None = None,
    *,
    serve: bool = True,
) -> LoopwatchSpanProcessor:
    """Add a :class:`LoopwatchSpanProcessor` to ``tracer_provider`` (default: the global one)
    and serve ``/metrics`` on the configured address (127.0.0.1:9464 by default)."""
    config = config if config is not None else load_config()
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    if not hasattr(provider, "add_span_processor"):
        raise RuntimeError(
            "loopwatch.instrument(): the tracer provider is not an SDK TracerProvider "
            f"({type(provider).__name__}); set one with trace.set_tracer_provider(...) first, "
            "or pass tracer_provider="
        )
    with _lock:
        processor = _attached.get(provider)
        if processor is None:
            processor = _attached[provider] = LoopwatchSpanProcessor(config=config)
            provider.add_span_processor(processor)
    if serve:
        serve_metrics(config.metrics_host, config.metrics_port)
    log.info(
        "loopwatch: attached; metrics on http://%s:%d/metrics",
        config.metrics_host,
        config.metrics_port,
    )
    return processor


def auto_instrument() -> None:
    """Entry point for ``opentelemetry-instrument`` (group ``opentelemetry_post_instrument``).
    A broken setting is logged, never raised into the host."""
    try:
        instrument()
    except Exception as e:
        log.warning("loopwatch: not attached: %s", e)
