"""`KafkaPythonSource`: the collector's `RecordSource` on kafka-python.

Records are unpacked by driftline's guarded readers (`driftline.collector.record_batches`: the lean
one by default), which raise `MalformedBatch` for a batch that cannot be read and decompress
within `COLLECTOR_MAX_BATCH_BYTES`. Rebalance callbacks run on kafka-python's IO thread. A new
connection and the topic ids of fresh metadata tell a broker that restarted with a new log.
"""
from __future__ import annotations

from typing import Any, Iterable

from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition

from driftline.collector.kafka_internals import cluster_of, connections, same_connections, topic_id_of
from driftline.collector.record_batches import GuardedPartitionRecords, LeanPartitionRecords, use_reader
from driftline.collector.record_source import Partitions
from driftline.kafka_security import kafka_python_options


class KafkaPythonSource:
    """A kafka-python group member subscribed to the collector's topics (`RecordSource`)."""

    def __init__(self, config: Any, on_assigned: Partitions, on_revoked: Partitions):
        self.consumer = KafkaConsumer(
            bootstrap_servers=config.bootstrap_servers, group_id=config.group_id, client_id=config.client_id,
            enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=config.session_timeout_ms, heartbeat_interval_ms=config.heartbeat_interval_ms,
            max_poll_records=config.poll_max_records, max_partition_fetch_bytes=8 << 20,
            fetch_max_bytes=64 << 20, bootstrap_timeout_ms=5_000, reconnect_backoff_max_ms=1_000,
            request_timeout_ms=max(30_000, config.session_timeout_ms + 5_000),
            **kafka_python_options(config.security))
        # Lean: kafka-python's per-record unpacking was most of this process's CPU. Either way guarded:
        # a malformed batch is raised as MalformedBatch instead of spinning inside poll()
        use_reader(self.consumer,
                   LeanPartitionRecords if config.record_reader == "lean" else GuardedPartitionRecords)
        self.consumer.subscribe([config.inference_topic, config.labels_topic],
                                listener=_RebalanceListener(on_assigned, on_revoked))
        self._connections: tuple[Any, ...] = ()

    def poll(self, timeout_s: float, max_records: int) -> dict[TopicPartition, list[Any]]:
        return self.consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=max_records)

    def assignment(self) -> set[TopicPartition]:
        return set(self.consumer.assignment())

    def paused(self) -> set[TopicPartition]:
        return set(self.consumer.paused())

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self.consumer.pause(*partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self.consumer.resume(*partitions)

    def seek(self, tp: TopicPartition, offset: int | None) -> None:
        if offset is None:
            self.consumer.seek_to_beginning(tp)
        else:
            self.consumer.seek(tp, offset)

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.consumer.highwater(tp)

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.consumer.partitions_for_topic(topic) or set()

    def connection_changed(self) -> bool:
        snapshot = connections(self.consumer)
        if same_connections(snapshot, self._connections):
            return False
        self._connections = snapshot
        return True

    def log_resets(self) -> set[TopicPartition]:
        return set()  # a replaced log is told by its topic id (request_metadata)

    def request_metadata(self) -> Any:
        cluster = cluster_of(self.consumer)
        return cluster.request_update() if cluster is not None else None

    def topic_id(self, topic: str) -> str | None:
        return topic_id_of(self.consumer, topic)

    def stuck_fetch(self) -> tuple[TopicPartition, int, bytes] | None:
        part = getattr(getattr(self.consumer, "_fetcher", None), "_next_partition_records", None)
        raw = getattr(part, "_raw", None)
        tp = getattr(part, "topic_partition", None)
        return (tp, part.fetch_offset, raw) if tp is not None and raw is not None else None

    def close(self) -> None:
        self.consumer.close(autocommit=False, timeout_ms=5_000)


class _RebalanceListener(ConsumerRebalanceListener):
    """Forwards kafka-python's rebalance callbacks (on its IO thread)."""

    def __init__(self, on_assigned: Partitions, on_revoked: Partitions):
        self.on_assigned, self.on_revoked = on_assigned, on_revoked

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.on_revoked(revoked)

    def on_partitions_lost(self, lost: Any) -> None:
        # Flushing is still safe: the offset fence rejects it if the new owner already wrote.
        self.on_revoked(lost)

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.on_assigned(assigned)
