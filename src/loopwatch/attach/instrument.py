"""Attaching loopwatch: ``loopwatch.instrument()`` and the ``opentelemetry-instrument`` hook."""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import start_http_server

from loopwatch.attach.frameworks import disabled_names, enabled, instrument_frameworks
from loopwatch.attach.processor import LoopwatchSpanProcessor
from loopwatch.attach.provider import global_sdk_provider
from loopwatch.core.config import Config, ConfigError, config_file, load_config

log = logging.getLogger(__name__)
_lock = threading.Lock()
_servers: dict[tuple[str, int], Any] = {}
# provider -> its processor, so a second instrument() call does not count every span twice
_attached: weakref.WeakKeyDictionary[Any, LoopwatchSpanProcessor] = weakref.WeakKeyDictionary()
_exit_hook: list[bool] = []  # [True] once _shut_down_at_exit is registered


def _shut_down_at_exit() -> None:
    """At exit the open turns are counted and the summary logged, whether or not the provider
    shuts its processors down then (the SDK's does, unless told not to)."""
    for processor in list(_attached.values()):
        try:
            processor.shutdown()
        except Exception as e:
            log.debug("shutdown at exit: %s", e)


def serve_metrics(host: str, port: int) -> None:
    """Serve prometheus_client's default registry on ``http://host:port/metrics`` (once).
    Raises OSError when the address cannot be bound."""
    with _lock:
        if (host, port) in _servers:
            return
        _servers[(host, port)] = start_http_server(port, addr=host)


def _config() -> Config:
    """``load_config()``, or the defaults when the file or a variable is broken (logged)."""
    try:
        file = config_file()
        config = load_config()
    except ConfigError as e:
        log.warning("%s; running with the default settings", e)
        return Config()
    log.info("config %s", file if file is not None else "none, defaults")
    return config


# The processor attached to ``provider``: the one already there, else a new one (attached where
# the provider takes span processors).
def _attach(provider: Any, config: Config) -> LoopwatchSpanProcessor:
    with _lock:
        processor = _attached.get(provider)
        if processor is None:
            processor = LoopwatchSpanProcessor(config=config, tracer_provider=provider)
            if hasattr(provider, "add_span_processor"):
                _attached[provider] = processor
                provider.add_span_processor(processor)
                if not _exit_hook:
                    _exit_hook.append(True)
                    atexit.register(_shut_down_at_exit)
            else:
                log.warning(
                    "the global tracer provider (%s) is not an SDK TracerProvider; "
                    "not attached: add the returned processor to your provider, or call "
                    "loopwatch.instrument(tracer_provider=...)",
                    type(provider).__name__,
                )
        return processor


def instrument(
    tracer_provider: TracerProvider | None = None,
    config: Config | None = None,
    *,
    serve: bool = True,
    frameworks: bool = True,
) -> LoopwatchSpanProcessor:
    """Attach loopwatch to ``tracer_provider`` (default: the global one) and serve
    ``/metrics`` on the configured address (127.0.0.1:9464 by default).

    When no global provider was set, an SDK ``TracerProvider`` is set first, with the exporters
    ``OTEL_TRACES_EXPORTER`` asks for. With ``frameworks`` (and unless
    ``LOOPWATCH_INSTRUMENT_FRAMEWORKS=false``) the GenAI instrumentation of the installed agent
    frameworks is switched on: pydantic-ai's (with content capture) and any OpenInference or
    OpenLLMetry instrumentor not already on. A broken setting, a busy metrics port or a failing
    instrumentor is logged as a warning, never raised; only a ``tracer_provider`` argument that
    cannot take span processors raises ``RuntimeError``. Returns the processor attached (the
    one already attached to that provider, when called again).

    >>> import loopwatch
    >>> processor = loopwatch.instrument(serve=False)  # doctest: +SKIP
    """
    config = config if config is not None else _config()
    if tracer_provider is not None:
        provider = tracer_provider
        if not hasattr(provider, "add_span_processor"):
            raise RuntimeError(
                "loopwatch.instrument(): tracer_provider is not an SDK TracerProvider "
                f"({type(provider).__name__}); pass an opentelemetry.sdk.trace.TracerProvider"
            )
    else:
        with _lock:  # two threads attaching at once set one provider, not two
            provider = global_sdk_provider()
    processor = _attach(provider, config)
    if enabled(frameworks):
        switched = instrument_frameworks(tracer_provider)
        if switched:
            log.info("switched on GenAI instrumentation: %s", ", ".join(switched))
    address = f"{config.metrics_host}:{config.metrics_port}"
    if serve:
        try:
            serve_metrics(config.metrics_host, config.metrics_port)
        except OSError as e:
            log.warning(
                "cannot serve /metrics on %s (%s); set LOOPWATCH_METRICS_PORT "
                "(or [metrics] port in loopwatch.toml) to a free port. The processor is "
                "attached and counting.",
                address,
                e.strerror or e,
            )
            return processor
    log.info("attached; metrics on http://%s/metrics", address)
    return processor


def auto_instrument() -> None:
    """Entry point for ``opentelemetry-instrument`` (group ``opentelemetry_post_instrument``).
    ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=loopwatch`` skips it; nothing is raised into the
    host."""
    if "loopwatch" in disabled_names():
        log.info("not attached (OTEL_PYTHON_DISABLED_INSTRUMENTATIONS)")
        return
    try:
        instrument()
    except Exception as e:
        log.warning("not attached: %s", e)
