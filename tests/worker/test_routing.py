"""Rollout routing in the worker: canary and A/B shares, stickiness by entity, shadow answers logged and never
returned, a full shadow queue dropped and counted, plans picked up while serving."""
from __future__ import annotations

import asyncio
import math
import os
import re
import threading
import time

import pytest
from fastapi.testclient import TestClient


from driftline.config import TOPIC_INFERENCE
from driftline.events import parse_inference
from driftline.rollouts import ab_plan, canary_plan, shadow_plan
from driftline.store import db as store_db
from driftline.store.rollouts import clear_plan, set_plan
from driftline.worker.dataset import generate_inputs
from driftline.worker.server import Worker, WorkerConfig, create_app
from driftline.worker.shadow import ShadowAnswer, ShadowRequest, ShadowRunner
from tests.support.waiting import wait_until
from tests.support.worker_helpers import make_settings, registry_with_versions, serving, topic_records

MODEL = "credit-default"


class Recorder:
    """Stands in for the InferenceLogger: keeps each event's arguments."""

    def __init__(self):
        self.events: list[dict] = []

    def log_soon(self, features, prediction, latency_ms, **fields):
        self.events.append({"features": features, "prediction": prediction, "latency_ms": latency_ms, **fields})

    log = log_soon

    def stats(self):
        return None

    def close(self, timeout_s: float = 0.0):
        return None


def _within_binomial_bounds(hits: int, n: int, p: float, z: float = 5.0) -> bool:
    return abs(hits - n * p) <= z * math.sqrt(n * p * (1 - p)) + 1


@pytest.fixture
def store(tiny_results, tmp_path):
    """Settings of a store with versions 1 (production) and 2."""
    # TestClient's requests name the host "testserver": listed like any name clients use
    settings = make_settings(tmp_path, "127.0.0.1:1").model_copy(update={"worker_allowed_hosts": "testserver"})
    registry_with_versions(settings, tiny_results)
    return settings


def _plan(settings, plan) -> None:
    with store_db.session_scope(settings.db_url) as session:
        if plan is None:
            clear_plan(session, MODEL)
        else:
            set_plan(session, plan)


def _client(settings, **config) -> tuple[TestClient, Worker]:
    options = dict(model=MODEL, device="cpu", max_batch_size=16, max_wait_ms=1.0, log_events=False,
                   listen_for_labels=False, alias_poll_s=0)
    worker = Worker(settings, WorkerConfig(**{**options, **config}))
    return TestClient(create_app(worker)), worker


def _metric(client: TestClient, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", client.get("/metrics").text, re.MULTILINE)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))


ROWS = generate_inputs(400, seed=21).to_dict("records")


def test_a_canary_answers_its_weight_sticky_by_entity(store):
    _plan(store, canary_plan(MODEL, "2", 30))
    client, worker = _client(store, cache_size=0)
    with client:
        worker.logger = recorder = Recorder()
        assert client.get("/model").json()["rollout"] == {"model": MODEL, "mode": "canary", "candidate": "2",
                                                          "weight": 30.0, "loaded": ["2"]}
        first = {}
        for i, row in enumerate(ROWS):
            answer = client.post("/predict", json={"features": row, "entity_id": f"user-{i}"}).json()
            first[i] = answer["version"]
        again = {i: client.post("/predict", json={"features": ROWS[i], "entity_id": f"user-{i}"}).json()["version"]
                 for i in range(0, len(ROWS), 4)}
        candidate = worker.routing.versions["2"]
        production = worker.current
    assert all(again[i] == first[i] for i in again)  # sticky
    on_canary = sum(v == "2" for v in first.values())
    assert set(first.values()) == {"1", "2"}
    assert _within_binomial_bounds(on_canary, len(ROWS), 0.30), on_canary
    for event in recorder.events:  # each event names the version that answered and its role, with its answer
        assert event["role"] == ("canary" if event["version"] == "2" else "production")
        answering = candidate if event["version"] == "2" else production
        assert event["prediction"] == pytest.approx(answering.predict([event["features"]])[0], abs=1e-6)


def test_an_ab_test_splits_requests_by_the_arms_weights(store):
    _plan(store, ab_plan(MODEL, [("1", 50), ("2", 50)]))
    client, worker = _client(store)
    with client:
        worker.logger = recorder = Recorder()
        versions = [client.post("/predict", json={"features": row, "entity_id": f"e{i}"}).json()["version"]
                    for i, row in enumerate(ROWS)]
        assert _metric(client, 'driftline_worker_routed_requests_total{role="arm:2"}') == versions.count("2")
    assert _within_binomial_bounds(versions.count("2"), len(ROWS), 0.5)
    assert {e["role"] for e in recorder.events} == {"arm:1", "arm:2"}
    assert all(e["role"] == f"arm:{e['version']}" for e in recorder.events)


def test_a_running_worker_picks_a_plan_up_and_clear_restores_production(store):
    client, worker = _client(store, alias_poll_s=0.05)
    with client:
        assert client.get("/model").json()["rollout"] is None
        _plan(store, canary_plan(MODEL, "2", 100))
        wait_until(lambda: client.get("/model").json()["rollout"] is not None, timeout=20, message="GET /model to show the plan")
        assert {client.post("/predict", json={"features": row}).json()["version"] for row in ROWS[:20]} == {"2"}
        _plan(store, None)
        wait_until(lambda: client.get("/model").json()["rollout"] is None, timeout=20, message="GET /model to show no plan")
        assert {client.post("/predict", json={"features": row}).json()["version"] for row in ROWS[:20]} == {"1"}
        assert _metric(client, "driftline_worker_plan_changes_total") == 2


def test_shadow_answers_are_logged_with_the_request_id_and_never_returned(store):
    _plan(store, shadow_plan(MODEL, "2"))
    client, worker = _client(store)
    with client:
        worker.logger = recorder = Recorder()
        answers = {}
        for i, row in enumerate(ROWS[:60]):
            answer = client.post("/predict", json={"features": row, "request_id": f"r{i}", "entity_id": f"e{i}"})
            answers[f"r{i}"] = answer.json()
        wait_until(lambda: sum(e["role"] == "shadow" for e in recorder.events) == 60, timeout=20, message="60 shadow events")
        assert _metric(client, "driftline_worker_shadow_answers_total") == 60
        candidate, production = worker.routing.versions["2"], worker.current
    shadows = {e["request_id"]: e for e in recorder.events if e["role"] == "shadow"}
    productions = {e["request_id"]: e for e in recorder.events if e["role"] == "production"}
    assert set(shadows) == set(productions) == set(answers)
    differs = 0
    for request_id, answer in answers.items():
        shadow, served = shadows[request_id], productions[request_id]
        assert answer["version"] == served["version"] == "1" and shadow["version"] == "2"
        assert answer["prediction"] == served["prediction"]
        assert answer["prediction"] == pytest.approx(production.predict([served["features"]])[0], abs=1e-6)
        assert shadow["prediction"] == pytest.approx(candidate.predict([shadow["features"]])[0], abs=1e-6)
        assert shadow["entity_id"] == served["entity_id"] and shadow["features"] == served["features"]
        differs += shadow["prediction"] != answer["prediction"]
    assert differs > 0  # two differently trained models: the answers would show it had the shadow leaked


def test_a_full_shadow_queue_drops_copies_counts_them_and_production_keeps_answering(store):
    _plan(store, shadow_plan(MODEL, "2"))
    client, worker = _client(store, shadow_queue=2)
    gate = threading.Event()
    with client:
        worker.logger = recorder = Recorder()
        candidate = worker.routing.versions["2"]
        real_predict = candidate.predict

        def stuck(records):
            gate.wait(30)  # a candidate that falls behind
            return real_predict(records)

        candidate.predict = stuck
        try:
            answers = [client.post("/predict", json={"features": row, "request_id": f"q{i}"})
                       for i, row in enumerate(ROWS[:20])]
            assert [a.status_code for a in answers] == [200] * 20
            assert {a.json()["version"] for a in answers} == {"1"}
            dropped = _metric(client, "driftline_worker_shadow_dropped_total")
            assert dropped == worker.shadow.dropped >= 20 - 1 - 2  # one computing, two queued
        finally:
            gate.set()
        wait_until(lambda: worker.shadow.answered == 20 - dropped, timeout=20, message="every queued shadow copy answered")
    assert sum(e["role"] == "production" for e in recorder.events) == 20
    assert sum(e["role"] == "shadow" for e in recorder.events) == 20 - dropped


def test_a_candidate_that_cannot_be_loaded_leaves_production_answering(store):
    _plan(store, canary_plan(MODEL, "2", 100))
    registry_dir = store.artifacts_dir / MODEL / "2" / "model.pt"
    registry_dir.write_bytes(b"not a model")  # its sha256 no longer matches the registry's
    client, worker = _client(store)
    with client:
        assert client.get("/model").json()["rollout"]["loaded"] == []
        assert {client.post("/predict", json={"features": row}).json()["version"] for row in ROWS[:10]} == {"1"}


def test_shadow_events_on_kafka_follow_the_contract(broker, tiny_results, tmp_path, unique_id):
    settings = make_settings(tmp_path, broker)
    registry_with_versions(settings, tiny_results)
    _plan(settings, shadow_plan(MODEL, "2"))
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", listen_for_labels=False, alias_poll_s=0))
    with serving(worker) as url:
        import httpx

        ids = [f"{unique_id}-{i}" for i in range(5)]
        for request_id, row in zip(ids, ROWS):
            assert httpx.post(f"{url}/predict", json={"features": row, "request_id": request_id}).status_code == 200
        found: dict[str, list] = {}
        for _, record in topic_records(broker, TOPIC_INFERENCE,
                                       lambda: sum(map(len, found.values())) >= 2 * len(ids)):
            try:
                event = parse_inference(record.value)  # the contract's own validator
            except Exception:
                continue  # other tests' traffic, malformed on purpose
            if event.request_id in ids:
                found.setdefault(event.request_id, []).append(event)
    for request_id in ids:
        roles = sorted((e.role, e.version) for e in found[request_id])
        assert roles == [("production", "1"), ("shadow", "2")]
        assert len({e.event_id for e in found[request_id]}) == 2


def test_shadow_batches_run_at_a_lower_scheduling_priority():
    seen: list[int] = []

    class Candidate:
        version = "2"

        def predict(self, records):
            seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            return [0.5] * len(records)

    answers: list[ShadowAnswer] = []

    async def run() -> None:
        runner = ShadowRunner(4, 8, answers.append, lambda: None, lambda: None, nice=5)
        await runner.start()
        try:
            assert runner.offer(ShadowRequest(Candidate(), {"x": 1}, {"x": 1}, "r1", None, time.perf_counter()))
            for _ in range(500):
                if answers:
                    break
                await asyncio.sleep(0.01)
        finally:
            await runner.stop()

    asyncio.run(run())
    assert [(a.request.request_id, a.prediction) for a in answers] == [("r1", 0.5)]
    assert seen == [min(19, os.getpriority(os.PRIO_PROCESS, 0) + 5)]
