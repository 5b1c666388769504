"""The breaker's counts in a SQLite file shared by the processes of one host: each update is one
write transaction (``BEGIN IMMEDIATE``), so a check and its reservation are atomic."""

from __future__ import annotations

import sqlite3

from loopwatch.guards.stores.counts_base import Change, kept_on_overflow, merged
from loopwatch.guards.stores.sqlite_file import SqliteFile

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


class SqliteCounts(SqliteFile):
    """Scopes in one SQLite file; at most ``bound`` after each sweep (oldest dropped)."""

    SCHEMA = _SCHEMA
    COUNTED_TABLE = "loopwatch_breaker_scopes"

    def update(
        self, scope: str, fields: tuple[str, ...], window_seconds: float, change: Change
    ) -> None:
        with self._transaction() as (conn, now):
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
                (self.bound - 1,),  # room for the scope about to be written
            ).fetchall()
        ]
        for s in over:
            conn.execute("DELETE FROM loopwatch_breaker_fields WHERE scope = ?", (s,))
            conn.execute("DELETE FROM loopwatch_breaker_scopes WHERE scope = ?", (s,))
        self._evicted += len(over)
