"""One SQLite file shared by the processes of one host, as the guard stores hold it: a connection
per process, dropped after an error, write transactions that take the lock before reading."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

from loopwatch.guards.stores.base import StoreError

# how long a write waits for another process's write transaction before it is a store error
BUSY_TIMEOUT_MS = 2000
# expired rows are deleted (and the row cap applied) on every this many writes of a process
SWEEP_EVERY = 256


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


@contextlib.contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` (the write lock before reading: no two processes interleave), committed
    when the block ends, rolled back when it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


class SqliteFile:
    """The file and its connection; a store names its schema, the table ``len`` counts, and
    how a sweep deletes expired rows and keeps at most ``bound``."""

    SCHEMA: ClassVar[str]
    COUNTED_TABLE: ClassVar[str]

    def __init__(self, path: str, bound: int, clock: Callable[[], float]) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"
        self.bound = bound
        self.clock = clock  # wall-clock seconds: every process of the host must agree on it
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._writes = 0
        self._evicted = 0

    def _sweep(self, conn: sqlite3.Connection, now: float) -> None:
        raise NotImplementedError

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[tuple[sqlite3.Connection, float]]:
        """The connection and the clock's time, in a write transaction under this process's
        lock (errors as in ``_locked``); every SWEEP_EVERY-th of this process sweeps first."""
        with self._locked() as conn:
            now = self.clock()
            with write_transaction(conn):
                self._writes += 1
                if self._writes % SWEEP_EVERY == 1:
                    self._sweep(conn, now)
                yield conn, now

    def _connection(self) -> sqlite3.Connection:
        # a forked worker (gunicorn --preload) must not share its parent's connection
        if self._conn is None or self._pid != os.getpid():
            self._conn, self._pid = connect(self.path, self.SCHEMA), os.getpid()
        return self._conn

    @contextlib.contextmanager
    def _locked(self) -> Iterator[sqlite3.Connection]:
        """The connection under this process's lock; an error drops it (the next call opens the
        file again) and is raised as a StoreError."""
        with self._lock:
            try:
                yield self._connection()
            except (sqlite3.Error, OSError) as e:
                self._drop_connection()
                raise self._error(e) from None

    def _error(self, e: BaseException) -> StoreError:
        return StoreError(f"{self.url}: {type(e).__name__}: {e}")

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
                    .execute(f"SELECT count(*) FROM {self.COUNTED_TABLE}")
                    .fetchone()
                )
        except (sqlite3.Error, OSError) as e:
            raise self._error(e) from None
        return int(n)

    @property
    def evicted(self) -> int:
        return self._evicted

    def close(self) -> None:
        with self._lock:
            self._drop_connection()
