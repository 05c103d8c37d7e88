"""A request/response pair, read from its payloads, as inference events of the contract (docs/contract.md).

One event per row: features from the request by the registered feature names, the prediction from
the response, `ts` the request half's time, `latency_ms.total` the time between the halves, the
ce-id as the request id (`ID:i` for row i of a several-row request, as the worker's Open Inference
Protocol does), and the KServe extensions as tags. The event id is derived from the pair's key and
the row, so a pair received twice makes the same events (the collector keeps one of each).
A request of a version's raw inputs (what a logger in front of the bundled worker records: the inputs
its model metadata lists) goes through the version's registered transform, as the worker does: the
event carries the transform's `features` and the raw `inputs` (for the parity-skew check).
"""
from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from driftline.events import INFERENCE_SCHEMA, REQUEST_ID_CHARS, EventError, rfc3339
from driftline.receiver.lookups import VersionSchema
from driftline.receiver.pairing import Half
from driftline.receiver.payloads import request_rows, response_error, response_predictions

# the KServe extension attributes kept as event tags (tag name -> attribute)
TAG_ATTRIBUTES = {"inferenceservice": "inferenceservicename", "namespace": "namespace",
                  "component": "component", "endpoint": "endpoint"}
# where a half's hints from the logger URL or the headers live among its attributes
HINT_MODEL = "driftline.model"
HINT_VERSION = "driftline.version"
HINT_OUTPUT = "driftline.output"
_EVENT_IDS = uuid.UUID("6d1f0a52-3c2e-4b8e-9a57-0d6c1f1e7a10")  # the namespace of derived event ids


def parse_ce_time(value: str | None) -> float | None:
    """A CloudEvent `time` (RFC 3339, up to nanoseconds as Go writes it) in epoch milliseconds; None if unreadable."""
    if not value:
        return None
    text = value.strip().replace("z", "Z").replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:  # Python reads at most microseconds: cut the fraction to six digits
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = f"{head}.{rest[:min(digits, 6)]}{rest[digits:]}"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when.timestamp() * 1000 if when.tzinfo is not None else None


def model_of(request: Half, response: Half) -> str | None:
    """The model: the logger URL's `model`, else the InferenceService's name, else a v2 body's `model_name`."""
    for half in (request, response):
        if half.attributes.get(HINT_MODEL):
            return half.attributes[HINT_MODEL]
    for half in (request, response):
        if half.attributes.get("inferenceservicename"):
            return half.attributes["inferenceservicename"]
    for half in (response, request):
        if isinstance(half.data, dict) and isinstance(half.data.get("model_name"), str) and half.data["model_name"]:
            return half.data["model_name"]
    return None


def version_of(request: Half, response: Half) -> str | None:
    """The version the halves name: the logger URL's `version` or the X-Driftline-Version header, else the
    v2 response's `model_version`; None: the caller asks the store for the production version."""
    for half in (request, response):
        if half.attributes.get(HINT_VERSION):
            return half.attributes[HINT_VERSION]
    for half in (response, request):
        version = half.data.get("model_version") if isinstance(half.data, dict) else None
        if isinstance(version, (str, int)) and not isinstance(version, bool) and str(version):
            return str(version)
    return None


def request_id_problem(ce_id: str, rows: int) -> str | None:
    """Why the request ids of a `rows`-row request of `ce_id` cannot be stored (`ID:i` is longer than the id),
    or None."""
    longest = len(ce_id) if rows <= 1 else len(f"{ce_id}:{rows - 1}")
    if longest <= REQUEST_ID_CHARS:
        return None
    suffix = "" if rows <= 1 else f" (with the row suffix ':{rows - 1}' of a {rows}-row request)"
    return (f"the request id is {longest} characters{suffix}, above the limit of {REQUEST_ID_CHARS} (the store's "
            f"request_id): send a ce-id of at most {REQUEST_ID_CHARS - (longest - len(ce_id))} characters")


def feature_rows(doc: Any, schema: VersionSchema) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """(features, raw inputs) of a request body: the inputs are None unless the registered transform made the
    features from them (a row lacks registered features and holds names the baseline does not know)."""
    rows = request_rows(doc, schema.features, schema.inputs)
    if schema.transform is None or schema.features is None:
        return rows, None
    registered = set(schema.features)
    if not any(not registered.issubset(row) and not registered.issuperset(row) for row in rows):
        return rows, None
    try:
        features = [dict(row) for row in schema.transform(rows)]
    except Exception as exc:  # noqa: BLE001 - a user's transform: its failure is this pair's reason
        raise EventError(f"the version's registered transform failed on the request's raw inputs: "
                         f"{type(exc).__name__}: {str(exc)[:300]}", "inputs") from None
    if len(features) != len(rows):
        raise EventError(f"the version's registered transform made {len(features)} rows of {len(rows)}", "inputs")
    return features, rows


def pair_events(request: Half, response: Half, model: str, version: str,
                schema: VersionSchema | None = None) -> list[dict[str, Any]]:
    """The pair's events (not yet validated); `EventError` when a payload cannot be read."""
    rows, inputs = feature_rows(request.data, schema or VersionSchema())
    problem = request_id_problem(request.ce_id, len(rows))
    if problem is not None:
        raise EventError(problem, "id")
    error = response_error(response.data)
    if error is None:
        output = response.attributes.get(HINT_OUTPUT) or request.attributes.get(HINT_OUTPUT)
        predictions = response_predictions(response.data, output)
        if len(predictions) != len(rows):
            raise EventError(f"the response has {len(predictions)} predictions for {len(rows)} request rows",
                             "predictions")
    else:
        predictions = [None] * len(rows)
    latency = max(0.0, response.time_ms - request.time_ms)
    tags = {tag: request.attributes[attr] for tag, attr in TAG_ATTRIBUTES.items() if request.attributes.get(attr)}
    key = "/".join(str(part) for part in request.key) if isinstance(request.key, tuple) else str(request.key)
    events = []
    for i, (features, prediction) in enumerate(zip(rows, predictions)):
        event: dict[str, Any] = {
            "schema": INFERENCE_SCHEMA,
            "event_id": str(uuid.uuid5(_EVENT_IDS, f"{key}#{i}")),
            "request_id": request.ce_id if len(rows) == 1 else f"{request.ce_id}:{i}",
            "ts": rfc3339(request.time_ms),
            "model": model,
            "version": version,
            "features": features,
            "latency_ms": {"total": round(latency, 3)},
            "status": "ok" if error is None else "error",
        }
        if inputs is not None:
            event["inputs"] = inputs[i]
        if error is None:
            event["prediction"] = prediction
        else:
            event["error"] = error
        if len(rows) > 1:
            event["batch_size"] = len(rows)
        if tags:
            event["tags"] = tags
        events.append(event)
    return events
