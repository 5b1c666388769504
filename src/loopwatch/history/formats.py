"""Stored traces as span views: OTLP JSON (the Collector's file exporter), OTLP protobuf (one
message, or the file exporter's length-prefixed stream), Jaeger JSON (its API v3's too: OTLP
JSON under ``result``) and Tempo JSON; plain, gzip- or zstd-compressed
(:mod:`loopwatch.history.compressed`); files, directories, globs and ``-`` for stdin.

Everything becomes span views with the values ``loopwatch serve`` gives the same spans: OTLP
JSON through the service's own decoder (:mod:`loopwatch.service.otlp_json`), protobuf and
Jaeger through its conversion (:func:`loopwatch.service.otlp.span_views`). Files are read one
line or one message at a time; a bad line or message is skipped and reported (file and line),
the rest is read."""

from __future__ import annotations

import base64
import binascii
import contextlib
import glob
import heapq
import io
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from loopwatch.core.log_view import LogView
from loopwatch.core.span_view import SpanView
from loopwatch.core.words import counted
from loopwatch.history.compressed import (
    GZIP_MAGIC,
    ZSTD_MAGIC,
    ZSTD_MISSING,
    corrupt_errors,
    gunzip,
    unzstd,
    unzstd_message,
    zstd_available,
)
from loopwatch.service.otlp import RequestError, parse_protobuf, span_views
from loopwatch.service.otlp_json import JsonDecoded, decode
from loopwatch.service.otlp_logs import is_logs_document, log_views, logs_request

AUTO = "auto"
OTLP_JSON = "otlp-json"
OTLP_PROTO = "otlp-proto"
JAEGER = "jaeger"
TEMPO = "tempo"
FORMATS = (AUTO, OTLP_JSON, OTLP_PROTO, JAEGER, TEMPO)

# The most a line, message or document may hold: each is read whole, so this bounds what one
# holds in memory (a length prefix past it is not one)
MAX_UNIT_BYTES = 1 << 30
_SKIP_CHUNK = 1 << 20
_PROBLEMS_KEPT = 20


class InputError(ValueError):
    """One line, message or file that cannot be read; the message says why."""


@dataclass
class Problem:
    where: str  # "path:line 12", "path: message 3 (byte 4096)", "path"
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class ReadStats:
    """What the reader met: files, spans, and every problem (the first few kept in full)."""

    files: int = 0
    files_read: int = 0  # files from which at least one span came
    units: int = 0  # lines, messages or documents read
    spans: int = 0
    log_records: int = 0  # the coding agents' events (OTLP logs), read beside the spans
    rejected_spans: int = 0  # invalid trace or span ids
    skipped: int = 0  # lines, messages or files skipped
    bytes_read: int = 0
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def problem(self, where: str, message: str) -> None:
        self.skipped += 1
        if len(self.problems) < _PROBLEMS_KEPT:
            self.problems.append(Problem(where, message))

    def note(self, text: str) -> None:
        if text not in self.notes and len(self.notes) < _PROBLEMS_KEPT:
            self.notes.append(text)


# -- inputs --------------------------------------------------------------------------------------
STDIN = "-"


def expand(paths: Iterable[str], stats: ReadStats) -> list[str]:
    """Files, directories (every file below, in name order), globs and ``-``; a path that names
    nothing is a problem."""
    out: list[str] = []
    for raw in paths:
        if raw == STDIN:
            out.append(STDIN)
            continue
        if any(c in raw for c in "*?["):
            found = sorted(p for p in glob.glob(raw, recursive=True) if os.path.isfile(p))
            if not found:
                stats.problem(raw, "no file matches this pattern")
            out.extend(found)
            continue
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                str(p)
                for p in path.rglob("*")
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if not found:
                stats.problem(raw, "directory holds no files")
            out.extend(found)
        elif path.exists():
            out.append(raw)
        else:
            stats.problem(raw, "no such file or directory")
    return out


class _Counting(io.RawIOBase):
    """A raw stream that counts the bytes read from it (the progress line's bytes)."""

    def __init__(self, inner: Any, stats: ReadStats) -> None:
        self.inner = inner  # a binary file: open(..., "rb"), stdin's buffer
        self.stats = stats

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self.inner.readinto(buffer) or 0  # into the reader's buffer: no copy between
        self.stats.bytes_read += n
        return n


def _open(name: str, stats: ReadStats) -> IO[bytes]:
    raw: Any = sys.stdin.buffer if name == STDIN else open(name, "rb")  # noqa: SIM115
    return io.BufferedReader(_Counting(raw, stats), buffer_size=1 << 20)


def _peek(stream: Any, n: int) -> bytes:
    data: bytes = stream.peek(n)
    return data[:n]


# -- OTLP JSON -----------------------------------------------------------------------------------
def _list(parent: Any, *keys: str) -> list[Any]:
    if not isinstance(parent, dict):
        raise InputError("expected an object")
    for key in keys:
        value = parent.get(key)
        if value is not None:
            if not isinstance(value, list):
                raise InputError(f"{key}: expected an array")
            return value
    return []


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def otlp_views(document: dict[str, Any]) -> JsonDecoded:
    """An OTLP JSON document already parsed (Tempo's, a Jaeger API v3 answer's) read by the
    service's decoder, written out again as Python's json module read it."""
    try:
        return decode(json.dumps(document).encode())
    except RequestError as e:
        raise InputError(str(e)) from None
    except RecursionError:
        raise InputError("nested too deeply") from None


# -- Jaeger JSON ---------------------------------------------------------------------------------
_JAEGER_KIND = {"internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}
_JAEGER_STATUS = {"OK": 1, "ERROR": 2, "UNSET": 0}
# tags the Collector's OTLP -> Jaeger translation adds for what OTLP holds in fields
_JAEGER_SPECIAL = frozenset(
    {
        "otel.status_code",
        "otel.status_description",
        "span.kind",
        "otel.scope.name",
        "otel.scope.version",
        "otel.library.name",
        "otel.library.version",
        "w3c.tracestate",
        "error",
        "internal.span.format",
    }
)


def _jaeger_id(value: Any, size: int, where: str) -> bytes:
    if not isinstance(value, str) or not value or len(value) > 2 * size:
        raise InputError(f"{where}: not a Jaeger id: {str(value)[:40]!r}")
    try:
        return bytes.fromhex(value.rjust(2 * size, "0"))
    except ValueError:
        raise InputError(f"{where}: not a hex id: {value[:40]!r}") from None


def _jaeger_value(kv: Any, where: str) -> tuple[str, Any]:
    if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
        raise InputError(f"{where}: expected a tag object with a key")
    kind = str(kv.get("type", "string")).lower()
    value = kv.get("value")
    if kind == "binary" and isinstance(value, str):
        try:
            value = base64.b64decode(value)
        except binascii.Error:
            raise InputError(f"{where}: binary tag is not base64") from None
    elif kind == "int64" and isinstance(value, str):
        value = int(value) if value.lstrip("-").isdigit() else value
    elif kind == "float64" and isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    return kv["key"], value


def _set_any(target: Any, value: Any) -> None:
    if isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, bytes):
        target.bytes_value = value
    elif value is None:
        target.string_value = ""
    else:
        target.string_value = value if isinstance(value, str) else json.dumps(value)


def _jaeger_span(span: Any, where: str, out: Any) -> None:
    if not isinstance(span, dict):
        raise InputError(f"{where}: expected an object")
    out.trace_id = _jaeger_id(span.get("traceID"), 16, f"{where}.traceID")
    out.span_id = _jaeger_id(span.get("spanID"), 8, f"{where}.spanID")
    refs = span.get("references") or []
    if not isinstance(refs, list):
        raise InputError(f"{where}.references: expected an array")
    parent = next(
        (
            r
            for r in refs
            if isinstance(r, dict)
            and r.get("refType", "CHILD_OF") == "CHILD_OF"
            and r.get("traceID", span.get("traceID")) == span.get("traceID")
        ),
        None,
    )
    if parent is not None:
        out.parent_span_id = _jaeger_id(parent.get("spanID"), 8, f"{where}.references")
    out.name = str(span.get("operationName", ""))
    start, duration = span.get("startTime"), span.get("duration", 0)
    if not isinstance(start, int) or not isinstance(duration, int):
        raise InputError(f"{where}: startTime and duration must be microseconds")
    out.start_time_unix_nano = start * 1000
    out.end_time_unix_nano = (start + max(duration, 0)) * 1000
    tags: dict[str, Any] = {}
    for n, kv in enumerate(span.get("tags") or []):
        key, value = _jaeger_value(kv, f"{where}.tags[{n}]")
        if key in _JAEGER_SPECIAL:
            tags[key] = value
            continue
        attribute = out.attributes.add()
        attribute.key = key
        _set_any(attribute.value, value)
    status = tags.get("otel.status_code")
    if isinstance(status, str) and status.upper() in _JAEGER_STATUS:
        out.status.code = _JAEGER_STATUS[status.upper()]
    elif tags.get("error") in (True, "true"):
        out.status.code = 2
    if isinstance(tags.get("otel.status_description"), str):
        out.status.message = tags["otel.status_description"]
    kind = tags.get("span.kind")
    if isinstance(kind, str) and kind in _JAEGER_KIND:
        out.kind = _JAEGER_KIND[kind]
    for n, log in enumerate(span.get("logs") or []):
        if not isinstance(log, dict):
            raise InputError(f"{where}.logs[{n}]: expected an object")
        event = out.events.add()
        timestamp = log.get("timestamp", 0)
        event.time_unix_nano = timestamp * 1000 if isinstance(timestamp, int) else 0
        for m, kv in enumerate(log.get("fields") or []):
            key, value = _jaeger_value(kv, f"{where}.logs[{n}].fields[{m}]")
            if key == "event" and not event.name:
                event.name = str(value)
                continue
            attribute = event.attributes.add()
            attribute.key = key
            _set_any(attribute.value, value)


def jaeger_request(document: dict[str, Any]) -> Any:
    """Jaeger's JSON (the UI's download, ``/api/traces``: ``{"data": [trace, ...]}``, or one
    trace) as an ``ExportTraceServiceRequest``: one resource per process, the Collector's
    Jaeger translation undone (status, kind and scope tags back to fields, logs to events)."""
    traces = document.get("data") if "data" in document else [document]
    if not isinstance(traces, list):
        raise InputError("data: expected an array of traces")
    request = ExportTraceServiceRequest()
    for t, trace in enumerate(traces):
        if not isinstance(trace, dict):
            raise InputError(f"data[{t}]: expected an object")
        processes = trace.get("processes") or {}
        if not isinstance(processes, dict):
            raise InputError(f"data[{t}].processes: expected an object")
        scopes: dict[str, Any] = {}
        for n, span in enumerate(_list(trace, "spans")):
            where = f"data[{t}].spans[{n}]"
            process_id = str(span.get("processID", "")) if isinstance(span, dict) else ""
            scope_spans = scopes.get(process_id)
            if scope_spans is None:
                resource_spans = request.resource_spans.add()
                process = processes.get(process_id) or (
                    span.get("process") if isinstance(span, dict) else None
                )
                service = process.get("serviceName", "") if isinstance(process, dict) else ""
                attribute = resource_spans.resource.attributes.add()
                attribute.key = "service.name"
                attribute.value.string_value = str(service or "unknown")
                tags = process.get("tags") if isinstance(process, dict) else None
                for m, kv in enumerate(tags or []):
                    key, value = _jaeger_value(kv, f"data[{t}].processes.{process_id}.tags[{m}]")
                    attribute = resource_spans.resource.attributes.add()
                    attribute.key = key
                    _set_any(attribute.value, value)
                scope_spans = scopes[process_id] = resource_spans.scope_spans.add()
            _jaeger_span(span, where, scope_spans.spans.add())
    return request


# -- documents -----------------------------------------------------------------------------------
_API_V3_START = b'{"result"'  # how Jaeger writes its answer: compact, one key


def is_api_v3(document: Any) -> bool:
    """Whether a parsed JSON document is an answer of Jaeger's API v3 (Jaeger 2's
    ``/api/v3/traces``), or a line of its streamed form: a ``result``, or only an ``error`` or
    the ``end``."""
    return (
        type(document) is dict
        and "resourceSpans" not in document
        and (
            "result" in document
            or (len(document) == 1 and ("end" in document or "error" in document))
        )
    )


def api_v3_traces(document: dict[str, Any]) -> dict[str, Any] | None:
    """The OTLP JSON in a Jaeger API v3 answer (``{"result": {"resourceSpans": ...}}``; a span
    search's ``{"result": {"spans": {...}}}``); None for a stream's end marker; InputError for
    an error it reports or a result without traces."""
    if "result" not in document:
        if "end" in document:
            return None
        error = document["error"]
        details = error if isinstance(error, dict) else {"message": error}
        code = f" {details['httpCode']}" if "httpCode" in details else ""
        message = _short(str(details.get("message", "")))
        raise InputError(f"Jaeger API v3 answered an error{code}: {message}")
    result = document["result"]
    if isinstance(result, dict) and isinstance(result.get("spans"), dict):
        result = result["spans"]
    if not isinstance(result, dict) or (result and "resourceSpans" not in result):
        what = _first_keys(result) if isinstance(result, dict) else "no object"
        raise InputError(f"a Jaeger API v3 answer without traces (its result: {what})")
    return result or {"resourceSpans": []}  # a trace without spans marshals as {}


def _first_keys(document: dict[str, Any]) -> str:
    """The six keys of a document that sort first, for a message: linear in its keys."""
    return ", ".join(heapq.nsmallest(6, map(str, document)))


def document_format(document: Any) -> str:
    """Which format a parsed JSON document is in (InputError when none)."""
    if isinstance(document, dict):
        if "resourceSpans" in document or "resource_spans" in document:
            return OTLP_JSON
        if is_api_v3(document):
            return JAEGER
        if "batches" in document:
            return TEMPO
        if isinstance(document.get("trace"), dict):
            return TEMPO
        if isinstance(document.get("data"), list) or (
            "traceID" in document and "spans" in document
        ):
            return JAEGER
        keys = _first_keys(document)
        raise InputError(
            f"not a trace document (OTLP JSON, Jaeger or Tempo); its keys: {keys or 'none'}"
        )
    raise InputError(f"not a trace document: a JSON {type(document).__name__}, not an object")


# what a forced --format accepts besides its own documents (Tempo's are OTLP JSON inside)
_READS_ALSO = {TEMPO: OTLP_JSON}


def document_views(document: Any, forced: str, failed: RequestError | None = None) -> JsonDecoded:
    """A parsed JSON document's span views. ``failed``: what the decoder said of the very bytes
    this document was read from, the answer for an OTLP JSON one."""
    kind = document_format(document) if forced == AUTO else forced
    if not isinstance(document, dict):
        raise InputError(f"not a {kind} document: a JSON {type(document).__name__}")
    if forced != AUTO and forced != OTLP_PROTO:
        # a document of another format would read as no spans at all: say which it is
        found = document_format(document)
        if found not in (forced, _READS_ALSO.get(forced)):
            raise InputError(f"--format {forced}, but this document is {found}")
    if kind == JAEGER:
        try:
            decoded = span_views(jaeger_request(document))
        except RequestError as e:
            raise InputError(str(e)) from None
        return JsonDecoded(decoded.spans, decoded.rejected)
    if kind == TEMPO:
        if isinstance(document.get("trace"), dict):  # /api/v2/traces/<id>
            document = document["trace"]
        elif "batches" in document:  # /api/traces/<id>
            document = {"resourceSpans": _list(document, "batches")}
        return otlp_views(document)
    if kind == OTLP_JSON:
        if failed is not None:
            raise InputError(str(failed))
        return otlp_views(document)
    raise InputError(f"--format {kind} does not read JSON")


# -- one file ------------------------------------------------------------------------------------
Batch = list[SpanView]
_Read = TypeVar("_Read")


@dataclass
class Reader:
    """Span views from stored traces, a request (a line, message or document) at a time."""

    paths: list[str]
    forced: str = AUTO
    stats: ReadStats = field(default_factory=ReadStats)
    on_file: Callable[[int, str], None] | None = None  # (index, name) as each file starts
    # where a line of OTLP logs goes (its records, in the order of the file); None: not read
    on_logs: Callable[[list[LogView]], None] | None = None

    def batches(self) -> Iterator[Batch]:
        names = expand(self.paths, self.stats)
        self.stats.files = len(names)
        for index, name in enumerate(names):
            if self.on_file is not None:
                self.on_file(index, name)
            before = self.stats.spans + self.stats.log_records
            try:
                with _open(name, self.stats) as stream:
                    yield from self._file(name, stream)
            except OSError as e:
                self.stats.problem(_label(name), f"cannot read: {e.strerror or e}")
            except corrupt_errors() as e:
                self.stats.problem(_label(name), f"compressed data is truncated or corrupt ({e})")
            if self.stats.spans + self.stats.log_records > before:
                self.stats.files_read += 1

    def _file(self, name: str, stream: Any) -> Iterator[Batch]:
        label = _label(name)
        head = _peek(stream, 4)
        decompressing = None
        if head.startswith(GZIP_MAGIC):
            decompressing = gunzip(stream)
        elif head.startswith(ZSTD_MAGIC):
            if not zstd_available():
                self.stats.problem(
                    label,
                    f"{ZSTD_MISSING}; or decompress it first: zstd -dc FILE | loopwatch replay -",
                )
                return
            decompressing = unzstd(stream)
        if decompressing is not None:
            stream = io.BufferedReader(decompressing, buffer_size=1 << 20)
            head = _peek(stream, 4)
            if not head and decompressing.truncated:
                self.stats.problem(label, "compressed data is truncated before any content")
                return
        yield from self._content(label, stream, head)
        if decompressing is not None and decompressing.truncated:
            self.stats.problem(label, "compressed data is truncated (read up to the cut)")

    def _content(self, label: str, stream: Any, head: bytes) -> Iterator[Batch]:
        if not head:
            self.stats.problem(label, "empty file")
            return
        first = head.lstrip()[:1]
        if self.forced == OTLP_PROTO or (self.forced == AUTO and first not in (b"{", b"[")):
            if head[:1] == b"\x00":
                yield from self._proto_stream(label, stream)
            elif head[:1] == b"\x0a" or self.forced == OTLP_PROTO:
                yield from self._proto_single(label, stream)
            elif not first:  # whitespace only so far
                yield from self._json(label, stream)
            else:
                self.stats.problem(
                    label,
                    "not a trace file (OTLP JSON or protobuf, Jaeger or Tempo JSON; "
                    f"starts with bytes {head.hex()})",
                )
            return
        if first and first not in (b"{", b"["):  # a JSON format forced on another
            self.stats.problem(
                label,
                f"not JSON, which --format {self.forced} reads (starts with bytes {head.hex()})",
            )
            return
        yield from self._json(label, stream)

    def _counted(self, read: JsonDecoded, where: str) -> Batch:
        if read.base64_ids:
            self.stats.note(f"{where}: ids in base64 (protobuf's JSON mapping) read as such")
        return self._taken(read.spans, read.rejected, where)

    def _views(self, request: Any, where: str) -> Batch:
        try:
            decoded = span_views(request)
        except RequestError as e:
            raise InputError(str(e)) from None
        return self._taken(decoded.spans, decoded.rejected, where)

    def _taken(self, spans: Batch, rejected: int, where: str) -> Batch:
        """One unit's spans, counted (and those rejected for invalid ids)."""
        if rejected:
            self.stats.rejected_spans += rejected
            dropped = counted(rejected, "span")
            self.stats.note(f"{where}: {dropped} with an invalid trace or span id left out")
        self.stats.units += 1
        self.stats.spans += len(spans)
        return spans

    def _proto_single(self, label: str, stream: Any) -> Iterator[Batch]:
        body = stream.read(MAX_UNIT_BYTES + 1)
        if len(body) > MAX_UNIT_BYTES:
            self.stats.problem(
                label,
                f"one protobuf message over {MAX_UNIT_BYTES:,} bytes: not read (the file "
                "exporter's length-prefixed stream, format: proto, is read a message at a time)",
            )
            return
        try:
            views = self._views(parse_protobuf(body), label)
        except (RequestError, InputError) as e:
            self.stats.problem(label, str(e))
            return
        yield views

    def _proto_stream(self, label: str, stream: Any) -> Iterator[Batch]:
        """The file exporter's ``format: proto``: each message after its length (4 bytes, big
        endian)."""
        offset = 0
        n = 0
        while True:
            prefix = stream.read(4)
            if not prefix:
                return
            n += 1
            where = f"{label}: message {n} (byte {offset})"
            if len(prefix) < 4:
                self.stats.problem(where, "truncated length prefix at the end of the file")
                return
            size = int.from_bytes(prefix, "big")
            if size > MAX_UNIT_BYTES:
                self.stats.problem(where, f"length prefix {size} is not plausible; rest skipped")
                return
            body = stream.read(size)
            offset += 4 + len(body)
            if len(body) < size:
                self.stats.problem(
                    where, f"truncated: {len(body)} of {size} bytes at the end of the file"
                )
                return
            if body.startswith(ZSTD_MAGIC):  # the file exporter's older compression: zstd
                if not zstd_available():
                    self.stats.problem(label, f"its messages are {ZSTD_MISSING}")
                    return
                try:
                    body = unzstd_message(body, MAX_UNIT_BYTES)
                except corrupt_errors() as e:
                    self.stats.problem(where, f"compressed data is corrupt ({e})")
                    continue
                except ValueError as e:
                    self.stats.problem(where, str(e))
                    continue
                if body.lstrip()[:1] == b"{":  # format: json, compressed
                    yield from self._line(body, where)
                    continue
            try:
                yield self._views(parse_protobuf(body), where)
            except (RequestError, InputError) as e:
                self.stats.problem(where, str(e))

    def _json(self, label: str, stream: Any) -> Iterator[Batch]:
        """One request per line, as the file exporter writes; or, when the first line is not a
        whole document (a pretty-printed Jaeger or Tempo download), the file as one document."""
        line_no = 0
        first = True
        while line := stream.readline(MAX_UNIT_BYTES + 1):
            line_no += 1
            if len(line) > MAX_UNIT_BYTES:
                if not line.endswith(b"\n"):
                    _skip_line(stream)
                self.stats.problem(
                    f"{label}:{line_no}", f"a line over {MAX_UNIT_BYTES:,} bytes: skipped"
                )
                first = False
                continue
            # the file exporter's lines, whitespace and all: the decoder
            read = decoded_line(line, self.forced)
            if isinstance(read, JsonDecoded):
                first = False
                yield self._counted(read, f"{label}:{line_no}")
                continue
            text = line.strip()
            if not text:
                continue
            if first:
                first = False
                try:
                    document = json.loads(text)
                except json.JSONDecodeError as e:
                    continued = e.pos >= len(text) - 1 and text[:1] in (b"{", b"[")
                except (UnicodeDecodeError, ValueError, RecursionError):
                    continued = False
                else:
                    yield from self._document(document, f"{label}:{line_no}", read)
                    continue
                if continued:
                    rest = text + b"\n" + stream.read(MAX_UNIT_BYTES + 1 - len(text))
                    if len(rest) > MAX_UNIT_BYTES:
                        self.stats.problem(
                            label,
                            f"a JSON document over {MAX_UNIT_BYTES:,} bytes: not read (write "
                            "it as one request a line, as the file exporter does, or split it)",
                        )
                        return
                    read = decoded_line(rest, self.forced)
                    if isinstance(read, JsonDecoded):
                        yield self._counted(read, label)
                        return
                    try:
                        document = json.loads(rest)
                    except (UnicodeDecodeError, ValueError, RecursionError):
                        # not one document either: lines after all, the first one broken
                        yield from self._lines(label, rest.split(b"\n"), line_no - 1)
                        return
                    yield from self._document(document, label, read)
                    return
            yield from self._parsed(text, f"{label}:{line_no}", read)
        if line_no == 0:
            self.stats.problem(label, "empty file")

    def _logs(self, document: Any, where: str) -> None:
        """One OTLP logs request (the coding agents' events): its records to ``on_logs``."""
        if self.on_logs is None:
            self.stats.problem(where, "OTLP logs: not read here")
            return
        views = self._or_problem(where, lambda: log_views(logs_request(document)))
        if views is None:
            return
        self.stats.units += 1
        self.stats.log_records += len(views)
        self.on_logs(views)

    def _lines(self, label: str, lines: list[bytes], before: int) -> Iterator[Batch]:
        for n, line in enumerate(lines, before + 1):
            text = line.strip()
            if text:
                yield from self._line(text, f"{label}:{n}")

    def _line(self, text: bytes, where: str) -> Iterator[Batch]:
        read = decoded_line(text, self.forced)
        if isinstance(read, JsonDecoded):
            yield self._counted(read, where)
            return
        yield from self._parsed(text, where, read)

    def _parsed(self, text: bytes, where: str, failed: RequestError | None) -> Iterator[Batch]:
        """A line the decoder did not read, through Python's json module: another format's
        document, or what the decoder found wrong said (``failed``), or why it is not JSON."""
        try:
            document = json.loads(text)
        except (UnicodeDecodeError, ValueError) as e:
            self.stats.problem(where, f"not JSON: {_short(str(e))}")
            return
        except RecursionError:
            self.stats.problem(where, "not JSON: nested too deeply")
            return
        yield from self._document(document, where, failed)

    def _document(
        self, document: Any, where: str, failed: RequestError | None = None
    ) -> Iterator[Batch]:
        """One parsed JSON document: its spans as a batch, or its log records to ``on_logs``."""
        forced = self.forced
        if forced in (AUTO, OTLP_JSON) and is_logs_document(document):
            self._logs(document, where)
            return
        if forced != TEMPO and is_api_v3(document):  # Jaeger 2: OTLP JSON inside
            try:
                document = api_v3_traces(document)
            except InputError as e:
                self.stats.problem(where, str(e))
                return
            if document is None:  # the end of a streamed answer
                return
            forced = OTLP_JSON
        read = self._or_problem(where, lambda: document_views(document, forced, failed))
        if read is not None:
            yield self._counted(read, where)

    def _or_problem(self, where: str, read: Callable[[], _Read]) -> _Read | None:
        """``read()``; None when the input is wrong, what is wrong a problem at ``where``."""
        try:
            return read()
        except (RequestError, InputError) as e:
            self.stats.problem(where, str(e))
        except RecursionError:
            self.stats.problem(where, "nested too deeply")
        return None


def decoded_line(line: bytes, forced: str = AUTO) -> JsonDecoded | RequestError | None:
    """A line through the service's decoder: the file exporter's request, or Jaeger's API v3
    answer (OTLP JSON under ``result``), read; what is wrong with it; None when it names no
    spans (a Jaeger or Tempo document: the general path reads it) or ``forced`` reads no such
    line."""
    if forced not in (AUTO, OTLP_JSON, JAEGER):
        return None
    api_v3 = line.startswith(_API_V3_START)  # decided first: a failed decode scans the line
    if forced == JAEGER and not api_v3:
        return None
    try:
        read = decode(line, api_v3)
    except RequestError as e:
        return e
    return read if read.names_spans else None


def _skip_line(stream: Any) -> None:
    """Past the next newline, a chunk at a time."""
    while chunk := stream.readline(_SKIP_CHUNK):
        if chunk.endswith(b"\n"):
            return


def _label(name: str) -> str:
    return "<stdin>" if name == STDIN else name
