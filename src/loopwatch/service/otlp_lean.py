"""``LeanRequest``: opentelemetry-proto's ``ExportTraceServiceRequest`` with each span's
attributes left as their serialized ``KeyValue`` bytes.

Built at import with protobuf's descriptor API from opentelemetry-proto's own trace.proto: the
same messages and field numbers, only ``Span.attributes`` (field 9) is ``repeated bytes`` and
``Span.status`` (field 15) is ``bytes``, which the wire format allows (both are
length-delimited). Parsing it costs no Python object per attribute, and the service decodes
only the attributes it keeps (otlp.py), with the official ``KeyValue``; a span's status, unset
on most spans, is decoded with the official ``Status`` only when present. Events, links, scope
and resource stay the official messages."""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from opentelemetry.proto.trace.v1 import trace_pb2

_PACKAGE = "loopwatch.otlp_lean"
_OFFICIAL = "." + trace_pb2.DESCRIPTOR.package + "."
_FIELD = descriptor_pb2.FieldDescriptorProto


def _rename(message: descriptor_pb2.DescriptorProto) -> None:
    # the copied messages refer to each other under the new package
    for f in message.field:
        if f.type_name.startswith(_OFFICIAL):
            f.type_name = f".{_PACKAGE}.{f.type_name[len(_OFFICIAL) :]}"
    for nested in message.nested_type:
        _rename(nested)


def _build() -> Any:
    file = descriptor_pb2.FileDescriptorProto()
    trace_pb2.DESCRIPTOR.CopyToProto(file)  # proto3, with common.proto and resource.proto
    file.name = "loopwatch/otlp_lean.proto"
    file.package = _PACKAGE
    file.ClearField("options")
    for message in file.message_type:
        _rename(message)
    span = next(m for m in file.message_type if m.name == "Span")
    for field in span.field:
        if field.number in (9, 15):  # attributes, status
            field.type = _FIELD.TYPE_BYTES
            field.ClearField("type_name")
    # ExportTraceServiceRequest: field 1, repeated ResourceSpans
    request = file.message_type.add(name="ExportTraceServiceRequest")
    request.field.add(
        name="resource_spans",
        number=1,
        label=_FIELD.LABEL_REPEATED,
        type=_FIELD.TYPE_MESSAGE,
        type_name=f".{_PACKAGE}.ResourceSpans",
        json_name="resourceSpans",
    )
    pool = descriptor_pool.Default()  # holds the official files this one imports
    pool.AddSerializedFile(file.SerializeToString())
    found = pool.FindMessageTypeByName(f"{_PACKAGE}.ExportTraceServiceRequest")
    return message_factory.GetMessageClass(found)


LeanRequest: Any = _build()

__all__ = ["LeanRequest"]
