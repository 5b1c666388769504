"""A SQLite file shared by the processes of one host: claims in a write transaction, WAL mode."""

from __future__ import annotations

import sqlite3

from loopwatch.guards.stores import outcome_json
from loopwatch.guards.stores.base import Claim, Outcome
from loopwatch.guards.stores.sqlite_file import SqliteFile

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


class SqliteStore(SqliteFile):
    """Keys in one SQLite file; at most ``bound`` rows after each sweep (oldest dropped)."""

    SCHEMA = _SCHEMA
    COUNTED_TABLE = "loopwatch_guard_keys"

    def claim(self, key: str, token: str, lease_seconds: float, window_seconds: float) -> Claim:
        # IMMEDIATE: the write lock is taken before reading, so no two processes claim one key
        with self._transaction() as (conn, now):
            inserted = conn.execute(
                "INSERT INTO loopwatch_guard_keys (key, token, first_at, lease_until, expires_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
                (key, token, now, now + lease_seconds, now + window_seconds),
            ).rowcount
            if inserted == 1:
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
                return Claim("claimed", token, now)
            (duplicates,) = conn.execute(
                "UPDATE loopwatch_guard_keys SET duplicates = duplicates + 1 WHERE key = ?"
                " RETURNING duplicates",
                (key,),
            ).fetchone()
        if outcome is None:
            return Claim("running", held_token, first_at, duplicates)
        return Claim("done", held_token, first_at, duplicates, outcome_json.decode(outcome))

    def _sweep(self, conn: sqlite3.Connection, now: float) -> None:
        conn.execute("DELETE FROM loopwatch_guard_keys WHERE expires_at <= ?", (now,))
        over = conn.execute(
            "DELETE FROM loopwatch_guard_keys WHERE key IN (SELECT key FROM loopwatch_guard_keys"
            " ORDER BY first_at DESC LIMIT -1 OFFSET ?)",
            (self.bound - 1,),  # room for the claim about to be made
        ).rowcount
        self._evicted += max(over, 0)

    def finish(self, key: str, token: str, outcome: Outcome) -> None:
        text = outcome_json.encode(outcome)
        with self._locked() as conn:
            conn.execute(
                "UPDATE loopwatch_guard_keys SET outcome = ? WHERE key = ? AND token = ?",
                (text, key, token),
            )
