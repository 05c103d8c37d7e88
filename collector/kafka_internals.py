"""kafka-python internals the collector reads, in one place (kafka-python is pinned to 3.0.x)."""
from __future__ import annotations

from typing import Any, Iterable

from kafka import TopicPartition


def connections(consumer: Any) -> tuple[Any, ...]:
    """The consumer's live connection objects (a new object means a new TCP connection)."""
    manager = getattr(consumer, "_manager", None)
    conns = getattr(manager, "_conns", None)
    return tuple(conns.values()) if isinstance(conns, dict) else ()


def same_connections(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def cluster_of(consumer: Any) -> Any:
    return getattr(consumer, "_cluster", None)


def topic_id_of(consumer: Any, topic: str) -> str | None:
    cluster = cluster_of(consumer)
    topic_id = cluster.topic_id(topic) if cluster is not None and hasattr(cluster, "topic_id") else None
    return str(topic_id) if topic_id is not None else None


def topic_partition(buf: Any) -> TopicPartition:
    """The TopicPartition of a partition buffer (anything with `topic` and `partition`)."""
    return TopicPartition(buf.topic, buf.partition)


def partition_names(partitions: Iterable[Any]) -> str:
    return ", ".join(sorted(f"{tp.topic}[{tp.partition}]" for tp in partitions)) or "nothing"
