"""OTLP trace export requests (protobuf or OTLP/JSON) into plain, bounded spans.

Both encodings are read into opentelemetry-proto's `ExportTraceServiceRequest` (OTLP/JSON's hex trace and span
ids are turned into the base64 the protobuf JSON mapping reads), then into `Span`s holding only what the mapping
reads: ids, name, times, status, scalar and array attributes (strings cut at `OTLP_MAX_ATTRIBUTE_CHARS`, arrays at
`OTLP_MAX_ARRAY_ITEMS`, at most `OTLP_MAX_ATTRIBUTES_PER_SPAN` of them) and the first `OTLP_MAX_EVENTS_PER_SPAN`
span events. A body that is neither raises `OtlpError` with the reason; a span without valid ids is rejected and
counted, as OTLP's partial success reports it.
"""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Iterable

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from driftline import defaults

STATUS_ERROR = 2  # opentelemetry.proto.trace.v1.Status.STATUS_CODE_ERROR
_ID_FIELDS = (("traceId", 16), ("spanId", 8), ("parentSpanId", 8))
Attributes = dict[str, Any]


class OtlpError(ValueError):
    """Why an OTLP body cannot be read at all."""


@dataclass(slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: Attributes


@dataclass(slots=True)
class Span:
    """One span, as far as the mapping reads it; `resource`: its resource's attributes (shared by its spans)."""

    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_id: str  # "" for a root span
    name: str
    kind: int
    start_ns: int
    end_ns: int
    error: bool
    status_message: str
    attributes: Attributes
    flags: int = 0  # OTLP span flags (the parent's is-remote bits)
    size: int = 0  # bytes it holds, roughly (its strings and 64 a value): what a waiting trace is charged
    events: list[SpanEvent] = field(default_factory=list)
    resource: Attributes = field(default_factory=dict)
    dropped_events: int = 0


@dataclass
class Decoded:
    spans: list[Span]
    rejected: int = 0  # spans without valid ids, or beyond the call's bound
    reasons: list[str] = field(default_factory=list)


def decode_protobuf(body: bytes) -> Decoded:
    """An `application/x-protobuf` body; OtlpError when it is no ExportTraceServiceRequest."""
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise OtlpError(f"not an OTLP ExportTraceServiceRequest in protobuf: {str(exc)[:200]}") from None
    return from_request(request)


def decode_json(body: bytes) -> Decoded:
    """An `application/json` body (OTLP/JSON: hex ids, camelCase or snake_case fields); OtlpError otherwise."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OtlpError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise OtlpError("expected an OTLP/JSON object with \"resourceSpans\"")
    rejected = _hex_ids_to_base64(doc)
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(doc, request, ignore_unknown_fields=True, max_recursion_depth=64)
    except (json_format.ParseError, RecursionError, ValueError, TypeError) as exc:
        raise OtlpError(f"not an OTLP/JSON ExportTraceServiceRequest: {str(exc)[:200]}") from None
    decoded = from_request(request)
    decoded.rejected += rejected
    return decoded


def to_otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """A request as OTLP/JSON (`decode_json`'s inverse): the protobuf JSON mapping, with hex trace and span ids."""
    doc = json_format.MessageToDict(request)
    for resource_spans in doc.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key, _ in _ID_FIELDS:
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return doc


def _hex_ids_to_base64(doc: dict[str, Any]) -> int:
    """OTLP/JSON writes ids in hex where the protobuf JSON mapping reads base64: converted in place; a span whose
    ids are not hex of the right length is removed, and counted."""
    removed = 0
    for resource_spans in _items(doc, "resourceSpans", "resource_spans"):
        for scope_spans in _items(resource_spans, "scopeSpans", "scope_spans"):
            spans = scope_spans.get("spans") if isinstance(scope_spans, dict) else None
            if not isinstance(spans, list):
                continue
            kept = []
            for span in spans:
                if isinstance(span, dict) and _convert_ids(span):
                    kept.append(span)
                else:
                    removed += 1
            scope_spans["spans"] = kept
    return removed


def _items(doc: Any, *names: str) -> list[Any]:
    if not isinstance(doc, dict):
        return []
    for name in names:
        value = doc.get(name)
        if isinstance(value, list):
            return value
    return []


def _convert_ids(span: dict[str, Any]) -> bool:
    span.pop("links", None)  # not read; their ids would need the same conversion
    for name, width in _ID_FIELDS:
        snake = "".join("_" + c.lower() if c.isupper() else c for c in name)
        key = name if name in span else snake
        value = span.get(key)
        if value in (None, "") and name == "parentSpanId":
            span.pop(key, None)
            continue
        if not isinstance(value, str) or len(value) != 2 * width:
            return False
        try:
            span[key] = base64.b64encode(binascii.unhexlify(value)).decode()
        except (binascii.Error, ValueError):
            return False
    return True


def from_request(request: ExportTraceServiceRequest) -> Decoded:
    """The request's spans, bounded (`OTLP_MAX_SPANS_PER_CALL`; the rest rejected)."""
    out = Decoded([])
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if len(out.spans) >= defaults.OTLP_MAX_SPANS_PER_CALL:
                    out.rejected += 1
                    continue
                if len(span.trace_id) != 16 or len(span.span_id) != 8 or not any(span.trace_id):
                    out.rejected += 1
                    if len(out.reasons) < 3:
                        out.reasons.append(f"span {span.name[:64]!r}: a trace id of 16 bytes and a span id of 8")
                    continue
                out.spans.append(_span(span, resource))
    if out.rejected > len(out.reasons) and len(out.reasons) < 3:
        out.reasons.append(f"{out.rejected} spans rejected (ids, or more than {defaults.OTLP_MAX_SPANS_PER_CALL} "
                           "spans in one call)")
    return out


def _span(span: Any, resource: Attributes) -> Span:
    events = [SpanEvent(event.name[:256], event.time_unix_nano, _attributes(event.attributes))
              for event in span.events[:defaults.OTLP_MAX_EVENTS_PER_SPAN]]
    attributes = _attributes(span.attributes)
    size = 256 + _size(attributes) + sum(64 + _size(event.attributes) for event in events)
    return Span(trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                parent_id=span.parent_span_id.hex() if len(span.parent_span_id) == 8 else "",
                name=span.name[:256], kind=int(span.kind), start_ns=span.start_time_unix_nano,
                end_ns=max(span.end_time_unix_nano, span.start_time_unix_nano),
                error=span.status.code == STATUS_ERROR, status_message=span.status.message[:1000],
                attributes=attributes, events=events, resource=resource, size=size,
                flags=int(span.flags), dropped_events=max(0, len(span.events) - defaults.OTLP_MAX_EVENTS_PER_SPAN))


def _size(attributes: Attributes) -> int:
    total = 0
    for key, value in attributes.items():
        total += 64 + len(key)
        if isinstance(value, str):
            total += len(value)
        elif isinstance(value, list):
            total += sum(64 + (len(v) if isinstance(v, str) else 0) for v in value)
    return total


def _attributes(pairs: Iterable[Any]) -> Attributes:
    out: Attributes = {}
    for pair in pairs:
        if len(out) >= defaults.OTLP_MAX_ATTRIBUTES_PER_SPAN:
            break
        value = _value(pair.value)
        if value is not None:
            out[pair.key[:256]] = value
    return out


def _value(value: Any) -> Any:
    """A scalar (cut), or a list of scalars (cut); None for bytes, maps and nested arrays (never read)."""
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value[:defaults.OTLP_MAX_ATTRIBUTE_CHARS]
    if which in ("bool_value", "int_value", "double_value"):
        return getattr(value, which)
    if which == "array_value":
        items = []
        for item in value.array_value.values[:defaults.OTLP_MAX_ARRAY_ITEMS]:
            kind = item.WhichOneof("value")
            if kind == "string_value":
                items.append(item.string_value[:defaults.OTLP_MAX_ATTRIBUTE_CHARS])
            elif kind in ("bool_value", "int_value", "double_value"):
                items.append(getattr(item, kind))
        return items
    return None
