"""Settings: ``loopwatch.toml`` first, then ``LOOPWATCH_*`` (and the ``OTEL_*`` that already
say the same thing) from the environment."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

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
class Config:
    loop_threshold: int = 3
    no_rows_threshold: int = 3
    # None: each tool's no-rows threshold
    same_result_threshold: int | None = None
    # consecutive failures of one tool with one error class, over more than one key
    # (docs: why 5)
    failing_threshold: int = 5
    tools: Mapping[str, ToolDeclaration] = field(default_factory=dict)
    # from x-loopwatch on tool definitions; merged between the file and the decorator
    schema_tools: Mapping[str, ToolDeclaration] = field(default_factory=dict)

    label_limit: int = 200
    # series per metric family: the exposition's bound (LoopwatchMetrics.exposition_bound_bytes)
    series_limit: int = 500
    label_chars: int = 64  # per label value: OpenAI's own limit on a function name
    max_open_turns: int = 10_000
    max_spans_per_turn: int = 10_000
    # estimated bytes of spans held across all open traces (core.assembler: RECORD_BYTES)
    buffer_bytes: int = 128 * 1024 * 1024
    idle_timeout_seconds: float = 300.0
    queue_spans: int = 100_000

    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9464

    grpc_address: str = "127.0.0.1:4317"
    http_address: str = "127.0.0.1:4318"
    grace_seconds: float = 5.0
    max_request_bytes: int = 16 * 1024 * 1024
    # OTLP/HTTP front end (docs/service.md, "Limits")
    max_connections: int = 2048
    max_header_bytes: int = 32 * 1024
    header_timeout_seconds: float = 10.0
    body_timeout_seconds: float = 30.0

    # the guards' shared store (docs/guards.md, "Several workers and hosts")
    guards_store: str = "memory"
    guards_lease_seconds: float = 300.0
    guards_on_store_error: str = "allow"

    def declaration(self, tool: str) -> ToolDeclaration | None:
        """The merged declaration of one tool (file < x-loopwatch < decorator)."""
        declared = self.tools.get(tool)
        schema, decorated = self.schema_tools.get(tool), REGISTRY.by_tool.get(tool)
        if schema is None and decorated is None:  # the common case: nothing to merge
            return declared
        return merge(merge(declared, schema), decorated)

    def loop_threshold_for(self, decl: ToolDeclaration | None) -> int:
        if decl is not None and decl.loop_threshold is not None:
            return decl.loop_threshold
        return self.loop_threshold

    def no_rows_threshold_for(self, decl: ToolDeclaration | None) -> int:
        if decl is not None and decl.no_rows_threshold is not None:
            return decl.no_rows_threshold
        return self.no_rows_threshold

    def same_result_threshold_for(self, decl: ToolDeclaration | None) -> int:
        if decl is not None and decl.same_result_threshold is not None:
            return decl.same_result_threshold
        if self.same_result_threshold is not None:
            return self.same_result_threshold
        return self.no_rows_threshold_for(decl)

    def failing_threshold_for(self, decl: ToolDeclaration | None) -> int:
        if decl is not None and decl.failing_threshold is not None:
            return decl.failing_threshold
        return self.failing_threshold

    def with_tool_definitions(self, definitions: list[Mapping[str, Any]]) -> Config:
        """Add ``x-loopwatch`` declarations from OpenAI/MCP tool definitions."""
        from loopwatch.core.declarations import declarations_from_tool_definitions

        found = declarations_from_tool_definitions(definitions)
        return replace(self, schema_tools={**self.schema_tools, **found})


# (table, key) in loopwatch.toml -> (field, environment variables, kind)
_SETTINGS: dict[tuple[str, str], tuple[str, tuple[str, ...], type]] = {
    ("defaults", "loop_threshold"): ("loop_threshold", ("LOOPWATCH_LOOP_THRESHOLD",), int),
    ("defaults", "no_rows_threshold"): (
        "no_rows_threshold",
        ("LOOPWATCH_NO_ROWS_THRESHOLD",),
        int,
    ),
    ("defaults", "same_result_threshold"): (
        "same_result_threshold",
        ("LOOPWATCH_SAME_RESULT_THRESHOLD",),
        int,
    ),
    ("defaults", "failing_threshold"): (
        "failing_threshold",
        ("LOOPWATCH_FAILING_THRESHOLD",),
        int,
    ),
    ("limits", "label_values"): ("label_limit", ("LOOPWATCH_LABEL_LIMIT",), int),
    ("limits", "series_per_metric"): ("series_limit", ("LOOPWATCH_SERIES_LIMIT",), int),
    ("limits", "label_chars"): ("label_chars", ("LOOPWATCH_LABEL_CHARS",), int),
    ("limits", "open_turns"): ("max_open_turns", ("LOOPWATCH_MAX_OPEN_TURNS",), int),
    ("limits", "spans_per_turn"): ("max_spans_per_turn", ("LOOPWATCH_MAX_SPANS_PER_TURN",), int),
    ("limits", "buffer_bytes"): ("buffer_bytes", ("LOOPWATCH_BUFFER_BYTES",), int),
    ("limits", "idle_timeout_seconds"): (
        "idle_timeout_seconds",
        ("LOOPWATCH_IDLE_TIMEOUT_SECONDS",),
        float,
    ),
    ("limits", "queue_spans"): ("queue_spans", ("LOOPWATCH_QUEUE_SPANS",), int),
    ("metrics", "host"): (
        "metrics_host",
        ("LOOPWATCH_METRICS_HOST", "OTEL_EXPORTER_PROMETHEUS_HOST"),
        str,
    ),
    ("metrics", "port"): (
        "metrics_port",
        ("LOOPWATCH_METRICS_PORT", "OTEL_EXPORTER_PROMETHEUS_PORT"),
        int,
    ),
    ("serve", "grpc"): ("grpc_address", ("LOOPWATCH_GRPC_ADDRESS",), str),
    ("serve", "http"): ("http_address", ("LOOPWATCH_HTTP_ADDRESS",), str),
    ("serve", "grace_seconds"): ("grace_seconds", ("LOOPWATCH_GRACE_SECONDS",), float),
    ("serve", "max_request_bytes"): (
        "max_request_bytes",
        ("LOOPWATCH_MAX_REQUEST_BYTES",),
        int,
    ),
    ("serve", "max_connections"): ("max_connections", ("LOOPWATCH_MAX_CONNECTIONS",), int),
    ("serve", "max_header_bytes"): ("max_header_bytes", ("LOOPWATCH_MAX_HEADER_BYTES",), int),
    ("serve", "header_timeout_seconds"): (
        "header_timeout_seconds",
        ("LOOPWATCH_HEADER_TIMEOUT_SECONDS",),
        float,
    ),
    ("serve", "body_timeout_seconds"): (
        "body_timeout_seconds",
        ("LOOPWATCH_BODY_TIMEOUT_SECONDS",),
        float,
    ),
    ("guards", "store"): ("guards_store", ("LOOPWATCH_GUARDS_STORE",), str),
    ("guards", "lease_seconds"): (
        "guards_lease_seconds",
        ("LOOPWATCH_GUARDS_LEASE_SECONDS",),
        float,
    ),
    ("guards", "on_store_error"): (
        "guards_on_store_error",
        ("LOOPWATCH_GUARDS_ON_STORE_ERROR",),
        str,
    ),
}
_MINIMUM = {
    "loop_threshold": 2,
    "no_rows_threshold": 2,
    "same_result_threshold": 2,
    "failing_threshold": 2,
    "label_limit": 1,
    "series_limit": 1,
    "label_chars": 16,  # room for the hash suffix of a cut value
    "max_open_turns": 1,
    "max_spans_per_turn": 1,
    "buffer_bytes": 1024 * 1024,
    "idle_timeout_seconds": 0.001,
    "queue_spans": 1,
    "metrics_port": 0,
    "grace_seconds": 0.0,
    "max_request_bytes": 1024,
    "max_connections": 1,
    "max_header_bytes": 1024,
    "header_timeout_seconds": 0.001,
    "body_timeout_seconds": 0.001,
    "guards_lease_seconds": 0.001,
}
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


def _coerce(where: str, value: Any, kind: type) -> Any:
    if kind is str:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where}: expected a non-empty string, got {value!r}")
        return value
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a number, got {value!r}")
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected {kind.__name__}, got {value!r}") from None


def _check(where: str, name: str, value: Any) -> None:
    low = _MINIMUM.get(name)
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
    known_tables = {t for t, _ in _SETTINGS} | {"tools"}
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
            spec = _SETTINGS.get((table, key))
            if spec is None:
                known = sorted(k for t, k in _SETTINGS if t == table)
                raise ConfigError(f"{source}: unknown key {table}.{key}; known: {', '.join(known)}")
            name, _, kind = spec
            where = f"{source}: {table}.{key}"
            values[name] = _coerce(where, value, kind)
            _check(where, name, values[name])
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
    for name, variables, kind in _SETTINGS.values():
        for var in variables:
            if env.get(var):
                changes[name] = _coerce(var, env[var], kind)
                _check(var, name, changes[name])
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
        raise ConfigError(
            f"{file}: no such file (from {'argument' if path else 'LOOPWATCH_CONFIG'})"
        )
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
