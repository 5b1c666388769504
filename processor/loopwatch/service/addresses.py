"""``HOST:PORT`` strings as the command line and loopwatch.toml write them."""

from __future__ import annotations

from loopwatch.core.config import ConfigError


class BindError(OSError):
    """An address could not be bound (in use, not local, not permitted)."""


def split_address(address: str, what: str) -> tuple[str, int]:
    """``"127.0.0.1:4318"`` -> ``("127.0.0.1", 4318)``; ``[::1]:4318`` for IPv6."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{what}: expected HOST:PORT, got {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
