"""OTLP over gRPC: `opentelemetry.proto.collector.trace.v1.TraceService/Export` on `receiver_otlp_grpc_port`.

A synchronous grpc server on its own threads beside the HTTP one, handing each request to the same trace intake
(receiver/otlp.py). The receiver's rules hold: the token as `authorization: Bearer TOKEN` metadata (what
OTEL_EXPORTER_OTLP_HEADERS sends), messages at most the receiver's body bound, at most its connection cap of
calls at once; bytes that are no export request get INVALID_ARGUMENT, a full event buffer RESOURCE_EXHAUSTED
(which OTLP exporters retry), a call that could never fit INVALID_ARGUMENT.
"""
from __future__ import annotations

import hmac
from concurrent import futures
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from driftline.listen import bind_grpc
from driftline.receiver.otlp import OtlpIntake, export_response
from driftline.receiver.service import Busy, TooLarge

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
STOP_GRACE_SECONDS = 5.0


def start_otlp_grpc(intake: OtlpIntake, host: str, port: int, token: str | None, max_message_bytes: int,
                    max_calls: int, workers: int = 4) -> tuple[Any, int]:
    """A started server and the port it listens on (`port` 0: a free one)."""
    def export(raw: bytes, context: Any) -> bytes:
        if token is not None:
            given = dict(context.invocation_metadata()).get("authorization", "")
            given = given[7:] if given.startswith("Bearer ") else ""
            if not hmac.compare_digest(given.encode(), token.encode()):
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token (settings.receiver_token): "
                              "send the metadata authorization: Bearer TOKEN")
        try:
            request = ExportTraceServiceRequest.FromString(raw)
        except (DecodeError, RecursionError, ValueError) as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"not an OTLP ExportTraceServiceRequest: {exc}")
        try:
            result = intake.accept_request(request)
        except Busy as exc:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except TooLarge as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return export_response(result).SerializeToString()

    handler = grpc.method_handlers_generic_handler(SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(
        export, request_deserializer=None, response_serializer=None)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="driftline-otlp-grpc"),
                         handlers=[handler], maximum_concurrent_rpcs=max_calls,
                         options=[("grpc.max_receive_message_length", max_message_bytes), ("grpc.so_reuseport", 0)])
    try:
        bound = bind_grpc(server, host, port, "OTLP gRPC")
    except OSError:
        server.stop(None)
        raise
    server.start()
    return server, bound


def stop_otlp_grpc(server: Any) -> None:
    server.stop(STOP_GRACE_SECONDS).wait(STOP_GRACE_SECONDS + 1)
