"""Open Inference Protocol v2 over REST, through NVIDIA's own client (tritonclient.http) and plain HTTP,
against a real worker on 127.0.0.1 logging to a real broker."""
from __future__ import annotations

import httpx
import numpy as np
import pytest

from driftline.config import TOPIC_INFERENCE
from driftline.events import parse_inference
from driftline.worker.dataset import generate_inputs
from driftline.worker.feature_transform import FeatureTransform
from driftline.worker.server import Worker, WorkerConfig

httpclient = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

from tests.support.worker_helpers import make_settings, metric, read_topic, registry_with_versions, serving

MODEL = "credit-default"
# tritonclient sends no Content-Type of its own (accepted on OIP paths); a declared JSON type is accepted too.
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def served(broker, tiny_results, tmp_path_factory):
    settings = make_settings(tmp_path_factory.mktemp("oip-rest"), broker)
    registry_with_versions(settings, tiny_results)
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", max_batch_size=32, max_wait_ms=5.0,
                                           listen_for_labels=False, alias_poll_s=0, cache_size=0))
    with serving(worker) as url:
        yield url, worker


@pytest.fixture()
def client(served):
    url, _ = served
    triton = httpclient.InferenceServerClient(url.removeprefix("http://"), network_timeout=60.0)
    yield triton
    triton.close()


def triton_inputs(rows: list[dict], schema: list[dict]) -> list:
    """One input per feature, shape [N, 1]: the layout MLServer's pandas codec uses."""
    inputs = []
    for entry in schema:
        column = [row[entry["name"]] for row in rows]
        if entry["kind"] == "numeric":
            tensor = httpclient.InferInput(entry["name"], [len(rows), 1], "FP64")
            tensor.set_data_from_numpy(np.asarray(column, dtype=np.float64).reshape(-1, 1), binary_data=False)
        else:
            tensor = httpclient.InferInput(entry["name"], [len(rows), 1], "BYTES")
            tensor.set_data_from_numpy(np.asarray(column, dtype=np.object_).reshape(-1, 1), binary_data=False)
        inputs.append(tensor)
    return inputs


def test_health_and_metadata(client, served):
    _, worker = served
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready(MODEL) and client.is_model_ready(MODEL, "1")
    assert not client.is_model_ready("no-such-model")
    assert client.get_server_metadata()["name"] == "driftline"
    meta = client.get_model_metadata(MODEL)
    assert meta["name"] == MODEL and meta["versions"] == ["1"]
    assert [(i["name"], i["datatype"]) for i in meta["inputs"]] == [
        (e["name"], "FP64" if e["kind"] == "numeric" else "BYTES") for e in worker.current.schema]
    assert meta["outputs"] == [{"name": "prediction", "datatype": "FP64", "shape": [-1, 1]}]
    assert client.get_model_metadata(MODEL, "1")["versions"] == ["1"]


def test_unknown_model_and_version_are_404_with_the_protocol_error_shape(served):
    url, _ = served
    for path in ("/v2/models/nope", "/v2/models/nope/ready", f"/v2/models/{MODEL}/versions/9"):
        answer = httpx.get(url + path)
        assert answer.status_code == 404 and set(answer.json()) == {"error"}
    answer = httpx.post(f"{url}/v2/models/nope/infer", json={"inputs": []})
    assert answer.status_code == 404 and "unknown model 'nope'" in answer.json()["error"]


def test_a_128_row_batch_gives_128_events_with_row_ids(client, served, broker):
    _, worker = served
    rows = generate_inputs(128, seed=21).to_dict("records")
    batches_before = metric(served[0], "driftline_worker_batch_size_count")
    result = client.infer(MODEL, triton_inputs(rows, worker.current.schema), request_id="batch-rest",
                          outputs=[httpclient.InferRequestedOutput("prediction", binary_data=False)], headers=JSON)
    scores = result.as_numpy("prediction")
    assert scores.shape == (128, 1)
    assert result.get_response()["id"] == "batch-rest" and result.get_response()["model_version"] == "1"
    expected = worker.current.predict(FeatureTransform().apply(rows))
    assert np.allclose(scores[:, 0], expected, atol=1e-6)

    want = {f"batch-rest:{i}" for i in range(128)}
    raw = read_topic(broker, TOPIC_INFERENCE, want)
    assert set(raw) == want
    for i, row in enumerate(rows):
        event = parse_inference(raw[f"batch-rest:{i}"])
        assert event.raw["inputs"] == row and event.version == "1"
        assert event.prediction == pytest.approx(float(scores[i, 0]))
    # the rows went through the dynamic batcher as separate requests: forward passes of up to 32 rows
    assert metric(served[0], "driftline_worker_batch_size_count") - batches_before >= 4


def test_one_row_keeps_the_request_id_and_shape_n_is_accepted(served, broker):
    url, worker = served
    row = generate_inputs(1, seed=5).to_dict("records")[0]
    body = {"id": "single-rest", "inputs": [
        {"name": e["name"], "shape": [1], "datatype": "INT64" if isinstance(row[e["name"]], int) else
         ("FP32" if e["kind"] == "numeric" else "BYTES"), "data": [row[e["name"]]]} for e in worker.current.schema]}
    answer = httpx.post(f"{url}/v2/models/{MODEL}/versions/1/infer", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"][0]["shape"] == [1, 1]
    assert set(read_topic(broker, TOPIC_INFERENCE, {"single-rest"})) == {"single-rest"}


@pytest.mark.parametrize("change, message", [
    (lambda inputs: inputs[0].update(shape=[2, 2]), "expected [N] or [N, 1]"),
    (lambda inputs: inputs[0].update(datatype="BYTES"), "is numeric: datatype FP64"),
    (lambda inputs: inputs[-1].update(datatype="FP64"), "is categorical: datatype BYTES"),
    (lambda inputs: inputs[0].update(data=[1.0]), "has shape [2, 1] but 1 values"),
    (lambda inputs: inputs.pop(), "missing input"),
    (lambda inputs: inputs[0].update(name="nope"), "unknown input 'nope'"),
    (lambda inputs: inputs[0].update(data=["x", "y"]), "expected a number or null"),
])
def test_bad_input_is_400_and_logs_nothing(served, change, message):
    url, worker = served
    rows = generate_inputs(2, seed=9).to_dict("records")
    inputs = [{"name": e["name"], "shape": [2, 1], "datatype": "FP64" if e["kind"] == "numeric" else "BYTES",
               "data": [[row[e["name"]]] for row in rows]} for e in worker.current.schema]
    change(inputs)
    before = metric(url, "driftline_worker_cache_misses_total")
    answer = httpx.post(f"{url}/v2/models/{MODEL}/infer", json={"id": "bad", "inputs": inputs})
    assert answer.status_code == 400, answer.text
    assert set(answer.json()) == {"error"} and message in answer.json()["error"]
    assert metric(url, "driftline_worker_cache_misses_total") == before  # nothing reached the model


def test_tritonclient_bad_datatype_raises_its_400(client, served):
    _, worker = served
    rows = generate_inputs(2, seed=3).to_dict("records")
    inputs = triton_inputs(rows, worker.current.schema)
    wrong = httpclient.InferInput(inputs[0].name(), [2, 1], "BYTES")
    wrong.set_data_from_numpy(np.asarray([["a"], ["b"]], dtype=np.object_), binary_data=False)
    with pytest.raises(InferenceServerException) as raised:
        client.infer(MODEL, [wrong, *inputs[1:]], headers=JSON,
                     outputs=[httpclient.InferRequestedOutput("prediction", binary_data=False)])
    assert raised.value.status() == "400" and "is numeric" in raised.value.message()


def test_tritonclient_as_documented_with_no_extra_headers_is_answered(client, served):
    """tritonclient sends no Content-Type and no Origin: a non-browser client, let through by the ingress guard."""
    _, worker = served
    rows = generate_inputs(2, seed=4).to_dict("records")
    result = client.infer(MODEL, triton_inputs(rows, worker.current.schema),
                          outputs=[httpclient.InferRequestedOutput("prediction", binary_data=False)])
    scores = result.as_numpy("prediction")
    assert scores.shape == (2, 1) and ((scores > 0) & (scores < 1)).all()
    assert result.get_response()["model_version"] == worker.current.version


@pytest.mark.parametrize("browser", [{"Sec-Fetch-Site": "cross-site"}, {"Origin": "http://evil.example"}])
def test_a_cross_site_browser_infer_is_403_in_the_protocol_shape(served, browser):
    url, worker = served
    inputs = [{"name": e["name"], "shape": [1, 1], "datatype": "FP64" if e["kind"] == "numeric" else "BYTES",
               "data": [worker.example[e["name"]]]} for e in worker.current.schema]
    before = metric(url, "driftline_worker_cache_misses_total")
    answer = httpx.post(f"{url}/v2/models/{MODEL}/infer", json={"inputs": inputs}, headers=browser)
    assert answer.status_code == 403 and set(answer.json()) == {"error"} and "cross-origin" in answer.json()["error"]
    assert metric(url, "driftline_worker_cache_misses_total") == before  # nothing reached the model


def test_a_body_not_declared_as_json_is_415_in_the_protocol_shape(served):
    url, _ = served
    answer = httpx.post(f"{url}/v2/models/{MODEL}/infer", content=b"{}", headers={"Content-Type": "text/plain"})
    assert answer.status_code == 415 and set(answer.json()) == {"error"}


def test_latency_histogram_is_labelled_by_protocol(client, served):
    url, worker = served
    client.infer(MODEL, triton_inputs(generate_inputs(1, seed=2).to_dict("records"), worker.current.schema),
                 headers=JSON, outputs=[httpclient.InferRequestedOutput("prediction", binary_data=False)])
    text = httpx.get(f"{url}/metrics").text
    assert 'driftline_worker_latency_seconds_count{protocol="v2-rest",stage="total"}' in text
    assert 'driftline_worker_v2_requests_total{code="200",protocol="v2-rest"}' in text


def test_admission_takes_all_the_rows_or_none(broker, tiny_results, tmp_path_factory):
    """More rows than the admission bound: 413 (no retry could help), nothing computed; up to the bound passes."""
    settings = make_settings(tmp_path_factory.mktemp("oip-admission"), broker)
    registry_with_versions(settings, tiny_results)
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", listen_for_labels=False, alias_poll_s=0,
                                           log_events=False, max_pending=4))
    with serving(worker) as url:
        def body(n: int) -> dict:
            rows = generate_inputs(n, seed=6).to_dict("records")
            return {"inputs": [{"name": e["name"], "shape": [n], "datatype": "FP64" if e["kind"] == "numeric"
                                else "BYTES", "data": [row[e["name"]] for row in rows]} for e in worker.current.schema]}

        refused = httpx.post(f"{url}/v2/models/{MODEL}/infer", json=body(5))
        assert refused.status_code == 413
        assert "5 rows are more than the 4 requests the worker admits at once" in refused.json()["error"]
        assert metric(url, "driftline_worker_cache_misses_total") == 0  # no row reached the model
        assert httpx.post(f"{url}/v2/models/{MODEL}/infer", json=body(4)).status_code == 200


def test_rows_follow_the_rollout_plan_and_the_versioned_path_pins_production(tiny_results, tmp_path):
    from fastapi.testclient import TestClient

    from driftline.rollouts import canary_plan
    from driftline.store import db as store_db
    from driftline.store.rollouts import set_plan
    from driftline.worker.server import create_app

    settings = make_settings(tmp_path, "127.0.0.1:1").model_copy(update={"worker_allowed_hosts": "testserver"})
    registry_with_versions(settings, tiny_results)
    with store_db.session_scope(settings.db_url) as session:
        set_plan(session, canary_plan(MODEL, "2", 50))
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", log_events=False, listen_for_labels=False,
                                           alias_poll_s=0, cache_size=0))
    roles: list[tuple[str, str, str]] = []

    class Recorder:  # stands in for the InferenceLogger: keeps (request id, version, role) of each event
        def log_soon(self, features, prediction, latency_ms, **fields):
            roles.append((fields["request_id"], fields["version"], fields["role"]))

        def stats(self):
            return None

        def close(self, timeout_s: float = 0.0):
            return None

    rows = generate_inputs(64, seed=8).to_dict("records")
    with TestClient(create_app(worker)) as client:
        worker.logger = Recorder()
        body = {"id": "routed", "inputs": [
            {"name": e["name"], "shape": [64, 1], "datatype": "FP64" if e["kind"] == "numeric" else "BYTES",
             "data": [[row[e["name"]]] for row in rows]} for e in worker.current.schema]}
        answer = client.post(f"/v2/models/{MODEL}/infer", json=body).json()
        per_row = answer["parameters"]["versions"].split(",")
        assert answer["model_version"] == "1,2" and set(per_row) == {"1", "2"}  # 64 rows at 50 %: both arms
        assert sorted(roles) == sorted((f"routed:{i}", v, "canary" if v == "2" else "production")
                                       for i, v in enumerate(per_row))
        roles.clear()
        pinned = client.post(f"/v2/models/{MODEL}/versions/1/infer", json=body).json()
        assert pinned["model_version"] == "1" and "parameters" not in pinned
        assert {(v, r) for _, v, r in roles} == {("1", "production")}


def test_an_id_whose_row_ids_the_store_cannot_hold_is_refused_at_the_door(served):
    """A 256-character id with 2 rows made `ID:0` of 258 characters, answered 200 and then
    dead-lettered by the collector; it is refused with 400, before any row reaches the model."""
    url, worker = served
    rows = generate_inputs(2, seed=21).to_dict("records")
    inputs = [{"name": e["name"], "shape": [2, 1], "datatype": "FP64" if e["kind"] == "numeric" else "BYTES",
               "data": [[row[e["name"]]] for row in rows]} for e in worker.current.schema]
    before = metric(url, "driftline_worker_cache_misses_total")
    answer = httpx.post(f"{url}/v2/models/{MODEL}/infer", json={"id": "i" * 256, "inputs": inputs})
    assert answer.status_code == 400, answer.text
    assert "258 characters, above the limit of 256" in answer.json()["error"]
    assert "at most 254 characters" in answer.json()["error"]
    assert metric(url, "driftline_worker_cache_misses_total") == before
    assert httpx.post(f"{url}/v2/models/{MODEL}/infer", json={"id": "i" * 254, "inputs": inputs}).status_code == 200
