"""driftline.client.InferenceLogger: contract events a consumer reads back; never blocks when Kafka is away."""
from __future__ import annotations

from driftline.broker import free_port
from driftline.client import InferenceLogger
from driftline.config import TOPIC_INFERENCE, TOPIC_LABELS
from driftline.events import parse_inference, parse_label


def test_logged_events_and_labels_are_read_back_in_the_contract_shape(broker, kit, unique_id):
    logger = InferenceLogger(broker, model="fraud", version="7", device="cpu", tags={"team": "risk"})
    ids = [f"{unique_id}-{i}" for i in range(25)]
    for i, request_id in enumerate(ids):
        logger.log({"amount": float(i), "country": "se", "age": None}, prediction=[0.25, 0.75],
                   latency_ms={"total": 3.5, "compute": 1.0}, request_id=request_id,
                   inputs={"amount": str(i)}, entity_id=f"customer-{i}")
    logger.log({"amount": 1.0}, prediction=None, latency_ms=2.0, request_id=f"{unique_id}-err", status="error",
               error="model timed out")
    for request_id in ids[:5]:
        logger.log_label(request_id, 1)
    assert logger.flush(timeout_s=20)
    stats = logger.close()
    assert (stats.sent, stats.buffered, stats.dropped, stats.failed) == (31, 0, 0, 0)

    events = kit.read_topic(broker, TOPIC_INFERENCE, set(ids) | {f"{unique_id}-err"})
    assert len(events) == 26
    first = parse_inference(events[ids[3]])
    assert (first.model, first.version, first.request_id, first.status) == ("fraud", "7", ids[3], "ok")
    assert first.features == {"amount": 3.0, "country": "se", "age": None}
    assert first.prediction == [0.25, 0.75] and first.latency_ms == {"total": 3.5, "compute": 1.0}
    assert first.raw["inputs"] == {"amount": "3"} and first.raw["entity_id"] == "customer-3"
    assert first.raw["device"] == "cpu" and first.raw["tags"] == {"team": "risk"}
    error = parse_inference(events[f"{unique_id}-err"])
    assert error.status == "error" and error.raw["error"] == "model timed out" and error.prediction is None
    assert len({parse_inference(raw).event_id for raw in events.values()}) == 26

    labels = kit.read_topic(broker, TOPIC_LABELS, set(ids[:5]))
    parsed = [parse_label(raw) for raw in labels.values()]
    assert sorted(p.request_id for p in parsed) == sorted(ids[:5])
    assert all(p.label == 1 and p.model == "fraud" for p in parsed)


def test_without_kafka_log_returns_at_once_buffers_to_the_bound_and_counts_drops():
    logger = InferenceLogger(f"127.0.0.1:{free_port()}", model="m", version="1", max_buffered=10)
    for i in range(25):
        logger.log({"x": i}, prediction=0.5, latency_ms=1.0)
    stats = logger.stats()  # right after the calls: nothing waited for Kafka
    assert (stats.buffered, stats.dropped, stats.sent, stats.connected) == (10, 15, 0, False)
    stats = logger.close(timeout_s=0.2)
    assert stats.buffered == 0 and stats.failed == 10 and stats.dropped == 15
    logger.log({"x": 1}, prediction=0.5, latency_ms=1.0)  # after close: dropped, not raised
    assert logger.stats().dropped == 16
