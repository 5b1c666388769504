"""Switching on the GenAI instrumentation of the agent frameworks installed in the process.

Without it most frameworks emit no spans and loopwatch sees nothing. What is switched on:
pydantic-ai's instrumentation of every agent (with content capture, so tool arguments and
results are on the spans), and the installed OpenInference and OpenLLMetry instrumentors, found
by their entry points. Anything already instrumented is left as it is; a failure is a warning.
"""

from __future__ import annotations

import logging
import os
from importlib import metadata
from typing import Any

log = logging.getLogger("loopwatch")

OPT_OUT_VARIABLE = "LOOPWATCH_INSTRUMENT_FRAMEWORKS"
_OFF = {"0", "false", "no", "off"}
# OpenInference instrumentors register here (and under opentelemetry_instrumentor too)
_OPENINFERENCE_GROUP = "openinference_instrumentor"
_OTEL_GROUP = "opentelemetry_instrumentor"
# every OpenLLMetry instrumentor depends on OpenLLMetry's GenAI semantic conventions
_OPENLLMETRY_MARK = "opentelemetry-semantic-conventions-ai"


def enabled(argument: bool) -> bool:
    """Off when the argument says so or ``LOOPWATCH_INSTRUMENT_FRAMEWORKS`` is 0/false/no/off."""
    return argument and os.environ.get(OPT_OUT_VARIABLE, "").strip().lower() not in _OFF


def disabled_names() -> set[str]:
    """``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``, as opentelemetry-instrument reads it."""
    raw = os.environ.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "")
    return {name.strip() for name in raw.split(",") if name.strip()}


def _is_openllmetry(entry_point: metadata.EntryPoint) -> bool:
    dist = entry_point.dist
    requires = (dist.requires or []) if dist is not None else []
    return any(r.replace("_", "-").lower().startswith(_OPENLLMETRY_MARK) for r in requires)


def genai_entry_points() -> list[metadata.EntryPoint]:
    """OpenInference and OpenLLMetry instrumentors installed, one per class, minus those named
    in ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` (``*``: all)."""
    disabled = disabled_names()
    if "*" in disabled:
        return []
    found: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=_OPENINFERENCE_GROUP):
        found.setdefault(ep.value, ep)
    for ep in metadata.entry_points(group=_OTEL_GROUP):
        if _is_openllmetry(ep):
            found.setdefault(ep.value, ep)
    return [ep for ep in found.values() if ep.name not in disabled]


def _instrument_entry_point(ep: metadata.EntryPoint, provider: Any) -> str | None:
    """Instrument one entry point's library; its name when done, None when skipped."""
    from opentelemetry.instrumentation.dependencies import get_dist_dependency_conflicts

    if ep.dist is not None and get_dist_dependency_conflicts(ep.dist) is not None:
        return None  # the library it instruments is not installed (or not a supported version)
    instrumentor = ep.load()()
    if instrumentor.is_instrumented_by_opentelemetry:
        return None  # opentelemetry-instrument or the application did it already
    instrumentor.instrument(tracer_provider=provider)
    return str(ep.name)


def _instrument_pydantic_ai(provider: Any) -> bool:
    try:
        from pydantic_ai import Agent
        from pydantic_ai.models.instrumented import InstrumentationSettings
    except ImportError:
        return False
    if Agent._instrument_default is not False:
        return False  # the application chose its own settings
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider, include_content=True))
    return True


def instrument_frameworks(provider: Any) -> list[str]:
    """Switch on what is installed and not yet on; returns the names switched on."""
    done: list[str] = []
    try:
        if _instrument_pydantic_ai(provider):
            done.append("pydantic_ai")
    except Exception as e:
        log.warning("loopwatch: could not switch on pydantic-ai's instrumentation: %s", e)
    for ep in genai_entry_points():
        try:
            name = _instrument_entry_point(ep, provider)
        except Exception as e:
            log.warning("loopwatch: could not switch on instrumentor %r: %s", ep.value, e)
            continue
        if name is not None:
            done.append(name)
    return done
