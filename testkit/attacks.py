"""Attacks on a real ``loopwatch serve`` on loopback: hostile clients and hostile spans, each
bounded in count and time (benchmarks/adversarial.py runs them all and reports; the service
tests run them one by one). Only 127.0.0.1 is contacted."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import re
import resource
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from loopwatch.service.otlp import hex_ids_json
from testkit.serve_process import ServeProcess

RSS_BUDGET_MB = 300.0  # docs/service.md: what the service may use under any of these
STOP_SECONDS = 10.0
HEADER_TIMEOUT = 10.0  # the defaults of [serve] header_timeout_seconds / body_timeout_seconds
BODY_TIMEOUT = 30.0
GOOD = "good"  # service.name of the good turns
PROTOBUF = "application/x-protobuf"
JSON = "application/json"


def raise_open_files() -> None:
    """1,000 connections need more than the common default of 1,024 descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# -- OTLP requests --------------------------------------------------------------------------------
def _attributes(values: dict[str, str]) -> list[KeyValue]:
    return [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in values.items()]


def turn_spans(
    n: int, agent: str, model: str, tool: str, tool_error: str = "", calls: int = 1
) -> list[Span]:
    """One turn (trace ``n``): an agent span, a chat span, ``calls`` tool spans under it."""
    trace = (n + 1).to_bytes(16, "big")
    t = 1_700_000_000_000_000_000 + n * 10_000_000_000

    def span(i: int, parent: int, name: str, attrs: dict[str, str], **kw: Any) -> Span:
        return Span(
            trace_id=trace,
            span_id=(i + 1).to_bytes(8, "big"),
            parent_span_id=(parent + 1).to_bytes(8, "big") if parent >= 0 else b"",
            name=name,
            start_time_unix_nano=t + i * 1000,
            end_time_unix_nano=t + 10**9 - i,
            attributes=_attributes(attrs),
            **kw,
        )

    spans = [
        span(
            0,
            -1,
            f"invoke_agent {agent}",
            {"gen_ai.operation.name": "invoke_agent"} | {"gen_ai.agent.name": agent},
        ),
        span(
            1,
            0,
            f"chat {model}",
            {"gen_ai.operation.name": "chat"} | {"gen_ai.request.model": model},
        ),
    ]
    for c in range(calls):
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": json.dumps({"order_id": "88214"}),
        }
        status = Status(code=Status.STATUS_CODE_ERROR, message=tool_error) if tool_error else None
        spans.append(span(2 + c, 0, f"execute_tool {tool}", attrs, status=status))
    return spans


def encode(service: str, spans: list[Span]) -> bytes:
    resource_attrs = _attributes({"service.name": service})
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=resource_attrs), scope_spans=[ScopeSpans(spans=spans)]
            )
        ]
    )
    return bytes(request.SerializeToString())


def good_body(n: int, service: str = GOOD) -> bytes:
    return encode(service, turn_spans(n, "good-agent", "good-model", "lookup"))


# -- a raw HTTP client ----------------------------------------------------------------------------
def _host_port(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


def post_bytes(body: bytes, content_type: str = PROTOBUF, extra: str = "") -> bytes:
    head = (
        f"POST /v1/traces HTTP/1.1\r\nHost: loopwatch\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode() + body


async def exchange(address: str, data: bytes, timeout: float = 30.0) -> int | None:
    """Send ``data`` on a new connection; the answer's status, None if it closed unanswered."""
    host, port = _host_port(address)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError):
        return None
    try:
        writer.write(data)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
        parts = line.split()
        return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    except (OSError, TimeoutError):
        return None
    finally:
        writer.close()


async def export(address: str, body: bytes, tries: int = 3) -> bool:
    """POST like an exporter (10 s timeout): a retryable answer (503, none) is sent again."""
    for attempt in range(tries):
        status = await exchange(address, post_bytes(body), timeout=10.0)
        if status == 200:
            return True
        if status not in (None, 503):
            return False
        await asyncio.sleep(0.5 * (attempt + 1))
    return False


# -- the service under attack ---------------------------------------------------------------------
class Service(ServeProcess):
    """``loopwatch serve`` with default limits (grace 0.2 s) on ephemeral loopback ports, its RSS
    peak sampled while it runs."""

    def __init__(self, toml: str = "[serve]\ngrace_seconds = 0.2\n") -> None:
        super().__init__(toml)
        self.peak_rss_mb = 0.0
        self._sampling = True
        threading.Thread(target=self._sample, daemon=True).start()

    def rss_mb(self) -> float:
        try:
            with open(f"/proc/{self.process.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def _sample(self) -> None:
        while self._sampling and self.process.poll() is None:
            self.peak_rss_mb = max(self.peak_rss_mb, self.rss_mb())
            time.sleep(0.05)

    def turns(self, service: str, timeout: float = 5.0) -> float:
        """loopwatch_turns_total summed over the series of ``service`` (a pattern); -1 when
        the scrape fails within ``timeout``."""
        pattern = re.compile(
            r'^loopwatch_turns_total\{[^}]*service="' + service + r'"[^}]*\} (\S+)'
        )
        try:
            text = self.scrape(timeout=timeout)
        except OSError:
            return -1.0
        return sum(float(m.group(1)) for m in map(pattern.match, text.splitlines()) if m)

    def wait_turns(self, service: str, count: float, timeout: float = 30.0) -> float:
        """The count once it reaches ``count`` (or ``timeout`` passed), read again half a
        second later: more than expected would show then. A slow exposition gets 120 s."""
        deadline = time.monotonic() + timeout
        seen = self.turns(service, 120.0)
        while seen < count and time.monotonic() < deadline:
            time.sleep(0.1)
            seen = self.turns(service, max(5.0, deadline - time.monotonic()))
        time.sleep(0.5)
        return self.turns(service, 120.0)

    def sigterm(self, timeout: float = STOP_SECONDS) -> tuple[int | None, float]:
        """SIGTERM; (exit code, None when killed after ``timeout``; seconds taken)."""
        self._sampling = False
        return super().sigterm(timeout)


# -- the attacks ----------------------------------------------------------------------------------
# Each takes the service and returns (held, figures).
Attack = Callable[[Service], Awaitable[tuple[bool, dict[str, Any]]]]


async def burst(service: Service, n: int = 1000) -> tuple[bool, dict[str, Any]]:
    """``n`` good exports at once, each on its own connection, no retries."""
    bodies = [post_bytes(good_body(100 + i, "burst")) for i in range(n)]
    return await _burst(service, bodies, "burst")


async def burst_json(service: Service, n: int = 1000) -> tuple[bool, dict[str, Any]]:
    """The same as OTLP/JSON (hex ids), as OpenTelemetry JS's HTTP exporter sends it."""
    bodies = [
        post_bytes(
            hex_ids_json(ExportTraceServiceRequest.FromString(good_body(20_000 + i, "json"))), JSON
        )
        for i in range(n)
    ]
    return await _burst(service, bodies, "json")


async def _burst(service: Service, bodies: list[bytes], label: str) -> tuple[bool, dict[str, Any]]:
    statuses = await asyncio.gather(*(exchange(service.http, body) for body in bodies))
    ok = sum(s == 200 for s in statuses)
    n = len(bodies)
    counted = service.wait_turns(label, n)
    return ok == n and counted == n, {"answered_200": ok, "counted": counted, "sent": n}


async def slowloris(
    service: Service, n: int = 1000, opened: asyncio.Event | None = None
) -> tuple[bool, dict[str, Any]]:
    """``n`` connections that send a header line a second and never finish their headers;
    ``opened`` is set once each has connected (or failed to)."""
    host, port = _host_port(service.http)
    started = time.monotonic()
    limit = HEADER_TIMEOUT + 5.0
    tried = 0

    def counted() -> None:
        nonlocal tried
        tried += 1
        if tried == n and opened is not None:
            opened.set()

    async def one() -> float | None:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            counted()
            return None
        counted()
        try:
            writer.write(b"POST /v1/traces HTTP/1.1\r\nHost: loopwatch\r\n")
            while time.monotonic() - started < limit:
                try:
                    data = await asyncio.wait_for(reader.read(1024), 1.0)
                    if not data:
                        return time.monotonic() - started
                except TimeoutError:
                    writer.write(b"X-Slow: 1\r\n")
            return None
        except OSError:
            return time.monotonic() - started
        finally:
            writer.close()

    closed = await asyncio.gather(*(one() for _ in range(n)))
    times = [t for t in closed if t is not None]
    latest = max(times, default=0.0)
    held = len(times) == n and latest <= HEADER_TIMEOUT + 2.0
    return held, {"closed_by_server": len(times), "of": n, "last_closed_s": round(latest, 2)}


async def header_hoard(
    service: Service, n: int = 150, megabytes: int = 6
) -> tuple[bool, dict[str, Any]]:
    """``n`` connections each sending ``megabytes`` MB of header lines as fast as they can;
    held when the server closed every one of them (and stayed in its RSS budget)."""
    host, port = _host_port(service.http)
    line = b"X-Hoard: " + b"h" * 1014 + b"\r\n"

    async def one() -> tuple[int, bool]:
        sent = 0
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            return 0, False
        try:
            writer.write(b"POST /v1/traces HTTP/1.1\r\nHost: loopwatch\r\n")
            while sent < megabytes * 1024 * 1024:
                writer.write(line * 64)
                await asyncio.wait_for(writer.drain(), HEADER_TIMEOUT + 5)
                sent += len(line) * 64
            # everything fit in the socket buffers: the server's close shows as EOF or reset
            return sent, await asyncio.wait_for(reader.read(1024), HEADER_TIMEOUT + 5) == b""
        except (OSError, TimeoutError) as e:
            return sent, isinstance(e, OSError)
        finally:
            writer.close()

    results = await asyncio.gather(*(one() for _ in range(n)))
    closed = sum(c for _, c in results)
    held = closed == n and service.peak_rss_mb < RSS_BUDGET_MB
    most = max(s for s, _ in results) // 1024
    return held, {"closed_by_server": closed, "of": n, "most_written_kb": most}


def _expect(status: int, data: bytes, timeout: float = 30.0) -> Attack:
    async def attack(service: Service) -> tuple[bool, dict[str, Any]]:
        started = time.monotonic()
        got = await exchange(service.http, data, timeout)
        return got == status, {"status": got, "seconds": round(time.monotonic() - started, 2)}

    return attack


GOOD_BODY = good_body(7)


def raw(headers: list[str], body: bytes) -> bytes:
    """A POST to /v1/traces with exactly these framing headers (latin-1 unless bytes)."""
    head = "POST /v1/traces HTTP/1.1\r\nHost: loopwatch\r\nContent-Type: application/x-protobuf\r\n"
    return (head + "".join(h + "\r\n" for h in headers) + "\r\n").encode() + body


CL_LONGER = raw(["Content-Length: 1000"], b"x" * 10)
CL_TE = raw(["Content-Length: 5", "Transfer-Encoding: chunked"], b"0\r\n\r\n")
CL_TWICE = raw(
    [f"Content-Length: {len(GOOD_BODY)}", f"Content-Length: {len(GOOD_BODY) + 1}"], GOOD_BODY
)
CL_NOT_ASCII = raw(["Content-Length: \u0661\u0662"], b"x" * 12)  # Arabic-Indic 1, 2 (UTF-8)
NESTED_JSON = b'{"resourceSpans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
NESTED_VALUE = (
    b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"01010101010101010101010101010101",'
    b'"spanId":"0101010101010101","name":"n","attributes":[{"key":"k","value":'
    + b'{"arrayValue":{"values":[' * 2000
    + b"{}"
    + b"]}}" * 2000
    + b"}]}]}]}]}"
)
BOMB = gzip.compress(b"\0" * (32 * 1024 * 1024), compresslevel=9)


async def nested_json(service: Service) -> tuple[bool, dict[str, Any]]:
    """Brackets 100,000 deep, and AnyValue arrays 2,000 deep in an otherwise valid request."""
    deep = await exchange(service.http, post_bytes(NESTED_JSON, JSON))
    value = await exchange(service.http, post_bytes(NESTED_VALUE, JSON))
    return deep == 400 and value == 400, {"brackets": deep, "any_value": value}


async def regex_freeze(service: Service, kilobytes: int = 950) -> tuple[bool, dict[str, Any]]:
    """A tool span whose status message is "Error running " + "tool " * N (< 1 MB), gzipped;
    /healthz polled every 10 ms meanwhile: its slowest answer."""
    message = "Error running " + "tool " * (kilobytes * 1024 // 5)
    body = gzip.compress(encode("regex", turn_spans(1, "a", "m", "t", tool_error=message)))
    worst = 0.0
    stop = asyncio.Event()

    async def poll() -> None:
        nonlocal worst
        host, port = _host_port(service.metrics)
        while not stop.is_set():
            started = time.monotonic()
            with contextlib.suppress(OSError, TimeoutError):
                await asyncio.wait_for(_get_status(host, port, "/healthz"), 20.0)
            worst = max(worst, time.monotonic() - started)
            await asyncio.sleep(0.01)

    poller = asyncio.ensure_future(poll())
    await asyncio.sleep(0.3)
    status = await exchange(service.http, post_bytes(body, extra="Content-Encoding: gzip\r\n"))
    await asyncio.sleep(3.0)  # the worker reads the span now
    stop.set()
    await poller
    held = status == 200 and worst < 0.1
    return held, {"status": status, "gzipped_bytes": len(body), "healthz_worst_ms": worst * 1000}


async def _get_status(host: str, port: int, path: str) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: loopwatch\r\n\r\n".encode())
        await reader.readline()
    finally:
        writer.close()


async def _send_turns(service: Service, bodies: list[bytes]) -> int:
    ok = 0
    for i in range(0, len(bodies), 8):
        sending = (export(service.http, b, tries=6) for b in bodies[i : i + 8])
        ok += sum(await asyncio.gather(*sending))
    return ok


def _scrape_figures(service: Service, scrapes: int = 2) -> dict[str, Any]:
    sizes, seconds, rss = [], [], []
    for _ in range(scrapes):
        service.peak_rss_mb = service.rss_mb()
        started = time.monotonic()
        try:
            sizes.append(len(service.scrape(timeout=300).encode()))
        except OSError:
            sizes.append(-1)
        seconds.append(round(time.monotonic() - started, 2))
        time.sleep(0.2)
        rss.append(round(service.peak_rss_mb, 1))
    return {"exposition_bytes": sizes, "scrape_s": seconds, "rss_mb_per_scrape": rss}


async def cardinality_many(service: Service, turns: int = 20_000) -> tuple[bool, dict[str, Any]]:
    """``turns`` turns whose service, agent, model and tool are each one of 200 values."""
    import random

    rng = random.Random(10)
    bodies = []
    for start in range(0, turns, 100):
        spans: list[Span] = []
        service_name = f"svc-{rng.randrange(200)}"
        for n in range(start, min(turns, start + 100)):
            spans += turn_spans(
                10_000 + n,
                f"agent-{rng.randrange(200)}",
                f"model-{rng.randrange(200)}",
                f"tool-{rng.randrange(200)}",
            )
        bodies.append(encode(service_name, spans))
    ok = await _send_turns(service, bodies)
    service.wait_turns("svc-[0-9]+", turns, timeout=120)
    figures = {"requests_ok": ok, "of": len(bodies)} | _scrape_figures(service)
    held = max(figures["exposition_bytes"]) < 50 * 1024 * 1024
    return held and service.peak_rss_mb < RSS_BUDGET_MB, figures


# field 1 of the request claims 256 MiB and the body ends after 4 MiB: a decode error
MALFORMED = b"\x0a\xff\xff\xff\x7f" + b"\x00" * (4 * 1024 * 1024)


async def malformed_bodies(
    service: Service, n: int = 300, at_once: int = 20
) -> tuple[bool, dict[str, Any]]:
    """``n`` bodies of 4 MiB that fail to decode, ``at_once`` at a time: each answered 400, and
    none held afterwards (the service's collector runs less often: a failed decode must leave
    no body behind for it)."""
    slots = asyncio.Semaphore(at_once)

    async def one() -> int | None:
        async with slots:
            return await exchange(service.http, post_bytes(MALFORMED), 60)

    statuses = await asyncio.gather(*(one() for _ in range(n)))
    refused = sum(s == 400 for s in statuses)
    return refused == n and service.peak_rss_mb < RSS_BUDGET_MB, {"answered_400": refused, "of": n}


async def cardinality_long(service: Service, turns: int = 200) -> tuple[bool, dict[str, Any]]:
    """``turns`` turns whose service, agent, model and tool names are 20 KB each."""
    bodies = []
    for n in range(turns):
        name = f"{n:05d}" + "n" * 20_000
        bodies.append(
            encode("s" + name, turn_spans(50_000 + n, "a" + name, "m" + name, "t" + name))
        )
    ok = await _send_turns(service, bodies)
    service.wait_turns("s[0-9]+n+", turns, timeout=120)
    figures = {"requests_ok": ok, "of": len(bodies)} | _scrape_figures(service)
    held = 0 < max(figures["exposition_bytes"]) < 50 * 1024 * 1024
    return held and service.peak_rss_mb < RSS_BUDGET_MB, figures


async def plain_flood(
    service: Service, traces: int = 1000, spans_per_trace: int = 500
) -> tuple[bool, dict[str, Any]]:
    """Plain spans (no GenAI meaning) of traces whose root never arrives."""
    bodies = []
    per_request = 5000
    batch: list[Span] = []
    for t in range(traces):
        trace = (900_000 + t).to_bytes(16, "big")
        for s in range(spans_per_trace):
            batch.append(
                Span(
                    trace_id=trace,
                    span_id=(s + 2).to_bytes(8, "big"),
                    parent_span_id=(1).to_bytes(8, "big"),  # the root that never comes
                    name="GET /orders",
                    start_time_unix_nano=1_700_000_000_000_000_000,
                    end_time_unix_nano=1_700_000_000_100_000_000,
                )
            )
            if len(batch) == per_request:
                bodies.append(encode("flood", batch))
                batch = []
    if batch:
        bodies.append(encode("flood", batch))
    ok = await _send_turns(service, bodies)
    await asyncio.sleep(5.0)
    return service.peak_rss_mb < RSS_BUDGET_MB, {
        "requests_ok": ok,
        "of": len(bodies),
        "spans": traces * spans_per_trace,
    }


ATTACKS: dict[str, Attack] = {
    "burst_1000_exports": burst,
    "burst_1000_otlp_json_exports": burst_json,
    "slowloris_1000": slowloris,
    "header_hoarding_150x6MB": header_hoard,
    "content_length_longer_than_body": _expect(408, CL_LONGER, BODY_TIMEOUT + 10),
    "content_length_and_chunked": _expect(400, CL_TE),
    "two_different_content_lengths": _expect(400, CL_TWICE),
    "non_ascii_content_length": _expect(400, CL_NOT_ASCII),
    "deeply_nested_json": nested_json,
    "malformed_bodies_300x4MB": malformed_bodies,
    "gzip_bomb": _expect(
        413, post_bytes(BOMB, extra="Content-Encoding: gzip\r\n")
    ),  # 32 MiB of zeros in 32 KiB
    "regex_freeze": regex_freeze,
    "cardinality_20000_turns_200_values": cardinality_many,
    "cardinality_200_turns_20KB_names": cardinality_long,
    "plain_span_flood_rootless": plain_flood,
}
