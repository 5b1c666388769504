"""Switching on the GenAI instrumentation of the agent frameworks and model SDKs installed in
the process.

Without it most frameworks emit no spans and loopwatch sees nothing. What is switched on:
pydantic-ai's instrumentation of every agent (with content capture, so tool arguments and
results are on the spans), and the installed instrumentors of three families, found by their
entry points:

- OpenInference: group ``openinference_instrumentor``.
- OpenLLMetry: group ``opentelemetry_instrumentor``, distribution requiring
  ``opentelemetry-semantic-conventions-ai`` (every OpenLLMetry instrumentor does).
- OpenTelemetry's own GenAI instrumentors (``opentelemetry-instrumentation-openai-v2`` and its
  successors ``opentelemetry-instrumentation-genai-openai`` and ``-genai-anthropic``,
  ``-google-genai``, ``-openai-agents-v2``, ...): group ``opentelemetry_instrumentor``,
  distribution requiring ``opentelemetry-util-genai`` (their shared GenAI helper), or, for
  releases from before it, with a home page in the GenAI part of the OpenTelemetry Python
  repositories (``opentelemetry-python-contrib/.../instrumentation-genai/`` or
  ``opentelemetry-python-genai``). The other ``opentelemetry_instrumentor`` entry points (HTTP
  clients, databases, ...) are none of loopwatch's business and are left alone.

One library, one instrumentor: two on one library would record every model call twice. The
library an instrumentor covers is what its ``instrumentation_dependencies()`` names. An
instrumentor whose library is already instrumented (by the application, by
``opentelemetry-instrument`` or by an earlier call) is left out; otherwise the first of
OpenInference, OpenLLMetry, OpenTelemetry GenAI is switched on and the rest are left out
(logged at DEBUG).

Before an OpenTelemetry GenAI instrumentor is switched on, and only when the user has not set
it, ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is set to ``SPAN_ONLY``: their
releases read it through ``opentelemetry-util-genai`` as one of ``NO_CONTENT`` (the default),
``SPAN_ONLY``, ``EVENT_ONLY``, ``SPAN_AND_EVENT`` (``true`` is not among them and means no
content), and loopwatch reads messages from spans only. They always emit the latest
experimental GenAI conventions (``OTEL_SEMCONV_STABILITY_OPT_IN`` is not read for them), so that
variable is left as it is.

When: what the application has imported already is switched on at once, the rest when the
application imports it (a post-import hook, attach.post_import), so a framework or SDK that is
installed and never imported costs nothing. The modules an instrumentor waits for are read from
metadata without importing anything (its ``instruments`` extras, and the files those
distributions install: attach.library_modules); its version check runs at that import. One
whose metadata names no library is loaded at once, and with it its libraries.

Anything already instrumented is left as it is; a failure is a warning.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import threading
from collections.abc import Callable
from functools import partial
from importlib import metadata
from typing import Any

from loopwatch.attach.library_modules import instrumented, modules_of
from loopwatch.attach.mcp_client import instrument_mcp
from loopwatch.attach.own_spans import CAPTURE_CONTENT_VARIABLE
from loopwatch.attach.post_import import when_imported

log = logging.getLogger(__name__)

OPT_OUT_VARIABLE = "LOOPWATCH_INSTRUMENT_FRAMEWORKS"
_CAPTURE_ON_SPANS = "SPAN_ONLY"
_OFF = {"0", "false", "no", "off"}
# OpenInference instrumentors register here (and under opentelemetry_instrumentor too)
_OPENINFERENCE_GROUP = "openinference_instrumentor"
_OTEL_GROUP = "opentelemetry_instrumentor"
# every OpenLLMetry instrumentor depends on OpenLLMetry's GenAI semantic conventions
_OPENLLMETRY_MARK = "opentelemetry-semantic-conventions-ai"
# every current OpenTelemetry GenAI instrumentor depends on the GenAI helper library
_OTEL_GENAI_MARK = "opentelemetry-util-genai"
_lock = threading.Lock()
_switched: list[str] = []  # every name switched on in this process, in order
_hooked: set[str] = set()  # what waits for (or had) its import: pydantic_ai, mcp, entry points
_OTEL_GENAI_HOMES = (
    "github.com/open-telemetry/opentelemetry-python-contrib/tree/main/instrumentation-genai/",
    "github.com/open-telemetry/opentelemetry-python-genai",
)


def enabled(argument: bool) -> bool:
    """Off when the argument says so or ``LOOPWATCH_INSTRUMENT_FRAMEWORKS`` is 0/false/no/off."""
    return argument and os.environ.get(OPT_OUT_VARIABLE, "").strip().lower() not in _OFF


def disabled_names() -> set[str]:
    """``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``, as opentelemetry-instrument reads it."""
    raw = os.environ.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "")
    return {name.strip() for name in raw.split(",") if name.strip()}


def _requires(entry_point: metadata.EntryPoint, mark: str) -> bool:
    dist = entry_point.dist
    requires = (dist.requires or []) if dist is not None else []
    return any(r.replace("_", "-").lower().startswith(mark) for r in requires)


def _is_openllmetry(entry_point: metadata.EntryPoint) -> bool:
    return _requires(entry_point, _OPENLLMETRY_MARK)


def _is_otel_genai(entry_point: metadata.EntryPoint) -> bool:
    if _requires(entry_point, _OTEL_GENAI_MARK):
        return True
    dist = entry_point.dist
    if dist is None:
        return False
    meta = dist.metadata
    pages = [*(meta.get_all("Project-URL") or []), *(meta.get_all("Home-page") or [])]
    return any(home in page for page in pages for home in _OTEL_GENAI_HOMES)


def genai_entry_points() -> list[metadata.EntryPoint]:
    """OpenInference, OpenLLMetry and OpenTelemetry GenAI instrumentors installed, one per
    class, in that order of preference, minus those named in
    ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` (``*``: all)."""
    disabled = disabled_names()
    if "*" in disabled:
        return []
    found: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=_OPENINFERENCE_GROUP):
        found.setdefault(ep.value, ep)
    otel = [ep for ep in metadata.entry_points(group=_OTEL_GROUP) if ep.value not in found]
    for ep in otel:
        if _is_openllmetry(ep):
            found.setdefault(ep.value, ep)
    for ep in otel:
        if _is_otel_genai(ep):
            found.setdefault(ep.value, ep)
    return [ep for ep in found.values() if ep.name not in disabled]


def _instrumentor(ep: metadata.EntryPoint) -> Any:
    """The entry point's instrumentor, or None when the library it instruments is not
    installed (or not a supported version)."""
    from opentelemetry.instrumentation.dependencies import get_dist_dependency_conflicts

    if ep.dist is not None and get_dist_dependency_conflicts(ep.dist) is not None:
        return None
    return ep.load()()


def _libraries(instrumentor: Any) -> set[str]:
    """The distributions an instrumentor instruments, by their normalized names."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    out: set[str] = set()
    for dependency in instrumentor.instrumentation_dependencies():
        try:
            out.add(canonicalize_name(Requirement(str(dependency)).name))
        except InvalidRequirement:
            out.add(canonicalize_name((str(dependency).split() or [""])[0]))
    return out


def _warn_if_untraced() -> None:
    """The openai SDK emits no spans of its own: with no GenAI instrumentation at all, a loop
    over it is invisible. Said once, with what to install, rather than exporting silence."""
    if "openai" in disabled_names() or importlib.util.find_spec("openai") is None:
        return
    log.warning(
        "no GenAI instrumentation is installed and the openai SDK traces none of "
        "its calls, so an agent loop over it sends loopwatch no spans. Install one and "
        "instrument() switches it on: pip install openinference-instrumentation-openai "
        "(docs/attach.md: Hand-rolled agents). A framework that traces itself needs none."
    )


def _default_content_capture() -> None:
    if not os.environ.get(CAPTURE_CONTENT_VARIABLE, "").strip():
        os.environ[CAPTURE_CONTENT_VARIABLE] = _CAPTURE_ON_SPANS
        log.debug("set %s=%s", CAPTURE_CONTENT_VARIABLE, _CAPTURE_ON_SPANS)


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


def switched_on() -> list[str]:
    """Every name switched on in this process so far, at ``instrument()`` and on import."""
    with _lock:
        return list(_switched)


def instrument_frameworks(provider: Any) -> list[str]:
    """Switch on, one instrumentor per library, what is installed and not yet on: at once for
    what the application has imported, else when it imports it. Returns the names switched on
    now."""
    done: list[str] = []
    pydantic_ai_later = "pydantic_ai" not in sys.modules
    if not pydantic_ai_later:
        done += _pydantic_ai(provider)
    elif _installed("pydantic_ai") and _waits_first("pydantic_ai"):
        when_imported("pydantic_ai", partial(_later, partial(_pydantic_ai, provider)))
    now: list[metadata.EntryPoint] = []
    later: dict[tuple[str, ...], list[metadata.EntryPoint]] = {}
    traceable = False  # an instrumentor waits for its library's import
    for ep in genai_entry_points():
        try:
            modules = _modules(ep)
        except Exception as e:
            log.warning("could not switch on instrumentor %r: %s", ep.value, e)
            continue
        if modules is None or any(m in sys.modules for m in modules):
            now.append(ep)  # (None: what it instruments is known only once it is loaded)
        elif modules:
            traceable = True
            if _waits_first(ep.value):
                later.setdefault(modules, []).append(ep)
    on_already = _switch_on(now, provider, done)
    for modules, eps in later.items():
        # one hook for a library's instrumentors (they decide together), whichever module first
        hook = partial(_later, partial(_entry_points_later, eps, provider))
        for module in modules:
            when_imported(module, hook)
    # (pydantic-ai, imported later, traces itself)
    if not (on_already or done or traceable) and not (
        pydantic_ai_later and _installed("pydantic_ai")
    ):
        _warn_if_untraced()
    # (named "mcp" in OTEL_PYTHON_DISABLED_INSTRUMENTATIONS, as OpenLLMetry's instrumentor is)
    if "mcp" in disabled_names():
        return done
    if "mcp" in sys.modules:
        done += _mcp()
    elif _installed("mcp") and _waits_first("mcp"):
        when_imported("mcp", partial(_later, _mcp))
    return done


def _installed(module: str) -> bool:
    """Whether a top-level module can be imported (found, not imported): no hook otherwise."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _modules(ep: metadata.EntryPoint) -> tuple[str, ...] | None:
    """The modules whose import switches the entry point's instrumentor on (its library's
    version is checked then): none when no library it instruments is installed, None when its
    metadata does not say what it instruments."""
    libraries = instrumented(ep.dist)
    if libraries is None:
        return None
    return tuple(sorted({m for library in libraries for m in modules_of(library)}))


def _waits_first(name: str) -> bool:
    """Whether ``name`` has no hook yet (a second ``instrument()`` adds none)."""
    with _lock:
        if name in _hooked:
            return False
        _hooked.add(name)
        return True


def _later(switch: Callable[[], list[str]]) -> None:
    """A hook: the application imported what ``switch`` switches on."""
    done = switch()
    if done:
        log.info("switched on GenAI instrumentation: %s", ", ".join(done))


def _entry_points_later(eps: list[metadata.EntryPoint], provider: Any) -> list[str]:
    """The instrumentors of one library, taken once, whichever of its modules came first."""
    with _lock:
        taken, eps[:] = list(eps), []
    done: list[str] = []
    _switch_on(taken, provider, done)
    return done


def _pydantic_ai(provider: Any) -> list[str]:
    try:
        if _instrument_pydantic_ai(provider):
            _record("pydantic_ai")
            return ["pydantic_ai"]
    except Exception as e:
        log.warning("could not switch on pydantic-ai's instrumentation: %s", e)
    return []


def _mcp() -> list[str]:
    try:
        if instrument_mcp():
            _record("mcp")
            return ["mcp"]
    except Exception as e:
        log.warning("could not trace MCP tool calls: %s", e)
    return []


def _record(name: str) -> None:
    with _lock:
        _switched.append(name)


def _switch_on(eps: list[metadata.EntryPoint], provider: Any, done: list[str]) -> bool:
    """Switch on the first of ``eps`` (in order of preference) for each library none has yet,
    appending the names switched on to ``done``; whether one of them was on already."""
    candidates: list[tuple[metadata.EntryPoint, Any, set[str]]] = []
    for ep in eps:
        try:
            instrumentor = _instrumentor(ep)
            if instrumentor is not None:
                candidates.append((ep, instrumentor, _libraries(instrumentor)))
        except Exception as e:
            log.warning("could not switch on instrumentor %r: %s", ep.value, e)
    # library -> the instrumentor that has it; what is on already keeps it
    owner = {
        library: ep.value
        for ep, instrumentor, libraries in candidates
        if instrumentor.is_instrumented_by_opentelemetry
        for library in libraries
    }
    on_already = bool(owner)
    for ep, instrumentor, libraries in candidates:
        if instrumentor.is_instrumented_by_opentelemetry:
            continue  # opentelemetry-instrument, the application or an earlier call did it
        taken = sorted(library for library in libraries if library in owner)
        if taken:
            log.debug(
                "not switching on %s: %s already instrumented by %s",
                ep.value,
                ", ".join(taken),
                owner[taken[0]],
            )
            continue
        try:
            if _is_otel_genai(ep):
                _default_content_capture()
            instrumentor.instrument(tracer_provider=provider)
        except Exception as e:
            log.warning("could not switch on instrumentor %r: %s", ep.value, e)
            continue
        if not instrumentor.is_instrumented_by_opentelemetry:
            continue  # it declined (a dependency conflict, logged by the instrumentor)
        owner.update(dict.fromkeys(libraries, ep.value))
        log.debug("switched on %s for %s", ep.value, ", ".join(sorted(libraries)))
        done.append(str(ep.name))
        _record(str(ep.name))
    return on_already
