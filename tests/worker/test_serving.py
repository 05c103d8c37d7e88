"""The worker end to end: a real uvicorn server, a real embedded broker, a real store."""
from __future__ import annotations

import asyncio
import json
import logging
import math
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import orjson
import pytest

from driftline.config import TOPIC_INFERENCE
from driftline.events import parse_inference
from driftline.worker.feature_transform import FeatureTransform
from driftline.worker.dataset import generate_inputs
from driftline.worker.server import Worker, WorkerConfig
from tests.support.waiting import wait_until
from tests.support.worker_helpers import (make_settings, metric, read_topic, registry_with_versions, serving,
                                          topic_records)

TOKEN = "test-token"
JSON = {"Content-Type": "application/json"}


MODEL = "credit-default"


@pytest.fixture(scope="module")
def served(broker, tiny_results, tmp_path_factory):
    """A worker serving version 1 of two registered versions, logging to the test broker."""
    settings = make_settings(tmp_path_factory.mktemp("served"), broker).model_copy(update={"retrain_token": TOKEN})
    registry_with_versions(settings, tiny_results)
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", max_batch_size=32, max_wait_ms=5.0,
                                           listen_for_labels=False, alias_poll_s=0, faults=True))
    with serving(worker) as url:
        yield url, worker


def rows(n: int, seed: int) -> list[dict]:
    return generate_inputs(n, seed).to_dict("records")


async def _post_all(url: str, bodies: list[dict]) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=len(bodies))
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        return await asyncio.gather(*(client.post("/predict", json=body) for body in bodies))


def test_400_concurrent_requests_give_400_contract_events(served, broker):
    url, _worker = served
    inputs = rows(400, seed=11)
    bodies = [{"features": row, "request_id": f"concurrent-{i}"} for i, row in enumerate(inputs)]
    responses = asyncio.run(_post_all(url, bodies))
    assert [r.status_code for r in responses] == [200] * 400
    answers = {r.json()["request_id"]: r.json() for r in responses}

    raw = read_topic(broker, TOPIC_INFERENCE, set(answers))
    assert len(raw) == 400
    batch_sizes = []
    for i, row in enumerate(inputs):
        event = parse_inference(raw[f"concurrent-{i}"])  # the contract's own validator
        doc = event.raw
        assert doc["schema"] == "driftline.inference/v1"
        assert event.model == MODEL and event.version == "1"
        assert doc["inputs"] == row
        assert doc["features"] == FeatureTransform().apply([row])[0]
        assert event.prediction == answers[f"concurrent-{i}"]["prediction"]
        assert 0.0 < event.prediction < 1.0
        assert set(event.latency_ms) == {"total", "queue", "compute"}
        assert event.latency_ms["total"] >= event.latency_ms["compute"]
        assert doc["cache_hit"] is False and doc["device"] == "cpu" and doc["status"] == "ok"
        batch_sizes.append(doc["batch_size"])
    assert len({parse_inference(v).event_id for v in raw.values()}) == 400
    assert max(batch_sizes) > 1
    assert all(1 <= size <= 32 for size in batch_sizes)
    assert metric(url, "driftline_worker_batch_size_count") < 400  # fewer forward passes than requests


def test_a_request_id_the_worker_makes_up_is_also_the_event_id(served, broker, unique_id):
    url, _worker = served
    inputs = rows(20, seed=13)
    given = [f"{unique_id}-{i}" for i in range(10)]
    bodies = [{"features": row, "request_id": given[i]} if i < 10 else {"features": row}
              for i, row in enumerate(inputs)]
    responses = asyncio.run(_post_all(url, bodies))
    request_ids = [r.json()["request_id"] for r in responses]
    assert request_ids[:10] == given and len(set(request_ids)) == 20

    raw = read_topic(broker, TOPIC_INFERENCE, set(request_ids))
    events = {request_id: parse_inference(raw[request_id]) for request_id in request_ids}
    for request_id in request_ids[10:]:  # made up by the worker: unique, so it is the event id as well
        assert events[request_id].event_id == request_id
    for request_id in given:  # the caller's own id may repeat: the event gets one of its own
        assert events[request_id].event_id != request_id and len(events[request_id].event_id) == 32
    assert len({event.event_id for event in events.values()}) == 20


def test_a_repeated_request_is_a_cache_hit(served):
    url, _worker = served
    body = {"features": rows(1, seed=12)[0]}
    hits_before = metric(url, "driftline_worker_cache_hits_total")
    first = httpx.post(f"{url}/predict", json=body).json()
    second = httpx.post(f"{url}/predict", json=body).json()
    assert first["cached"] is False and second["cached"] is True
    assert second["prediction"] == first["prediction"] and second["version"] == first["version"]
    assert second["latency_ms"]["compute"] == 0.0
    assert metric(url, "driftline_worker_cache_hits_total") == hits_before + 1


def _body_with(**changes):
    row = rows(1, seed=13)[0]
    row.update(changes)
    return {"features": row}


@pytest.mark.parametrize("content, field", [
    (json.dumps(_body_with(age="forty")), "features.age"),
    (json.dumps(_body_with(age=True)), "features.age"),
    (json.dumps(_body_with(region=3)), "features.region"),
    (json.dumps(_body_with(shoe_size=42)), "features.shoe_size"),
    (json.dumps({"features": {k: v for k, v in rows(1, 13)[0].items() if k != "credit_score"}}), "features.credit_score"),
    (json.dumps(_body_with(annual_income=math.nan)), "features.annual_income"),   # NaN token
    (json.dumps(_body_with(credit_limit=math.inf)), "features.credit_limit"),     # Infinity token
    ('{"features": ' + json.dumps(rows(1, 13)[0])[:-1] + ', "loan_amount": 1e999}}', "features.loan_amount"),
    (json.dumps({"features": [1, 2, 3]}), "features"),
    (json.dumps({"rows": []}), "rows"),
    (json.dumps({"features": rows(1, 13)[0], "request_id": 7}), "request_id"),
    ("{not json", None),
    ("[]", None),
    (json.dumps(_body_with(age=1e200)), "features.age"),                          # finite, but its square is inf
    (json.dumps(_body_with(annual_income=-1e51)), "features.annual_income"),
    ('{"features": ' + json.dumps(rows(1, 13)[0])[:-1] + ', "loan_amount": ' + "9" * 400 + '}}', "features.loan_amount"),
    (json.dumps({"features": rows(1, 13)[0], "request_id": "a\ud800b"}), "request_id"),   # lone surrogate
    (json.dumps({"features": rows(1, 13)[0], "entity_id": "\udfff"}), "entity_id"),
    (json.dumps(_body_with(region="north\ud83d")), "features.region"),
    (json.dumps(_body_with(region="north\u0000")), "features.region"),                # NUL
    (json.dumps({"features": rows(1, 13)[0], "request_id": "tab\there"}), "request_id"),
    ('{"features": ' + json.dumps(rows(1, 13)[0])[:-1] + ', "\\ud800": 1}}', "features"),  # a field name
    ('{"\\udc00": 1, "features": ' + json.dumps(rows(1, 13)[0]) + '}', None),
])
def test_bad_input_gets_422_naming_the_field(served, content, field):
    url, _worker = served
    response = httpx.post(f"{url}/predict", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field
    if field:
        assert field in response.json()["detail"]


def test_a_refused_request_is_neither_counted_nor_logged(served, monkeypatch):
    url, worker = served
    logged = []
    monkeypatch.setattr(worker.logger, "log_soon", lambda *args, **kwargs: logged.append(kwargs))
    monkeypatch.setattr(worker.logger, "log", lambda *args, **kwargs: logged.append(kwargs))
    misses = metric(url, "driftline_worker_cache_misses_total")
    for body in ({"features": rows(1, 21)[0], "request_id": "bad-\ud800"}, _body_with(age=1e200),
                 _body_with(region="\ud800")):
        assert httpx.post(f"{url}/predict", content=json.dumps(body), headers=JSON).status_code == 422
    assert logged == [] and metric(url, "driftline_worker_cache_misses_total") == misses
    assert httpx.post(f"{url}/predict", json={"features": rows(1, 22)[0], "request_id": "good"}).status_code == 200
    assert [entry["request_id"] for entry in logged] == ["good"]


def test_oversized_body_gets_413_and_the_worker_stays_healthy(served):
    url, worker = served
    huge = json.dumps(_body_with(region="x" * (worker.config.max_body_bytes + 10)))
    assert httpx.post(f"{url}/predict", content=huge, headers=JSON).status_code == 413

    def chunks():  # no Content-Length: the limit holds while streaming
        for _ in range(20):
            yield b" " * 8192
    assert httpx.post(f"{url}/predict", content=chunks(), headers=JSON).status_code == 413
    assert httpx.get(f"{url}/healthz").json() == {"status": "ok", "model": MODEL, "version": "1", "device": "cpu",
                                                  "kafka_connected": True}
    assert httpx.post(f"{url}/predict", json=_body_with()).status_code == 200


def test_nulls_out_of_range_and_unseen_categories_reach_the_model(served, broker):
    url, _worker = served
    body = _body_with(annual_income=None, age=150, region="atlantis")
    body["request_id"] = "dirty-1"
    answer = httpx.post(f"{url}/predict", json=body)
    assert answer.status_code == 200
    event = orjson.loads(read_topic(broker, TOPIC_INFERENCE, {"dirty-1"})["dirty-1"])
    assert event["features"]["annual_income"] is None and event["features"]["debt_to_income"] is None
    assert event["features"]["age"] == 150.0 and event["features"]["region"] == "atlantis"


def test_model_and_metrics_endpoints(served):
    url, _worker = served
    model = httpx.get(f"{url}/model").json()
    assert model["name"] == MODEL and model["version"] == "1"
    assert [f["name"] for f in model["features"]] == list(model["example"])
    assert httpx.post(f"{url}/predict", json={"features": model["example"]}).status_code == 200
    text = httpx.get(f"{url}/metrics").text
    for name in ("driftline_worker_latency_seconds_bucket", "driftline_worker_batch_size_bucket",
                 "driftline_worker_cache_hits_total", "driftline_worker_queue_depth", "driftline_worker_events_sent_total",
                 "driftline_worker_events_dropped_total", "driftline_worker_events_buffered"):
        assert name in text


def test_faults_need_the_token_and_skew_changes_served_features(served, broker):
    url, _worker = served
    assert httpx.post(f"{url}/admin/faults", json={"skew": True}).status_code == 401
    assert httpx.post(f"{url}/admin/faults", json={"skew": True},
                      headers={"Authorization": "Bearer wrong"}).status_code == 401
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.post(f"{url}/admin/faults", json={"skew": "yes"}, headers=auth).status_code == 422
    assert httpx.post(f"{url}/admin/faults", json={"warp": 1}, headers=auth).status_code == 422
    row = rows(1, seed=14)[0]
    try:
        assert httpx.post(f"{url}/admin/faults", json={"skew": True}, headers=auth).json()["skew"] is True
        skewed = httpx.post(f"{url}/predict", json={"features": row, "request_id": "skew-1"}).json()
    finally:
        assert httpx.delete(f"{url}/admin/faults", headers=auth).json()["skew"] is False
    clean = httpx.post(f"{url}/predict", json={"features": row, "request_id": "skew-2"}).json()
    assert clean["cached"] is False  # different served features: a different cache entry
    events = {k: orjson.loads(v) for k, v in read_topic(broker, TOPIC_INFERENCE, {"skew-1", "skew-2"}).items()}
    training_features = FeatureTransform().apply([events["skew-1"]["inputs"]])[0]
    served_dti, training_dti = events["skew-1"]["features"]["debt_to_income"], training_features["debt_to_income"]
    assert served_dti == pytest.approx(training_dti / 12)
    assert events["skew-2"]["features"] == training_features
    assert skewed["prediction"] != clean["prediction"]


def test_latency_fault_adds_compute_time(served):
    url, _worker = served
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        httpx.post(f"{url}/admin/faults", json={"latency_ms": 150, "latency_fraction": 1.0}, headers=auth)
        answer = httpx.post(f"{url}/predict", json=_body_with(age=33)).json()
        # then a fault no answer could outlast the client's timeout under: still on, the next request times out
        httpx.post(f"{url}/admin/faults", json={"latency_ms": 60_000, "latency_fraction": 1.0}, headers=auth)
    finally:
        httpx.delete(f"{url}/admin/faults", headers=auth)
    assert answer["latency_ms"]["compute"] >= 150.0
    assert answer["latency_ms"]["total"] >= answer["latency_ms"]["compute"]
    after = httpx.post(f"{url}/predict", json=_body_with(age=34), timeout=30).json()  # switched off: not slowed
    assert after["latency_ms"]["compute"] < 60_000.0


def test_rollback_switches_the_served_version(broker, tiny_results, tmp_path, sqlite_url):
    settings = make_settings(tmp_path, broker, sqlite_url)
    registry = registry_with_versions(settings, tiny_results)
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", alias_poll_s=0.1, listen_for_labels=False,
                                           log_events=False))
    body = {"features": rows(1, seed=15)[0]}
    with serving(worker) as url:
        assert httpx.post(f"{url}/predict", json=body).json()["version"] == "1"
        registry.promote(MODEL, "2")
        wait_until(lambda: httpx.get(f"{url}/healthz").json()["version"] == "2",
                   message="the worker to serve version 2")
        on_two = httpx.post(f"{url}/predict", json=body).json()
        assert on_two["version"] == "2" and on_two["cached"] is False  # the cache key holds the version
        assert registry.rollback(MODEL) == ("2", "1")
        wait_until(lambda: httpx.get(f"{url}/healthz").json()["version"] == "1",
                   message="the worker to serve version 1")
        on_one = httpx.post(f"{url}/predict", json=body).json()
        assert on_one["version"] == "1" and on_one["prediction"] != on_two["prediction"]
        assert metric(url, "driftline_worker_model_swaps_total") == 2


def test_kafka_down_serving_continues_and_drops_are_counted(tiny_results, tmp_path, sqlite_url,
                                                            embedded_broker_factory):
    from driftline.broker import free_port

    port = free_port()  # nothing listens here yet: Kafka is down at start
    settings = make_settings(tmp_path, f"127.0.0.1:{port}", sqlite_url)
    registry_with_versions(settings, tiny_results[:1])
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", event_buffer=50, listen_for_labels=False,
                                           alias_poll_s=0, cache_size=0, shutdown_flush_s=0.5))
    with serving(worker) as url:
        bodies = [{"features": row, "request_id": f"down-{i}"} for i, row in enumerate(rows(120, seed=16))]
        responses = asyncio.run(_post_all(url, bodies))
        assert [r.status_code for r in responses] == [200] * 120
        assert metric(url, "driftline_worker_events_buffered") == 50
        assert metric(url, "driftline_worker_events_dropped_total") == 70
        assert metric(url, "driftline_worker_kafka_connected") == 0

        broker = embedded_broker_factory(port=port)  # Kafka comes back: the buffer drains
        wait_until(lambda: metric(url, "driftline_worker_events_sent_total") == 50, timeout=60,
                   message="the 50 buffered events to be sent")
        assert metric(url, "driftline_worker_events_buffered") == 0
        # a fresh broker: its topic holds this test's events only, read until the 50 sent are there
        delivered: list[str] = []
        for _, record in topic_records(broker.bootstrap_servers, TOPIC_INFERENCE, lambda: len(delivered) >= 50,
                                           timeout_s=60):
            delivered.append(parse_inference(record.value).request_id)
        assert len(delivered) == len(set(delivered)) == 50 and set(delivered) <= {f"down-{i}" for i in range(120)}

        broker.stop(timeout_s=0.5)  # and goes away again mid-run (Tansu may ignore SIGTERM: then killed)
        more = asyncio.run(_post_all(url, [{"features": row} for row in rows(30, seed=17)]))
        assert [r.status_code for r in more] == [200] * 30
        assert httpx.get(f"{url}/healthz").json()["status"] == "ok"


def test_a_failing_model_answers_500_logs_an_error_event_and_the_worker_recovers(served, broker):
    url, worker = served
    loaded = worker.current

    def broken(_records):
        raise RuntimeError("device lost")

    loaded.predict = broken  # an instance attribute shadows the method for this test only
    try:
        answer = httpx.post(f"{url}/predict", json={**_body_with(age=55), "request_id": "broken-1"})
    finally:
        del loaded.predict
    assert answer.status_code == 500 and "device lost" in answer.json()["detail"]
    event = parse_inference(read_topic(broker, TOPIC_INFERENCE, {"broken-1"})["broken-1"])
    assert event.status == "error" and "device lost" in event.raw["error"] and event.prediction is None
    assert event.features == FeatureTransform().apply([event.raw["inputs"]])[0]
    assert httpx.post(f"{url}/predict", json=_body_with(age=55)).status_code == 200


def test_a_full_request_queue_answers_503_with_retry_after(served, monkeypatch):
    url, worker = served
    loaded = worker.current
    gate, entered = threading.Event(), threading.Event()
    real_predict = loaded.predict

    def held(records):
        entered.set()
        gate.wait(30)
        return real_predict(records)

    monkeypatch.setattr(worker.batcher, "max_pending", 1)
    loaded.predict = held  # an instance attribute shadows the method for this test only
    bodies = [{"features": row} for row in rows(3, seed=31)]
    with ThreadPoolExecutor(2) as pool:
        try:
            computing = pool.submit(httpx.post, f"{url}/predict", json=bodies[0], timeout=60)
            assert entered.wait(30)  # the first request holds the forward pass
            queued = pool.submit(httpx.post, f"{url}/predict", json=bodies[1], timeout=60)
            wait_until(lambda: worker.batcher.queue_depth == 1, message="the second request to queue")
            refused = httpx.post(f"{url}/predict", json=bodies[2])
        finally:
            gate.set()
            del loaded.predict
        assert computing.result().status_code == 200 and queued.result().status_code == 200
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert "overloaded" in refused.json()["detail"]
    assert httpx.post(f"{url}/predict", json=bodies[2]).status_code == 200


def test_a_client_that_leaves_mid_body_is_counted_not_logged_as_a_failure(served, caplog):
    url, worker = served
    host, port = url.removeprefix("http://").split(":")
    def closed() -> float:
        line = [x for x in httpx.get(f"{url}/metrics").text.splitlines()
                if x.startswith("driftline_worker_requests_total") and 'code="499"' in x]
        return float(line[0].rsplit(" ", 1)[1]) if line else 0.0

    before = closed()
    with caplog.at_level(logging.INFO, logger="driftline.worker.server"):
        with socket.create_connection((host, int(port)), timeout=5) as conn:
            conn.sendall(b"POST /predict HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 5000\r\n\r\n{\"features\": {")
        wait_until(lambda: closed() > before, message="the disconnect to be counted")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert httpx.post(f"{url}/predict", json=_body_with()).status_code == 200
