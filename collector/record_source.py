"""`RecordSource`: the one interface the collector's loop reads Kafka through, and `open_record_source`.

Two implementations, one file each: `driftline.collector.kafka_python_source` (kafka-python, with
driftline's guarded record-batch readers) and `driftline.collector.confluent_source` (librdkafka
through confluent-kafka, several times faster). The collector never commits to Kafka (its offsets
are fenced in the store), so the interface has no commit: it polls records grouped by partition,
seeks, pauses and tells where each partition's log ends. Partitions are kafka-python's
`TopicPartition` (a named tuple of topic and partition) on both.

`poll` raises `MalformedBatch` for a record batch neither client can read, naming the offsets to
skip; rebalance callbacks (`on_assigned`, `on_revoked`) are called from inside `poll` (librdkafka)
or from kafka-python's IO thread, with the partitions assigned or taken away.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Protocol

from kafka import TopicPartition

from driftline import defaults

Partitions = Callable[[Iterable[TopicPartition]], None]


class RecordSource(Protocol):
    """A group member's view of the partitions it reads (see the module docstring)."""

    def poll(self, timeout_s: float, max_records: int) -> dict[TopicPartition, list[Any]]:
        """Records by partition, each with `topic`, `partition`, `offset`, `timestamp`, `key`, `value`,
        `headers`, in offset order; `MalformedBatch` for a batch that cannot be read."""

    def assignment(self) -> set[TopicPartition]: ...

    def paused(self) -> set[TopicPartition]: ...

    def pause(self, partitions: Iterable[TopicPartition]) -> None: ...

    def resume(self, partitions: Iterable[TopicPartition]) -> None: ...

    def seek(self, tp: TopicPartition, offset: int | None) -> None:
        """Read `tp` from `offset` next (None: the log's beginning); raises when `tp` is not assigned."""

    def highwater(self, tp: TopicPartition) -> int | None:
        """The end of `tp`'s log as the last fetch saw it (None: not known yet)."""

    def partitions_for_topic(self, topic: str) -> set[int]: ...

    def connection_changed(self) -> bool:
        """Whether a connection to the cluster was (re)made since the last call (the log may be a new one)."""

    def log_resets(self) -> set[TopicPartition]:
        """Partitions whose position fell outside their log since the last call (a replaced or truncated
        log the client cannot tell by topic id); each is read again from its beginning."""

    def request_metadata(self) -> Any:
        """Ask for fresh cluster metadata: a future with `is_done` and `failed()`, or None where topic ids
        cannot be read (the log is then trusted)."""

    def topic_id(self, topic: str) -> str | None: ...

    def stuck_fetch(self) -> tuple[TopicPartition, int, bytes] | None:
        """The fetch a poll that does not return is stuck in: (partition, offset, raw bytes), or None."""

    def close(self) -> None: ...


def default_kafka_client() -> str:
    """confluent where confluent-kafka imports, else kafka-python."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "kafka-python"
    return "confluent"


def check_kafka_client(name: str) -> str:
    if name not in defaults.COLLECTOR_KAFKA_CLIENTS:
        raise ValueError(f"kafka_client must be one of {', '.join(defaults.COLLECTOR_KAFKA_CLIENTS)}, got {name!r}")
    return name


def open_record_source(config: Any, on_assigned: Partitions, on_revoked: Partitions) -> RecordSource:
    """A `RecordSource` of `config.kafka_client`, subscribed to the inference and labels topics."""
    if config.kafka_client == "confluent":
        from driftline.collector.confluent_source import ConfluentSource

        return ConfluentSource(config, on_assigned, on_revoked)
    from driftline.collector.kafka_python_source import KafkaPythonSource

    return KafkaPythonSource(config, on_assigned, on_revoked)
