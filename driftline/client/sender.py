"""`EventSender`: a bounded in-memory buffer drained by one thread into a kafka-python producer."""
from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping

import orjson
from kafka.errors import MessageSizeTooLargeError

from driftline.client.partitioning import KeyHashPartitioner, partition_for_key
from driftline.client.tuning import (DEFAULT_MAX_BUFFERED, DELIVERY_TIMEOUT_MS, DRAIN_INTERVAL_S, FLUSH_TIMEOUT_S,
                                     PRODUCER_BATCH_BYTES, PRODUCER_COMPRESSION, PRODUCER_LINGER_MS,
                                     RECONNECT_BACKOFF_S, THREAD_STOP_S)
from driftline.events import encode_event

log = logging.getLogger(__name__)

# Events no retry can send: not JSON-encodable, or larger than a request may be.
_UNSENDABLE = (orjson.JSONEncodeError, MessageSizeTooLargeError)


@dataclass(frozen=True)
class SenderStats:
    sent: int       # acknowledged by Kafka
    buffered: int   # waiting in memory or in the producer, not yet acknowledged
    dropped: int    # refused because the buffer was full
    failed: int     # accepted, then not delivered within the delivery timeout
    connected: bool


class EventSender:
    """A bounded buffer drained by one background thread into a Kafka producer.

    Every drain interval the thread hands everything waiting to the producer with an
    explicit partition (keyless events: one partition per burst, rotating between bursts,
    so a burst makes one batch; keyed ones: `partition_for_key`), flushes, and then counts
    the acknowledged records by looking at their futures, rather than running two
    callbacks and a lock per record on the producer's I/O thread.
    """

    _thread_stop_s = THREAD_STOP_S

    def __init__(self, bootstrap_servers: str, max_buffered: int = DEFAULT_MAX_BUFFERED,
                 client_id: str = "driftline-logger", producer_config: Mapping[str, Any] | None = None):
        if max_buffered < 1:
            raise ValueError("max_buffered must be at least 1")
        self.bootstrap_servers = bootstrap_servers
        self.max_buffered = max_buffered
        self.client_id = client_id
        self.producer_config = dict(producer_config or {})
        # deque.append/popleft are atomic: the serving thread appends, the sender thread pops.
        # An event is a dict (encoded by the sender thread) or bytes already encoded.
        self._waiting: collections.deque[tuple[str, bytes | None, dict[str, Any] | bytes]] = collections.deque()
        self._lock = threading.Lock()
        self._buffered = 0
        self._sent = 0
        self._dropped = 0
        self._failed = 0
        self._producer: Any = None
        self._unacknowledged: list[Any] = []  # record futures handed to the producer
        self._burst = 0
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="driftline-event-sender", daemon=True)
        self._thread.start()

    # --- called by the serving path: cheap, never blocks ----------------------------
    def submit(self, topic: str, key: str | bytes | None, event: dict[str, Any] | bytes) -> bool:
        """Queue an event; False (and counted as dropped) when the buffer is full or closed."""
        if not self._admit(1):
            return False
        self._waiting.append((topic, key.encode() if isinstance(key, str) and key else key or None, event))
        return True

    def submit_many(self, topic: str, events: list[bytes]) -> int:
        """Queue keyless encoded events under one lock; returns how many were accepted (the rest count as dropped)."""
        accepted = self._admit(len(events))
        self._waiting.extend([(topic, None, event) for event in events[:accepted]])
        return accepted

    def _admit(self, count: int) -> int:
        """How many of `count` new events fit in the buffer (none once closing); those count as buffered, the rest
        as dropped."""
        with self._lock:
            room = 0 if self._closing.is_set() else max(0, self.max_buffered - self._buffered)
            accepted = min(count, room)
            self._dropped += count - accepted
            self._buffered += accepted
        return accepted

    def count_unsendable(self, topic: str, exc: Exception) -> None:
        """An event that was accepted by the logger but cannot be encoded or sent: it counts as failed."""
        with self._lock:
            self._buffered += 1
        self._fail_unsendable(topic, exc)

    def stats(self) -> SenderStats:
        with self._lock:
            return SenderStats(self._sent, self._buffered, self._dropped, self._failed, self._connected())

    def _connected(self) -> bool:
        return self._producer is not None

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every accepted event is acknowledged or failed; True if nothing is left."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.stats().buffered == 0:
                return True
            time.sleep(0.01)
        return self.stats().buffered == 0

    def close(self, timeout_s: float = 10.0) -> SenderStats:
        """Flush for up to `timeout_s`, stop the thread and the producer; what is left counts as failed.

        Returns within `timeout_s` plus the producer's own bounded waits (a connection
        attempt of up to 2 s, a close of up to 2 s).
        """
        self.flush(timeout_s)
        self._closing.set()
        self._thread.join(timeout=self._thread_stop_s)
        return self.stats()

    # --- background thread -----------------------------------------------------------
    def _connect(self) -> Any:
        from kafka import KafkaProducer

        config = {
            "bootstrap_servers": self.bootstrap_servers,
            "client_id": self.client_id,
            "enable_idempotence": False,
            "acks": 1,
            "linger_ms": PRODUCER_LINGER_MS,
            "batch_size": PRODUCER_BATCH_BYTES,
            "compression_type": PRODUCER_COMPRESSION,
            "max_block_ms": 1_000,
            "bootstrap_timeout_ms": 2_000,
            "request_timeout_ms": 10_000,
            "delivery_timeout_ms": DELIVERY_TIMEOUT_MS,
            "reconnect_backoff_max_ms": 1_000,
            # Used only where the sender leaves the partition to the producer (its own
            # choice failed); it agrees with `partition_for_key` on keyed records.
            "partitioner": KeyHashPartitioner(),
        }
        config.update(self.producer_config)
        return KafkaProducer(**config)

    def _partition(self, topic: str, key: bytes | None, burst_partitions: dict[str, list[int]]) -> int | None:
        """The partition for one record of this burst (None: let the producer choose)."""
        partitions = burst_partitions.get(topic)
        if partitions is None:
            # Known metadata makes this a dict look-up; unknown, it waits up to max_block_ms.
            partitions = sorted(self._producer.partitions_for(topic) or ())
            if not partitions:
                return None
            burst_partitions[topic] = partitions
        if key is not None:
            return partition_for_key(key, partitions)
        return partitions[self._burst % len(partitions)]

    def _run(self) -> None:
        attempt = 0
        sent_since_flush = 0
        burst_partitions: dict[str, list[int]] = {}
        pending: tuple[str, bytes | None, dict[str, Any] | bytes] | None = None
        while True:
            if self._producer is None:
                if self._closing.is_set():
                    break
                try:
                    producer = self._connect()
                except Exception as exc:  # Kafka down at start: keep buffering, retry with backoff
                    delay = RECONNECT_BACKOFF_S[min(attempt, len(RECONNECT_BACKOFF_S) - 1)]
                    if attempt == 0:
                        log.warning("Kafka at %s is unreachable (%s); buffering events and retrying",
                                    self.bootstrap_servers, exc)
                    attempt += 1
                    self._closing.wait(delay)
                    continue
                with self._lock:
                    self._producer = producer
                attempt = 0
            if pending is None:
                if not self._waiting:
                    if sent_since_flush:
                        sent_since_flush = 0
                        try:
                            self._producer.flush(timeout=FLUSH_TIMEOUT_S)
                        except Exception as exc:  # Kafka slow or down: the producer keeps retrying
                            log.debug("flush did not complete (%s)", exc)
                    if self._unacknowledged:
                        self._count_acknowledged()
                    if self._closing.is_set():
                        break
                    self._closing.wait(DRAIN_INTERVAL_S)
                    burst_partitions.clear()  # metadata may have changed; a new burst, a new partition
                    self._burst += 1
                    continue
                pending = self._waiting.popleft()
            topic, key, event = pending
            try:
                value = event if isinstance(event, bytes) else encode_event(event)
                partition = self._partition(topic, key, burst_partitions)
                future = self._producer.send(topic, key=key, value=value, partition=partition)
            except _UNSENDABLE as exc:  # retrying would not help, and would hold up every later event
                self._fail_unsendable(topic, exc)
                pending = None
                continue
            except Exception as exc:  # metadata unavailable (Kafka down mid-run): hold it and retry
                if self._closing.is_set():
                    break
                log.debug("send to %s failed (%s); retrying", topic, exc)
                burst_partitions.clear()
                self._closing.wait(0.2)
                continue
            pending = None
            sent_since_flush += 1
            self._unacknowledged.append(future)
        self._shutdown(pending)

    def _fail_unsendable(self, topic: str, exc: Exception) -> None:
        log.warning("an event for %s cannot be sent (%s); it counts as failed", topic, exc)
        self._settle(failed=1)

    def _settle(self, sent: int = 0, failed: int = 0) -> None:
        """Events that left the buffer: acknowledged by Kafka, or failed."""
        with self._lock:
            self._sent += sent
            self._failed += failed
            self._buffered -= sent + failed

    def _count_acknowledged(self) -> None:
        """Move finished records from `_unacknowledged` into the sent and failed counts."""
        waiting, sent, failed, error = [], 0, 0, None
        for future in self._unacknowledged:
            if not future.is_done:
                waiting.append(future)
            elif future.exception is None:
                sent += 1
            else:
                failed += 1
                error = future.exception
        self._unacknowledged = waiting
        if failed:
            log.warning("%d events were not delivered to Kafka: %s", failed, error)
        self._settle(sent, failed)

    def _shutdown(self, pending: Any) -> None:
        producer = self._producer
        if producer is not None:
            try:
                producer.close(timeout=2)
            except Exception:
                # kafka-python's close() raises when its flush times out (Kafka down), before
                # it force-closes; finish the job so undelivered batches fail (and are counted)
                # and no I/O thread is left behind.
                sender = getattr(producer, "_sender", None)
                if sender is not None:
                    sender.force_close()
                producer._closed = True
        self._count_acknowledged()
        leftover = (1 if pending is not None else 0) + len(self._waiting) + len(self._unacknowledged)
        self._waiting.clear()
        self._unacknowledged = []
        self._settle(failed=leftover)
        self._producer = None
