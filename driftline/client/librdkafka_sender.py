"""`LibrdkafkaSender`: the producer process's Kafka side, a confluent-kafka producer fed whole batches."""
from __future__ import annotations

import collections
import logging
import time
from typing import Any, Mapping

from driftline.client.partitioning import partition_for_key
from driftline.client.tuning import (DEFAULT_MAX_BUFFERED, DELIVERY_TIMEOUT_MS, PRODUCER_BATCH_BYTES,
                                     PRODUCER_COMPRESSION, PRODUCER_LINGER_MS)

log = logging.getLogger(__name__)


class LibrdkafkaSender:
    """The producer process's Kafka side: a confluent-kafka (librdkafka) producer, fed whole batches.

    kafka-python spends most of its per-record time in Python (`send`, the record batch
    builder, its I/O thread); librdkafka does that work in C, and what is left in Python
    is one `produce` call and one delivery callback per record. Every
    record gets an explicit partition, as in `EventSender`: keyed ones
    `partition_for_key` (crc32, which librdkafka's `consistent_random` partitioner, the
    fallback while a topic's partitions are unknown, also computes), keyless ones one
    partition per batch, rotating between batches. Records wait here, in order, while
    the partition count is unknown (Kafka down at start) or librdkafka's queue is full;
    once handed over, librdkafka retries until the delivery timeout. Idempotence stays
    off (see the module docstring). The caller bounds what it hands over.
    """

    # Partition counts are read again this often (kafka-python: every 5 minutes).
    _METADATA_MAX_AGE_S = 30.0
    # Longest a metadata request may hold up the loop (Kafka down: it fails after this).
    _METADATA_TIMEOUT_S = 1.0

    def __init__(self, bootstrap_servers: str, max_buffered: int = DEFAULT_MAX_BUFFERED,
                 client_id: str = "driftline-logger", producer_config: Mapping[str, Any] | None = None):
        from confluent_kafka import Producer

        self.bootstrap_servers = bootstrap_servers
        self.sent = 0
        self.failed = 0
        self.connected = False
        self._waiting: collections.deque[tuple[str, bytes | None, bytes]] = collections.deque()
        self._partitions: dict[str, tuple[float, list[int] | None]] = {}  # topic: (read at, partitions)
        self._batch = 0
        self._new_failures = 0
        self._last_error: Any = None
        self._unreachable_logged = False
        self._next_probe = 0.0  # while not connected, Kafka is asked for metadata at most this often
        kafka_logger = logging.getLogger("kafka.librdkafka")
        config = {
            "bootstrap.servers": bootstrap_servers,
            "client.id": client_id,
            "enable.idempotence": False,
            "acks": 1,
            "linger.ms": PRODUCER_LINGER_MS,
            "batch.size": PRODUCER_BATCH_BYTES,
            "compression.type": PRODUCER_COMPRESSION,
            "message.timeout.ms": DELIVERY_TIMEOUT_MS,
            "request.timeout.ms": 10_000,
            "reconnect.backoff.max.ms": 1_000,
            # The caller never hands over more than max_buffered; room for all of them.
            "queue.buffering.max.messages": max(max_buffered, 1),
            "queue.buffering.max.kbytes": 2_097_151,
            "partitioner": "consistent_random",
            "on_delivery": self._delivered,
            "error_cb": self._error,
            "logger": kafka_logger,
            # librdkafka logs every failed reconnect; `_error` says it once per outage instead.
            "log_level": 7 if kafka_logger.isEnabledFor(logging.DEBUG) else 2,
            "log.connection.close": False,
        }
        config.update(producer_config or {})
        self._producer = Producer(config)

    def add(self, records: list[tuple[str, bytes | None, bytes]]) -> None:
        self._waiting.extend(records)

    def pump(self) -> None:
        """Hand what waits to librdkafka (one partition rotation step per call) and count delivery reports."""
        if not self.connected and time.monotonic() >= self._next_probe:
            self._probe()
        if self._waiting:
            self._produce_waiting()
        self._producer.poll(0)
        if self._new_failures:
            log.warning("%d events were not delivered to Kafka: %s", self._new_failures, self._last_error)
            self._new_failures = 0

    def _produce_waiting(self) -> None:
        from confluent_kafka import KafkaException

        producer, waiting = self._producer, self._waiting
        batch_partitions: dict[str, list[int] | None] = {}
        self._batch += 1
        while waiting:
            topic, key, value = waiting[0]
            if topic in batch_partitions:
                partitions = batch_partitions[topic]
            else:
                try:
                    partitions = batch_partitions[topic] = self._topic_partitions(topic)
                except KafkaException as exc:  # Kafka down at start: keep them, try again on the next call
                    self._unreachable(exc)
                    return
            try:
                if not partitions:  # unknown topic: librdkafka waits for it, then partitions as we would
                    producer.produce(topic, value, key)
                elif key is not None:
                    producer.produce(topic, value, key, partition=partition_for_key(key, partitions))
                else:
                    producer.produce(topic, value, partition=partitions[self._batch % len(partitions)])
            except BufferError:  # librdkafka's queue is full: the rest waits for the next call
                return
            except KafkaException as exc:  # this record is refused (too large, say): it fails alone
                self._failed_record(exc)
            waiting.popleft()

    def _probe(self) -> None:
        """Ask Kafka for its metadata: `connected` turns true before the first event too, as kafka-python's does."""
        from confluent_kafka import KafkaException

        self._next_probe = time.monotonic() + self._METADATA_TIMEOUT_S
        try:
            self._producer.list_topics(timeout=self._METADATA_TIMEOUT_S)
        except KafkaException as exc:
            self._unreachable(exc)
        else:
            self._reachable()

    def _topic_partitions(self, topic: str) -> list[int] | None:
        """The topic's partitions, read at most every `_METADATA_MAX_AGE_S`; None for a topic Kafka does not know.

        Raises `KafkaException` when Kafka cannot be asked and nothing is known yet.
        """
        from confluent_kafka import KafkaException

        known = self._partitions.get(topic)
        if known is not None and time.monotonic() - known[0] < self._METADATA_MAX_AGE_S:
            return known[1]
        try:
            metadata = self._producer.list_topics(topic, timeout=self._METADATA_TIMEOUT_S).topics.get(topic)
        except KafkaException:
            if known is None:
                raise
            return known[1]  # Kafka down mid-run: keep the last known partitions; librdkafka reconnects
        self._reachable()
        partitions = sorted(metadata.partitions) if metadata is not None and metadata.error is None else None
        self._partitions[topic] = (time.monotonic(), partitions)
        return partitions

    def _delivered(self, error: Any, _message: Any) -> None:
        if error is None:
            self.sent += 1
            if not self.connected:
                self._reachable()
        else:
            self._failed_record(error)

    def _failed_record(self, error: Any) -> None:
        """One record Kafka will not get; `pump` logs the failures of each call together."""
        self.failed += 1
        self._new_failures += 1
        self._last_error = error

    def _error(self, error: Any) -> None:
        from confluent_kafka import KafkaError

        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            # Reported late at times (after a reconnect): the next `pump` asks Kafka, and logs.
            self.connected = False
        elif error.fatal():
            log.error("the Kafka producer failed: %s", error)
        else:
            log.debug("Kafka producer: %s", error)

    def _unreachable(self, reason: Any) -> None:
        self.connected = False
        if not self._unreachable_logged:
            self._unreachable_logged = True
            log.warning("Kafka at %s is unreachable (%s); buffering events and retrying", self.bootstrap_servers,
                        reason)

    def _reachable(self) -> None:
        if self._unreachable_logged:
            log.info("Kafka at %s is reachable again", self.bootstrap_servers)
        self._unreachable_logged = False
        self.connected = True

    def close(self, timeout_s: float) -> None:
        """Deliver what is held for up to `timeout_s`; what is left counts as failed."""
        deadline = time.monotonic() + timeout_s
        while self._waiting and time.monotonic() < deadline:
            self.pump()
            if self._waiting:
                time.sleep(0.05)
        self._producer.flush(max(0.0, deadline - time.monotonic()))
        if len(self._producer):
            # Purged records come back through the delivery callback as failed.
            self._producer.purge(in_queue=True, in_flight=True)
            self._producer.flush(2.0)
        self.failed += len(self._waiting) + len(self._producer)
        self._waiting.clear()
