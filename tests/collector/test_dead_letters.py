"""Malformed messages: every one is in the dead-letter store and on the DLQ topic, with its reason.

On SQLite and PostgreSQL: PostgreSQL refuses NUL in text, which a bad message may well contain."""
from __future__ import annotations

import time
import uuid

import orjson
from sqlalchemy import select

from driftline.config import TOPIC_DEAD_LETTERS, TOPIC_INFERENCE, TOPIC_LABELS
from driftline.events import encode_event
from driftline.store import db as store_db
from driftline.store.models import DeadLetter
from tests.support.collector_helpers import collector_thread, config, event, events, produce
from tests.support.waiting import wait_until


def _malformed(model: str, good: dict) -> list[tuple[str, bytes | None, str, str | None]]:
    """(kind, message bytes, expected words in the reason, expected field)."""
    def doc(**changes) -> bytes:
        out = {**good, "event_id": uuid.uuid4().hex, **changes}
        return orjson.dumps({k: v for k, v in out.items() if v is not _DROP})

    def without(*names) -> bytes:
        return doc(**{n: _DROP for n in names})

    raw = orjson.dumps(good)
    return [
        ("broken JSON", raw[: len(raw) // 2], "JSON", None),
        ("binary garbage", bytes(range(256)) * 4, "JSON", None),
        ("invalid UTF-8 in a string", raw.replace(model.encode(), model.encode() + b"\xff\xfe"), "JSON", None),
        ("empty message", b"", "empty", None),
        ("tombstone (null value)", None, "empty", None),
        ("JSON array", b"[1, 2, 3]", "object", None),
        ("JSON number", b"42", "object", None),
        ("NaN literal", raw.replace(b'"x":1.0', b'"x":NaN'), "JSON", None),
        ("missing schema", without("schema"), "missing", "schema"),
        ("unknown schema version", doc(schema="driftline.inference/v9"), "unsupported schema version", "schema"),
        ("foreign schema", doc(schema="acme.event/v1"), "expected", "schema"),
        ("missing event_id", without("event_id"), "missing", "event_id"),
        ("event_id a number", doc(event_id=12345), "string", "event_id"),
        ("empty model", doc(model=""), "empty", "model"),
        ("version a number", doc(version=3), "string", "version"),
        ("missing ts", without("ts"), "missing", "ts"),
        ("ts not a time", doc(ts="yesterday at noon"), "RFC 3339", "ts"),
        ("ts in seconds", doc(ts=1_800_000_000), "2000-2100", "ts"),
        ("ts without zone", doc(ts="2026-11-30T12:00:00"), "time zone", "ts"),
        ("features a list", doc(features=[1, 2]), "object", "features"),
        ("feature an object", doc(features={"x": {"nested": 1}}), "number, string, boolean or null", "features.x"),
        ("missing prediction", without("prediction"), "required", "prediction"),
        ("prediction an object", doc(prediction={"p": 1}), "expected", "prediction"),
        ("empty probabilities", doc(prediction=[]), "empty", "prediction"),
        ("missing latency total", doc(latency_ms={"queue": 1.0}), "missing", "latency_ms.total"),
        ("negative latency", doc(latency_ms={"total": -5.0}), "non-negative", "latency_ms.total"),
        ("unknown status", doc(status="meh"), "ok", "status"),
        ("error without message", doc(status="error"), "error message", "error"),
        ("batch_size zero", doc(batch_size=0), "positive", "batch_size"),
        ("cache_hit a string", doc(cache_hit="yes"), "boolean", "cache_hit"),
        ("tag not a string", doc(tags={"team": 7}), "string", "tags.team"),
        ("huge payload", doc(inputs={"blob": "y" * (1 << 20)}), "above the limit", None),
        ("model name beyond the safe alphabet's length", doc(model="m" * 230), "letters, digits", "model"),
        ("NUL in the model name", doc(model=model + "\x00evil"), "letters, digits", "model"),
        ("model name that climbs folders", doc(model="../../x"), "letters, digits", "model"),
        ("version with a space", doc(version="1 beta"), "letters, digits", "version"),
        ("ts two hours ahead of the collector's clock", doc(ts=int(time.time() * 1000) + 2 * 3_600_000),
         "in the future", "ts"),
        ("NUL in a bad feature's name", doc(features={"a\x00b": [1]}), "number, string", "features.a\\x00b"),
    ]


_DROP = object()


def test_every_malformed_message_is_dead_lettered_with_its_reason(broker, db_url, unique_id):
    model = f"dlq-{unique_id}"
    good = event(model, 1)
    cases = _malformed(model, good)
    assert len(cases) >= 20
    valid_before = [encode_event(event(model, i)) for i in range(3)]
    valid_after = [encode_event(event(model, i)) for i in range(3, 5)]
    bad_labels = [(b'{"schema":"driftline.label/v1","request_id":"r1","ts":1800000000000,"model":"m"}',
                   "missing", "label"),
                  (b'{"schema":"driftline.label/v1","request_id":"r1","ts":1800000000000,"model":"m","label":[1]}',
                   "expected", "label")]
    sent = produce(broker, valid_before + [c[1] for c in cases] + valid_after)
    label_sent = produce(broker, [b[0] for b in bad_labels], topic=TOPIC_LABELS)
    bad_at = {sent[len(valid_before) + i]: case for i, case in enumerate(cases)}
    bad_at.update({(TOPIC_LABELS,) + where: case for where, case in zip(label_sent, bad_labels)})

    # each Kafka client once, each on one store: the corpus meets both clients and both stores in two runs
    client = "kafka-python" if db_url.startswith("sqlite") else "confluent"
    with collector_thread(config(broker, db_url, kafka_client=client)) as collector:
        wait_until(lambda: events(db_url, model) == 5, message="the valid events around the bad ones")
        wait_until(lambda: collector.consumed >= len(sent) + len(label_sent) and not collector._pending(),
                   message="everything flushed")

    with store_db.session_scope(db_url) as session:
        letters = {(d.topic, d.partition, d.offset): d for d in session.scalars(select(DeadLetter))}
    for where, case in bad_at.items():
        key = where if len(where) == 3 else (TOPIC_INFERENCE,) + where
        kind, message, words, field = (case if len(case) == 4 else ("label: " + case[2], *case))
        assert key in letters, f"{kind}: not in the dead-letter store"
        letter = letters[key]
        assert words.lower() in letter.reason.lower(), f"{kind}: reason {letter.reason!r}"
        assert letter.field == field, f"{kind}: field {letter.field!r}"
        assert letter.raw_size == len(message or b"")
        assert letter.raw == (message or b"")[:65_536]
    huge = letters[(TOPIC_INFERENCE,) + sent[len(valid_before) + [c[0] for c in cases].index("huge payload")]]
    assert huge.raw_size > (1 << 20) and len(huge.raw) == 65_536
    assert letters[(TOPIC_INFERENCE,) + sent[len(valid_before)]].model is None  # broken JSON: no model
    assert letters[(TOPIC_INFERENCE,) + sent[len(valid_before) + 8]].model == model  # missing schema: model read

    # ... and on the DLQ topic: original bytes, reason and position in the headers
    on_topic = _read_dlq(broker, expected=len(bad_at))
    for where, case in bad_at.items():
        key = where if len(where) == 3 else (TOPIC_INFERENCE,) + where
        assert key in on_topic, f"{case[0]}: not on {TOPIC_DEAD_LETTERS}"
        value, headers = on_topic[key]
        message = case[1] if len(case) == 4 else case[0]
        assert value == (message or b"")
        assert headers["driftline.reason"].decode() == letters[key].reason


def _read_dlq(bootstrap: str, expected: int) -> dict[tuple[str, int, int], tuple[bytes, dict[str, bytes]]]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(TOPIC_DEAD_LETTERS, bootstrap_servers=bootstrap, group_id=f"dlq-{uuid.uuid4().hex}",
                             auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=2000,
                             heartbeat_interval_ms=500, max_partition_fetch_bytes=8 << 20)
    found: dict[tuple[str, int, int], tuple[bytes, dict[str, bytes]]] = {}

    def read_to_the_end() -> bool:
        for records in consumer.poll(timeout_ms=300).values():
            for r in records:
                headers = dict(r.headers)
                key = (headers["driftline.topic"].decode(), int(headers["driftline.partition"]),
                       int(headers["driftline.offset"]))
                found[key] = (r.value or b"", headers)
        return len(found) >= expected and all(consumer.highwater(tp) == consumer.position(tp)
                                              for tp in consumer.assignment())

    try:
        # the poll itself waits for records: no pause between rounds
        wait_until(read_to_the_end, interval=0, message=f"{expected} dead letters, read to the end of the topic")
    finally:
        consumer.close(autocommit=False)
    return found
