"""Spans of loopwatch's own: an ``execute_tool`` span around each call of a ``@loopwatch.tool``
function, and ``loopwatch.turn(agent=...)``, the ``invoke_agent`` span of a hand-rolled turn.

Both follow the OpenTelemetry GenAI conventions, so the processor reads them as it reads any
instrumentation's. The tracer is looked up when a span starts (a provider set after decoration
is used). While only the API's no-op or proxy provider is set, no span is made and a call costs
one provider lookup. Nothing here raises into the application: a tracing failure leaves the
call untraced and the application's own exceptions pass through unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import logging
import os
import uuid
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from opentelemetry import context, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from loopwatch.attach.read_fields import no_tracer_provider
from loopwatch.core import declarations
from loopwatch.version import VERSION

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

# Whether GenAI content (tool arguments, results, messages) goes on spans: read here for
# loopwatch's own spans, defaulted by attach.frameworks for the instrumentors it switches on.
CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# Values that keep content off spans: the old boolean form and the util-genai modes that put
# none on spans (EVENT_ONLY writes log events only).
_NO_CONTENT_ON_SPANS = frozenset({"false", "0", "no", "off", "no_content", "event_only"})

_NO_SDK = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
_cached: tuple[object, trace.Tracer] | None = None


def capture_content() -> bool:
    """Whether ``@loopwatch.tool`` spans carry arguments and results: yes unless
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says no content on spans."""
    return os.environ.get(CAPTURE_CONTENT_VARIABLE, "").strip().lower() not in _NO_CONTENT_ON_SPANS


def current_tracer() -> trace.Tracer | None:
    """The global provider's loopwatch tracer; None while no SDK provider is set."""
    global _cached
    try:
        if no_tracer_provider():  # cheaper than get_tracer_provider() while none is set
            return None
        provider = trace.get_tracer_provider()
        if isinstance(provider, _NO_SDK):
            return None
        cached = _cached
        if cached is not None and cached[0] is provider:
            return cached[1]
        tracer = provider.get_tracer("loopwatch", VERSION)
    except Exception as e:
        log.debug("no tracer: %s", e)
        return None
    _cached = (provider, tracer)
    return tracer


def qualified_name(error: BaseException) -> str:
    """The exception's class as the SDK's ``exception.type`` writes it (``ValueError``,
    ``httpx.ReadTimeout``)."""
    cls = type(error)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


class Open:
    """A started span made current; ``close`` ends it and restores the previous context."""

    __slots__ = ("span", "token")

    def __init__(self, span: trace.Span) -> None:
        self.span = span
        self.token = context.attach(trace.set_span_in_context(span))

    def close(self, error: BaseException | None = None) -> None:
        try:
            if error is not None and self.span.is_recording():
                self.span.set_attribute("error.type", qualified_name(error))
                self.span.record_exception(error)
                self.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            self.span.end()
        except Exception as e:
            log.debug("could not end span: %s", e)
        finally:
            try:
                context.detach(self.token)
            except Exception as e:
                log.debug("could not restore the context: %s", e)


def start_span(tracer: trace.Tracer, name: str, attributes: Mapping[str, str]) -> Open | None:
    try:
        return Open(tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes))
    except Exception as e:
        log.debug("could not start span %r: %s", name, e)
        return None


def _json_default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)  # pydantic models: their fields, not a repr
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def as_json(value: Any) -> str | None:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_json_default)
    except Exception:
        return None  # a circular structure, or a value whose str() raises


class _ToolSpec:
    """What every call of one declared function shares."""

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.name = name
        self.span_name = f"execute_tool {name}"
        self.attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
        }
        doc = inspect.getdoc(fn)
        description = doc.strip().splitlines()[0].strip() if doc and doc.strip() else ""
        if description:
            self.attributes["gen_ai.tool.description"] = description
        try:
            self.signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            self.signature = None
        self.context_parameter = declarations.framework_parameter(self.signature)

    def start(
        self, tracer: trace.Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Open | None:
        bound = self._bind(args, kwargs)
        attributes = {**self.attributes, "gen_ai.tool.call.id": self._call_id(bound)}
        call = start_span(tracer, self.span_name, attributes)
        if call is None or bound is None:
            return call
        try:
            if call.span.is_recording() and capture_content():
                arguments = as_json(self._arguments(bound))
                if arguments is not None:
                    call.span.set_attribute("gen_ai.tool.call.arguments", arguments)
        except Exception as e:
            log.debug("could not record the arguments of %r: %s", self.name, e)
        return call

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
        if self.signature is None:
            return None
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError:
            return None  # the call itself will raise, inside the span
        # with the defaults, as frameworks that validate arguments pass them: a direct call and
        # one through a framework record the same arguments
        bound.apply_defaults()
        return dict(bound.arguments)

    def _arguments(self, bound: dict[str, Any]) -> dict[str, Any]:
        """By parameter name, the framework's context left out, ``**kwargs`` spread out as
        the model named them, an empty ``*args`` left out."""
        assert self.signature is not None
        out: dict[str, Any] = {}
        for name, value in bound.items():
            if name == self.context_parameter:
                continue
            kind = self.signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD and isinstance(value, Mapping):
                out.update(value)
            elif kind is not inspect.Parameter.VAR_POSITIONAL or value:
                out[name] = value
        return out

    def _call_id(self, bound: dict[str, Any] | None) -> str:
        # pydantic-ai's RunContext and OpenAI Agents' ToolContext carry the model's call id
        if bound is not None and self.context_parameter is not None:
            given = getattr(bound.get(self.context_parameter), "tool_call_id", None)
            if isinstance(given, str) and given:
                return given
        # a framework's span for this very call, directly around this one
        attributes = getattr(trace.get_current_span(), "attributes", None)
        if isinstance(attributes, Mapping) and attributes.get("gen_ai.tool.name") == self.name:
            given = attributes.get("gen_ai.tool.call.id")
            if isinstance(given, str) and given:
                return given
        return f"call_{uuid.uuid4().hex}"


def _succeed(call: Open, result: Any) -> None:
    try:
        if call.span.is_recording() and capture_content():
            text = result if isinstance(result, str) else as_json(result)
            if text is not None:
                call.span.set_attribute("gen_ai.tool.call.result", text)
    except Exception as e:
        log.debug("could not record a tool result: %s", e)
    call.close()


def _start_tool(spec: _ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Open | None:
    tracer = current_tracer()
    if tracer is None:
        return None
    try:
        return spec.start(tracer, args, kwargs)
    except Exception as e:
        log.debug("could not trace a call of %r: %s", spec.name, e)
        return None


def traced_tool(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` wrapped so each call is an ``execute_tool {name}`` span (when an SDK provider is
    set); generator functions are returned as they are."""
    try:
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            return fn  # a span around the call would end before the first item
        spec = _ToolSpec(fn, name)
        is_async = inspect.iscoroutinefunction(fn)
    except Exception as e:
        log.debug("%r is declared but will not be traced: %s", name, e)
        return fn

    if is_async:

        @functools.wraps(fn)
        async def traced_async(*args: Any, **kwargs: Any) -> Any:
            call = _start_tool(spec, args, kwargs)
            if call is None:
                return await fn(*args, **kwargs)
            try:
                result = await fn(*args, **kwargs)
            except BaseException as e:
                call.close(e)
                raise
            _succeed(call, result)
            return result

        return traced_async

    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        call = _start_tool(spec, args, kwargs)
        if call is None:
            return fn(*args, **kwargs)
        try:
            result = fn(*args, **kwargs)
        except BaseException as e:
            call.close(e)
            raise
        _succeed(call, result)
        return result

    return traced


class Turn:
    """``with``, ``async with`` or decorator: one ``invoke_agent {agent}`` span per use.

    As a decorator each call gets a span of its own; one object used with ``with`` is for one
    thread or task at a time (``loopwatch.turn(...)`` where the turn starts makes a new one).
    """

    __slots__ = ("_agent", "_open")

    def __init__(self, agent: str | None) -> None:
        self._agent = agent
        self._open: list[Open | None] = []  # nested uses of one object close in order

    def _enter(self) -> None:
        attributes = {"gen_ai.operation.name": "invoke_agent"}
        if self._agent:
            attributes["gen_ai.agent.name"] = self._agent
        name = f"invoke_agent {self._agent}" if self._agent else "invoke_agent"
        tracer = current_tracer()
        self._open.append(None if tracer is None else start_span(tracer, name, attributes))

    def _exit(self, error: BaseException | None) -> None:
        call = self._open.pop() if self._open else None
        if call is not None:
            call.close(error)

    def __enter__(self) -> Turn:
        self._enter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._exit(exc)

    async def __aenter__(self) -> Turn:
        return self.__enter__()

    async def __aexit__(self, *exc_info: Any) -> None:
        self.__exit__(*exc_info)  # as the sync exit: nothing here awaits

    def __call__(self, fn: F) -> F:
        agent = self._agent
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def turn_async(*args: Any, **kwargs: Any) -> Any:
                with Turn(agent):
                    return await fn(*args, **kwargs)

            return turn_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def turn_sync(*args: Any, **kwargs: Any) -> Any:
            with Turn(agent):
                return fn(*args, **kwargs)

        return turn_sync  # type: ignore[return-value]


def turn(agent: str | None = None) -> Turn:
    """Mark one turn of a hand-rolled agent: ``with loopwatch.turn(agent="support"):``,
    ``async with``, or ``@loopwatch.turn(agent="support")`` on a sync or async function.

    Opens an ``invoke_agent {agent}`` span (``gen_ai.operation.name="invoke_agent"``,
    ``gen_ai.agent.name``); every tool span and model call made inside it belongs to that turn.
    An exception inside marks the span ERROR and propagates unchanged. Without an SDK tracer
    provider it does nothing.
    """
    return Turn(agent)


declarations.trace_calls_with(traced_tool)
