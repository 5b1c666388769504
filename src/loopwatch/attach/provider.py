"""An SDK TracerProvider for a process that has none, configured from the ``OTEL_*`` variables
by the SDK's own helpers (the ones ``opentelemetry-instrument`` uses), for traces only."""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from loopwatch.attach.read_fields import traces_exporters

log = logging.getLogger(__name__)

# exporter entry point -> the package that provides it, for the warning when it is missing
_EXPORTER_PACKAGES = {
    "otlp_proto_grpc": "opentelemetry-exporter-otlp-proto-grpc",
    "otlp_proto_http": "opentelemetry-exporter-otlp-proto-http",
    "zipkin": "opentelemetry-exporter-zipkin",
}


def _exporters() -> dict[str, Any]:
    """The span exporters ``OTEL_TRACES_EXPORTER`` asks for (unset: none), each made on its
    own so a missing package or a bad setting costs only its own exporter."""
    # the names opentelemetry-instrument reads ("otlp" -> grpc or http by
    # OTEL_EXPORTER_OTLP_PROTOCOL) mean the same exporters
    found: dict[str, Any] = {}
    for name, cls in traces_exporters().items():
        try:
            if isinstance(cls, Exception):
                raise cls
            found[name] = cls()
        except Exception as e:
            package = _EXPORTER_PACKAGES.get(name)
            hint = f" (pip install {package})" if package else ""
            log.warning(
                "OTEL_TRACES_EXPORTER asks for %r, which could not be set up%s: %s; "
                "spans are not exported there, loopwatch still counts them",
                name,
                hint,
                e,
            )
    return found


def global_sdk_provider() -> Any:
    """The global tracer provider; when none was set yet, an SDK one is set first (resource,
    sampler and exporters from ``OTEL_*``). Returns whatever is global afterwards."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, trace.ProxyTracerProvider):
        return provider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporters = _exporters()
    # the SDK reads OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES and OTEL_TRACES_SAMPLER itself
    sdk = TracerProvider(resource=Resource.create())
    for exporter in exporters.values():
        sdk.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(sdk)  # a no-op (logged by the API) if another thread won the race
    log.info(
        "no tracer provider was set: loopwatch set an SDK TracerProvider from OTEL_* "
        "(exporters: %s)",
        ", ".join(exporters) or "none, OTEL_TRACES_EXPORTER unset",
    )
    return trace.get_tracer_provider()
