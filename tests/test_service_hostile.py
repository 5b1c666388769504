"""``loopwatch serve`` with its default limits against bursty and hostile HTTP clients: the
attacks of benchmarks/adversarial.py on a real process on loopback, then SIGTERM. The
limits themselves (deadlines, connection cap, chunked size cap) are checked in process with
small settings, so those tests take a second."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import socket
from collections.abc import Iterator

import grpc
import pytest

from loopwatch.core.config import Config
from loopwatch.service import http_server, metrics_server
from loopwatch.service.app import Service as LiveService
from loopwatch.service.http_base import Endpoint
from loopwatch.service.run import STOP_SECONDS
from testkit.attacks import (
    CL_LONGER,
    CL_NOT_ASCII,
    CL_TE,
    CL_TWICE,
    HEADER_TIMEOUT,
    NESTED_JSON,
    NESTED_VALUE,
    RSS_BUDGET_MB,
    Service,
    burst,
    burst_json,
    exchange,
    good_body,
    header_hoard,
    post_bytes,
    raise_open_files,
    raw,
    slowloris,
)
from testkit.serve_process import wait_for
from tests.support.service import EXPORT, get, running, settle, value

_TRACES = itertools.count(300_000)


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    raise_open_files()  # 1,000 connections from this process (the service raises its own)
    s = Service()
    try:
        yield s
    finally:
        s.close()


@pytest.mark.slow
def test_a_thousand_simultaneous_exports_all_succeed(service: Service) -> None:
    held, figures = asyncio.run(burst(service, 1000))
    assert (figures["answered_200"], figures["counted"]) == (1000, 1000)
    assert held


@pytest.mark.slow
def test_a_thousand_simultaneous_otlp_json_exports_all_succeed(service: Service) -> None:
    held, figures = asyncio.run(burst_json(service, 1000))
    assert (figures["answered_200"], figures["counted"]) == (1000, 1000)
    assert held


@pytest.mark.slow
def test_slowloris_is_closed_at_the_header_deadline_while_a_good_client_exports(
    service: Service,
) -> None:
    async def scenario() -> tuple[dict[str, float], list[int | None]]:
        opened = asyncio.Event()
        attack = asyncio.ensure_future(slowloris(service, 1000, opened))
        statuses = []
        await opened.wait()  # the good client exports while all 1,000 are held open
        n = 0
        while not attack.done():
            body = good_body(200_000 + n, "steady")
            statuses.append(await exchange(service.http, post_bytes(body), timeout=10))
            n += 1
            await asyncio.sleep(0.5)
        return (await attack)[1], statuses

    figures, statuses = asyncio.run(scenario())
    # the attack watches for HEADER_TIMEOUT + 5 s: every connection was closed by then
    assert figures["closed_by_server"] == 1000
    assert figures["last_closed_s"] > HEADER_TIMEOUT - 1  # by the deadline, not before
    assert len(statuses) >= 10
    assert statuses == [200] * len(statuses)
    assert service.wait_turns("steady", len(statuses)) == len(statuses)


def test_header_hoarding_is_cut_off(service: Service) -> None:
    held, figures = asyncio.run(header_hoard(service, n=50, megabytes=2))
    assert figures["closed_by_server"] == 50
    assert held


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (CL_TE, 400),
        (CL_TWICE, 400),
        (CL_NOT_ASCII, 400),
        (post_bytes(NESTED_JSON, "application/json"), 400),
        (post_bytes(NESTED_VALUE, "application/json"), 400),
    ],
    ids=["content-length and chunked", "two content-lengths", "non-ascii length", "nested", "deep"],
)
def test_ambiguous_framing_and_nesting_get_400_and_serving_goes_on(
    service: Service, data: bytes, status: int
) -> None:
    before = service.turns("after-bad")
    assert asyncio.run(exchange(service.http, data)) == status
    good = post_bytes(good_body(next(_TRACES), "after-bad"))  # a new trace each time
    assert asyncio.run(exchange(service.http, good)) == 200
    assert service.wait_turns("after-bad", before + 1) == before + 1


def test_rss_stayed_in_budget_and_sigterm_exits_0(service: Service) -> None:
    assert 0 < service.peak_rss_mb < RSS_BUDGET_MB
    code, seconds = service.sigterm()
    assert code == 0, seconds
    assert seconds < STOP_SECONDS


# -- the limits, in process with small settings ---------------------------------------------------
SMALL = Config(
    grace_seconds=0.0,
    max_request_bytes=4096,
    header_timeout_seconds=0.5,
    body_timeout_seconds=0.5,
)


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def _until_closed(c: socket.socket) -> bytes:
    data = b""
    while chunk := c.recv(4096):
        data += chunk
    return data


def test_deadlines_and_chunked_size_cap() -> None:
    with running(SMALL) as s:
        assert s.bound is not None
        address = s.bound.http
        # a body shorter than its Content-Length: 408 at the body deadline, then closed
        with _connect(address) as c:
            c.sendall(CL_LONGER)
            assert _until_closed(c).startswith(b"HTTP/1.1 408")
        # headers that never end: closed at the header deadline, unanswered
        with _connect(address) as c:
            c.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")
            assert _until_closed(c) == b""
        # a chunked body over max_request_bytes: 413, as with a Content-Length
        chunk = b"x" * 1000
        body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(5)) + b"0\r\n\r\n"
        head = (
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        assert asyncio.run(exchange(address, head + body)) == 413
        # and serving goes on
        assert asyncio.run(exchange(address, post_bytes(good_body(1)))) == 200
        settle(s)
        assert value(s.registry, "loopwatch_turns_total") == 1


def _endpoint(s: LiveService) -> Endpoint:
    """The OTLP/HTTP endpoint of an in-process service: its counters are the state to wait on."""
    endpoint = s._http
    assert endpoint is not None
    return endpoint


def test_connection_cap() -> None:
    with running(Config(grace_seconds=0.0, max_connections=4)) as s:
        assert s.bound is not None
        address = s.bound.http
        # four connections open (accepted in order): the fifth is answered 503 and closed
        held = [_connect(address) for _ in range(4)]
        with _connect(address) as c:
            assert _until_closed(c).startswith(b"HTTP/1.1 503")
        for c in held:
            c.close()
        # serving goes on once the server has seen them closed
        wait_for(lambda: _endpoint(s).open_connections == 0, timeout=30)
        assert asyncio.run(exchange(address, post_bytes(good_body(1)))) == 200


def _refused_on_metrics(s: LiveService) -> dict[str, str]:
    """endpoint -> the refused-connections line of a real scrape of /metrics."""
    assert s.bound is not None
    status, text, _ = get(s.bound.metrics, "/metrics")
    assert status == 200
    name = "loopwatch_http_connections_refused_total"
    return {
        line.split('endpoint="', 1)[1].split('"', 1)[0]: line
        for line in text.splitlines()
        if line.startswith(name + "{")
    }


def test_refused_connections_are_counted_on_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_server, "MAX_CONNECTIONS", 2)  # /metrics: two at once
    with running(Config(grace_seconds=0.0, max_connections=3)) as s:
        assert s.bound is not None and s._metrics_server is not None
        metrics = s._metrics_server
        name = "loopwatch_http_connections_refused_total"
        assert _refused_on_metrics(s) == {
            "otlp_http": f'{name}{{endpoint="otlp_http"}} 0.0',
            "metrics": f'{name}{{endpoint="metrics"}} 0.0',
        }
        wait_for(lambda: metrics.open_connections == 0, timeout=30)
        # OTLP/HTTP at its cap of three: two more are refused; /metrics at its two: one more
        held = [_connect(s.bound.http) for _ in range(3)]
        held += [_connect(s.bound.metrics) for _ in range(2)]
        wait_for(lambda: _endpoint(s).open_connections == 3, timeout=30)
        wait_for(lambda: metrics.open_connections == 2, timeout=30)
        for address in (s.bound.http, s.bound.http, s.bound.metrics):
            with _connect(address) as c:
                assert _until_closed(c).startswith(b"HTTP/1.1 503")
        for c in held:
            c.close()
        wait_for(lambda: metrics.open_connections == 0, timeout=30)
        assert _refused_on_metrics(s) == {
            "otlp_http": f'{name}{{endpoint="otlp_http"}} 2.0',
            "metrics": f'{name}{{endpoint="metrics"}} 1.0',
        }


def test_the_other_documented_answers() -> None:
    with running(SMALL) as s:
        assert s.bound is not None
        http = s.bound.http
        assert asyncio.run(exchange(http, b"GET /v1/traces HTTP/1.1\r\nHost: x\r\n\r\n")) == 405
        assert asyncio.run(exchange(http, raw([], b""))) == 200  # no body: an empty export
        huge = raw(["Content-Length: 999999999"], b"x")  # past the drain bound: not read
        assert asyncio.run(exchange(http, huge)) == 400
        assert asyncio.run(exchange(http, raw(["Transfer-Encoding: gzip"], b"x"))) == 400
        with grpc.insecure_channel(s.bound.grpc) as channel:
            export = channel.unary_unary(EXPORT)
            with pytest.raises(grpc.RpcError) as caught:
                export(b"", timeout=5, metadata=[("x-big", "a" * 2 * SMALL.max_header_bytes)])
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert export(b"", timeout=5) == b""  # and the next call is served


def test_bodies_held_at_once_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # the floor of the budget is 64 MiB; without it the budget is 4 x max_request_bytes
    monkeypatch.setattr(http_server, "MIN_BUFFER_BYTES", 0)
    # SMALL's 0.5 s deadlines would answer a held body 408 (freeing its share of the budget)
    # if a starved event loop let them pass before the probe is read
    relaxed = dataclasses.replace(SMALL, body_timeout_seconds=30.0, header_timeout_seconds=30.0)
    with running(relaxed) as s:
        assert s.bound is not None
        address = s.bound.http
        front = _endpoint(s).app
        assert isinstance(front, http_server.OtlpFront)
        limit = SMALL.max_request_bytes
        # four bodies of nearly max_request_bytes, each one byte short: 4 x limit held. The
        # probe waits until the server holds all of them: a probe read in between takes its
        # share of the budget, and the held body that no longer fits is refused instead
        held = [_connect(address) for _ in range(4)]
        for c in held:
            c.sendall(raw([f"Content-Length: {limit}"], b"x" * (limit - 1)))
        wait_for(lambda: front.buffered == 4 * (limit - 1), timeout=30)
        assert asyncio.run(exchange(address, post_bytes(good_body(1)))) == 503
        for c in held:
            c.close()
        # released once the server sees them closed
        wait_for(lambda: front.buffered == 0, timeout=30)
        assert asyncio.run(exchange(address, post_bytes(good_body(2)))) == 200
