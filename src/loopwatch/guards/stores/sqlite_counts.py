"""The breaker's counts in a SQLite file shared by the processes of one host: each update is one
write transaction (``BEGIN IMMEDIATE``), so a check and its reservation are atomic."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable

from loopwatch.guards.stores.base import StoreError
from loopwatch.guards.stores.counts_base import Change, kept_on_overflow, merged
from loopwatch.guards.stores.sqlite_store import SWEEP_EVERY, connect

_SCHEMA = """
CREATE TABLE IF NOT EXISTS loopwatch_breaker_scopes (
    scope TEXT PRIMARY KEY,
    expires_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS loopwatch_breaker_scopes_expiry
    ON loopwatch_breaker_scopes (expires_at);
CREATE TABLE IF NOT EXISTS loopwatch_breaker_fields (
    scope TEXT NOT NULL,
    field TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (scope, field)
) WITHOUT ROWID;
"""


class SqliteCounts:
    """Scopes in one SQLite file; at most ``max_scopes`` after each sweep (oldest dropped)."""

    def __init__(self, path: str, max_scopes: int, clock: Callable[[], float]) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"
        self.max_scopes = max_scopes
        self.clock = clock  # wall-clock seconds: every process of the host must agree on it
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._updates = 0
        self._evicted = 0

    def _connection(self) -> sqlite3.Connection:
        # a forked worker (gunicorn --preload) must not share its parent's connection
        if self._conn is None or self._pid != os.getpid():
            self._conn, self._pid = connect(self.path, _SCHEMA), os.getpid()
        return self._conn

    def update(
        self, scope: str, fields: tuple[str, ...], window_seconds: float, change: Change
    ) -> None:
        with self._lock:
            try:
                self._update(scope, fields, window_seconds, change)
            except (sqlite3.Error, OSError) as e:
                self._drop_connection()  # the next call opens the file again
                raise StoreError(f"{self.url}: {type(e).__name__}: {e}") from None

    def _update(
        self, scope: str, fields: tuple[str, ...], window_seconds: float, change: Change
    ) -> None:
        conn = self._connection()
        now = self.clock()
        conn.execute(
            "BEGIN IMMEDIATE"
        )  # the write lock before reading: no two processes interleave
        try:
            self._updates += 1
            if self._updates % SWEEP_EVERY == 1:
                self._sweep(conn, now)
            row = conn.execute(
                "SELECT expires_at FROM loopwatch_breaker_scopes WHERE scope = ?", (scope,)
            ).fetchone()
            if row is not None and row[0] <= now:  # its window is over: it starts empty
                conn.execute("DELETE FROM loopwatch_breaker_fields WHERE scope = ?", (scope,))
                row = None
            values: dict[str, str] = {}
            if row is not None and fields:
                marks = ",".join("?" * len(fields))
                values = dict(
                    conn.execute(
                        "SELECT field, value FROM loopwatch_breaker_fields"
                        f" WHERE scope = ? AND field IN ({marks})",
                        (scope, *fields),
                    ).fetchall()
                )
            writes = change(values, now)
            if writes:
                self._write(conn, scope, values, writes, now + window_seconds)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _write(
        self,
        conn: sqlite3.Connection,
        scope: str,
        values: dict[str, str],
        writes: dict[str, str | None],
        expires_at: float,
    ) -> None:
        (held,) = conn.execute(
            "SELECT count(*) FROM loopwatch_breaker_fields WHERE scope = ?", (scope,)
        ).fetchone()
        if kept_on_overflow(int(held), values, writes):
            conn.execute("DELETE FROM loopwatch_breaker_fields WHERE scope = ?", (scope,))
            kept: dict[str, str | None] = dict(merged(values, writes))
            writes = kept
            self._evicted += 1
        for f, v in writes.items():
            if v is None:
                conn.execute(
                    "DELETE FROM loopwatch_breaker_fields WHERE scope = ? AND field = ?", (scope, f)
                )
            else:
                conn.execute(
                    "INSERT INTO loopwatch_breaker_fields (scope, field, value) VALUES (?, ?, ?)"
                    " ON CONFLICT (scope, field) DO UPDATE SET value = excluded.value",
                    (scope, f, v),
                )
        conn.execute(
            "INSERT INTO loopwatch_breaker_scopes (scope, expires_at) VALUES (?, ?)"
            " ON CONFLICT (scope) DO UPDATE SET expires_at = excluded.expires_at",
            (scope, expires_at),
        )

    def _sweep(self, conn: sqlite3.Connection, now: float) -> None:
        conn.execute(
            "DELETE FROM loopwatch_breaker_fields WHERE scope IN"
            " (SELECT scope FROM loopwatch_breaker_scopes WHERE expires_at <= ?)",
            (now,),
        )
        conn.execute("DELETE FROM loopwatch_breaker_scopes WHERE expires_at <= ?", (now,))
        over = [
            s
            for (s,) in conn.execute(
                "SELECT scope FROM loopwatch_breaker_scopes ORDER BY expires_at DESC"
                " LIMIT -1 OFFSET ?",
                (self.max_scopes - 1,),  # room for the scope about to be written
            ).fetchall()
        ]
        for s in over:
            conn.execute("DELETE FROM loopwatch_breaker_fields WHERE scope = ?", (s,))
            conn.execute("DELETE FROM loopwatch_breaker_scopes WHERE scope = ?", (s,))
        self._evicted += len(over)

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
                    .execute("SELECT count(*) FROM loopwatch_breaker_scopes")
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
