"""The harness that starts ``loopwatch serve`` for the tests and benchmarks: a free port taken
between being chosen and being bound is chosen again, and nothing else is retried."""

from __future__ import annotations

import pytest

import testkit.serve_process as sp


def _choosing(monkeypatch: pytest.MonkeyPatch, first: str | None) -> list[str]:
    """The addresses the harness chooses from now on (``first``, when given, first)."""
    real = sp.free_address
    chosen: list[str] = []

    def choose() -> str:
        chosen.append(first if first is not None and not chosen else real())
        return chosen[-1]

    monkeypatch.setattr(sp, "free_address", choose)
    return chosen


def test_a_chosen_port_taken_before_the_service_binds_it_is_chosen_again(
    monkeypatch: pytest.MonkeyPatch, taken: str
) -> None:
    chosen = _choosing(monkeypatch, first=taken)
    with sp.ServeProcess(log_level="WARNING") as served:
        assert len(chosen) == 6  # three addresses, twice
        assert served.grpc == chosen[3] != taken
        assert served.get("/readyz")[0] == 200


def test_an_address_the_caller_gave_that_is_taken_fails_at_once(
    monkeypatch: pytest.MonkeyPatch, taken: str
) -> None:
    chosen = _choosing(monkeypatch, first=None)
    with pytest.raises(AssertionError, match=f"cannot listen for OTLP/gRPC on {taken}"):
        sp.ServeProcess(grpc=taken, log_level="WARNING")
    assert len(chosen) == 2  # http and metrics, once: not tried again
