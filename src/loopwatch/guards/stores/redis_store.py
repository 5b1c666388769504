"""Redis shared by several hosts (redis-py): claim and check in one Lua script, the server's
clock for leases, key TTLs for the window."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from loopwatch.guards.stores import outcome_json
from loopwatch.guards.stores.base import Claim, Outcome, StoreError

KEY_PREFIX = "loopwatch:guard:"
# a store that does not answer within this is an error (the policy decides), not a stall
SOCKET_TIMEOUT_SECONDS = 1.0

# KEYS[1]: the key; ARGV: token, lease ms, window ms. Returns state, token, first_at ms,
# duplicates, outcome ("" when none). TIME is the server's: one clock for every host.
_CLAIM = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'token', 'first_at', 'lease_until', 'outcome')
if h[1] == false or (h[4] == false and tonumber(h[3]) <= now) then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'token', ARGV[1], 'first_at', now,
             'lease_until', now + tonumber(ARGV[2]), 'duplicates', 0)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {'claimed', ARGV[1], tostring(now), 0, ''}
end
local n = redis.call('HINCRBY', KEYS[1], 'duplicates', 1)
if h[4] == false then
  return {'running', h[1], h[2], n, ''}
end
return {'done', h[1], h[2], n, h[4]}
"""
# KEYS[1]: the key; ARGV: token, outcome JSON. Only the claim's own worker writes its outcome.
_FINISH = """
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'outcome', ARGV[2])
  return 1
end
return 0
"""


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def connect(url: str) -> tuple[Any, tuple[type[BaseException], ...]]:
    """A redis-py client for ``url`` (no connection made yet) and the errors it raises."""
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError:
        raise ImportError(
            "a redis:// guard store needs redis-py: pip install 'loopwatch[guards-redis]'"
        ) from None
    # one retry on a fresh connection: a pooled one may predate a server restart
    client = redis.Redis.from_url(
        url,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), 1),
    )
    return client, (redis.RedisError, OSError)


class RedisStore:
    """Keys in Redis; each expires with its window (TTL), so the store bounds itself."""

    def __init__(self, url: str) -> None:
        self.url = _without_password(url)
        self._client, self._errors = connect(url)
        self._claim = self._client.register_script(_CLAIM)
        self._finish = self._client.register_script(_FINISH)

    def claim(self, key: str, token: str, lease_seconds: float, window_seconds: float) -> Claim:
        lease_ms, window_ms = max(1, int(lease_seconds * 1000)), max(1, int(window_seconds * 1000))
        try:
            raw = self._claim(keys=[KEY_PREFIX + key], args=[token, lease_ms, window_ms])
        except self._errors as e:
            raise StoreError(f"{self.url}: {type(e).__name__}: {e}") from None
        if not isinstance(raw, list) or len(raw) != 5:
            raise StoreError(f"{self.url}: unexpected answer to a claim: {raw!r:.80}")
        state, held, first_ms, duplicates, outcome = (_text(v) for v in raw)
        first_at = int(first_ms) / 1000
        if state == "claimed":
            return Claim("claimed", held, first_at)
        if state == "running":
            return Claim("running", held, first_at, int(duplicates))
        return Claim("done", held, first_at, int(duplicates), outcome_json.decode(outcome))

    def finish(self, key: str, token: str, outcome: Outcome) -> None:
        text = outcome_json.encode(outcome)
        try:
            self._finish(keys=[KEY_PREFIX + key], args=[token, text])
        except self._errors as e:
            raise StoreError(f"{self.url}: {type(e).__name__}: {e}") from None

    def __len__(self) -> int:
        try:
            return sum(1 for _ in self._client.scan_iter(match=KEY_PREFIX + "*", count=1000))
        except self._errors as e:
            raise StoreError(f"{self.url}: {type(e).__name__}: {e}") from None

    @property
    def evicted(self) -> int:
        return 0  # keys leave by their TTL; an evicting maxmemory policy is the server's

    def close(self) -> None:
        self._client.close()
