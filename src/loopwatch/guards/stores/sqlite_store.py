"""A SQLite file shared by the processes of one host: claims in a write transaction, WAL mode."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from loopwatch.guards.stores import outcome_json
from loopwatch.guards.stores.base import Claim, Outcome, StoreError

# how long a claim waits for another process's write transaction before it is a store error
BUSY_TIMEOUT_MS = 2000
# expired rows are deleted (and the row cap applied) on every this many claims of a process
SWEEP_EVERY = 256

_SCHEMA = """
CREATE TABLE IF NOT EXISTS loopwatch_guard_keys (
    key TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    first_at REAL NOT NULL,
    lease_until REAL NOT NULL,
    expires_at REAL NOT NULL,
    duplicates INTEGER NOT NULL DEFAULT 0,
    outcome TEXT
);
CREATE INDEX IF NOT EXISTS loopwatch_guard_keys_expiry ON loopwatch_guard_keys (expires_at);
"""


def connect(path: str, schema: str) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, ``schema`` applied."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(schema)
    return conn


class SqliteStore:
    """Keys in one SQLite file; at most ``max_keys`` rows after each sweep (oldest dropped)."""

    def __init__(self, path: str, max_keys: int, clock: Callable[[], float]) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"
        self.max_keys = max_keys
        self.clock = clock  # wall-clock seconds: every process of the host must agree on it
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._claims = 0
        self._evicted = 0

    def _connection(self) -> sqlite3.Connection:
        # a forked worker (gunicorn --preload) must not share its parent's connection
        if self._conn is None or self._pid != os.getpid():
            self._conn, self._pid = connect(self.path, _SCHEMA), os.getpid()
        return self._conn

    def claim(self, key: str, token: str, lease_seconds: float, window_seconds: float) -> Claim:
        with self._lock:
            try:
                return self._claim(key, token, lease_seconds, window_seconds)
            except (sqlite3.Error, OSError) as e:
                self._drop_connection()  # the next call opens the file again
                raise StoreError(f"{self.url}: {type(e).__name__}: {e}") from None

    def _claim(self, key: str, token: str, lease_seconds: float, window_seconds: float) -> Claim:
        conn = self._connection()
        now = self.clock()
        # IMMEDIATE: the write lock is taken before reading, so no two processes claim one key
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._claims += 1
            if self._claims % SWEEP_EVERY == 1:
                self._sweep(conn, now)
            inserted = conn.execute(
                "INSERT INTO loopwatch_guard_keys (key, token, first_at, lease_until, expires_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
                (key, token, now, now + lease_seconds, now + window_seconds),
            ).rowcount
            if inserted == 1:
                conn.execute("COMMIT")
                return Claim("claimed", token, now)
            row = conn.execute(
                "SELECT token, first_at, lease_until, expires_at, outcome"
                " FROM loopwatch_guard_keys WHERE key = ?",
                (key,),
            ).fetchone()
            held_token, first_at, lease_until, expires_at, outcome = row
            if expires_at <= now or (outcome is None and lease_until <= now):
                conn.execute(
                    "UPDATE loopwatch_guard_keys SET token = ?, first_at = ?, lease_until = ?,"
                    " expires_at = ?, duplicates = 0, outcome = NULL WHERE key = ?",
                    (token, now, now + lease_seconds, now + window_seconds, key),
                )
                conn.execute("COMMIT")
                return Claim("claimed", token, now)
            (duplicates,) = conn.execute(
                "UPDATE loopwatch_guard_keys SET duplicates = duplicates + 1 WHERE key = ?"
                " RETURNING duplicates",
                (key,),
            ).fetchone()
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if outcome is None:
            return Claim("running", held_token, first_at, duplicates)
        return Claim("done", held_token, first_at, duplicates, outcome_json.decode(outcome))

    def _sweep(self, conn: sqlite3.Connection, now: float) -> None:
        conn.execute("DELETE FROM loopwatch_guard_keys WHERE expires_at <= ?", (now,))
        over = conn.execute(
            "DELETE FROM loopwatch_guard_keys WHERE key IN (SELECT key FROM loopwatch_guard_keys"
            " ORDER BY first_at DESC LIMIT -1 OFFSET ?)",
            (self.max_keys - 1,),  # room for the claim about to be made
        ).rowcount
        self._evicted += max(over, 0)

    def finish(self, key: str, token: str, outcome: Outcome) -> None:
        text = outcome_json.encode(outcome)
        with self._lock:
            try:
                self._connection().execute(
                    "UPDATE loopwatch_guard_keys SET outcome = ? WHERE key = ? AND token = ?",
                    (text, key, token),
                )
            except (sqlite3.Error, OSError) as e:
                self._drop_connection()
                raise StoreError(f"{self.url}: {type(e).__name__}: {e}") from None

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def __len__(self) -> int:
        try:
            with self._lock:
                (n,) = (
                    self._connection()
                    .execute("SELECT count(*) FROM loopwatch_guard_keys")
                    .fetchone()
                )
        except (sqlite3.Error, OSError) as e:
            raise StoreError(f"{self.url}: {type(e).__name__}: {e}") from None
        return int(n)

    @property
    def evicted(self) -> int:
        return self._evicted

    def close(self) -> None:
        with self._lock:
            self._drop_connection()
