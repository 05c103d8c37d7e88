"""`ConfluentSource`: the collector's `RecordSource` on librdkafka (confluent-kafka).

librdkafka fetches, decompresses and parses record batches in C on its own threads; Python sees one
call per poll and a few per record, several times less CPU per event than kafka-python's reader.
What the collector relies on, and how it is had here:

* **offsets from the store**: nothing is committed to Kafka (`enable.auto.commit` off); an assigned
  partition starts paused at the log's beginning and is sought to its stored offset once placed;
* **rebalances**: `on_assign`, `on_revoke` and `on_lost` run inside `poll` on the collector's thread
  (so the collector's flush on revocation runs there, before librdkafka gives the partitions up);
* **a replaced log**: after a lost connection the topic ids are asked for (librdkafka's admin
  `describe_topics`, written as kafka-python writes them, so stored offsets compare across the
  clients) and compared as with kafka-python; and `auto.offset.reset` is `error`: a position outside
  its log (a recreated or truncated topic) is reported by `log_resets`, and read from its beginning;
* **the end of the log**: `highwater` is librdkafka's high watermark as of its last fetch
  (`get_watermark_offsets(cached=True)`: no request, and never the embedded broker's wrong
  ListOffsets answer for the end);
* **unreadable batches**: librdkafka treats a batch it cannot parse as a truncated response and
  fetches it again forever without a word (a record-length lie behind a valid CRC, a batch that
  decompresses to garbage), and it decompresses gzip and lz4 whole, without a bound. A partition that
  has not moved for `COLLECTOR_STALL_SECONDS` while its log holds more and librdkafka's queue is
  drained (a poll came back short: no other partition's records stand before its own) is read past
  its position once by the guarded kafka-python reader (`driftline.collector.record_batches`), which
  delivers the records or raises the same `MalformedBatch` (offsets, raw bytes) the kafka-python
  client does.
"""
from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Iterable, NamedTuple

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import KafkaConsumer, TopicPartition

from driftline import defaults
from driftline.collector.record_batches import GuardedPartitionRecords, LeanPartitionRecords, use_reader
from driftline.collector.record_source import Partitions
from driftline.kafka_security import kafka_python_options, librdkafka_config

log = logging.getLogger("driftline.collector.consumer")

# Transport-level errors: the connection is (re)made, and the log behind it may be a new one.
_CONNECTION_ERRORS = (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
_FALLBACK_READ_S = 10.0  # the kafka-python reader's time to fetch past a stalled position


class Record(NamedTuple):
    """One consumed message, its fields named as kafka-python's `ConsumerRecord`'s.

    The loop reads only offsets and values: the rest is read from librdkafka's message when asked."""

    topic: str
    partition: int
    offset: int
    value: bytes | None
    message: Any

    @property
    def timestamp(self) -> int:
        return self.message.timestamp()[1]

    @property
    def key(self) -> bytes | None:
        return self.message.key()

    @property
    def headers(self) -> list[tuple[str, bytes]] | None:
        return self.message.headers()


class ConfluentSource:
    """A librdkafka group member subscribed to the collector's topics (`RecordSource`)."""

    def __init__(self, config: Any, on_assigned: Partitions, on_revoked: Partitions):
        self.config = config
        self.stall_s = config.stall_s
        self._on_assigned, self._on_revoked = on_assigned, on_revoked
        self._changed = True  # the first connection: the placement verifies before anything is read
        self.connections_lost = 0  # transport errors seen so far
        self._resets: set[TopicPartition] = set()
        self._paused: set[TopicPartition] = set()
        self._assigned: set[TopicPartition] = set()
        self._positions: dict[TopicPartition, int] = {}  # the next offset each partition delivers
        self._moved: dict[TopicPartition, float] = {}  # when each last delivered, or was sought or resumed
        self._partitions: dict[tuple[str, int], TopicPartition] = {}
        self._admin: AdminClient | None = None
        self._described: _Described | None = None
        fetch = defaults.COLLECTOR_FETCH_BYTES
        self.consumer_logger = logging.getLogger("driftline.collector.librdkafka")
        self.consumer = Consumer({
            "bootstrap.servers": config.bootstrap_servers, "group.id": config.group_id,
            "client.id": config.client_id, "enable.auto.commit": False, "enable.auto.offset.store": False,
            "auto.offset.reset": "error", "session.timeout.ms": config.session_timeout_ms,
            "heartbeat.interval.ms": config.heartbeat_interval_ms, "check.crcs": True,
            "max.partition.fetch.bytes": defaults.COLLECTOR_PARTITION_FETCH_BYTES, "fetch.max.bytes": fetch,
            "receive.message.max.bytes": fetch + (1 << 20),  # librdkafka wants room for the framing
            "reconnect.backoff.max.ms": 1_000, "error_cb": self._error,
            "logger": self.consumer_logger,
            **librdkafka_config(config.security)})
        self.consumer.subscribe([config.inference_topic, config.labels_topic], on_assign=self._assign,
                                on_revoke=self._revoke, on_lost=self._revoke)

    # --- records ------------------------------------------------------------------------------------
    def poll(self, timeout_s: float, max_records: int) -> dict[TopicPartition, list[Any]]:
        stalled = self._stalled()
        if stalled is not None:
            return self._read_past(stalled)
        out: dict[TopicPartition, list[Any]] = {}
        partitions = self._partitions
        new_record = tuple.__new__  # the named tuple without its Python-level __new__
        messages = self.consumer.consume(max_records, timeout_s)
        for message in messages:
            error = message.error()
            if error is not None:
                self._message_error(message, error)
                continue
            key = (message.topic(), message.partition())
            tp = partitions.get(key)
            if tp is None:
                tp = partitions[key] = TopicPartition(*key)
            batch = out.get(tp)
            if batch is None:
                batch = out[tp] = []
            batch.append(new_record(Record, (key[0], key[1], message.offset(), message.value(), message)))
        now = time.monotonic()
        for tp, batch in out.items():
            self._positions[tp] = batch[-1].offset + 1
            self._moved[tp] = now
        if len(messages) >= max_records:
            # librdkafka's queue holds more: a partition waiting behind the others' records is not stalled
            for tp in self._assigned:
                self._moved[tp] = now
        return out

    def _message_error(self, message: Any, error: Any) -> None:
        code = error.code()
        if message.topic() is not None and code == KafkaError._AUTO_OFFSET_RESET:
            tp = TopicPartition(message.topic(), message.partition())
            log.info("%s[%d]: the position is outside the log (%s)", tp.topic, tp.partition, error.str())
            self._resets.add(tp)
        elif code in _CONNECTION_ERRORS:
            self._changed = True
            self.connections_lost += 1
        elif code != KafkaError._PARTITION_EOF:
            log.warning("Kafka: %s", error.str())

    def _stalled(self) -> TopicPartition | None:
        """An unpaused partition that has not moved for `stall_s` while its log holds more (its clock restarts)."""
        now = time.monotonic()
        for tp in self._assigned - self._paused:
            position = self._positions.get(tp)
            highwater = self.highwater(tp) if position is not None else None
            if highwater is None or position >= highwater:
                self._moved[tp] = now
            elif now - self._moved.setdefault(tp, now) > self.stall_s:
                self._moved[tp] = now
                return tp
        return None

    def _read_past(self, tp: TopicPartition) -> dict[TopicPartition, list[Any]]:
        """Read `tp` from its position with the guarded kafka-python reader: its records, or `MalformedBatch`."""
        position = self._positions[tp]
        log.warning("%s[%d]: librdkafka has not moved past offset %d for %.0f s; reading it with kafka-python",
                    tp.topic, tp.partition, position, self.stall_s)
        cfg = self.config
        reader = KafkaConsumer(bootstrap_servers=cfg.bootstrap_servers, client_id=cfg.client_id, group_id=None,
                               enable_auto_commit=False, max_partition_fetch_bytes=defaults.COLLECTOR_PARTITION_FETCH_BYTES,
                               fetch_max_bytes=defaults.COLLECTOR_FETCH_BYTES, bootstrap_timeout_ms=5_000,
                               **kafka_python_options(cfg.security))
        try:
            use_reader(reader, LeanPartitionRecords if cfg.record_reader == "lean" else GuardedPartitionRecords)
            reader.assign([tp])
            reader.seek(tp, position)
            deadline = time.monotonic() + _FALLBACK_READ_S
            while time.monotonic() < deadline:
                records = reader.poll(timeout_ms=200, max_records=cfg.poll_max_records).get(tp)  # MalformedBatch
                if records:
                    self.seek(tp, records[-1].offset + 1)  # librdkafka reads on after them
                    self._positions[tp] = records[-1].offset + 1
                    return {tp: records}
            return {}
        finally:
            reader.close(autocommit=False)

    # --- positions --------------------------------------------------------------------------------
    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        self.consumer.pause([ConfluentPartition(tp.topic, tp.partition) for tp in partitions])
        self._paused.update(partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        self.consumer.resume([ConfluentPartition(tp.topic, tp.partition) for tp in partitions])
        self._paused.difference_update(partitions)
        now = time.monotonic()
        for tp in partitions:
            self._moved[tp] = now

    def seek(self, tp: TopicPartition, offset: int | None) -> None:
        if tp not in self._assigned:
            raise KafkaException(KafkaError(KafkaError._STATE, f"{tp.topic}[{tp.partition}] is not assigned"))
        self.consumer.seek(ConfluentPartition(tp.topic, tp.partition, OFFSET_BEGINNING if offset is None else offset))
        self._positions[tp] = 0 if offset is None else offset
        self._moved[tp] = time.monotonic()

    def highwater(self, tp: TopicPartition) -> int | None:
        try:
            _low, high = self.consumer.get_watermark_offsets(ConfluentPartition(tp.topic, tp.partition), cached=True)
        except KafkaException:
            return None
        return high if high is not None and high >= 0 else None

    def partitions_for_topic(self, topic: str) -> set[int]:
        metadata = self.consumer.list_topics(topic, timeout=10)
        found = metadata.topics.get(topic)
        return set(found.partitions) if found is not None and found.error is None else set()

    def connection_changed(self) -> bool:
        changed, self._changed = self._changed, False
        return changed

    def log_resets(self) -> set[TopicPartition]:
        resets, self._resets = self._resets, set()
        return resets & self._assigned

    def request_metadata(self) -> Any:
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.config.bootstrap_servers,
                                       "client.id": self.config.client_id, "logger": self.consumer_logger,
                                       **librdkafka_config(self.config.security)})
        topics = [self.config.inference_topic, self.config.labels_topic]
        self._described = _Described(self._admin.describe_topics(TopicCollection(topics), request_timeout=10))
        return self._described

    def topic_id(self, topic: str) -> str | None:
        return self._described.topic_id(topic) if self._described is not None else None

    def stuck_fetch(self) -> tuple[TopicPartition, int, bytes] | None:
        return None  # librdkafka's poll returns within its timeout; a stalled partition is read past (poll)

    def close(self) -> None:
        self.consumer.close()

    # --- callbacks (inside poll, on the collector's thread; error_cb also inside poll) ----------------
    def _assign(self, consumer: Any, partitions: list[Any]) -> None:
        # Paused at the beginning until the placement seeks each to its stored offset.
        consumer.assign([ConfluentPartition(p.topic, p.partition, OFFSET_BEGINNING) for p in partitions])
        consumer.pause(partitions)
        assigned = [TopicPartition(p.topic, p.partition) for p in partitions]
        self._assigned.update(assigned)
        self._paused.update(assigned)
        self._on_assigned(assigned)

    def _revoke(self, consumer: Any, partitions: list[Any]) -> None:
        gone = [TopicPartition(p.topic, p.partition) for p in partitions]
        try:
            self._on_revoked(gone)
        finally:
            self._assigned.difference_update(gone)
            self._paused.difference_update(gone)
            for tp in gone:
                self._positions.pop(tp, None)
                self._moved.pop(tp, None)
            consumer.unassign()

    def _error(self, error: Any) -> None:
        if error.code() in _CONNECTION_ERRORS:
            self._changed = True
            self.connections_lost += 1
        level = logging.ERROR if error.fatal() else logging.INFO if self._changed else logging.WARNING
        log.log(level, "Kafka: %s", error.str())  # a lost connection is retried: no warning


class _Described:
    """`describe_topics` futures, read as the placement reads kafka-python's metadata future."""

    def __init__(self, futures: dict[str, Any]):
        self.futures = futures

    @property
    def is_done(self) -> bool:
        return all(f.done() for f in self.futures.values())

    def failed(self) -> bool:
        return any(f.exception() is not None for f in self.futures.values())

    def topic_id(self, topic: str) -> str | None:
        """The topic's id as kafka-python writes it (a `uuid.UUID`'s text), so both clients store the same."""
        future = self.futures.get(topic)
        if future is None or not future.done() or future.exception() is not None:
            return None
        tid = future.result().topic_id
        if tid is None:
            return None
        bits = ((tid.get_most_significant_bits() & (2**64 - 1)) << 64) | (tid.get_least_significant_bits() & (2**64 - 1))
        return str(uuid.UUID(int=bits)) if bits else None
