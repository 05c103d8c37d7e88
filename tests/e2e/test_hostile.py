"""A hostile client and a hostile producer during a `driftline up` run: monitoring goes on.

While the covariate_shift scenario runs, the test sends the worker requests built to break it (a
1e200 feature, NaN, a lone surrogate, a path in the model name, a 2 MB body) and puts on Kafka what a
careless or hostile producer would (huge and out-of-range numbers, a flood of unique categories,
far-future times, unsafe model names, bytes that are not JSON). Afterwards: every bad request got a
4xx naming its field, every bad message is a dead letter with its reason, no component crashed, and
the drift still pages through the default rules (dataset drift is an error: PagerDuty).
"""
from __future__ import annotations

import time
import uuid

import httpx
import orjson
import pytest
from kafka import KafkaProducer
from sqlalchemy import func, select

from driftline.config import TOPIC_INFERENCE
from driftline.store.db import session_scope
from driftline.store.models import Alert, DeadLetter, DetectorResult

from .conftest import MODEL, assert_clean_exit, evaluated_windows

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def _health(url: str) -> dict | None:
    """The worker's /healthz answer once it is healthy; None before."""
    try:
        answer = httpx.get(f"{url}/healthz", timeout=1.0)
    except httpx.HTTPError:
        return None
    return answer.json() if answer.status_code == 200 else None


def hostile_requests(url: str, example: dict) -> list[tuple[str, int, str]]:
    """(what, status, answer) for requests a hostile client sends; none may get a 5xx."""
    numeric = next(k for k, v in example.items() if isinstance(v, (int, float)))
    categorical = next(k for k, v in example.items() if isinstance(v, str))
    bodies = {
        "huge number": orjson.dumps({"features": {**example, numeric: 1e200}}),
        "NaN literal": orjson.dumps({"features": example}).replace(
            orjson.dumps(example[numeric]), b"NaN", 1),
        "surrogate request_id": b'{"request_id": "\\ud800", "features": ' + orjson.dumps(example) + b"}",
        "surrogate category": orjson.dumps({"features": {**example, categorical: "x"}}).replace(
            b'"x"', b'"\\udfff"', 1),
        "wrong type": orjson.dumps({"features": {**example, numeric: {"nested": [1, 2]}}}),
        "not json": b"\xff\xfe{{{",
        "two megabytes": orjson.dumps({"features": example, "request_id": "r" * (2 << 20)}),
    }
    answers = []
    with httpx.Client(timeout=10.0) as client:
        for what, body in bodies.items():
            reply = client.post(f"{url}/predict", content=body, headers={"Content-Type": "application/json"})
            answers.append((what, reply.status_code, reply.text[:300]))
        # a cross-site form's body, and a DNS-rebinding page's requests (its own name in Host)
        body = orjson.dumps({"features": example})
        for what, headers in (("text/plain body", {"Content-Type": "text/plain"}),
                              ("rebound Host", {"Content-Type": "application/json", "Host": "evil.example"})):
            reply = client.post(f"{url}/predict", content=body, headers=headers)
            answers.append((what, reply.status_code, reply.text[:300]))
    return answers


def hostile_messages(bootstrap: str, example: dict) -> dict[str, int]:
    """Put on Kafka what a hostile producer would; returns how many messages of each kind were sent."""
    numeric = next(k for k, v in example.items() if isinstance(v, (int, float)))
    categorical = next(k for k, v in example.items() if isinstance(v, str))

    def event(**changes) -> dict:
        doc = {"schema": "driftline.inference/v1", "event_id": uuid.uuid4().hex, "request_id": uuid.uuid4().hex,
               "ts": int(time.time() * 1000), "model": MODEL, "version": "1", "features": dict(example),
               "prediction": 0.5, "latency_ms": {"total": 3.0}}
        return doc | changes

    sent = {"bad": 0, "odd": 0}
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, linger_ms=20)
    try:
        bad = [b"\xff\xfe not json", b"[1, 2, 3]", b'{"schema": "driftline.inference/v1"}',
               orjson.dumps(event(model="../../etc")), orjson.dumps(event(ts=int(time.time() * 1000) + 30 * 86_400_000)),
               orjson.dumps(event(prediction="x" * 10))[:-5]]
        for raw in bad:
            producer.send(TOPIC_INFERENCE, raw)
        sent["bad"] = len(bad)
        # Valid by the contract but extreme: counted as data-quality problems, never folded into sums.
        for i in range(3000):
            features = dict(example)
            features[categorical] = f"{uuid.uuid4().hex}{'z' * 180}"  # a flood of unique 200-character values
            if i % 100 == 0:
                features[numeric] = 1e200 if i % 200 == 0 else -1.7e308
            producer.send(TOPIC_INFERENCE, orjson.dumps(event(features=features, prediction=1e300 if i == 1 else 0.4)))
        sent["odd"] = 3000
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=5)
    return sent


def _outcome(db_url: str, sink, bad: int) -> bool:  # noqa: ANN001
    """Ten windows evaluated, every malformed message dead-lettered, and the drift paged."""
    with session_scope(db_url) as s:
        letters = s.scalar(select(func.count()).select_from(DeadLetter).where(DeadLetter.topic == TOPIC_INFERENCE))
        drift = s.scalar(select(Alert.id).where(Alert.fired_at.is_not(None), Alert.detector == "dataset_drift")
                         .limit(1))
    triggers = [b for b in sink.bodies("/pagerduty") if b["event_action"] == "trigger"]
    return (evaluated_windows(db_url) >= 10 and letters >= bad and drift is not None and bool(triggers)
            and bool(sink.bodies("/slack")))


def test_hostile_traffic_does_not_stop_monitoring_and_drift_still_pages(home, sink, up):
    running = up(home, "covariate_shift", sink=sink, warmup=8)
    url = running.worker_url
    running.wait_for(lambda: _health(url), "the worker to become healthy")
    example = httpx.get(f"{url}/model", timeout=5.0).json()["example"]
    answers = hostile_requests(url, example)
    sent = hostile_messages(running.bootstrap_servers, example)
    running.wait_for(lambda: _outcome(running.db_url, sink, sent["bad"]),
                     "ten evaluated windows, the dead letters and a page for the drift")
    run = running.stop()
    assert_clean_exit(run)

    # Each hostile request was refused with a client error that names what was wrong; none crashed the worker.
    for what, status, answer in answers:
        assert 400 <= status < 500, (what, status, answer)
    assert "features." in dict((w, a) for w, _, a in answers)["huge number"]
    statuses = {what: status for what, status, _ in answers}
    assert (statuses["text/plain body"], statuses["rebound Host"]) == (415, 400)

    db_url = f"sqlite:///{home / 'driftline.db'}"
    with session_scope(db_url) as s:
        letters = s.scalars(select(DeadLetter).where(DeadLetter.topic == TOPIC_INFERENCE)).all()
        reasons = [letter.reason for letter in letters]
        fired = s.scalars(select(Alert).where(Alert.fired_at.is_not(None))).all()
        fired = [(a.detector, a.feature, a.severity) for a in fired]
        shares = [(r.window_start_ms, r.value, r.breached, r.details.get("features"))
                  for r in s.scalars(select(DetectorResult).where(DetectorResult.detector == "dataset_drift")
                                     .order_by(DetectorResult.window_start_ms))]
    # Every malformed message is a dead letter with its reason; the extreme-but-valid ones are not.
    assert len(letters) == sent["bad"], reasons
    assert all(reason for reason in reasons)
    assert any("model" in (letter.field or "") for letter in letters), reasons
    assert any("future" in letter.reason for letter in letters), reasons
    assert evaluated_windows(db_url) >= 10
    # The shift is still seen and still pages: the dataset-level verdict is an error, which goes to PagerDuty.
    assert [f for f in fired if f[0] == "dataset_drift"], (fired, shares)
    triggers = [b for b in sink.bodies("/pagerduty") if b["event_action"] == "trigger"]
    assert triggers, fired
    assert sink.bodies("/slack")
