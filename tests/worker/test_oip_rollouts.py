"""Rollouts over the Open Inference Protocol: A/B arms and shadow copies through tritonclient (REST and gRPC),
and the versioned infer path pinned to a version the plan serves (an arm or a canary), each event naming the
version that answered and its role."""
from __future__ import annotations

import contextlib
from typing import Iterator

import httpx
import numpy as np
import pytest

from driftline.broker import free_port
from driftline.rollouts import ab_plan, canary_plan, shadow_plan
from driftline.store import db as store_db
from driftline.store.rollouts import set_plan
from driftline.worker.dataset import generate_inputs
from driftline.worker.server import Worker, WorkerConfig
from tests.support.waiting import wait_until
from tests.support.worker_helpers import make_settings, registry_with_versions, serving

httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")
from tritonclient.utils import InferenceServerException  # noqa: E402

MODEL = "credit-default"
JSON = {"Content-Type": "application/json"}
ROWS = generate_inputs(64, seed=12).to_dict("records")


class Recorder:
    """Stands in for the InferenceLogger: keeps (request id, version, role) of each event."""

    def __init__(self):
        self.events: list[tuple[str, str, str]] = []

    def log_soon(self, features, prediction, latency_ms, **fields):
        self.events.append((fields["request_id"], fields["version"], fields["role"]))

    log = log_soon

    def stats(self):
        return None

    def close(self, timeout_s: float = 0.0):
        return None


@contextlib.contextmanager
def serving_plan(tiny_results, tmp_path, plan) -> Iterator[tuple[str, str, Worker, Recorder]]:
    """A worker with versions 1 (production) and 2 under `plan`, REST and gRPC on 127.0.0.1, events recorded."""
    settings = make_settings(tmp_path, "127.0.0.1:1")
    registry_with_versions(settings, tiny_results)
    with store_db.session_scope(settings.db_url) as session:
        set_plan(session, plan)
    grpc_port = free_port()
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", log_events=False, listen_for_labels=False,
                                           alias_poll_s=0, cache_size=0, grpc_port=grpc_port))
    with serving(worker) as url:
        worker.logger = recorder = Recorder()
        yield url, f"127.0.0.1:{grpc_port}", worker, recorder


def rest_infer(url: str, schema: list[dict], request_id: str, version: str | None = None) -> dict:
    client = httpclient.InferenceServerClient(url.removeprefix("http://"), network_timeout=60.0)
    inputs = []
    for entry in schema:
        numeric = entry["kind"] == "numeric"
        tensor = httpclient.InferInput(entry["name"], [len(ROWS), 1], "FP64" if numeric else "BYTES")
        tensor.set_data_from_numpy(np.asarray([row[entry["name"]] for row in ROWS],
                                              dtype=np.float64 if numeric else np.object_).reshape(-1, 1),
                                   binary_data=False)
        inputs.append(tensor)
    try:
        return client.infer(MODEL, inputs, model_version=version or "", request_id=request_id, headers=JSON,
                            outputs=[httpclient.InferRequestedOutput("prediction", binary_data=False)]).get_response()
    finally:
        client.close()


def grpc_infer(address: str, schema: list[dict], request_id: str, version: str | None = None) -> dict:
    client = grpcclient.InferenceServerClient(address)
    inputs = []
    for entry in schema:
        numeric = entry["kind"] == "numeric"
        tensor = grpcclient.InferInput(entry["name"], [len(ROWS), 1], "FP64" if numeric else "BYTES")
        tensor.set_data_from_numpy(np.asarray([row[entry["name"]] for row in ROWS],
                                              dtype=np.float64 if numeric else np.object_).reshape(-1, 1))
        inputs.append(tensor)
    try:
        return client.infer(MODEL, inputs, model_version=version or "", request_id=request_id).get_response(
            as_json=True)
    finally:
        client.close()


def _row_versions(answer: dict) -> list[str]:
    """Each row's version: the answer's `versions` parameter when the rows differ, else model_version."""
    versions = answer.get("parameters", {}).get("versions")
    if isinstance(versions, dict):  # gRPC as JSON: {"string_param": "..."}
        versions = versions["string_param"]
    return versions.split(",") if versions else [answer["model_version"]] * len(ROWS)


@pytest.mark.parametrize("transport", ["rest", "grpc"])
def test_an_ab_test_over_oip_routes_rows_to_the_arms_and_the_versioned_path_pins_an_arm(
        tiny_results, tmp_path, transport):
    with serving_plan(tiny_results, tmp_path, ab_plan(MODEL, [("1", 50), ("2", 50)])) as (url, address, worker,
                                                                                               recorder):
        infer = (lambda rid, version=None: rest_infer(url, worker.current.schema, rid, version)) \
            if transport == "rest" else (lambda rid, version=None: grpc_infer(address, worker.current.schema, rid,
                                                                              version))
        per_row = _row_versions(infer("ab"))
        assert set(per_row) == {"1", "2"}  # 64 rows drawn at 50 %: both arms answer
        assert sorted(recorder.events) == sorted((f"ab:{i}", v, f"arm:{v}") for i, v in enumerate(per_row))
        for version in ("2", "1"):
            recorder.events.clear()
            pinned = infer(f"pin-{version}", version)
            assert pinned["model_version"] == version and _row_versions(pinned) == [version] * len(ROWS)
            assert {(v, role) for _, v, role in recorder.events} == {(version, f"arm:{version}")}
            assert len(recorder.events) == len(ROWS)
        if transport == "rest":  # the metadata lists both arms; each arm is ready under its number
            assert httpx.get(f"{url}/v2/models/{MODEL}").json()["versions"] == ["1", "2"]
            assert httpx.get(f"{url}/v2/models/{MODEL}/versions/2/ready").json()["ready"] is True


@pytest.mark.parametrize("transport", ["rest", "grpc"])
def test_a_shadow_over_oip_answers_from_production_and_logs_the_candidate_as_shadow(tiny_results, tmp_path, transport):
    with serving_plan(tiny_results, tmp_path, shadow_plan(MODEL, "2", 1.0)) as (url, address, worker, recorder):
        schema = worker.current.schema
        answer = rest_infer(url, schema, "sh") if transport == "rest" else grpc_infer(address, schema, "sh")
        assert _row_versions(answer) == ["1"] * len(ROWS)  # the candidate's answers are never returned
        want = {(f"sh:{i}", "1", "production") for i in range(len(ROWS))} | {
            (f"sh:{i}", "2", "shadow") for i in range(len(ROWS))}
        wait_until(lambda: set(recorder.events) >= want, timeout=60,
                   message="a production and a shadow event for each row")
        assert sorted(recorder.events) == sorted(want)
        # the shadow candidate answers no request of its own, under its number either
        if transport == "rest":
            refused = httpx.post(f"{url}/v2/models/{MODEL}/versions/2/infer", json={"inputs": []})
            assert refused.status_code == 404
            assert "version '2' is not served; the served versions are 1" in refused.json()["error"]
            assert httpx.get(f"{url}/v2/models/{MODEL}").json()["versions"] == ["1"]
        else:
            with pytest.raises(InferenceServerException) as raised:
                grpc_infer(address, schema, "sh-pinned", "2")
            assert raised.value.status() == "StatusCode.NOT_FOUND"


def test_the_versioned_path_pins_a_canary_to_its_role(tiny_results, tmp_path):
    with serving_plan(tiny_results, tmp_path, canary_plan(MODEL, "2", 10)) as (url, _, worker, recorder):
        answer = rest_infer(url, worker.current.schema, "canary-pin", "2")
        assert _row_versions(answer) == ["2"] * len(ROWS)
        assert {(v, role) for _, v, role in recorder.events} == {("2", "canary")}
