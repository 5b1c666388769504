"""``loopwatch serve`` as a child process, for the tests and the benchmarks alike.

``ServeProcess`` starts it on loopback and returns only once it is ready: every port bound and
accepting (its ``listening:`` line), ``/readyz`` answering 200 and ``/metrics`` answering. Its log
is read on a thread into memory (a full pipe would block the service), so a caller can wait for a
line, read the whole log after exit, or echo it. Nothing here sleeps to let time pass: each wait
polls the state it needs, within a timeout.

Imported without pytest: benchmarks run as scripts import it too.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

EPHEMERAL = "127.0.0.1:0"
LISTENING = re.compile(r"listening: otlp-grpc=(\S+) otlp-http=(\S+) metrics=(\S+)")
# loopwatch serve's own bound on SIGTERM to exit (loopwatch.service.run.STOP_SECONDS), plus room
STOP_TIMEOUT = 30.0
# log levels that still write the INFO ``listening:`` line naming the bound ports
_SAYS_WHERE = ("DEBUG", "INFO")
_BIND_ATTEMPTS = 3


def free_port() -> int:
    """A loopback port nothing listens on right now (for a server that cannot bind port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_address() -> str:
    return f"127.0.0.1:{free_port()}"


def wait_for(condition: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    """Poll ``condition`` until it is true; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or 'condition'} not met in {timeout:g} s")
        time.sleep(0.02)


def http_get(address: str, path: str, timeout: float = 10.0) -> tuple[int, str]:
    """(status, body) of a GET; OSError when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _die_with_parent() -> None:
    # a frozen service ignores SIGTERM: if the test or benchmark is killed, the kernel kills it
    # too (the signal follows the thread that started it: start services from the main thread)
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class ServeProcess:
    """``loopwatch serve`` on loopback, ready to take spans once the constructor returns.

    ``toml`` is written to a loopwatch.toml of its own and passed with ``--config``; ``args`` are
    more flags. Addresses default to port 0 (read back from the ``listening:`` line); at a log
    level that hides that line, free ports are chosen first (and chosen again when one is taken
    before the service binds it). ``env`` replaces the environment
    (e.g. a PYTHONPATH serving another checkout); ``echo`` copies the log to this stderr.
    """

    def __init__(
        self,
        toml: str | None = None,
        args: tuple[str, ...] = (),
        *,
        grpc: str = EPHEMERAL,
        http: str = EPHEMERAL,
        metrics: str = EPHEMERAL,
        log_level: str = "INFO",
        env: Mapping[str, str] | None = None,
        echo: bool = False,
        timeout: float = 30.0,
    ) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="loopwatch-serve-")
        self.config: Path | None = None
        command = [sys.executable, "-m", "loopwatch.cli", "serve"]
        if toml is not None:
            self.config = Path(self._dir.name) / "loopwatch.toml"
            self.config.write_text(toml)
            command += ["--config", str(self.config)]
        says_where = log_level.upper() in _SAYS_WHERE
        command += ["--log-level", log_level, *args]
        self._echo = echo
        wanted = (grpc, http, metrics)
        # A free port chosen here can be taken before the service binds it (by any socket's
        # ephemeral port): then the start is tried again on other free ports.
        chooses = not says_where and any(a.endswith(":0") for a in wanted)
        attempts = _BIND_ATTEMPTS if chooses else 1
        for attempt in range(1, attempts + 1):
            addresses = (
                wanted
                if says_where
                else tuple(free_address() if a.endswith(":0") else a for a in wanted)
            )
            try:
                self._start(command, addresses, env, says_where, timeout)
                return
            except AssertionError:
                log = self.log()
                chosen = [a for a, w in zip(addresses, wanted, strict=True) if a != w]
                lost = any(
                    re.search(f"cannot listen for .* on {re.escape(a)}", log) for a in chosen
                )
                if attempt == attempts or not lost:
                    self.close()
                    raise
                self._end_attempt()
            except BaseException:
                self.close()
                raise

    def _start(
        self,
        command: list[str],
        addresses: tuple[str, ...],
        env: Mapping[str, str] | None,
        says_where: bool,
        timeout: float,
    ) -> None:
        grpc, http, metrics = addresses
        self.grpc, self.http, self.metrics = grpc, http, metrics
        self._lines: list[str] = []
        self._cursor = 0
        self._changed = threading.Condition()
        self._eof = False
        self.process = subprocess.Popen(
            [
                *command,
                "--grpc-address",
                grpc,
                "--http-address",
                http,
                "--metrics-address",
                metrics,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env) if env is not None else None,
            preexec_fn=_die_with_parent,
        )
        self.pid = self.process.pid
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        if says_where:
            _, line = self._wait_for(LISTENING, 0, timeout)
            match = LISTENING.search(line)
            assert match is not None
            self.grpc, self.http, self.metrics = match.groups()
        self._wait_ready(timeout)

    def _end_attempt(self) -> None:
        """A start that failed, ended, its log read to the end, before the next one."""
        if self.process.poll() is None:
            self.kill()
        self._reader.join(timeout=STOP_TIMEOUT)

    # -- the log ------------------------------------------------------------------------------
    def _read_log(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if self._echo:
                sys.stderr.write(line)
            with self._changed:
                self._lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._eof = True
            self._changed.notify_all()

    def _wait_for(self, pattern: re.Pattern[str], start: int, timeout: float) -> tuple[int, str]:
        """The first line from index ``start`` on that matches, with its index."""
        deadline = time.monotonic() + timeout
        with self._changed:
            i = start
            while True:
                while i < len(self._lines):
                    if pattern.search(self._lines[i]):
                        return i, self._lines[i]
                    i += 1
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    why = "exited" if self._eof else f"no such line in {timeout:.0f} s"
                    raise AssertionError(
                        f"loopwatch serve: {why} waiting for {pattern.pattern!r}; log:\n"
                        + "\n".join(self._lines)
                    )
                self._changed.wait(left)

    def wait_line(self, pattern: str, timeout: float = 30.0) -> str:
        """The next line (after the last one this returned) that matches ``pattern``."""
        i, line = self._wait_for(re.compile(pattern), self._cursor, timeout)
        self._cursor = i + 1
        return line

    def unread(self) -> list[str]:
        """The lines after the last one ``wait_line`` returned; they count as read now."""
        with self._changed:
            lines = self._lines[self._cursor :]
            self._cursor = len(self._lines)
        return lines

    def log(self) -> str:
        """Every line so far (all of them once the process has exited)."""
        if self.process.poll() is not None:
            with self._changed:
                self._changed.wait_for(lambda: self._eof, timeout=10)
        with self._changed:
            return "\n".join(self._lines)

    # -- its endpoints ------------------------------------------------------------------------
    def _wait_ready(self, timeout: float) -> None:
        def answers(path: str) -> bool:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"loopwatch serve exited {self.process.returncode}:\n{self.log()}"
                )
            try:
                return http_get(self.metrics, path, timeout=5)[0] == 200
            except OSError:
                return False

        wait_for(lambda: answers("/readyz"), timeout, "loopwatch serve's /readyz answering 200")
        wait_for(lambda: answers("/metrics"), timeout, "loopwatch serve's /metrics answering")

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, str]:
        """(status, body) of a GET on the metrics address (/metrics, /healthz, /readyz)."""
        return http_get(self.metrics, path, timeout)

    def scrape(self, timeout: float = 10.0) -> str:
        """The /metrics text; OSError (HTTPError on an answer other than 200) otherwise."""
        with urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=timeout) as r:
            return str(r.read().decode())

    def samples(self, timeout: float = 10.0) -> dict[str, float]:
        """Each sample name of a scrape with its values summed over every series."""
        out: dict[str, float] = {}
        for line in self.scrape(timeout).splitlines():
            if line.startswith("#") or not line.strip():
                continue
            name = line.split("{", 1)[0].split(" ", 1)[0]
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        return out

    # -- stopping -----------------------------------------------------------------------------
    def sigterm(self, timeout: float = STOP_TIMEOUT) -> tuple[int | None, float]:
        """SIGTERM and wait: (exit code, None if it had to be killed after ``timeout``; seconds
        from the signal to the exit)."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            code: int | None = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            code = None
        return code, time.monotonic() - started

    def kill(self) -> None:
        """SIGKILL: no shutdown, open turns lost (what a crash does)."""
        self.process.kill()
        self.process.wait()

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM unless it has exited already, then its files removed; the exit code (None:
        killed after ``timeout``)."""
        running = self.process.poll() is None
        code = self.sigterm(timeout)[0] if running else self.process.returncode
        self._dir.cleanup()
        return code

    def close(self) -> None:
        """Killed if still running, its files removed: for a ``finally`` after a failure."""
        if getattr(self, "process", None) is not None and self.process.poll() is None:
            self.kill()  # (no process when it could not be started at all)
        self._dir.cleanup()

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is None:
            self.stop()
        self.close()
