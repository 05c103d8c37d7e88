"""driftline.client.InferenceLogger: contract events a consumer reads back; never blocks when Kafka is away.

Each behaviour is checked for both senders: the producer on a thread of this process
(`EventSender`) and in a child process (`ProcessEventSender`, the worker's choice).
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from driftline.broker import free_port
from driftline.client import (EventSender, InferenceLogger, KeyHashPartitioner, ProcessEventSender,
                              partition_for_key)
from driftline.config import TOPIC_INFERENCE, TOPIC_LABELS
from driftline.events import parse_inference, parse_label
from tests.support.waiting import wait_until
from tests.support.worker_helpers import read_topic, topic_records

ROOT = Path(__file__).resolve().parents[2]
SENDERS = pytest.mark.parametrize("producer_process", [False, True], ids=["thread", "process"])


def process_gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie left to a parent that does not reap counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def read_partitions(bootstrap_servers: str, topic: str, want: set[str]) -> dict[str, set[int]]:
    """For each wanted key (as text), the partitions of `topic` its records are on."""
    found: dict[str, set[int]] = {}
    for partition, record in topic_records(bootstrap_servers, topic, lambda: want <= set(found)):
        key = record.key.decode() if record.key is not None else None
        if key in want:
            found.setdefault(key, set()).add(partition)
    return found


@SENDERS
def test_logged_events_and_labels_are_read_back_in_the_contract_shape(broker, unique_id, producer_process):
    logger = InferenceLogger(broker, model="fraud", version="7", device="cpu", tags={"team": "risk"},
                             producer_process=producer_process)
    ids = [f"{unique_id}-{i}" for i in range(25)]
    for i, request_id in enumerate(ids):
        logger.log({"amount": float(i), "country": "se", "age": None}, prediction=[0.25, 0.75],
                   latency_ms={"total": 3.5, "compute": 1.0}, request_id=request_id,
                   inputs={"amount": str(i)}, entity_id=f"customer-{i}",
                   feature_ts={"amount": "2026-11-30T12:00:00.000Z"}, feature_age_ms={"country": 1500.0 + i})
    logger.log({"amount": 1.0}, prediction=None, latency_ms=2.0, request_id=f"{unique_id}-err", status="error",
               error="model timed out")
    for request_id in ids[:5]:
        logger.log_label(request_id, 1)
    assert logger.flush(timeout_s=20)
    stats = logger.close()
    assert (stats.sent, stats.buffered, stats.dropped, stats.failed) == (31, 0, 0, 0)

    events = read_topic(broker, TOPIC_INFERENCE, set(ids) | {f"{unique_id}-err"})
    assert len(events) == 26
    first = parse_inference(events[ids[3]])
    assert (first.model, first.version, first.request_id, first.status) == ("fraud", "7", ids[3], "ok")
    assert first.features == {"amount": 3.0, "country": "se", "age": None}
    assert first.prediction == [0.25, 0.75] and first.latency_ms == {"total": 3.5, "compute": 1.0}
    assert first.raw["inputs"] == {"amount": "3"} and first.raw["entity_id"] == "customer-3"
    assert first.raw["device"] == "cpu" and first.raw["tags"] == {"team": "risk"}
    assert first.raw["feature_ts"] == {"amount": "2026-11-30T12:00:00.000Z"}  # freshness, valid by the contract
    assert first.raw["feature_age_ms"] == {"country": 1503.0}
    error = parse_inference(events[f"{unique_id}-err"])
    assert error.status == "error" and error.raw["error"] == "model timed out" and error.prediction is None
    assert len({parse_inference(raw).event_id for raw in events.values()}) == 26

    labels = read_topic(broker, TOPIC_LABELS, set(ids[:5]))
    parsed = [parse_label(raw) for raw in labels.values()]
    assert sorted(p.request_id for p in parsed) == sorted(ids[:5])
    assert all(p.label == 1 and p.model == "fraud" for p in parsed)


@SENDERS
def test_without_kafka_log_returns_at_once_buffers_to_the_bound_and_counts_drops(producer_process):
    logger = InferenceLogger(f"127.0.0.1:{free_port()}", model="m", version="1", max_buffered=10,
                             producer_process=producer_process)
    for i in range(25):
        logger.log({"x": i}, prediction=0.5, latency_ms=1.0)
    stats = logger.stats()  # right after the calls: nothing waited for Kafka
    assert (stats.buffered, stats.dropped, stats.sent, stats.connected) == (10, 15, 0, False)
    stats = logger.close(timeout_s=0.2)
    assert stats.buffered == 0 and stats.failed == 10 and stats.dropped == 15
    logger.log({"x": 1}, prediction=0.5, latency_ms=1.0)  # after close: dropped, not raised
    assert logger.stats().dropped == 16


def test_log_soon_events_equal_log_events_and_are_built_at_the_end_of_the_loop_iteration(broker, unique_id):
    logger = InferenceLogger(broker, model="fraud", version="7", device="cpu", tags={"team": "risk"},
                             producer_process=True)
    ts = "2026-12-01T10:00:00.000Z"

    def call(i: int, log) -> str:
        return log({"amount": float(i), "country": "se", "age": None}, [0.25, 0.75], {"total": 3.5, "queue": 1.0},
                   request_id=f"{unique_id}-{log.__name__}-{i}", inputs={"amount": str(i)}, entity_id=f"c-{i}",
                   version="8", ts=ts, batch_size=4, cache_hit=False, tags={"route": "a"})

    async def serve() -> tuple[int, int]:
        for i in range(20):
            call(i, logger.log_soon)
        waiting_before = logger.stats().buffered  # taken but not yet built
        await asyncio.sleep(0)  # one iteration of the loop: the callback runs
        return waiting_before, logger.stats().buffered

    for i in range(20):
        call(i, logger.log)
    logged = logger.stats().buffered
    assert asyncio.run(serve()) == (logged, logged + 20)
    assert logger.flush(timeout_s=20)
    assert logger.close().sent == 40

    soon_ids = {f"{unique_id}-log_soon-{i}" for i in range(20)}
    now_ids = {f"{unique_id}-log-{i}" for i in range(20)}
    events = {key: orjson.loads(value) for key, value in read_topic(broker, TOPIC_INFERENCE,
                                                                    soon_ids | now_ids).items()}
    for i in range(20):
        soon, now = events[f"{unique_id}-log_soon-{i}"], events[f"{unique_id}-log-{i}"]
        parse_inference(orjson.dumps(soon))  # the contract's own validator
        assert soon.pop("event_id") != now.pop("event_id")
        assert soon.pop("request_id").replace("log_soon", "log") == now.pop("request_id")
        assert soon == now and soon["tags"] == {"team": "risk", "route": "a"}


def test_log_soon_counts_unencodable_events_as_failed_and_queues_the_rest():
    logger = InferenceLogger(f"127.0.0.1:{free_port()}", model="m", version="1", max_buffered=10)

    async def serve() -> None:
        for i in range(4):
            logger.log_soon({"x": i}, prediction=0.5, latency_ms=1.0)
        logger.log_soon({"x": object()}, prediction=0.5, latency_ms=1.0)
        logger.log_soon({"x": 1}, prediction=0.5, latency_ms="slow")  # neither a number nor a mapping
        for i in range(10):  # 4 of them beyond the bound
            logger.log_soon({"x": i}, prediction=0.5, latency_ms=1.0)
        await asyncio.sleep(0)

    asyncio.run(serve())
    stats = logger.stats()
    assert (stats.buffered, stats.failed, stats.dropped) == (10, 2, 4)  # the bad ones take no place in the buffer
    assert logger.close(timeout_s=0.2).failed == 12


def test_close_queues_what_log_soon_took_before_the_loop_built_it(broker, unique_id):
    logger = InferenceLogger(broker, model="m", version="1", producer_process=True)
    ids = {f"{unique_id}-{i}" for i in range(3)}

    async def serve_then_stop() -> None:
        for request_id in sorted(ids):
            logger.log_soon({"x": 1.0}, prediction=0.5, latency_ms=1.0, request_id=request_id)
        stats = logger.close()  # before the loop has run its callback
        assert (stats.sent, stats.buffered, stats.failed) == (3, 0, 0)

    asyncio.run(serve_then_stop())
    assert set(read_topic(broker, TOPIC_INFERENCE, ids)) == ids


def test_log_soon_needs_a_running_event_loop():
    logger = InferenceLogger(f"127.0.0.1:{free_port()}", model="m", version="1")
    with pytest.raises(RuntimeError, match="no running event loop"):
        logger.log_soon({"x": 1.0}, prediction=0.5, latency_ms=1.0)
    assert logger.close(timeout_s=0.2).buffered == 0


@SENDERS
def test_kafka_down_at_start_then_up_then_down_mid_run(unique_id, embedded_broker_factory, producer_process):
    port = free_port()
    sender_class = ProcessEventSender if producer_process else EventSender
    sender = sender_class(f"127.0.0.1:{port}", max_buffered=100)
    first = [f"{unique_id}-{i}" for i in range(40)]
    for request_id in first:
        assert sender.submit(TOPIC_LABELS, None, {"request_id": request_id, "label": 1})
    assert (sender.stats().buffered, sender.stats().connected) == (40, False)

    broker = embedded_broker_factory(port=port)  # Kafka comes up: everything buffered is delivered
    wait_until(lambda: sender.stats().sent == 40, timeout=60, message="all 40 events to be sent")
    stats = sender.stats()
    assert (stats.buffered, stats.failed, stats.dropped, stats.connected) == (0, 0, 0, True)
    assert set(read_topic(broker.bootstrap_servers, TOPIC_LABELS, set(first))) == set(first)

    broker.stop(timeout_s=0.5)  # Kafka goes away mid-run: events wait, nothing raises
    for i in range(10):
        assert sender.submit(TOPIC_LABELS, None, {"request_id": f"{unique_id}-late-{i}", "label": 0})
    assert sender.stats().buffered == 10
    stats = sender.close(timeout_s=0.5)
    assert (stats.sent, stats.buffered, stats.failed, stats.dropped) == (40, 0, 10, 0)


@SENDERS
def test_keyed_events_land_on_the_crc32_partition_of_their_key(broker, unique_id, producer_process):
    sender_class = ProcessEventSender if producer_process else EventSender
    sender = sender_class(broker)
    keys = [f"{unique_id}-key-{k}" for k in range(12)]
    for round_ in range(3):  # several bursts: keyless records rotate between bursts, keyed ones must not
        for key in keys:
            sender.submit(TOPIC_LABELS, key, {"request_id": f"{key}-{round_}", "label": round_})
        assert sender.flush(timeout_s=20)
    assert sender.close().sent == 36

    found = read_partitions(broker, TOPIC_LABELS, set(keys))
    assert found == {key: {partition_for_key(key.encode(), range(4))} for key in keys}
    assert len({partition for partitions in found.values() for partition in partitions}) > 1


def test_the_producer_partitioner_agrees_with_partition_for_key(broker, unique_id):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker, partitioner=KeyHashPartitioner(), enable_idempotence=False)
    keys = [f"{unique_id}-p-{k}" for k in range(8)]
    try:
        metadata = [producer.send(TOPIC_LABELS, key=key.encode(), value=b"{}").get(timeout=20) for key in keys]
        keyless = producer.send(TOPIC_LABELS, value=b"{}").get(timeout=20)
    finally:
        producer.close()
    assert [m.partition for m in metadata] == [partition_for_key(key.encode(), {0, 1, 2, 3}) for key in keys]
    assert keyless.partition in range(4)


def test_librdkafka_consistent_partitioner_agrees_with_partition_for_key(broker, unique_id):
    """The producer process falls back on it while a topic's partitions are unknown."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker, "partitioner": "consistent_random",
                         "enable.idempotence": False})
    keys = [f"{unique_id}-r-{k}" for k in range(16)]
    delivered: dict[str, int] = {}
    for key in keys:
        producer.produce(TOPIC_LABELS, b"{}", key.encode(),
                         on_delivery=lambda error, message: delivered.__setitem__(message.key().decode(),
                                                                                   message.partition()))
    assert producer.flush(20) == 0
    assert delivered == {key: partition_for_key(key.encode(), range(4)) for key in keys}


@SENDERS
def test_an_event_too_large_for_kafka_fails_alone(broker, unique_id, producer_process):
    sender_class = ProcessEventSender if producer_process else EventSender
    sender = sender_class(broker)
    ids = [f"{unique_id}-{i}" for i in range(10)]
    for request_id in ids[:5]:
        sender.submit(TOPIC_LABELS, None, {"request_id": request_id, "label": 1})
    sender.submit(TOPIC_LABELS, None, {"request_id": f"{unique_id}-huge", "label": "x" * 2_000_000})
    for request_id in ids[5:]:
        sender.submit(TOPIC_LABELS, None, {"request_id": request_id, "label": 1})
    assert sender.flush(timeout_s=20)
    stats = sender.close()
    assert (stats.sent, stats.failed, stats.buffered) == (10, 1, 0)
    assert set(read_topic(broker, TOPIC_LABELS, set(ids))) == set(ids)


def test_a_killed_producer_process_is_replaced_and_nothing_is_lost(broker, unique_id):
    sender = ProcessEventSender(broker)
    before = [f"{unique_id}-a-{i}" for i in range(20)]
    for request_id in before:
        sender.submit(TOPIC_LABELS, None, {"request_id": request_id, "label": 1})
    assert sender.flush(timeout_s=20)
    first_child = sender.child_pid
    os.kill(first_child, signal.SIGKILL)

    after = [f"{unique_id}-b-{i}" for i in range(20)]
    for request_id in after:
        sender.submit(TOPIC_LABELS, None, {"request_id": request_id, "label": 0})
    assert sender.flush(timeout_s=30)
    assert sender.child_pid not in (None, first_child)
    stats = sender.close()
    assert (stats.sent, stats.failed, stats.buffered) == (40, 0, 0)
    assert set(read_topic(broker, TOPIC_LABELS, set(after))) == set(after)


def test_close_stops_the_producer_process(broker):
    sender = ProcessEventSender(broker)
    sender.submit(TOPIC_LABELS, None, {"request_id": "close-test", "label": 1})
    assert sender.flush(timeout_s=20)
    child = sender.child_pid
    sender.close()
    assert process_gone(child) and sender.child_pid is None


def test_the_producer_process_exits_when_its_parent_is_killed(broker):
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from driftline.client import ProcessEventSender
        sender = ProcessEventSender({broker!r})
        sender.submit("{TOPIC_LABELS}", None, {{"request_id": "orphan-test", "label": 1}})
        assert sender.flush(timeout_s=20)
        print(sender.child_pid, flush=True)
        time.sleep(600)  # a parent that lives on until the test kills it
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert not process_gone(child)
        parent.kill()  # SIGKILL: no close(), no atexit
        parent.wait(timeout=10)
        wait_until(lambda: process_gone(child), timeout=60, message="the orphaned producer process to exit")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_ids_are_uuid7_and_sort_by_the_time_they_were_made(monkeypatch):
    # The collector keys predictions by request id: ids that grow with time append to that index.
    import time
    import uuid

    from driftline.client import ids as client_ids

    clock = iter([1_800_000_000_000_000_000 + k * 1_000_000 for k in range(50)])  # ns, 1 ms apart
    monkeypatch.setattr(client_ids.time, "time_ns", lambda: next(clock))
    ids = [client_ids.new_id() for _ in range(50)]
    assert ids == sorted(ids) and len(set(ids)) == 50 and all(len(i) == 32 for i in ids)
    parsed = uuid.UUID(ids[0])
    assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
    assert int(ids[0][:12], 16) == 1_800_000_000_000  # the Unix milliseconds, first
    monkeypatch.undo()
    before = time.time_ns() // 1_000_000
    fresh = [client_ids.new_id() for _ in range(1000)]
    assert before <= int(fresh[0][:12], 16) <= time.time_ns() // 1_000_000
    assert len({i[12:] for i in fresh}) == 1000  # the random part differs within a millisecond
