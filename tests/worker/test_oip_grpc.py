"""Open Inference Protocol v2 over gRPC, through tritonclient.grpc and a plain grpcio stub, against a real
worker on 127.0.0.1 (its gRPC port on the same event loop) logging to a real broker."""
from __future__ import annotations

import grpc
import numpy as np
import pytest

from driftline.broker import free_port
from driftline.config import TOPIC_INFERENCE
from driftline.events import parse_inference
from driftline.worker.dataset import generate_inputs
from driftline.worker.feature_transform import FeatureTransform
from driftline.worker.server import Worker, WorkerConfig

grpcclient = pytest.importorskip("tritonclient.grpc")
from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from tests.support.worker_helpers import make_settings, metric, read_topic, registry_with_versions, serving

MODEL = "credit-default"


@pytest.fixture(scope="module")
def served(broker, tiny_results, tmp_path_factory):
    settings = make_settings(tmp_path_factory.mktemp("oip-grpc"), broker)
    registry_with_versions(settings, tiny_results)
    port = free_port()
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", max_batch_size=32, max_wait_ms=5.0,
                                           listen_for_labels=False, alias_poll_s=0, cache_size=0, grpc_port=port))
    with serving(worker) as url:
        yield url, f"127.0.0.1:{port}", worker


@pytest.fixture()
def client(served):
    triton = grpcclient.InferenceServerClient(served[1])
    yield triton
    triton.close()


@pytest.fixture()
def stub(served):
    with grpc.insecure_channel(served[1]) as channel:
        yield service_pb2_grpc.GRPCInferenceServiceStub(channel)


def triton_inputs(rows: list[dict], schema: list[dict]) -> list:
    inputs = []
    for entry in schema:
        column = [row[entry["name"]] for row in rows]
        numeric = entry["kind"] == "numeric"
        tensor = grpcclient.InferInput(entry["name"], [len(rows), 1], "FP64" if numeric else "BYTES")
        tensor.set_data_from_numpy(np.asarray(column, dtype=np.float64 if numeric else np.object_).reshape(-1, 1))
        inputs.append(tensor)
    return inputs


def stub_request(rows: list[dict], schema: list[dict], request_id: str) -> service_pb2.ModelInferRequest:
    """Typed `contents` (not raw bytes), shape [N]: the other encoding tritonclient does not use."""
    request = service_pb2.ModelInferRequest(model_name=MODEL, id=request_id)
    for entry in schema:
        column = [row[entry["name"]] for row in rows]
        tensor = request.inputs.add(name=entry["name"], shape=[len(rows)])
        if entry["kind"] == "numeric":
            tensor.datatype = "FP64"
            tensor.contents.fp64_contents.extend(float(v) for v in column)
        else:
            tensor.datatype = "BYTES"
            tensor.contents.bytes_contents.extend(v.encode() for v in column)
    return request


def test_health_and_metadata(client, served, stub):
    worker = served[2]
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready(MODEL)
    assert client.get_server_metadata().name == "driftline"
    meta = client.get_model_metadata(MODEL)
    assert meta.name == MODEL and list(meta.versions) == ["1"]
    assert [(i.name, i.datatype, list(i.shape)) for i in meta.inputs] == [
        (e["name"], "FP64" if e["kind"] == "numeric" else "BYTES", [-1, 1]) for e in worker.current.schema]
    assert stub.ServerLive(service_pb2.ServerLiveRequest()).live
    assert stub.ModelReady(service_pb2.ModelReadyRequest(name=MODEL, version="1")).ready
    with pytest.raises(grpc.RpcError) as raised:
        stub.ModelMetadata(service_pb2.ModelMetadataRequest(name="nope"))
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_128_row_batch_gives_128_events_with_row_ids(client, served, broker):
    url, _, worker = served
    rows = generate_inputs(128, seed=31).to_dict("records")
    batches_before = metric(url, "driftline_worker_batch_size_count")
    result = client.infer(MODEL, triton_inputs(rows, worker.current.schema), request_id="batch-grpc")
    scores = result.as_numpy("prediction")
    assert scores.shape == (128, 1)
    assert result.get_response().id == "batch-grpc" and result.get_response().model_version == "1"
    assert np.allclose(scores[:, 0], worker.current.predict(FeatureTransform().apply(rows)), atol=1e-6)

    want = {f"batch-grpc:{i}" for i in range(128)}
    raw = read_topic(broker, TOPIC_INFERENCE, want)
    assert set(raw) == want
    for i, row in enumerate(rows):
        event = parse_inference(raw[f"batch-grpc:{i}"])
        assert event.raw["inputs"] == row and event.prediction == pytest.approx(float(scores[i, 0]))
    assert metric(url, "driftline_worker_batch_size_count") - batches_before >= 4
    assert 'driftline_worker_latency_seconds_count{protocol="v2-grpc",stage="total"}' in \
        __import__("httpx").get(f"{url}/metrics").text


def test_plain_grpcio_stub_with_typed_contents(stub, served, broker):
    worker = served[2]
    rows = generate_inputs(3, seed=41).to_dict("records")
    answer = stub.ModelInfer(stub_request(rows, worker.current.schema, "stub"))
    assert answer.model_name == MODEL and answer.id == "stub"
    assert [o.name for o in answer.outputs] == ["prediction"] and list(answer.outputs[0].shape) == [3, 1]
    scores = np.frombuffer(answer.raw_output_contents[0], dtype="<f8")
    assert np.allclose(scores, worker.current.predict(FeatureTransform().apply(rows)), atol=1e-6)
    assert set(read_topic(broker, TOPIC_INFERENCE, {"stub:0", "stub:1", "stub:2"})) == {"stub:0", "stub:1",
                                                                                          "stub:2"}


def test_bad_input_gets_the_protocol_status_codes(stub, client, served):
    worker = served[2]
    schema = worker.current.schema
    rows = generate_inputs(2, seed=43).to_dict("records")
    wrong_shape = stub_request(rows, schema, "bad")
    wrong_shape.inputs[0].shape[:] = [2, 2]
    wrong_type = stub_request(rows, schema, "bad")
    wrong_type.inputs[0].datatype = "BYTES"
    unknown = stub_request(rows, schema, "bad")
    unknown.model_name = "nope"
    for request, code, message in ((wrong_shape, grpc.StatusCode.INVALID_ARGUMENT, "expected [N] or [N, 1]"),
                                   (wrong_type, grpc.StatusCode.INVALID_ARGUMENT, "is numeric"),
                                   (unknown, grpc.StatusCode.NOT_FOUND, "unknown model 'nope'")):
        with pytest.raises(grpc.RpcError) as raised:
            stub.ModelInfer(request)
        assert raised.value.code() == code and message in raised.value.details()
    with pytest.raises(InferenceServerException) as raised:
        client.infer("nope", triton_inputs(rows, schema))
    assert raised.value.status() == "StatusCode.NOT_FOUND"


def test_a_message_above_the_body_limit_is_resource_exhausted(broker, tiny_results, tmp_path_factory):
    settings = make_settings(tmp_path_factory.mktemp("oip-grpc-limit"), broker)
    registry_with_versions(settings, tiny_results)
    port = free_port()
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", listen_for_labels=False, alias_poll_s=0,
                                           log_events=False, max_body_bytes=2_000, grpc_port=port))
    with serving(worker), grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        rows = generate_inputs(64, seed=1).to_dict("records")
        with pytest.raises(grpc.RpcError) as raised:
            service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(
                stub_request(rows, worker.current.schema, "big"))
        assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_an_id_whose_row_ids_the_store_cannot_hold_is_invalid_argument(stub, served):
    """`ID:i` of a 256-character id is longer than the store's request_id."""
    worker = served[2]
    rows = generate_inputs(2, seed=47).to_dict("records")
    with pytest.raises(grpc.RpcError) as raised:
        stub.ModelInfer(stub_request(rows, worker.current.schema, "g" * 256))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "above the limit of 256" in raised.value.details()
    assert stub.ModelInfer(stub_request(rows, worker.current.schema, "g" * 254)).id == "g" * 254
