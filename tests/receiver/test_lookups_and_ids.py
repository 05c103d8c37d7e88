"""Store lookups outside the receiver's locks and bounded, request ids refused at the door, and requests of a
version's raw inputs read through its registered transform."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import orjson
import pandas as pd
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from driftline.broker import free_port
from driftline.cli import cli
from driftline.events import REQUEST_ID_CHARS, validate_inference
from driftline.receiver.app import create_app
from driftline.receiver.lookups import StoreLookups
from driftline.store.db import session_scope
from driftline.store.models import ModelVersion
from driftline.worker.dataset import generate_inputs
from driftline.worker.feature_transform import FeatureTransform, transform_row
from tests.receiver.conftest import FEATURES, dead_letters_of, events_of, register_baseline
from tests.receiver.test_bounds import batch, binary, structured

NDJSON = {"content-type": "application/x-ndjson"}


def line(model: str, **fields) -> bytes:
    return orjson.dumps({"schema": "driftline.inference/v1", "event_id": uuid.uuid4().hex, "ts": "2026-01-02T03:04:05Z",
                         "model": model, "version": "1", "features": {"x": 1.0}, "prediction": 0.4,
                         "latency_ms": {"total": 3.0}, **fields})


# --- store lookups ---------------------------------------------------------------------------------


def test_a_slow_store_lookup_holds_up_no_other_call(receiver_factory, model):
    service, client = receiver_factory()
    other = TestClient(create_app(service), base_url="http://127.0.0.1")  # a second caller, on its own loop
    entered, release = threading.Event(), threading.Event()
    read = service.lookups._read

    def slow_read(query):
        entered.set()
        release.wait(3)
        return read(query)

    service.lookups._read = slow_read
    ce_id = uuid.uuid4().hex  # no version hint: the pair asks the store for the production version
    assert binary(client, model, ce_id, "request", orjson.dumps({"instances": [{"x": 1.0}]})).json()["waiting"] == 1
    pairing = threading.Thread(target=binary, args=(client, model, ce_id, "response",
                                                    orjson.dumps({"predictions": [1]})))
    pairing.start()
    try:
        assert entered.wait(10)
        started = time.perf_counter()
        answer = other.post("/events", content=line(model), headers=NDJSON)
        events_took = time.perf_counter() - started
        started = time.perf_counter()
        waiting = binary(other, model, uuid.uuid4().hex, "request", orjson.dumps({"instances": [{"x": 2.0}]}))
        half_took = time.perf_counter() - started
    finally:
        release.set()
        pairing.join()
    assert answer.status_code == 200 and answer.json()["events"] == 1, answer.text
    assert waiting.json()["waiting"] == 1
    assert events_took < 1.0 and half_took < 1.0, (events_took, half_took)


def test_a_call_naming_more_models_than_allowed_is_refused_whole(receiver_factory, model):
    service, client = receiver_factory(max_models_per_call=3)
    halves = [structured(f"{model}-{i}", uuid.uuid4().hex, "request", {"instances": [{"x": 1.0}]}) for i in range(4)]
    refused = batch(client, halves, "/")
    assert refused.status_code == 413 and "4 models" in refused.json()["detail"]
    assert service.stats()["halves"] == 0 and service.stats()["pending_halves"] == 0  # nothing taken
    assert batch(client, halves[:3], "/").json()["waiting"] == 3


def test_lookup_caches_are_bounded(sqlite_url):
    lookups = StoreLookups(sqlite_url, recheck_s=60, max_entries=4)
    for i in range(10):
        assert lookups.production_version(f"absent-{i}") is None
        assert lookups.schema(f"absent-{i}", "1").features is None
    assert lookups.cached() == 8
    assert list(lookups._production) == [f"absent-{i}" for i in range(6, 10)]  # the most recent kept


# --- request ids --------------------------------------------------------------------------------


def test_a_ce_id_longer_than_a_request_id_is_refused_at_the_door(receiver_factory, model):
    service, client = receiver_factory()
    answer = binary(client, model, "i" * 300, "request", orjson.dumps({"instances": [{"x": 1.0}]}))
    assert answer.status_code == 400
    (error,) = answer.json()["errors"]
    assert error["field"] == "id" and f"above the limit of {REQUEST_ID_CHARS}" in error["reason"]
    assert service.stats()["pending_halves"] == 0


def test_the_row_suffix_counts_against_the_request_id_limit(broker, receiver_factory, model):
    _, client = receiver_factory()
    url = f"/?model={model}&version=1"
    ce_id = "r" + uuid.uuid4().hex + "x" * (REQUEST_ID_CHARS - 34)  # 255 characters: "ID:1" would be 257
    two_rows = orjson.dumps({"instances": [{"x": 1.0}, {"x": 2.0}]})
    answer = binary(client, model, ce_id, "request", two_rows, url)
    assert answer.status_code == 400
    assert "with the row suffix ':1' of a 2-row request" in answer.json()["errors"][0]["reason"]
    assert f"at most {REQUEST_ID_CHARS - 2} characters" in answer.json()["errors"][0]["reason"]
    fits = ce_id[:REQUEST_ID_CHARS - 2]
    assert binary(client, model, fits, "request", two_rows, url).json()["waiting"] == 1
    assert binary(client, model, fits, "response", orjson.dumps({"predictions": [1, 0]}), url).json()["events"] == 2
    assert sorted(len(e["request_id"]) for e in events_of(broker, model, 2)) == [REQUEST_ID_CHARS] * 2


def test_an_events_line_with_a_request_id_the_store_cannot_hold_is_dead_lettered(receiver_factory, model):
    _, client = receiver_factory()
    answer = client.post("/events", content=line(model, request_id="q" * 300) + b"\n" + line(model),
                         headers=NDJSON).json()
    assert answer["events"] == 1 and answer["errors"][0]["field"] == "request_id"
    assert f"at most {REQUEST_ID_CHARS} characters" in answer["errors"][0]["reason"]


# --- raw inputs through the registered transform -------------------------------------


def register_credit_model(db_url: str, tmp_path, model: str) -> None:
    """What the bundled worker registers: raw inputs as its schema, its transform, a baseline of the features."""
    with session_scope(db_url) as session:
        session.add(ModelVersion(model=model, version="1", metrics={}, stage="registered",
                                 feature_schema=FeatureTransform.input_schema(),
                                 transform=FeatureTransform().to_dict()))
    features = FeatureTransform().apply(generate_inputs(300, seed=3).to_dict("records"))
    frame = pd.DataFrame(features)
    frame["score"] = 0.5
    path = tmp_path / "credit-features.csv"
    frame.to_csv(path, index=False)
    result = CliRunner().invoke(cli, ["baseline", "--model", model, "--version", "1", "--file", str(path),
                                      "--prediction", "score", "--db", db_url])
    assert result.exit_code == 0, result.output


def raw_tensors(rows: list[dict], leave_out: str | None = None) -> list[dict]:
    """One tensor per raw input, as the worker's OIP model metadata lists them (what a KServe logger records)."""
    return [{"name": name, "shape": [len(rows), 1], "datatype": "FP64" if kind == "numeric" else "BYTES",
             "data": [[row[name]] for row in rows]}
            for name, kind in ((e["name"], e["kind"]) for e in FeatureTransform.input_schema()) if name != leave_out]


def test_a_request_of_raw_inputs_goes_through_the_versions_registered_transform(broker, sqlite_url, tmp_path,
                                                                                receiver_factory, model):
    register_credit_model(sqlite_url, tmp_path, model)
    _, client = receiver_factory()
    raw = generate_inputs(2, seed=11).to_dict("records")
    ce_id = uuid.uuid4().hex
    request = {"id": ce_id, "inputs": raw_tensors(raw)}
    response = {"model_name": model, "id": ce_id,
                "outputs": [{"name": "prediction", "shape": [2, 1], "datatype": "FP64", "data": [0.1, 0.7]}]}
    assert binary(client, model, ce_id, "request", orjson.dumps(request)).json()["waiting"] == 1
    answer = binary(client, model, ce_id, "response", orjson.dumps(response)).json()
    assert answer["events"] == 2, answer["errors"]
    events = sorted(events_of(broker, model, 2), key=lambda e: e["request_id"])
    for event, row in zip(events, raw):
        validate_inference(event)
        assert event["features"] == pytest.approx(transform_row(row))
        assert event["features"]["debt_to_income"] == pytest.approx(row["monthly_debt"] / (row["annual_income"] / 12))
        assert event["inputs"] == pytest.approx(row)  # the raw request, for the parity-skew check


def test_a_feature_still_missing_is_a_missing_value_not_a_lost_event(broker, sqlite_url, tmp_path, receiver_factory,
                                                                    model):
    register_credit_model(sqlite_url, tmp_path, model)
    _, client = receiver_factory()
    raw = generate_inputs(1, seed=12).to_dict("records")
    ce_id = uuid.uuid4().hex
    binary(client, model, ce_id, "request", orjson.dumps({"inputs": raw_tensors(raw, leave_out="credit_limit")}))
    response = {"outputs": [{"name": "prediction", "shape": [1], "datatype": "FP64", "data": [0.2]}]}
    assert binary(client, model, ce_id, "response", orjson.dumps(response)).json()["events"] == 1
    (event,) = events_of(broker, model, 1)
    assert event["features"]["credit_utilization"] is None and "credit_limit" not in event["inputs"]


def test_a_missing_feature_tensor_without_a_transform_is_left_out_of_the_event(broker, sqlite_url, tmp_path,
                                                                             receiver_factory, model):
    register_baseline(sqlite_url, tmp_path, model)
    _, client = receiver_factory()
    ce_id = uuid.uuid4().hex
    tensors = [{"name": name, "shape": [1], "datatype": "FP64", "data": [5.0 + i]} for i, name in enumerate(FEATURES)]
    binary(client, model, ce_id, "request", orjson.dumps({"inputs": tensors[:-1]}))
    response = {"outputs": [{"name": "p", "shape": [1], "datatype": "FP64", "data": [0.3]}]}
    assert binary(client, model, ce_id, "response", orjson.dumps(response)).json()["events"] == 1
    (event,) = events_of(broker, model, 1)
    assert event["features"] == {name: 5.0 + i for i, name in enumerate(FEATURES[:-1])} and "inputs" not in event


def test_a_transform_that_fails_dead_letters_the_pair_with_its_reason(broker, sqlite_url, tmp_path, receiver_factory,
                                                                     model):
    register_credit_model(sqlite_url, tmp_path, model)
    service, client = receiver_factory()
    schema = service.lookups.schema(model, "1")
    assert schema.inputs == [e["name"] for e in FeatureTransform.input_schema()] and schema.transform is not None

    def broken(rows):
        raise ZeroDivisionError("boom")

    service.lookups._put(service.lookups._schemas, (model, "1"), (type(schema)(schema.features, schema.inputs, broken),
                                                                    time.monotonic()))
    ce_id = uuid.uuid4().hex
    raw = generate_inputs(1, seed=13).to_dict("records")
    binary(client, model, ce_id, "request", orjson.dumps({"inputs": raw_tensors(raw)}))
    response = {"outputs": [{"name": "prediction", "shape": [1], "datatype": "FP64", "data": [0.2]}]}
    answer = binary(client, model, ce_id, "response", orjson.dumps(response)).json()
    assert answer["events"] == 0 and "registered transform failed" in answer["errors"][0]["reason"]
    assert len(dead_letters_of(broker, ce_id, 2)) == 2


def test_driftline_receiver_takes_the_bounds_from_its_settings(broker, sqlite_url, model):
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("DRIFTLINE_")},
           "DRIFTLINE_RECEIVER_MAX_MODELS_PER_CALL": "1"}
    command = [str(Path(sys.executable).with_name("driftline")), "receiver", "--port", str(port), "--db", sqlite_url,
               "--bootstrap-servers", broker]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and process.poll() is None, "the receiver did not start"
                time.sleep(0.2)
        halves = [structured(f"{model}-{i}", uuid.uuid4().hex, "request", {"instances": [{"x": 1.0}]})
                  for i in range(2)]
        answer = httpx.post(f"http://127.0.0.1:{port}/", content=orjson.dumps(halves),
                            headers={"content-type": "application/cloudevents-batch+json"})
        assert answer.status_code == 413 and "more than the 1 one call may" in answer.json()["detail"]
    finally:
        process.terminate()
        process.wait(timeout=30)
