"""``HOST:PORT`` strings as the command line and loopwatch.toml write them."""

from __future__ import annotations

import socket

from loopwatch.core.config import ConfigError


class BindError(OSError):
    """An address could not be bound (in use, not local, not permitted)."""


def split_address(address: str, what: str) -> tuple[str, int]:
    """``"127.0.0.1:4318"`` -> ``("127.0.0.1", 4318)``; ``[::1]:4318`` for IPv6."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"{what}: expected HOST:PORT, got {address!r}")
    if int(port) > 65535:
        raise ConfigError(f"{what}: port {int(port)} is out of range (0-65535) in {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def probe(host: str, port: int, what: str) -> None:
    """Raise BindError if ``host:port`` cannot be bound now. grpc reports a failed bind only
    on stderr in its own format; probing first gives the one-line message."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        socket.create_server((host, port), family=family).close()
    except OSError as e:
        address = join_address(host, port)
        raise BindError(f"cannot listen for {what} on {address}: {e.strerror or e}") from None
