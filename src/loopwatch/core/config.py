"""Settings: ``loopwatch.toml`` first, then ``LOOPWATCH_*`` (and the ``OTEL_*`` that already
say the same thing) from the environment."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from loopwatch.core.declarations import (
    REGISTRY,
    DeclarationError,
    ToolDeclaration,
    declaration_from_mapping,
    merge,
)


class ConfigError(ValueError):
    """A setting that cannot be used; the message says which file, key or variable."""


@dataclass(frozen=True)
class Setting:
    """One row of the settings table: where a setting is read from, its type, default, minimum
    and meaning. docs/configuration.md (its example and its tables) is generated from
    these rows (``python -m docs_gen.settings``)."""

    name: str  # the Config field
    table: str  # [table] in loopwatch.toml
    key: str
    variables: tuple[str, ...]  # the first one set wins
    kind: type
    default: object
    minimum: float | None
    doc: str
    # an optional setting (default None): the setting whose value applies while it is unset
    unset: str = ""


_T = TypeVar("_T")


def _setting(
    default: _T,
    at: str,
    variables: str | tuple[str, ...],
    doc: str,
    minimum: float | None = None,
    unset: str = "",
) -> _T:
    """A Config field that is also a row of the settings table (``at`` is ``table.key``)."""
    table, key = at.split(".")
    names = (variables,) if isinstance(variables, str) else variables
    row = {"table": table, "key": key, "variables": names, "minimum": minimum, "doc": doc}
    return field(default=default, metadata={"setting": {**row, "unset": unset}})


@dataclass(frozen=True)
class Config:
    """Every setting, at its default unless given; checked when made (:class:`ConfigError`).
    ``load_config()`` reads one from ``loopwatch.toml`` and the ``LOOPWATCH_*`` variables; the
    tools' declarations are in ``tools`` (``[tools.NAME]`` tables).

    >>> Config(loop_threshold=4).loop_threshold
    4
    """

    loop_threshold: int = _setting(
        3,
        "defaults.loop_threshold",
        "LOOPWATCH_LOOP_THRESHOLD",
        "attempts of one key that count as a loop (a breaker cap of 2)",
        minimum=2,
    )
    no_rows_threshold: int = _setting(
        3,
        "defaults.no_rows_threshold",
        "LOOPWATCH_NO_ROWS_THRESHOLD",
        "consecutive empty results of one tool that count as a loop",
        minimum=2,
    )
    same_result_threshold: int | None = _setting(
        None,
        "defaults.same_result_threshold",
        "LOOPWATCH_SAME_RESULT_THRESHOLD",
        "consecutive calls of one tool that got the same data",
        minimum=2,
        unset="no_rows_threshold",  # each tool's no-rows threshold
    )
    failing_threshold: int = _setting(
        5,
        "defaults.failing_threshold",
        "LOOPWATCH_FAILING_THRESHOLD",
        "consecutive failures of one tool with one error class, over several keys",
        minimum=2,
    )
    tools: Mapping[str, ToolDeclaration] = field(default_factory=dict)
    # from x-loopwatch on tool definitions; merged between the file and the decorator
    schema_tools: Mapping[str, ToolDeclaration] = field(default_factory=dict)

    label_limit: int = _setting(
        200,
        "limits.label_values",
        "LOOPWATCH_LABEL_LIMIT",
        'distinct values per label; later ones become "other" (counted)',
        minimum=1,
    )
    # the exposition's bound (LoopwatchMetrics.exposition_bound_bytes)
    series_limit: int = _setting(
        500,
        "limits.series_per_metric",
        "LOOPWATCH_SERIES_LIMIT",
        "series per metric family; later combinations go to its overflow series",
        minimum=1,
    )
    label_chars: int = _setting(
        64,  # OpenAI's own limit on a function name
        "limits.label_chars",
        "LOOPWATCH_LABEL_CHARS",
        "characters per label value; longer ones are cut, with a hash suffix",
        minimum=16,  # room for the hash suffix of a cut value
    )
    max_open_turns: int = _setting(
        10_000,
        "limits.open_turns",
        "LOOPWATCH_MAX_OPEN_TURNS",
        "traces buffered at once; the oldest is finalized and counted past it",
        minimum=1,
    )
    max_spans_per_turn: int = _setting(
        10_000,
        "limits.spans_per_turn",
        "LOOPWATCH_MAX_SPANS_PER_TURN",
        "spans kept per trace; more are dropped and counted",
        minimum=1,
    )
    # estimated as core.buffer_budget's RECORD_BYTES
    buffer_bytes: int = _setting(
        128 * 1024 * 1024,
        "limits.buffer_bytes",
        "LOOPWATCH_BUFFER_BYTES",
        "memory (estimated) for spans held across traces; the oldest evicted past it",
        minimum=1024 * 1024,
    )
    idle_timeout_seconds: float = _setting(
        300.0,
        "limits.idle_timeout_seconds",
        "LOOPWATCH_IDLE_TIMEOUT_SECONDS",
        "a trace with no new span for this long is finalized (root never ended)",
        minimum=0.001,
    )
    queue_spans: int = _setting(
        100_000,
        "limits.queue_spans",
        "LOOPWATCH_QUEUE_SPANS",
        "spans waiting for the worker; more are dropped and counted",
        minimum=1,
    )

    metrics_host: str = _setting(
        "127.0.0.1",
        "metrics.host",
        ("LOOPWATCH_METRICS_HOST", "OTEL_EXPORTER_PROMETHEUS_HOST"),
        "the address /metrics listens on",
    )
    metrics_port: int = _setting(
        9464,
        "metrics.port",
        ("LOOPWATCH_METRICS_PORT", "OTEL_EXPORTER_PROMETHEUS_PORT"),
        "the port of /metrics (at most 65535; 0: any free port)",
        minimum=0,
    )

    # the loop spans (docs/metrics.md, "Loop spans")
    loop_spans_per_turn: int = _setting(
        16,
        "loop_spans.per_turn",
        "LOOPWATCH_LOOP_SPANS_PER_TURN",
        "a `loopwatch.loop {tool}` span per loop in the turn's trace, at most this many a turn "
        "(more are counted); 0: none",
        minimum=0,
    )
    loop_events: int = _setting(
        0,
        "loop_spans.events",
        "LOOPWATCH_LOOP_EVENTS",
        "1: also a `loopwatch.loop` log event per loop span (the OpenTelemetry Logs API, still "
        "experimental in the pinned SDK); 0: none",
        minimum=0,
    )

    grpc_address: str = _setting(
        "127.0.0.1:4317",
        "serve.grpc",
        "LOOPWATCH_GRPC_ADDRESS",
        "`loopwatch serve`: where OTLP/gRPC is taken (host:port)",
    )
    http_address: str = _setting(
        "127.0.0.1:4318",
        "serve.http",
        "LOOPWATCH_HTTP_ADDRESS",
        "`loopwatch serve`: where OTLP/HTTP is taken (host:port)",
    )
    grace_seconds: float = _setting(
        5.0,
        "serve.grace_seconds",
        "LOOPWATCH_GRACE_SECONDS",
        "`loopwatch serve`: a trace is held this long after its root span arrives; in process "
        "and in serve, a lone tool span waits this long for the model call that asked for it",
        minimum=0.0,
    )
    max_request_bytes: int = _setting(
        16 * 1024 * 1024,
        "serve.max_request_bytes",
        "LOOPWATCH_MAX_REQUEST_BYTES",
        "`loopwatch serve`: the largest OTLP request body taken",
        minimum=1024,
    )
    # OTLP/HTTP front end (docs/service.md, "Limits")
    max_connections: int = _setting(
        2048,
        "serve.max_connections",
        "LOOPWATCH_MAX_CONNECTIONS",
        "`loopwatch serve`: open OTLP/HTTP connections; more are refused (503)",
        minimum=1,
    )
    max_header_bytes: int = _setting(
        32 * 1024,
        "serve.max_header_bytes",
        "LOOPWATCH_MAX_HEADER_BYTES",
        "`loopwatch serve`: the largest request header (HTTP) or metadata (gRPC)",
        minimum=1024,
    )
    header_timeout_seconds: float = _setting(
        10.0,
        "serve.header_timeout_seconds",
        "LOOPWATCH_HEADER_TIMEOUT_SECONDS",
        "`loopwatch serve`: time to send a request's headers; also a keep-alive's idle time",
        minimum=0.001,
    )
    body_timeout_seconds: float = _setting(
        30.0,
        "serve.body_timeout_seconds",
        "LOOPWATCH_BODY_TIMEOUT_SECONDS",
        "`loopwatch serve`: time to send a request's body (408 past it)",
        minimum=0.001,
    )
    export_otlp: str = _setting(
        "",
        "serve.export_otlp",
        "LOOPWATCH_EXPORT_OTLP",
        "`loopwatch serve` and `replay`: the OTLP/gRPC endpoint the loop spans are sent to "
        "(http://host:4317); empty: none",
    )

    # the guards' shared store (docs/guards.md, "Several workers and hosts")
    guards_store: str = _setting(
        "memory",
        "guards.store",
        "LOOPWATCH_GUARDS_STORE",
        "the idempotency arbiter's keys: memory, sqlite:///file.db, redis://host:port/db",
    )
    guards_lease_seconds: float = _setting(
        300.0,
        "guards.lease_seconds",
        "LOOPWATCH_GUARDS_LEASE_SECONDS",
        "a claim not finished within this (its worker died) is free again",
        minimum=0.001,
    )
    guards_on_store_error: str = _setting(
        "allow",
        "guards.on_store_error",
        "LOOPWATCH_GUARDS_ON_STORE_ERROR",
        'or "deny": a call the store cannot check runs, or gets a terminal answer',
    )

    def __post_init__(self) -> None:
        """Each setting checked as :func:`load_config` checks it, with the same errors:
        ``Config(queue_spans=0)`` raises :class:`ConfigError` ("must be at least 1")."""
        for setting in SETTINGS:
            value = getattr(self, setting.name)
            if value is None and setting.default is None:
                continue
            where = f"Config({setting.name}=...)"
            empty_ok = setting.default == ""
            _check(where, setting, _coerce(where, value, setting.kind, empty_ok))

    def declaration(self, tool: str) -> ToolDeclaration | None:
        """The merged declaration of one tool (file < x-loopwatch < decorator)."""
        declared = self.tools.get(tool)
        schema, decorated = self.schema_tools.get(tool), REGISTRY.by_tool.get(tool)
        if schema is None and decorated is None:  # the common case: nothing to merge
            return declared
        return merge(merge(declared, schema), decorated)

    def loop_threshold_for(self, decl: ToolDeclaration | None) -> int:
        """The attempts of one key that make a loop for a tool:
        its declaration's value, else this config's."""
        if decl is not None and decl.loop_threshold is not None:
            return decl.loop_threshold
        return self.loop_threshold

    def no_rows_threshold_for(self, decl: ToolDeclaration | None) -> int:
        """The empty results in a row that make a no-rows loop for a tool:
        its declaration's value, else this config's."""
        if decl is not None and decl.no_rows_threshold is not None:
            return decl.no_rows_threshold
        return self.no_rows_threshold

    def same_result_threshold_for(self, decl: ToolDeclaration | None) -> int:
        """The calls in a row with the same data that make a same-result loop for a tool: its
        declaration's value, else this config's, else the no-rows threshold."""
        if decl is not None and decl.same_result_threshold is not None:
            return decl.same_result_threshold
        if self.same_result_threshold is not None:
            return self.same_result_threshold
        return self.no_rows_threshold_for(decl)

    def failing_threshold_for(self, decl: ToolDeclaration | None) -> int:
        """The failures of one class in a row that make a failing loop for a tool:
        its declaration's value, else this config's."""
        if decl is not None and decl.failing_threshold is not None:
            return decl.failing_threshold
        return self.failing_threshold

    def with_tool_definitions(self, definitions: list[Mapping[str, Any]]) -> Config:
        """Add ``x-loopwatch`` declarations from OpenAI/MCP tool definitions."""
        from loopwatch.core.declarations import declarations_from_tool_definitions

        found = declarations_from_tool_definitions(definitions)
        return replace(self, schema_tools={**self.schema_tools, **found})


_KINDS: dict[str, type] = {"int": int, "int | None": int, "float": float, "str": str}


def _settings() -> tuple[Setting, ...]:
    rows = []
    for f in fields(Config):
        if "setting" in f.metadata:
            row = f.metadata["setting"]
            rows.append(Setting(name=f.name, kind=_KINDS[str(f.type)], default=f.default, **row))
    return tuple(rows)


# The settings table, in the order of the docs
SETTINGS = _settings()
_BY_KEY = {(s.table, s.key): s for s in SETTINGS}


@dataclass(frozen=True)
class Variable:
    """An environment variable read outside the settings table, and what it does."""

    name: str
    doc: str


# Every other environment variable loopwatch reads (tests/test_settings_doc.py checks the code)
VARIABLES = (
    Variable(
        "LOOPWATCH_CONFIG",
        "the settings file; else `./loopwatch.toml` where present, else the defaults",
    ),
    Variable(
        "LOOPWATCH_INSTRUMENT_FRAMEWORKS",
        "`0`, `false`, `no` or `off`: `instrument()` leaves the frameworks' instrumentors off",
    ),
    Variable(
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS",
        "names `instrument()` leaves alone (as `opentelemetry-instrument` reads it)",
    ),
    Variable(
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "content capture; `instrument()` sets `SPAN_ONLY` where unset, and `@loopwatch.tool` "
        "spans carry no arguments or results when it says no content on spans",
    ),
    Variable(
        "OTEL_PYTHON_TRACER_PROVIDER",
        "read once at import: whether the tracer provider comes from the environment",
    ),
    Variable(
        "PROMETHEUS_DISABLE_CREATED_SERIES",
        "prometheus_client's switch for `_created` lines, read where the client has no flag",
    ),
    Variable(
        "LOOPWATCH_PURE_PYTHON",
        "`1`: a compiled installation runs its pure-Python sources (the whole process)",
    ),
    Variable(
        "LOOPWATCH_COMPILE",
        "at install (`pip install`): `1` builds the compiled build (mypyc)",
    ),
)
ON_STORE_ERROR = ("allow", "deny")
_STORE_PREFIXES = ("sqlite:///", "redis://", "rediss://", "unix://")


def check_store_url(url: str) -> str:
    """``url`` if it names a guard store, else a ValueError saying what does."""
    if url == "memory" or (url.startswith(_STORE_PREFIXES) and url.split("://", 1)[1].strip("/")):
        return url
    raise ValueError(
        f"not a guard store: {url!r}; expected memory, sqlite:///path/to/file.db or "
        "redis://host:port/db"
    )


def _coerce(where: str, value: Any, kind: type, may_be_empty: bool = False) -> Any:
    """``value`` as ``kind``; a string empty only where the default is (``may_be_empty``)."""
    if kind is str:
        if not isinstance(value, str) or not (value or may_be_empty):
            raise ConfigError(f"{where}: expected a non-empty string, got {value!r}")
        return value
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a number, got {value!r}")
    if kind is int and isinstance(value, float):  # int() would truncate 3.5 to 3 unsaid
        raise ConfigError(f"{where}: expected int, got {value!r}")
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected {kind.__name__}, got {value!r}") from None


def _check(where: str, setting: Setting, value: Any) -> None:
    name, low = setting.name, setting.minimum
    if low is not None and value < low:
        raise ConfigError(f"{where}: must be at least {low}, got {value!r}")
    if name == "metrics_port" and value > 65535:
        raise ConfigError(f"{where}: not a port number: {value!r}")
    if name == "guards_on_store_error" and value not in ON_STORE_ERROR:
        raise ConfigError(f"{where}: expected one of {', '.join(ON_STORE_ERROR)}, got {value!r}")
    if name == "guards_store":
        try:
            check_store_url(value)
        except ValueError as e:
            raise ConfigError(f"{where}: {e}") from None


def config_from_mapping(data: Mapping[str, Any], source: str = "loopwatch.toml") -> Config:
    """Build a Config from the parsed TOML document (unknown keys are errors: typos must show)."""
    values: dict[str, Any] = {}
    known_tables = {t for t, _ in _BY_KEY} | {"tools"}
    for table, body in data.items():
        if table not in known_tables:
            raise ConfigError(
                f"{source}: unknown table [{table}]; known: {', '.join(sorted(known_tables))}"
            )
        if not isinstance(body, Mapping):
            raise ConfigError(f"{source}: [{table}] must be a table")
        if table == "tools":
            continue
        for key, value in body.items():
            setting = _BY_KEY.get((table, key))
            if setting is None:
                known = sorted(k for t, k in _BY_KEY if t == table)
                raise ConfigError(f"{source}: unknown key {table}.{key}; known: {', '.join(known)}")
            where = f"{source}: {table}.{key}"
            values[setting.name] = _coerce(where, value, setting.kind, setting.default == "")
            _check(where, setting, values[setting.name])
    tools: dict[str, ToolDeclaration] = {}
    for name, raw in dict(data.get("tools", {})).items():
        try:
            tools[name] = declaration_from_mapping(name, raw)
        except DeclarationError as e:
            raise ConfigError(f"{source}: [tools.{name}]: {e}") from None
    return Config(tools=tools, **values)


def apply_environment(config: Config, environ: Mapping[str, str] | None = None) -> Config:
    env = os.environ if environ is None else environ
    changes: dict[str, Any] = {}
    for setting in SETTINGS:
        for var in setting.variables:
            if env.get(var):
                changes[setting.name] = _coerce(var, env[var], setting.kind, setting.default == "")
                _check(var, setting, changes[setting.name])
                break
    return replace(config, **changes) if changes else config


def config_file(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The file :func:`load_config` reads: ``path``, else ``$LOOPWATCH_CONFIG``, else
    ``./loopwatch.toml`` if present; None when there is none (the defaults apply)."""
    env = os.environ if environ is None else environ
    explicit = path if path is not None else env.get("LOOPWATCH_CONFIG") or None
    if explicit is None:
        default = Path("loopwatch.toml")
        return default if default.is_file() else None
    file = Path(explicit)
    if not file.is_file():
        what = "is a directory, not a file" if file.is_dir() else "no such file"
        raise ConfigError(f"{file}: {what} (from {'argument' if path else 'LOOPWATCH_CONFIG'})")
    return file


def load_config(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Config:
    """Read ``path`` (else ``$LOOPWATCH_CONFIG``, else ``./loopwatch.toml`` if present), then
    apply ``LOOPWATCH_*`` variables. Raises :class:`ConfigError` with a clear message."""
    env = os.environ if environ is None else environ
    file = config_file(path, env)
    config = Config()
    if file is not None:
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{file}: not valid TOML: {e}") from None
        config = config_from_mapping(data, str(file))
    return apply_environment(config, env)
