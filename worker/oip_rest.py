"""Open Inference Protocol v2 over REST on the worker's port: health, metadata and infer (docs/worker.md).

A thin adapter: the JSON tensors become rows (worker/oip.py), the rows go through the same path as
POST /predict (`Worker.predict_rows`: admission, rollout routing, cache, dynamic batcher, one event
per row). Errors use the protocol's shape, `{"error": "..."}`: 400 bad input, 404 unknown model or
version, 413 a body above the limit, 503 overloaded (with Retry-After), 500 a model failure.
Only the JSON tensor encoding is read: the binary tensor extension (a request carrying
Inference-Header-Content-Length) is refused with 400; a request asking for binary outputs gets JSON.
"""
from __future__ import annotations

import logging
import time
from importlib.metadata import PackageNotFoundError, version as package_version
from typing import TYPE_CHECKING, Any, Sequence

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.requests import ClientDisconnect

from driftline import defaults
from driftline.events import REQUEST_ID_CHARS
from driftline.json_types import json_type_name
from driftline.worker.batcher import BatcherFull
from driftline.worker.metrics import PROTOCOL_V2_REST
from driftline.worker.oip import (OUTPUT_NAME, OipError, Tensor, answer_version, check_model, check_rows, model_metadata,
                                  pinned, predictions, rows_from_tensors, served_versions)
from driftline.worker.validation import InputError, PredictRequest

if TYPE_CHECKING:
    from driftline.worker.server import Worker

log = logging.getLogger(__name__)

SERVER_NAME = "driftline"


def _json(document: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(document), status_code=status, media_type="application/json")


def _error(message: str, status: int) -> Response:
    return _json({"error": message}, status)


def check_row_ids(rows: Sequence[PredictRequest]) -> None:
    """OipError (400) when a row's request id, with its row suffix (`ID:i`), is longer than the store holds: the
    collector would dead-letter every event of the request after it was answered."""
    longest = max((row.request_id for row in rows if row.request_id is not None), key=len, default="")
    if len(longest) > REQUEST_ID_CHARS:
        given = longest.rpartition(":")[0] if len(rows) > 1 else longest
        raise OipError(f"id: with the row suffix ':{len(rows) - 1}' of a {len(rows)}-row request the request id is "
                       f"{len(longest)} characters, above the limit of {REQUEST_ID_CHARS} (the store's request_id): "
                       f"send an id of at most {REQUEST_ID_CHARS - (len(longest) - len(given))} characters")


def server_metadata() -> dict[str, Any]:
    try:
        installed = package_version("driftline")
    except PackageNotFoundError:  # running from a source tree
        installed = "unknown"
    return {"name": SERVER_NAME, "version": installed, "extensions": []}


def is_infer_path(path: str) -> bool:
    return path.startswith("/v2/models/") and path.endswith("/infer")


def tensors_from_json(doc: Any) -> tuple[list[Tensor], Any, Any]:
    """(inputs, id, entity_id) of an infer request body; OipError names what is malformed."""
    if not isinstance(doc, dict):
        raise OipError(f"expected a JSON object with \"inputs\", got {json_type_name(doc)}")
    parameters = doc.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise OipError("parameters: expected an object")
    inputs = doc.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise OipError("inputs: expected a non-empty list of tensors")
    for output in doc.get("outputs") or []:
        if not isinstance(output, dict) or output.get("name") != OUTPUT_NAME:
            raise OipError(f"outputs: this model has one output, {OUTPUT_NAME!r}")
    tensors = []
    for position, entry in enumerate(inputs):
        if not isinstance(entry, dict):
            raise OipError(f"inputs[{position}]: expected a tensor object")
        name, datatype, shape, data = (entry.get("name"), entry.get("datatype"), entry.get("shape"),
                                       entry.get("data"))
        if not isinstance(name, str) or not isinstance(datatype, str):
            raise OipError(f"inputs[{position}]: name and datatype must be strings")
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
            raise OipError(f"input {name!r}: shape must be a list of integers")
        if not isinstance(data, list):
            raise OipError(f"input {name!r}: data must be a list")
        tensors.append(Tensor(name, datatype, tuple(shape), _flat(data, name)))
    return tensors, doc.get("id"), parameters.get("entity_id")


def _flat(data: list[Any], name: str) -> list[Any]:
    """Row-major flattening of nested lists (the protocol allows both [[1], [2]] and [1, 2])."""
    if not any(isinstance(v, list) for v in data):
        return data
    flat: list[Any] = []
    for value in data:
        if isinstance(value, list):
            if any(isinstance(v, list) for v in value):
                raise OipError(f"input {name!r}: data nested deeper than the shape [N, 1]")
            flat.extend(value)
        else:
            flat.append(value)
    return flat


def add_v2_routes(app: FastAPI, worker: "Worker") -> Any:
    """Add the OIP GET endpoints to `app`; returns the infer handler (the ASGI fast path calls it)."""
    from driftline.worker.server import _read_body

    @app.get("/v2/health/live")
    async def live() -> Response:
        return _json({"live": True})

    @app.get("/v2/health/ready")
    async def ready() -> Response:
        is_ready = worker.current is not None
        return _json({"ready": is_ready}, 200 if is_ready else 503)

    @app.get("/v2")
    async def metadata() -> Response:
        return _json(server_metadata())

    @app.get("/v2/models/{name}")
    async def model(name: str) -> Response:
        try:
            check_model(name, worker.current.model)
        except OipError as exc:
            return _error(exc.message, exc.status)
        return _json(model_metadata(name, served_versions(worker.current, worker.routing), worker.current.schema))

    @app.get("/v2/models/{name}/versions/{version}")
    async def model_version(name: str, version: str) -> Response:
        try:
            check_model(name, worker.current.model)
            pinned(version, worker.current, worker.routing)
        except OipError as exc:
            return _error(exc.message, exc.status)
        return _json(model_metadata(name, [version], worker.current.schema))

    @app.get("/v2/models/{name}/ready")
    @app.get("/v2/models/{name}/versions/{version}/ready")
    async def model_ready(name: str, version: str | None = None) -> Response:
        try:
            check_model(name, worker.current.model)
            if version is not None:
                pinned(version, worker.current, worker.routing)
        except OipError as exc:
            return _error(exc.message, exc.status)
        return _json({"name": name, "ready": True})

    def count(code: int) -> None:
        worker.metrics.v2_requests.labels(PROTOCOL_V2_REST, str(code)).inc()

    async def infer(request: Request) -> Response:
        """POST /v2/models/{name}[/versions/{version}]/infer."""
        started = time.perf_counter()
        parts = request.url.path.split("/")  # "", v2, models, NAME, [versions, VERSION,] infer
        if len(parts) == 5:
            name, version = parts[3], None
        elif len(parts) == 7 and parts[4] == "versions":
            name, version = parts[3], parts[5]
        else:
            count(404)
            return _error(f"no such endpoint: {request.url.path}", 404)
        try:
            current = worker.current
            check_model(name, current.model)
            pin = None if version is None else pinned(version, current, worker.routing)
            if request.headers.get("inference-header-content-length") is not None:
                raise OipError("the binary tensor extension is not supported: send JSON tensors "
                               "(tritonclient: binary_data=False)")
            worker.metrics.body_reads.inc()
            try:  # before admission, as for /predict
                body = await _read_body(request, worker.config.max_body_bytes, worker.config.body_timeout_s)
            except InputError as exc:
                raise OipError.from_input_error(exc) from None
            finally:
                worker.metrics.body_reads.dec()
            try:
                doc = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise OipError(f"the body is not valid JSON ({exc})") from None
            tensors, request_id, entity_id = tensors_from_json(doc)
            rows = rows_from_tensors(tensors, current.schema, request_id, entity_id)
            check_row_ids(rows)
            check_rows(len(rows), worker.config.max_pending)
            answers = await worker.predict_rows(rows, started, worker.metrics.latency_v2_rest, pin)
            values = predictions(answers)
        except OipError as exc:
            count(exc.status)
            response = _error(exc.message, exc.status)
            if exc.status == 408:
                response.headers["Connection"] = "close"
            return response
        except BatcherFull as exc:
            count(503)
            response = _error(f"the worker is overloaded ({exc}); retry later", 503)
            response.headers["Retry-After"] = str(defaults.WORKER_RETRY_AFTER_SECONDS)
            return response
        except ClientDisconnect:
            count(499)
            return _error("the client disconnected", 400)
        except Exception as exc:  # the model failed: say so, keep serving
            log.exception("OIP inference failed")
            count(500)
            return _error(f"inference failed: {exc}", 500)
        count(200)
        model_version, per_row = answer_version(answers)
        answer: dict[str, Any] = {"model_name": name, "model_version": model_version,
                                  "outputs": [{"name": OUTPUT_NAME, "datatype": "FP64", "shape": [len(values), 1],
                                               "data": values}]}
        if request_id not in (None, ""):
            answer["id"] = request_id
        if per_row is not None:
            answer["parameters"] = {"versions": ",".join(per_row)}
        return _json(answer)

    return infer
