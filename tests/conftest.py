"""Fixtures every test file can ask for by name.

- ``free_port``: a function giving a loopback port nothing listens on (call it once a port).
- ``taken``: a loopback address something else listens on, for the length of the test.
- ``serve``: a function starting ``loopwatch serve`` as a child process
  (testkit/serve_process.py's ``ServeProcess``, same arguments), ready when it returns; each one
  started is killed at the end of the test if it still runs.

Other shared helpers are plain modules: tests/support/helpers.py (a real SDK pipeline on its own
registry, hand-timed spans), tests/support/service.py (the service in process, OTLP requests,
metric snapshots), testkit/serve_process.py (the service as a process, also used by benchmarks/).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from testkit import serve_process
from testkit.serve_process import ServeProcess


@pytest.fixture
def free_port() -> Callable[[], int]:
    return serve_process.free_port


@pytest.fixture
def taken() -> Iterator[str]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield f"127.0.0.1:{held.getsockname()[1]}"


@pytest.fixture
def serve() -> Iterator[Callable[..., ServeProcess]]:
    started: list[ServeProcess] = []

    def start(*args: Any, **kwargs: Any) -> ServeProcess:
        process = ServeProcess(*args, **kwargs)
        started.append(process)
        return process

    yield start
    for process in started:
        process.close()
