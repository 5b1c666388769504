"""A real redis-server on a free loopback port, no persistence, for the guard store tests."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis

from testkit.serve_process import free_port


class RedisProcess:
    """``redis-server`` started by the test; :meth:`stop` and :meth:`start` keep its port."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary, self.workdir = binary, workdir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, deadline_s: float = 20.0) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        deadline = time.monotonic() + deadline_s
        try:
            while True:
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    pass
                assert self.process.poll() is None, "redis-server exited at start"
                assert time.monotonic() < deadline, "redis-server did not answer PING"
                time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None
