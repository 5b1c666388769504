"""The harness that starts ``loopwatch serve`` for the tests and benchmarks: a free port taken
between being chosen and being bound is chosen again, and nothing else is retried."""

from __future__ import annotations

import socket

import pytest

import tests.serve_process as sp


def _held() -> socket.socket:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    return held


def test_a_chosen_port_taken_before_the_service_binds_it_is_chosen_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _held() as held:
        taken = f"127.0.0.1:{held.getsockname()[1]}"
        real = sp.free_address
        chosen: list[str] = []

        def first_one_taken() -> str:
            chosen.append(taken if not chosen else real())
            return chosen[-1]

        monkeypatch.setattr(sp, "free_address", first_one_taken)
        with sp.ServeProcess(log_level="WARNING") as served:
            assert len(chosen) == 6  # three addresses, twice
            assert served.grpc == chosen[3] != taken
            assert served.get("/readyz")[0] == 200


def test_an_address_the_caller_gave_that_is_taken_fails_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _held() as held:
        taken = f"127.0.0.1:{held.getsockname()[1]}"
        real = sp.free_address
        chosen: list[str] = []

        def counted() -> str:
            chosen.append(real())
            return chosen[-1]

        monkeypatch.setattr(sp, "free_address", counted)
        with pytest.raises(AssertionError, match=f"cannot listen for OTLP/gRPC on {taken}"):
            sp.ServeProcess(grpc=taken, log_level="WARNING")
        assert len(chosen) == 2  # http and metrics, once: not tried again
