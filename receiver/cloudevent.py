"""CloudEvents over HTTP (spec v1.0, HTTP protocol binding): binary, structured and batched content modes.

Binary mode (what KServe's logger sends): the attributes are `ce-*` headers and the body is the data.
Structured mode (`application/cloudevents+json`): one JSON object holding the attributes and `data`
(or `data_base64`). Batched mode (`application/cloudevents-batch+json`): a JSON array of those.
Attribute names come back lower-case without the `ce-` prefix: id, type, source, time, and the
extensions (KServe's inferenceservicename, namespace, component, endpoint, ...).
"""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, Mapping

import orjson

from driftline.events import EventError
from driftline.json_types import json_type_name

STRUCTURED = "application/cloudevents+json"
BATCHED = "application/cloudevents-batch+json"
REQUIRED = ("id", "type", "source")


@dataclass(slots=True)
class CloudEvent:
    attributes: dict[str, str]
    data: bytes  # the data as bytes (JSON text for a JSON payload)


def from_http(headers: Mapping[str, str], body: bytes) -> list[CloudEvent]:
    """The CloudEvents of one HTTP request; `EventError` when it is none of the three modes, or lacks an attribute."""
    content_type = (headers.get("content-type") or "").split(";")[0].strip().lower()
    if content_type == STRUCTURED:
        return [_structured(_json(body), "")]
    if content_type == BATCHED:
        docs = _json(body)
        if not isinstance(docs, list):
            raise EventError(f"a batch is a JSON array of events, got {json_type_name(docs)}")
        return [_structured(doc, f"[{i}]") for i, doc in enumerate(docs)]
    attributes = {name[3:].lower(): value for name, value in headers.items() if name.lower().startswith("ce-")}
    if not attributes:
        raise EventError("not a CloudEvent: no ce-* headers (binary mode) and the content type is not "
                         f"{STRUCTURED} (structured mode)")
    if content_type:
        attributes.setdefault("datacontenttype", content_type)
    _require(attributes, "ce-")
    return [CloudEvent(attributes, body)]


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise EventError(f"not JSON: {exc}") from None


def _structured(doc: Any, where: str) -> CloudEvent:
    if not isinstance(doc, dict):
        raise EventError(f"a structured CloudEvent is a JSON object, got {json_type_name(doc)}", where or None)
    attributes = {str(k).lower(): v if isinstance(v, str) else orjson.dumps(v).decode()
                  for k, v in doc.items() if k not in ("data", "data_base64")}
    _require(attributes, f"{where}." if where else "")
    if "data_base64" in doc:
        try:
            data = base64.b64decode(doc["data_base64"], validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise EventError("not valid base64", f"{where}.data_base64" if where else "data_base64") from None
    else:
        value = doc.get("data")
        # a JSON payload is inlined as JSON; some producers send JSON text as a string instead
        data = value.encode() if isinstance(value, str) else orjson.dumps(value)
    return CloudEvent(attributes, data)


def _require(attributes: dict[str, str], prefix: str) -> None:
    for name in REQUIRED:
        if not attributes.get(name):
            raise EventError("required CloudEvent attribute is missing", f"{prefix}{name}")
