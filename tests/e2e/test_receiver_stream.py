"""A KServe deployment monitored without code: its payload logger's CloudEvents go to `driftline up`'s receiver.

The CloudEvents SDK plays KServe's inference logger for `sklearn-iris`, a model served elsewhere whose
baseline was registered with `driftline baseline`: request and response halves in binary mode, v1
(`instances` / `predictions`) and v2 (Open Inference Protocol tensors) in turn, with two of its four
features shifted far from training. The halves go through the real receiver, broker, collector and
scheduler of an `up` run; a drift alert on the shifted features fires and reaches Slack (a local sink).
A malformed half sent on the way is in the store's dead letters with its reason.
"""
from __future__ import annotations

import threading
import uuid
from datetime import datetime, timezone

import httpx
import numpy as np
import orjson
import pytest
from cloudevents.v1.conversion import to_binary
from cloudevents.v1.http import CloudEvent
from sqlalchemy import select

from driftline.store.db import session_scope
from driftline.store.models import Alert, DeadLetter
from tests.receiver.conftest import FEATURES, register_baseline

from .conftest import UNLOADED_LATENCY, assert_clean_exit

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

MODEL = "sklearn-iris"
SHIFTED = {"petal_length", "petal_width"}  # +4 standard deviations from the registered baseline
ROWS_PER_CALL = 40  # 80 rows a second: each 4 s window holds well over the detectors' 100-row minimum


def _half(ce_id: str, kind: str, data: dict, when: datetime) -> CloudEvent:
    """A half as KServe's agent sends it (binary mode, its extensions naming the service)."""
    return CloudEvent({"id": ce_id, "type": f"org.kubeflow.serving.inference.{kind}",
                       "source": "http://localhost:9081/", "time": when.isoformat().replace("+00:00", "Z"),
                       "datacontenttype": "application/json", "inferenceservicename": MODEL,
                       "namespace": "default", "component": "predictor", "endpoint": ""}, orjson.dumps(data))


def _payloads(rows: np.ndarray, scores: np.ndarray, v2: bool) -> tuple[dict, dict]:
    if not v2:
        return {"instances": rows.tolist()}, {"predictions": scores.tolist()}
    return ({"id": "x", "inputs": [{"name": "input-0", "shape": list(rows.shape), "datatype": "FP64",
                                    "data": rows.ravel().tolist()}]},
            {"model_name": MODEL, "id": "x", "outputs": [{"name": "output-0", "shape": [len(scores)],
                                                          "datatype": "FP64", "data": scores.tolist()}]})


def _stream(url: str, stop: threading.Event, answers: list[dict]) -> None:
    """Pairs of shifted traffic every half second until `stop` (the test's own wait bounds it)."""
    rng = np.random.default_rng(7)
    shift = np.array([4 * 0.5 if name in SHIFTED else 0.0 for name in FEATURES])
    means = np.array([5.0 + i for i in range(len(FEATURES))])  # the baseline's means (register_baseline)
    with httpx.Client(timeout=10.0) as client:
        for call in range(100_000):
            if stop.is_set():
                return
            rows = rng.normal(means + shift, 0.5, (ROWS_PER_CALL, len(FEATURES))).round(3)
            request, response = _payloads(rows, rng.uniform(0, 1, ROWS_PER_CALL).round(4), v2=call % 2 == 1)
            ce_id, sent = uuid.uuid4().hex, datetime.now(timezone.utc)
            for kind, data, when in (("request", request, sent), ("response", response, datetime.now(timezone.utc))):
                headers, body = to_binary(_half(ce_id, kind, data, when))
                try:
                    answers.append(client.post(f"{url}/", headers=headers, content=body).json())
                except httpx.HTTPError:  # the receiver not listening yet: the next round tries again
                    break
            stop.wait(0.5)


def _drift_alerts(db_url: str) -> list[tuple[str, str | None]]:
    with session_scope(db_url) as s:
        return [(a.detector, a.feature) for a in s.scalars(select(Alert).where(
            Alert.model == MODEL, Alert.fired_at.is_not(None), Alert.detector.in_(("data_drift", "dataset_drift"))))]


def _receiver_letters(db_url: str) -> list[tuple[str, str | None, bytes]]:
    with session_scope(db_url) as s:
        return [(d.reason, d.model, d.raw) for d in s.scalars(select(DeadLetter).where(DeadLetter.topic == "receiver:/"))]


def test_a_kserve_logger_stream_through_the_receiver_fires_a_drift_alert(home, sink, up, tmp_path):
    register_baseline(f"sqlite:///{home / 'driftline.db'}", tmp_path, MODEL)
    running = up(home, "none", sink=sink, rate=10, config=UNLOADED_LATENCY)
    url = running.receiver_url
    running.wait_for(lambda: _healthy(url), "the receiver to answer /healthz")
    # a half whose body is not JSON: refused with its reason, and kept in the store's dead letters
    bad_id = uuid.uuid4().hex
    headers, _ = to_binary(_half(bad_id, "request", {}, datetime.now(timezone.utc)))
    refused = httpx.post(f"{url}/", headers=headers, content=b"{broken")
    assert refused.status_code == 400 and "not JSON" in refused.json()["errors"][0]["reason"]

    stop, answers = threading.Event(), []
    sender = threading.Thread(target=_stream, args=(url, stop, answers), daemon=True)
    sender.start()
    try:
        running.wait_for(lambda: _drift_alerts(running.db_url) and any(MODEL in orjson.dumps(b).decode()
                                                                       for b in sink.bodies("/slack")),
                         "a drift alert on sklearn-iris, delivered to Slack")
        running.wait_for(lambda: _receiver_letters(running.db_url), "the malformed half in the store's dead letters")
    finally:
        stop.set()
        sender.join(timeout=30)
    run = running.stop()
    assert_clean_exit(run)

    assert sum(a.get("events", 0) for a in answers) >= 3 * 100  # paired rows became events
    assert not [a for a in answers if a.get("dead_lettered")], [a for a in answers if a.get("dead_lettered")]
    fired = _drift_alerts(run.db_url)
    drifted = {feature for detector, feature in fired if detector == "data_drift"}
    assert drifted <= SHIFTED, fired  # the two unshifted features are never reported
    assert drifted or any(detector == "dataset_drift" for detector, _ in fired), fired
    (reason, model, raw), = _receiver_letters(run.db_url)
    assert reason.startswith("the request body is not JSON") and raw == b"{broken"
    assert model == MODEL  # from the half's ce-inferenceservicename


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False
