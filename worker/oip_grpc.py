"""Open Inference Protocol v2 over gRPC: `inference.GRPCInferenceService` on `worker_grpc_port` (docs/worker.md).

The messages and the servicer base come from tritonclient's generated modules (package `inference`).
The server is grpc.aio on the worker's own event loop, so a gRPC request takes the same path as
POST /predict (`Worker.predict_rows`: admission, rollout routing, cache, dynamic batcher, one event
per row). Tensors arrive as typed `contents` or as `raw_input_contents` (what tritonclient sends:
little-endian values; BYTES as 4-byte length-prefixed strings); the answer is `prediction` as raw FP64.
Status codes: INVALID_ARGUMENT bad input, NOT_FOUND unknown model or version, RESOURCE_EXHAUSTED a
message above `max_body_bytes` (gRPC's own limit, set to it), UNAVAILABLE overloaded, INTERNAL a model failure.
"""
from __future__ import annotations

import logging
import struct
import time
from typing import TYPE_CHECKING, Any

import grpc
import numpy as np
from google.protobuf.message import DecodeError
from tritonclient.grpc import service_pb2, service_pb2_grpc

from driftline.listen import bind_grpc
from driftline.worker.batcher import BatcherFull
from driftline.worker.metrics import PROTOCOL_V2_GRPC
from driftline.worker.oip import (BYTES, OUTPUT_NAME, PLATFORM, OipError, Tensor, answer_version, check_model,
                                  check_rows, model_metadata, pinned, predictions, rows_from_tensors,
                                  served_versions)
from driftline.worker.oip_rest import check_row_ids, server_metadata

if TYPE_CHECKING:
    from driftline.worker.server import Worker

log = logging.getLogger(__name__)

# Little-endian numpy dtypes of the numeric datatypes, for raw_input_contents.
RAW_DTYPES = {"FP64": "<f8", "FP32": "<f4", "FP16": "<f2", "INT64": "<i8", "INT32": "<i4", "INT16": "<i2",
              "INT8": "i1", "UINT64": "<u8", "UINT32": "<u4", "UINT16": "<u2", "UINT8": "u1"}
# The typed `contents` field each datatype's values travel in.
CONTENTS_FIELDS = {"FP64": "fp64_contents", "FP32": "fp32_contents", "INT64": "int64_contents",
                   "INT32": "int_contents", "INT16": "int_contents", "INT8": "int_contents",
                   "UINT64": "uint64_contents", "UINT32": "uint_contents", "UINT16": "uint_contents",
                   "UINT8": "uint_contents", BYTES: "bytes_contents"}
# Seconds in-flight RPCs get to finish when the worker stops.
STOP_GRACE_SECONDS = 2.0


def _decode_bytes_raw(raw: bytes, name: str) -> list[Any]:
    values, offset = [], 0
    while offset < len(raw):
        if offset + 4 > len(raw):
            raise OipError(f"input {name!r}: truncated BYTES element length")
        (length,) = struct.unpack_from("<I", raw, offset)
        offset += 4
        if offset + length > len(raw):
            raise OipError(f"input {name!r}: a BYTES element runs past the end of its raw contents")
        values.append(raw[offset:offset + length])
        offset += length
    return values


def _text(values: list[Any], name: str) -> list[str]:
    try:
        return [v.decode("utf-8") for v in values]
    except UnicodeDecodeError:
        raise OipError(f"input {name!r}: BYTES values must be UTF-8 text") from None


def tensors_from_request(request: Any) -> list[Tensor]:
    raw = list(request.raw_input_contents)
    if raw and len(raw) != len(request.inputs):
        raise OipError(f"raw_input_contents holds {len(raw)} tensors for {len(request.inputs)} inputs")
    tensors = []
    for position, entry in enumerate(request.inputs):
        name, datatype, shape = entry.name, entry.datatype, tuple(entry.shape)
        if raw:
            if datatype == BYTES:
                data: list[Any] = _text(_decode_bytes_raw(raw[position], name), name)
            elif datatype in RAW_DTYPES:
                dtype = np.dtype(RAW_DTYPES[datatype])
                if len(raw[position]) % dtype.itemsize:
                    raise OipError(f"input {name!r}: {len(raw[position])} raw bytes are not whole {datatype} values")
                data = np.frombuffer(raw[position], dtype=dtype).tolist()
            else:
                raise OipError(f"input {name!r}: unsupported datatype {datatype!r}")
        else:
            field = CONTENTS_FIELDS.get(datatype)
            if field is None:
                raise OipError(f"input {name!r}: unsupported datatype {datatype!r}")
            data = list(getattr(entry.contents, field))
            if datatype == BYTES:
                data = _text(data, name)
        tensors.append(Tensor(name, datatype, shape, data))
    return tensors


class InferenceServicer(service_pb2_grpc.GRPCInferenceServiceServicer):
    """The protocol's health, metadata and infer calls over the worker's serving path."""

    def __init__(self, worker: "Worker"):
        self.worker = worker

    def _count(self, code: str) -> None:
        self.worker.metrics.v2_requests.labels(PROTOCOL_V2_GRPC, code).inc()

    async def ServerLive(self, request: Any, context: Any) -> Any:
        return service_pb2.ServerLiveResponse(live=True)

    async def ServerReady(self, request: Any, context: Any) -> Any:
        return service_pb2.ServerReadyResponse(ready=self.worker.current is not None)

    async def ModelReady(self, request: Any, context: Any) -> Any:
        current = self.worker.current
        try:
            check_model(request.name, current.model)
            if request.version:
                pinned(request.version, current, self.worker.routing)
        except OipError as exc:
            await context.abort(grpc.StatusCode[exc.grpc_code], exc.message)
        return service_pb2.ModelReadyResponse(ready=True)

    async def ServerMetadata(self, request: Any, context: Any) -> Any:
        return service_pb2.ServerMetadataResponse(**server_metadata())

    async def ModelMetadata(self, request: Any, context: Any) -> Any:
        current = self.worker.current
        try:
            check_model(request.name, current.model)
            if request.version:
                pinned(request.version, current, self.worker.routing)
        except OipError as exc:
            await context.abort(grpc.StatusCode[exc.grpc_code], exc.message)
        versions = [request.version] if request.version else served_versions(current, self.worker.routing)
        doc = model_metadata(request.name, versions, current.schema)
        return service_pb2.ModelMetadataResponse(
            name=doc["name"], versions=doc["versions"], platform=PLATFORM,
            inputs=[service_pb2.ModelMetadataResponse.TensorMetadata(**t) for t in doc["inputs"]],
            outputs=[service_pb2.ModelMetadataResponse.TensorMetadata(**t) for t in doc["outputs"]])

    async def ModelInfer(self, request: Any, context: Any) -> Any:
        started = time.perf_counter()
        worker = self.worker
        try:
            current = worker.current
            check_model(request.model_name, current.model)
            pin = pinned(request.model_version, current, worker.routing) if request.model_version else None
            for output in request.outputs:
                if output.name != OUTPUT_NAME:
                    raise OipError(f"outputs: this model has one output, {OUTPUT_NAME!r}")
            entity = request.parameters["entity_id"].string_param if "entity_id" in request.parameters else None
            rows = rows_from_tensors(tensors_from_request(request), current.schema, request.id or None, entity)
            check_row_ids(rows)
            check_rows(len(rows), worker.config.max_pending)
            answers = await worker.predict_rows(rows, started, worker.metrics.latency_v2_grpc, pin)
            values = predictions(answers)
        except OipError as exc:
            self._count(exc.grpc_code)
            await context.abort(grpc.StatusCode[exc.grpc_code], exc.message)
        except BatcherFull as exc:
            self._count("UNAVAILABLE")
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"the worker is overloaded ({exc}); retry later")
        except Exception as exc:  # the model failed: say so, keep serving
            log.exception("OIP gRPC inference failed")
            self._count("INTERNAL")
            await context.abort(grpc.StatusCode.INTERNAL, f"inference failed: {exc}")
        self._count("OK")
        model_version, per_row = answer_version(answers)
        response = service_pb2.ModelInferResponse(
            model_name=request.model_name, model_version=model_version, id=request.id,
            outputs=[service_pb2.ModelInferResponse.InferOutputTensor(name=OUTPUT_NAME, datatype="FP64",
                                                                      shape=[len(values), 1])],
            raw_output_contents=[np.asarray(values, dtype="<f8").tobytes()])
        if per_row is not None:
            response.parameters["versions"].string_param = ",".join(per_row)
        return response


class _Undecodable:
    """A request whose bytes are not its protobuf message (kept so the call can say so)."""

    def __init__(self, reason: str):
        self.reason = reason


class UndecodableRequests(grpc.aio.ServerInterceptor):
    """Bytes that are not the method's message get INVALID_ARGUMENT, as the worker's other bad input does
    (grpc.aio would answer UNKNOWN from inside its own deserializer, before any servicer sees the call)."""

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = await continuation(details)
        if handler is None or handler.unary_unary is None or handler.request_deserializer is None:
            return handler
        parse, behaviour = handler.request_deserializer, handler.unary_unary

        def lenient(raw: bytes) -> Any:
            try:
                return parse(raw)
            except DecodeError as exc:
                return _Undecodable(str(exc))

        async def checked(request: Any, context: Any) -> Any:
            if isinstance(request, _Undecodable):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                    f"the request is not a valid protobuf message: {request.reason}")
            return await behaviour(request, context)

        return handler._replace(request_deserializer=lenient, unary_unary=checked)


async def start_grpc(worker: "Worker", host: str, port: int) -> Any:
    """A grpc.aio server for `worker` on host:port, started on the running event loop."""
    limit = worker.config.max_body_bytes
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                      ("grpc.so_reuseport", 0)], interceptors=[UndecodableRequests()])
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceServicer(worker), server)
    bind_grpc(server, host, port, "gRPC")
    await server.start()
    return server


async def stop_grpc(server: Any) -> None:
    await server.stop(STOP_GRACE_SECONDS)
