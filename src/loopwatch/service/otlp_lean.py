"""``LeanRequest``: opentelemetry-proto's ``ExportTraceServiceRequest`` with each span's
attributes left as their serialized ``KeyValue`` bytes; ``RawSpanRequest``: the same with each
whole span left serialized, for the compiled build's reading of spans (otlp_wire.py).

Built at import with protobuf's descriptor API from opentelemetry-proto's own trace.proto: the
same messages and field numbers, only ``Span.attributes`` (field 9) is ``repeated bytes`` and
``Span.status`` (field 15) is ``bytes``, which the wire format allows (both are
length-delimited). Parsing it costs no Python object per attribute, and the service decodes
only the attributes it keeps (otlp.py), with the official ``KeyValue``; a span's status, unset
on most spans, is decoded with the official ``Status`` only when present. Events, links, scope
and resource stay the official messages. ``LeanSpan`` is the lean ``Span`` alone: what a span
left serialized in a ``RawSpanRequest`` parses as when its layout is unusual."""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from opentelemetry.proto.trace.v1 import trace_pb2

_PACKAGE = "loopwatch.otlp_lean"
_RAW_PACKAGE = "loopwatch.otlp_raw"
_OFFICIAL = "." + trace_pb2.DESCRIPTOR.package + "."
_FIELD = descriptor_pb2.FieldDescriptorProto


def _rename(message: descriptor_pb2.DescriptorProto, package: str) -> None:
    # the copied messages refer to each other under the new package
    for f in message.field:
        if f.type_name.startswith(_OFFICIAL):
            f.type_name = f".{package}.{f.type_name[len(_OFFICIAL) :]}"
    for nested in message.nested_type:
        _rename(nested, package)


def _as_bytes(message: descriptor_pb2.DescriptorProto, numbers: tuple[int, ...]) -> None:
    for field in message.field:
        if field.number in numbers:
            field.type = _FIELD.TYPE_BYTES
            field.ClearField("type_name")


def _build(package: str, raw_spans: bool) -> None:
    """Add the lean copy of trace.proto under ``package`` to protobuf's default pool."""
    file = descriptor_pb2.FileDescriptorProto()
    trace_pb2.DESCRIPTOR.CopyToProto(file)  # proto3, with common.proto and resource.proto
    file.name = f"{package.replace('.', '/')}.proto"
    file.package = package
    file.ClearField("options")
    for message in file.message_type:
        _rename(message, package)
    messages = {m.name: m for m in file.message_type}
    _as_bytes(messages["Span"], (9, 15))  # attributes, status
    if raw_spans:
        _as_bytes(messages["ScopeSpans"], (2,))  # spans
    # ExportTraceServiceRequest: field 1, repeated ResourceSpans
    request = file.message_type.add(name="ExportTraceServiceRequest")
    request.field.add(
        name="resource_spans",
        number=1,
        label=_FIELD.LABEL_REPEATED,
        type=_FIELD.TYPE_MESSAGE,
        type_name=f".{package}.ResourceSpans",
        json_name="resourceSpans",
    )
    # the default pool holds the official files this one imports
    descriptor_pool.Default().AddSerializedFile(file.SerializeToString())


def _message(name: str) -> Any:
    return message_factory.GetMessageClass(descriptor_pool.Default().FindMessageTypeByName(name))


_build(_PACKAGE, raw_spans=False)
_build(_RAW_PACKAGE, raw_spans=True)
LeanRequest: Any = _message(f"{_PACKAGE}.ExportTraceServiceRequest")
LeanSpan: Any = _message(f"{_PACKAGE}.Span")
RawSpanRequest: Any = _message(f"{_RAW_PACKAGE}.ExportTraceServiceRequest")

__all__ = ["LeanRequest", "LeanSpan", "RawSpanRequest"]
