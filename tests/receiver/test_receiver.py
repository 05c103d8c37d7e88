"""`driftline receiver` end to end on the real broker: the CloudEvents SDK plays KServe's logger.

Payloads are the shapes KServe documents for its sklearn-iris sample (v1 `instances` / `predictions`)
and the Open Inference Protocol (v2 tensors); events and dead letters are read back from Kafka.
"""
from __future__ import annotations

import uuid

import orjson
import pytest
from cloudevents.v1.conversion import to_binary, to_structured
from cloudevents.v1.http import CloudEvent

from driftline.events import validate_inference
from tests.receiver.conftest import FEATURES, dead_letters_of, events_of, register_baseline

REQUEST_TYPE = "org.kubeflow.serving.inference.request"
RESPONSE_TYPE = "org.kubeflow.serving.inference.response"

V1_REQUEST = {"instances": [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6]]}
V1_RESPONSE = {"predictions": [1, 1]}
V2_REQUEST = {"id": "x", "inputs": [{"name": "input-0", "shape": [2, 4], "datatype": "FP32",
                                     "data": [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6]]}]}
V2_RESPONSE = {"model_name": "ignored-when-the-isvc-names-it", "id": "x", "parameters": {},
               "outputs": [{"name": "output-0", "shape": [2], "datatype": "INT32", "data": [1, 1]}]}


def half(model: str, ce_id: str, kind: str, data: dict, time: str) -> CloudEvent:
    """A half as KServe's agent sends it: its extensions name the service, namespace, component and endpoint."""
    return CloudEvent({"id": ce_id, "type": REQUEST_TYPE if kind == "request" else RESPONSE_TYPE,
                       "source": "http://localhost:9081/", "time": time, "datacontenttype": "application/json",
                       "inferenceservicename": model, "namespace": "default", "component": "predictor",
                       "endpoint": ""}, orjson.dumps(data))


def post(client, event: CloudEvent, mode: str = "binary", url: str = "/"):
    headers, body = (to_binary if mode == "binary" else to_structured)(event)
    return client.post(url, headers=headers, content=body)


@pytest.mark.parametrize("mode", ["binary", "structured"])
@pytest.mark.parametrize("protocol", ["v1", "v2"])
@pytest.mark.parametrize("response_first", [False, True])
def test_a_pair_becomes_events_with_features_prediction_latency_and_tags(
        broker, sqlite_url, tmp_path, receiver_factory, model, mode, protocol, response_first):
    register_baseline(sqlite_url, tmp_path, model)
    _, client = receiver_factory()
    ce_id = uuid.uuid4().hex
    request = half(model, ce_id, "request", V1_REQUEST if protocol == "v1" else V2_REQUEST,
                   "2026-01-02T03:04:05.000000000Z")
    response = half(model, ce_id, "response", V1_RESPONSE if protocol == "v1" else V2_RESPONSE,
                    "2026-01-02T03:04:05.012500000Z")
    first, second = (response, request) if response_first else (request, response)
    assert post(client, first, mode).json()["waiting"] == 1
    answer = post(client, second, mode).json()
    assert answer["events"] == 2, answer["errors"]

    events = sorted(events_of(broker, model, 2), key=lambda e: e["request_id"])
    assert [e["request_id"] for e in events] == [f"{ce_id}:0", f"{ce_id}:1"]
    assert events[0]["features"] == dict(zip(FEATURES, [6.8, 2.8, 4.8, 1.4]))
    assert events[1]["prediction"] == 1
    assert events[0]["version"] == "1"  # the production version the baseline registered
    assert events[0]["latency_ms"]["total"] == pytest.approx(12.5)
    assert events[0]["ts"] == "2026-01-02T03:04:05.000Z"
    assert events[0]["tags"] == {"inferenceservice": model, "namespace": "default", "component": "predictor"}
    for event in events:
        validate_inference(event)


def test_a_retried_half_is_idempotent(broker, sqlite_url, tmp_path, receiver_factory, model):
    register_baseline(sqlite_url, tmp_path, model)
    _, client = receiver_factory()
    ce_id = uuid.uuid4().hex
    request = half(model, ce_id, "request", {"instances": [[6.8, 2.8, 4.8, 1.4]]}, "2026-01-02T03:04:05Z")
    response = half(model, ce_id, "response", {"predictions": [2]}, "2026-01-02T03:04:05.010Z")
    post(client, request)
    post(client, request)
    assert post(client, response).json()["events"] == 1
    assert post(client, response).json()["duplicates"] == 1
    assert post(client, request).json()["duplicates"] == 1
    # a second, distinct pair marks the end: exactly one event of the first before it
    other = uuid.uuid4().hex
    post(client, half(model, other, "request", {"instances": [[1, 2, 3, 4]]}, "2026-01-02T03:04:06Z"))
    post(client, half(model, other, "response", {"predictions": [0]}, "2026-01-02T03:04:06.010Z"))
    events = events_of(broker, model, 2)
    assert sorted(e["request_id"] for e in events) == sorted([ce_id, other])


def test_an_unpaired_half_is_dead_lettered_after_its_wait(broker, sqlite_url, tmp_path, receiver_factory, model):
    register_baseline(sqlite_url, tmp_path, model)
    service, client = receiver_factory(pair_wait_s=0.2, sweep_interval_s=0.05)
    ce_id = uuid.uuid4().hex
    assert post(client, half(model, ce_id, "request", V1_REQUEST, "2026-01-02T03:04:05Z")).json()["waiting"] == 1
    (headers, body), = dead_letters_of(broker, ce_id, 1)
    assert headers["driftline.reason"].startswith("unpaired: no response half within")
    assert headers["driftline.ce_type"] == REQUEST_TYPE and headers["driftline.half"] == "request"
    assert orjson.loads(body) == V1_REQUEST
    assert service.stats()["expired"] == 1


@pytest.mark.parametrize("request_data, reason", [
    ({"instances": [[6.8, 2.8, 4.8]]}, "3 values, the registered baseline has 4 features"),
    ({"rows": []}, "expected a non-empty list of instances"),
])
def test_malformed_payloads_are_dead_lettered_with_their_reason(
        broker, sqlite_url, tmp_path, receiver_factory, model, request_data, reason):
    register_baseline(sqlite_url, tmp_path, model)
    _, client = receiver_factory()
    ce_id = uuid.uuid4().hex
    post(client, half(model, ce_id, "request", request_data, "2026-01-02T03:04:05Z"))
    answer = post(client, half(model, ce_id, "response", {"predictions": [1]}, "2026-01-02T03:04:05.01Z")).json()
    assert answer["events"] == 0 and answer["dead_lettered"] == 2
    letters = dead_letters_of(broker, ce_id, 2)
    assert {h["driftline.half"] for h, _ in letters} == {"request", "response"}
    assert all(h["driftline.reason"].startswith(reason) for h, _ in letters)


def test_a_body_that_is_not_a_cloudevent_or_not_json_is_dead_lettered(broker, receiver_factory, model):
    _, client = receiver_factory()
    marker = f"garbage-{model}"
    # a body of no CloudEvents content type is refused at the door (415: the ingress guard), so garbage that
    # is dead-lettered comes in a CloudEvents content type
    answer = client.post("/", content=marker.encode(), headers={"content-type": "application/cloudevents+json"})
    assert answer.status_code == 400
    (headers, body), = dead_letters_of(broker, marker, 1)
    assert headers["driftline.reason"].startswith("not JSON") and body == marker.encode()
    ce_id = uuid.uuid4().hex
    event = CloudEvent({"id": ce_id, "type": REQUEST_TYPE, "source": "s", "datacontenttype": "application/json"},
                       None)
    headers_, _ = to_binary(event)
    assert client.post("/", headers=headers_, content=b"{not json").status_code == 400
    (headers, body), = dead_letters_of(broker, ce_id, 1)
    assert headers["driftline.reason"].startswith("the request body is not JSON") and body == b"{not json"


def test_events_as_json_lines_valid_and_invalid(broker, receiver_factory, model):
    _, client = receiver_factory()
    good = {"schema": "driftline.inference/v1", "event_id": uuid.uuid4().hex, "ts": "2026-01-02T03:04:05Z",
            "model": model, "version": "7", "features": {"x": 1.0}, "prediction": 0.4, "latency_ms": {"total": 3.0}}
    bad = {**good, "event_id": uuid.uuid4().hex, "latency_ms": {}}
    body = b"\n".join([orjson.dumps(good), b"", orjson.dumps(bad), b"[1]", b"{oops"]) + b"\n"
    answer = client.post("/events", content=body, headers={"content-type": "application/x-ndjson"})
    assert answer.status_code == 200
    result = answer.json()
    assert result["events"] == 1 and result["dead_lettered"] == 3
    assert [e["line"] for e in result["errors"]] == [2, 3, 4]
    assert result["errors"][0]["field"] == "latency_ms.total"
    assert [e["event_id"] for e in events_of(broker, model, 1)] == [good["event_id"]]
    (headers, body_), = dead_letters_of(broker, bad["event_id"], 1)
    assert headers["driftline.topic"] == "receiver:/events" and headers["driftline.offset"] == "2"
    assert orjson.loads(body_) == bad


def test_a_full_buffer_refuses_the_whole_call(receiver_factory, model):
    service, client = receiver_factory(event_buffer=3, bootstrap_servers="127.0.0.1:1")  # nothing drains
    event = {"schema": "driftline.inference/v1", "ts": "2026-01-02T03:04:05Z", "model": model, "version": "1",
             "features": {"x": 1.0}, "prediction": 0.4, "latency_ms": {"total": 3.0}}
    lines = [orjson.dumps({**event, "event_id": str(i)}) for i in range(4)]
    assert client.post("/events", content=b"\n".join(lines[:2])).json()["events"] == 2
    refused = client.post("/events", content=b"\n".join(lines[2:]))  # 2 + 2 > 3: busy, nothing taken
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    never = client.post("/events", content=b"\n".join(lines))  # 4 > 3 could never fit: not "retry later"
    assert never.status_code == 413 and "split the body" in never.json()["detail"]
    assert client.post("/events", content=lines[2]).json()["events"] == 1
    assert service.stats()["events"] == 3 and service.stats()["dead_letters"] == 0
    service.close(timeout_s=0.5)  # nothing drains: do not wait the default ten seconds for it


def test_a_token_is_required_when_set(receiver_factory):
    _, client = receiver_factory(token="s3cret")
    assert client.post("/events", content=b"").status_code == 401
    assert client.post("/events?token=s3cret", content=b"").status_code == 200
    assert client.post("/events", content=b"", headers={"authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/healthz").status_code == 200
