"""The embedded broker: kafka-python produces to it and consumes from it; bad starts fail clearly."""
from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient

from driftline.broker import EmbeddedBroker, free_port
from driftline.config import ALL_TOPICS, TOPIC_INFERENCE
from driftline.errors import UserError
from tests.support.waiting import wait_until


def test_topics_are_created_with_partitions(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker)
    try:
        described = {t["name"]: len(t["partitions"]) for t in admin.describe_topics(list(ALL_TOPICS))}
    finally:
        admin.close()
    assert described == {name: 4 for name in ALL_TOPICS}


def test_produce_and_consume_round_trip(broker, unique_id):
    producer = KafkaProducer(bootstrap_servers=broker, enable_idempotence=False, linger_ms=5)
    sent = {f"{unique_id}-{i}".encode() for i in range(200)}
    for value in sent:
        producer.send(TOPIC_INFERENCE, value, key=value)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(TOPIC_INFERENCE, bootstrap_servers=broker, group_id=f"g-{unique_id}",
                             auto_offset_reset="earliest", session_timeout_ms=2000, heartbeat_interval_ms=500,
                             enable_auto_commit=False)
    received: set[bytes] = set()

    def all_received() -> bool:
        for records in consumer.poll(timeout_ms=500).values():
            received.update(r.value for r in records)
        return sent <= received

    try:
        # the poll itself waits for records: no pause between rounds
        wait_until(all_received, interval=0, message=f"the {len(sent)} messages sent")
        highwater = sum(consumer.highwater(TopicPartition(TOPIC_INFERENCE, p)) or 0 for p in range(4))
    finally:
        consumer.close()
    assert sent <= received
    assert highwater >= len(sent)


def test_port_taken_is_a_clear_error(broker):
    port = int(broker.rsplit(":", 1)[1])
    with pytest.raises(UserError, match="already in use"):
        EmbeddedBroker(port=port).start()


def test_missing_binary_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("DRIFTLINE_TANSU_BIN", "/nonexistent/tansu")
    with pytest.raises(UserError, match="missing or not executable"):
        EmbeddedBroker(port=free_port()).start()


def test_stop_terminates_the_process():
    embedded = EmbeddedBroker(port=free_port()).start()
    process = embedded.process
    embedded.stop()
    assert process.poll() is not None
    assert not embedded.is_running()
