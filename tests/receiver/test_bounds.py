"""The receiver's memory and output stay bounded under hostile or unlucky traffic.

Waiting halves are bytes, bounded in bytes; remembered ids are digests (not ids of any length);
dead letters waiting for Kafka are bounded and cut well under a stock broker's 1 MiB message limit;
rows are counted before a call is admitted; one call's answer, letters and log lines are bounded.
Memory is measured with tracemalloc and the receiver's own byte accounting, not RSS.
"""
from __future__ import annotations

import gc
import logging
import tracemalloc
import uuid

import orjson
import pytest
from kafka.future import Future
from sqlalchemy import select

from driftline.events import MAX_EVENT_BYTES
from driftline.receiver.dead_letters import DeadLetterSink
from driftline.receiver.pairing import REQUEST, RESPONSE, Half, Pairing
from driftline.store.db import session_scope
from driftline.store.models import DeadLetter
from tests.receiver.conftest import dead_letters_of

REQUEST_TYPE = "org.kubeflow.serving.inference.request"
RESPONSE_TYPE = "org.kubeflow.serving.inference.response"


def binary(client, model: str, ce_id: str, kind: str, body: bytes, url: str = "/"):
    """One half in CloudEvents binary mode, as KServe's logger posts it."""
    headers = {"ce-id": ce_id, "ce-type": REQUEST_TYPE if kind == "request" else RESPONSE_TYPE,
               "ce-source": "http://localhost:9081/", "ce-specversion": "1.0", "ce-inferenceservicename": model,
               "ce-time": "2026-01-02T03:04:05Z", "content-type": "application/json"}
    return client.post(url, headers=headers, content=body)


def structured(model: str, ce_id: str, kind: str, data: dict) -> dict:
    return {"specversion": "1.0", "id": ce_id, "type": REQUEST_TYPE if kind == "request" else RESPONSE_TYPE,
            "source": "s", "time": "2026-01-02T03:04:05Z", "inferenceservicename": model, "data": data}


def batch(client, events: list[dict], url: str):
    return client.post(url, content=orjson.dumps(events),
                       headers={"content-type": "application/cloudevents-batch+json"})


def rows_request(rows: int) -> dict:
    return {"instances": [{"x": float(i)} for i in range(rows)]}


def rows_response(rows: int) -> dict:
    return {"predictions": [0.5] * rows}


# --- waiting halves -------------------------------------------------------------


def test_waiting_halves_are_held_as_bytes_and_bounded_in_bytes(broker, receiver_factory, model):
    bound = 1_000_000
    service, client = receiver_factory(pair_wait_s=3600, max_pending_bytes=bound)
    body = orjson.dumps({"instances": [[0.5, 1.5, 2.5, 3.5]] * 20_000})  # ~420 KB of JSON, ~4 MB decoded
    ids = [uuid.uuid4().hex for _ in range(8)]
    # the first letter's one-off allocations (the store's mapper, the producer's encode buffer of a cut letter)
    binary(client, model, uuid.uuid4().hex, "request", b"\x00" * len(body))
    service.flush()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for ce_id in ids:
            assert binary(client, model, ce_id, "request", body).json()["waiting"] == 1
        service.flush()  # the evicted halves' letters have left the producer
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    stats = service.stats()
    assert stats["pending_halves"] == 2 and len(body) * 2 < stats["pending_bytes"] <= bound
    assert stats["unpaired"] == 6  # the six oldest, pushed out: dead-lettered, not lost
    assert held < 3 * len(body), f"{held} bytes held for two waiting halves of {len(body)} bytes"
    (headers, _), = dead_letters_of(broker, ids[0], 1)
    assert headers["driftline.reason"].startswith("unpaired: evicted to make room")
    assert f"{bound} bytes" in headers["driftline.reason"]


def test_a_half_larger_than_the_byte_bound_is_dead_lettered_at_once_and_its_other_half_follows(receiver_factory,
                                                                                             model):
    service, client = receiver_factory(pair_wait_s=3600, max_pending_bytes=100_000)
    ce_id = uuid.uuid4().hex
    answer = binary(client, model, ce_id, "request", orjson.dumps({"instances": [[1.0] * 40_000]}))
    assert answer.status_code == 400
    assert "receiver max pending bytes" in answer.json()["errors"][0]["reason"]
    late = binary(client, model, ce_id, "response", orjson.dumps({"predictions": [1]})).json()
    assert late["dead_lettered"] == 1 and late["errors"][0]["reason"].startswith("unpaired: its other half")
    assert service.stats()["pending_halves"] == 0 and service.stats()["unpaired"] == 2


def test_remembered_ids_take_a_fixed_size_whatever_their_length():
    """Suspected: `_seen` was bounded by count but kept every paired key whole (ids of any length)."""
    pairing = Pairing(max_pending=10, wait_s=60, seen_max=10_000)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(500):
            key = (f"{i}-" + "n" * 4_000, "isvc", "predictor", f"id-{i}")
            for kind in (REQUEST, RESPONSE):
                pairing.offer(Half(key, kind, f"id-{i}", {}, None, b"{}", 0.0))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(pairing) == 0
    assert held < 400_000, f"{held} bytes to remember 1 000 halves whose keys are 4 KB each"


def test_rows_completed_counts_the_request_rows_of_the_pairs_a_call_would_complete():
    pairing = Pairing(max_pending=10, wait_s=60, seen_max=100)

    def half(ce_id: str, kind: str, rows: int) -> Half:
        return Half(("", "m", "", ce_id), kind, ce_id, {}, None, b"{}", 0.0, rows=rows)

    pairing.offer(half("a", REQUEST, 7))
    pairing.offer(half("b", RESPONSE, 5))
    call = [half("a", RESPONSE, 7), half("b", REQUEST, 5), half("c", REQUEST, 3), half("c", RESPONSE, 3),
            half("c", RESPONSE, 3), half("d", REQUEST, 100)]
    assert pairing.rows_completed(call) == 7 + 5 + 3  # "d" would only wait; the retried "c" adds nothing
    assert len(pairing) == 2  # nothing changed


# --- rows counted before admission -----------------------------------------------


def test_rows_are_counted_before_admission_and_what_can_never_fit_is_413(receiver_factory, model):
    service, client = receiver_factory(event_buffer=20, bootstrap_servers="127.0.0.1:1")  # nothing drains
    url = f"/?model={model}&version=1"
    big = uuid.uuid4().hex  # one pair of 25 rows: more than the buffer could ever hold
    for kind, data in (("request", rows_request(25)), ("response", rows_response(25))):
        refused = binary(client, model, big, kind, orjson.dumps(data), url)
        assert refused.status_code == 413 and "25 rows" in refused.json()["detail"]
    pairs = [uuid.uuid4().hex for _ in range(12)]  # 24 halves but 12 events: they fit
    answer = batch(client, [structured(model, ce_id, kind, data) for ce_id in pairs
                            for kind, data in (("request", rows_request(1)), ("response", rows_response(1)))], url)
    assert answer.status_code == 200 and answer.json()["events"] == 12
    waiting = uuid.uuid4().hex  # 12 + 10 > 20: the pair must wait for room, nothing of it lost
    assert binary(client, model, waiting, "request", orjson.dumps(rows_request(10)), url).json()["waiting"] == 1
    busy = binary(client, model, waiting, "response", orjson.dumps(rows_response(10)), url)
    assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
    stats = service.stats()
    assert stats["pending_halves"] == 1 and stats["dead_letters"] == 0 and stats["events"] == 12
    waiting_only = batch(client, [structured(model, uuid.uuid4().hex, "request", rows_request(5)) for _ in range(4)],
                         url)
    assert waiting_only.json()["waiting"] == 4  # halves that only wait need no room
    service.close(timeout_s=0.5)  # nothing drains: do not wait the default ten seconds for it


# --- one call's answer, letters and log ------------------------------------------


def test_an_answer_lists_a_bounded_number_of_errors_and_the_rest_go_as_one_letter(db_url, receiver_factory,
                                                                                  caplog):
    service, client = receiver_factory(max_errors=10, db_url=db_url)
    caplog.set_level(logging.WARNING, logger="driftline")
    lines = [f"junk-{i}".encode() for i in range(5_000)]
    answer = client.post("/events", content=b"\n".join(lines), headers={"content-type": "application/x-ndjson"})
    assert answer.status_code == 400
    result = answer.json()
    assert result["dead_lettered"] == 5_000 and len(result["errors"]) == 10 and result["errors_left_out"] == 4_990
    assert len(answer.content) < 5_000
    service.flush()
    with session_scope(db_url) as session:
        letters = list(session.scalars(select(DeadLetter).order_by(DeadLetter.id)))
    assert len(letters) == 11 and service.stats()["dead_letters"] == 5_000
    merged = letters[-1]
    assert merged.reason.startswith("4990 more refusals of one call") and merged.offset == 10
    assert merged.raw_size == sum(len(line) for line in lines[10:]) + 4_989
    assert merged.raw.split(b"\n")[:2] == lines[10:12]  # replayable: the lines, one per line
    assert len([r for r in caplog.records if r.name.startswith("driftline")]) <= 2


# --- letters in flight and their size on the topic ---------------------------------


class StuckProducer:
    """A producer whose broker stopped: records are taken and never acknowledged."""

    def __init__(self) -> None:
        self.values: list[bytes] = []

    def send(self, topic: str, value: bytes, headers: list) -> Future:
        self.values.append(value)
        return Future()

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float | None = None) -> None:
        pass


def test_dead_letters_waiting_for_kafka_are_bounded_in_count_and_bytes_and_cut():
    sink = DeadLetterSink("127.0.0.1:1", raw_bytes=64 << 10, max_inflight=1_000, max_inflight_bytes=1 << 20)
    sink._producer = producer = StuckProducer()
    for i in range(40):
        sink.send(bytes([i % 250]) * (1 << 20), "not JSON", "data", "receiver:/")
    stats = sink.stats()
    assert stats["dead_letters_inflight_bytes"] <= 1 << 20 and stats["dead_letters_inflight"] == len(producer.values)
    assert stats["dead_letters_not_sent"] == 40 - len(producer.values) > 0
    assert all(len(value) == 64 << 10 for value in producer.values)
    few = DeadLetterSink("127.0.0.1:1", max_inflight=3)
    few._producer = StuckProducer()
    for _ in range(5):
        few.send(b"x", "bad", None, "receiver:/events")
    assert few.stats()["dead_letters_inflight"] == 3 and few.stats()["dead_letters_not_sent"] == 2


def test_a_stopped_broker_holds_a_bounded_number_of_letter_bytes(db_url, receiver_factory, model):
    service, client = receiver_factory(dead_letter_inflight_bytes=2 << 20, db_url=db_url)
    service.dead_letters._producer = producer = StuckProducer()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20):  # non-JSON halves of 1 MiB: dead-lettered at the door
            assert binary(client, model, uuid.uuid4().hex, "request", b"\x00" * (1 << 20)).status_code == 400
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    stats = service.stats()
    assert stats["dead_letters_inflight_bytes"] <= 2 << 20 and stats["dead_letters_not_sent"] == 20 - len(
        producer.values)
    assert held < 8 << 20, f"{held} bytes held by 20 letters of 1 MiB"  # letters cut; the store's rows 64 KiB each
    service.flush()
    assert stats["dead_letters"] == 20 and service.stats()["dead_letters_stored"] == 20  # none lost


def test_a_large_dead_letter_is_cut_under_a_stock_brokers_message_limit(broker, receiver_factory, model):
    """Suspected: a 4 MiB body limit and whole bodies on the DLQ topic, which a stock broker (1 MiB) refuses."""
    service, client = receiver_factory()
    ce_id = uuid.uuid4().hex
    assert binary(client, model, ce_id, "request", b"\x00" * (2 << 20)).status_code == 400
    (headers, value), = dead_letters_of(broker, ce_id, 1)
    assert len(value) == service.dead_letters.raw_bytes < 1 << 20
    assert headers["driftline.raw_size"] == str(2 << 20)


def test_an_event_above_the_message_limit_is_dead_lettered_not_produced(receiver_factory, model):
    _, client = receiver_factory()
    ce_id = uuid.uuid4().hex
    url = f"/?model={model}&version=1"
    request = orjson.dumps({"instances": [{"text": "x" * (MAX_EVENT_BYTES + 10)}]})
    assert binary(client, model, ce_id, "request", request, url).json()["waiting"] == 1
    answer = binary(client, model, ce_id, "response", orjson.dumps({"predictions": [1]}), url).json()
    assert answer["events"] == 0 and "above the limit" in answer["errors"][0]["reason"]


@pytest.mark.parametrize("setting, value", [("receiver_max_pending_bytes", "1000"),
                                            ("receiver_dead_letter_raw_bytes", "4096")])
def test_the_bounds_are_settings(monkeypatch, setting, value):
    from driftline.config import Settings

    monkeypatch.setenv(f"DRIFTLINE_{setting.upper()}", value)
    assert getattr(Settings(), setting) == int(value)
