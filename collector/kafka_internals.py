"""kafka-python internals the collector reads, in one place (kafka-python is pinned to 3.0.x)."""
from __future__ import annotations

import logging
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


class _ClosedSocketRead(logging.Filter):
    """Drops kafka-python's traceback for a read on a transport closed meanwhile.

    kafka-python 3.0.x's network thread can wake for a read just after `consumer.close()` on the caller's
    thread cleared the socket; `_sock_recv` then logs an AttributeError with its traceback at ERROR although
    nothing is lost (the transport was already closed on purpose). Other read errors, and this one at DEBUG,
    pass.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        transport = record.args[0] if isinstance(record.args, tuple) and record.args else None
        closed_race = (isinstance(exc, AttributeError) and getattr(transport, "_closed", False)
                       and getattr(transport, "_sock", True) is None)
        return not closed_race or logging.getLogger("kafka").isEnabledFor(logging.DEBUG)


_CLOSED_SOCKET_READ = _ClosedSocketRead()


def quiet_closed_socket_reads() -> None:
    """Install the filter for kafka-python's close race on its transport logger (idempotent)."""
    transport_log = logging.getLogger("kafka.net.transport")
    if _CLOSED_SOCKET_READ not in transport_log.filters:
        transport_log.addFilter(_CLOSED_SOCKET_READ)
