"""OpenTelemetry traces at the receiver: `POST /v1/traces` (protobuf, JSON, gzip) and OTLP gRPC, with the token,
the ingress rules and the bounds, each request's trace one event on Kafka."""
from __future__ import annotations

import gzip
import time
import uuid

import grpc
import orjson
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from driftline.llm_settings import LlmSettings
from driftline.receiver.otlp import OtlpConfig, OtlpIntake
from driftline.receiver.otlp_grpc import start_otlp_grpc, stop_otlp_grpc
from tests.receiver.conftest import events_of
from tests.support.otlp_traces import export_request, otlp_json, rag_trace

PROTOBUF = {"content-type": "application/x-protobuf"}
NOW_MS = int(time.time() * 1000) - 60_000


@pytest.fixture
def otlp_receiver(receiver_factory):
    """(service, intake, client) of a receiver taking traces; models named by `[llm.models]` per test."""
    from fastapi.testclient import TestClient

    from driftline.receiver.app import create_app

    def make(model: str, token: str | None = None, **config):
        service, _ = receiver_factory(token=token)
        llm = LlmSettings(models={"gpt-4o-mini": {"model": model}})
        intake = OtlpIntake(service, OtlpConfig(llm=llm, **config))
        return service, intake, TestClient(create_app(service, token=token, otlp=intake), base_url="http://127.0.0.1")

    return make


def test_protobuf_json_and_gzip_bodies_each_make_one_event_per_trace(otlp_receiver, broker):
    model = f"rag-{uuid.uuid4().hex[:8]}"
    service, _, client = otlp_receiver(model)
    answer = client.post("/v1/traces", content=export_request(rag_trace(NOW_MS) + rag_trace(NOW_MS))
                         .SerializeToString(), headers=PROTOBUF)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/x-protobuf"
    assert not ExportTraceServiceResponse.FromString(answer.content).HasField("partial_success")
    body = orjson.dumps(otlp_json(export_request(rag_trace(NOW_MS, finish="length"))))
    answer = client.post("/v1/traces", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 200 and answer.json()["events"] == 1
    answer = client.post("/v1/traces", content=gzip.compress(export_request(rag_trace(NOW_MS)).SerializeToString()),
                         headers={**PROTOBUF, "content-encoding": "gzip"})
    assert answer.status_code == 200
    events = events_of(broker, model, 4)
    assert len(events) == 4 and sorted(e["prediction"] for e in events) == ["length", "stop", "stop", "stop"]
    assert all(e["latency_ms"]["ttft"] == 80.0 and e["tokens_out"] == 40 for e in events)
    assert service.stats()["otlp_traces"] == 4


def test_the_token_the_content_type_and_junk_are_refused(otlp_receiver):
    _, _, client = otlp_receiver("rag-token", token="s3cret")
    body = export_request(rag_trace(NOW_MS)).SerializeToString()
    assert client.post("/v1/traces", content=body, headers=PROTOBUF).status_code == 401
    assert client.post("/v1/traces", content=body, headers={"content-type": "text/plain",
                                                             "authorization": "Bearer s3cret"}).status_code == 415
    junk = client.post("/v1/traces", content=b"\xff\xffjunk", headers={**PROTOBUF, "authorization": "Bearer s3cret"})
    assert junk.status_code == 400 and "ExportTraceServiceRequest" in junk.json()["detail"]
    bomb = gzip.compress(b"\x00" * (8 << 20))
    answer = client.post("/v1/traces", content=bomb, headers={**PROTOBUF, "content-encoding": "gzip",
                                                              "authorization": "Bearer s3cret"})
    assert answer.status_code == 413 and "inflates" in answer.json()["detail"]


def test_a_trace_without_its_root_is_judged_after_the_wait_and_late_spans_make_no_second_event(
        otlp_receiver, broker):
    model = f"rag-{uuid.uuid4().hex[:8]}"
    service, intake, client = otlp_receiver(model, wait_s=0.2, max_spans=3)
    spans = rag_trace(NOW_MS)
    answer = client.post("/v1/traces", content=export_request(spans[:3]).SerializeToString(), headers=PROTOBUF)
    assert answer.status_code == 200 and service.stats()["otlp_pending_traces"] == 1
    time.sleep(0.3)
    assert intake.expire() == 1
    late = client.post("/v1/traces", content=export_request(spans[3:]).SerializeToString(), headers=PROTOBUF)
    assert late.status_code == 200
    (event,) = events_of(broker, model, 1)
    assert event["features"]["retrieval_documents"] == 3 and service.stats()["otlp_spans_late"] == 1
    over = client.post("/v1/traces", content=export_request(rag_trace(NOW_MS))
                       .SerializeToString(), headers=PROTOBUF)
    rejected = ExportTraceServiceResponse.FromString(over.content).partial_success
    assert rejected.rejected_spans == 1 and "spans beyond 3" in rejected.error_message


def test_otlp_grpc_takes_traces_with_the_token(otlp_receiver, broker):
    model = f"rag-{uuid.uuid4().hex[:8]}"
    _, intake, _ = otlp_receiver(model)
    server, port = start_otlp_grpc(intake, "127.0.0.1", 0, "s3cret", 4 << 20, 8)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)
            with pytest.raises(grpc.RpcError) as refused:
                stub.Export(export_request(rag_trace(NOW_MS)))
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            stub.Export(export_request(rag_trace(NOW_MS, tokens_out=7)), metadata=[("authorization", "Bearer s3cret")])
            junk = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            with pytest.raises(grpc.RpcError) as bad:
                junk(b"\xff\xffjunk", metadata=[("authorization", "Bearer s3cret")])
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        stop_otlp_grpc(server)
    (event,) = events_of(broker, model, 1)
    assert event["tokens_out"] == 7


def test_the_rag_stand_in_traffic_reaches_a_served_receiver(receiver_factory, broker):
    """driftline/otlp/rag_traffic.py, as `up --scenario rag_topic_shift` runs it, against the receiver under
    uvicorn: every request it traced (cache hits too, mapped by the service) is an event on Kafka."""
    from driftline.otlp.rag_standin import SERVICE
    from driftline.otlp.rag_traffic import run
    from tests.support.otlp_receiver import served_receiver

    model = f"rag-{uuid.uuid4().hex[:8]}"
    service, _ = receiver_factory()
    intake = OtlpIntake(service, OtlpConfig(llm=LlmSettings(models={"standin-chat": {"model": model},
                                                                    SERVICE: {"model": model}})))
    with served_receiver(service, intake) as (port, _):
        sent = run(f"http://127.0.0.1:{port}/v1/traces", rate=10, warmup_s=1.0, duration_s=2.5)
    events = events_of(broker, model, sent)
    assert sent >= 10 and len(events) == sent
    answered = [e for e in events if not e["cache_hit"]]  # a cached answer streams nothing
    assert answered and all(e["latency_ms"]["ttft"] > 0 and e["tokens_out"] > 1 for e in answered)
