"""Log inference events from any Python model server (CONTRACTS.md §1-2).

>>> from driftline.client import InferenceLogger          # doctest: +SKIP
>>> logger = InferenceLogger("127.0.0.1:9092", model="credit-default", version="3")
>>> logger.log({"income": 5300.0, "region": "north"}, prediction=0.83, latency_ms=12.3,
...            request_id="9a1e", inputs={"income": "5300", "region": " North"})
>>> logger.log_label("9a1e", 1)            # later, when the outcome is known
>>> logger.close()                          # flushes what is buffered (bounded wait)

An asyncio server can call `log_soon` instead of `log` (same arguments): the events of
one turn of the event loop are then encoded together at its end, which costs the loop less.

`log` never blocks the caller and never raises for Kafka trouble: events go into a
bounded in-memory buffer that one background thread drains into a kafka-python
producer, or (`producer_process=True`, the worker's default) ships to a child process
that runs a confluent-kafka (librdkafka) producer. When Kafka is slow or down, at start
or mid-run, events wait in the buffer up to `max_buffered` (counting those handed to the
producer and not yet acknowledged); beyond that they are dropped and counted in `stats()`. The producer runs without
idempotence because a restarted in-memory broker (the embedded default) makes an
idempotent producer fail for good; a retried batch may therefore arrive twice, and
consumers de-duplicate on `event_id`.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import os
import pickle
import random
import subprocess
import threading
import time
import zlib
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Collection, Mapping

import orjson
from kafka.errors import MessageSizeTooLargeError
from kafka.partitioner import Partitioner

from driftline.config import TOPIC_INFERENCE, TOPIC_LABELS
from driftline.events import INFERENCE_SCHEMA, LABEL_SCHEMA, encode_event
from driftline.kafka_security import KafkaSecurity, kafka_python_options, librdkafka_config
from driftline.supervisor import start_python_child

log = logging.getLogger(__name__)

# Events held in memory while Kafka is slow or down (about 1-3 KB each).
DEFAULT_MAX_BUFFERED = 20_000
# Batching on the producer: 20 ms of linger fills batches at serving rates
# without adding noticeable delay to monitoring (windows are a minute).
PRODUCER_LINGER_MS = 20
PRODUCER_BATCH_BYTES = 262_144
# Event batches are compressed: JSON events shrink about 4x with lz4, and the broker's CPU
# per event drops with its bytes (embedded broker, 2-core machine: 5.5 us -> 2.0 us per
# event, for 0.2 us more in the producer). Every Kafka client reads lz4 (kafka-python
# through the `lz4` package, a dependency).
PRODUCER_COMPRESSION = "lz4"
# How long an accepted event may wait for Kafka before it counts as failed.
DELIVERY_TIMEOUT_MS = 60_000
_RECONNECT_BACKOFF_S = (0.2, 0.5, 1.0, 2.0)
# The sender thread wakes this often, hands everything waiting to the producer in one
# burst and flushes it: one produce request per interval instead of one per linger or
# per event. Waking per event would also hand the GIL back and forth with the serving
# thread on every request. Measured on the 2-core development machine (where a socket
# send costs ~1 ms of system time) at 1 000 events/s, CPU per event in all: waking per
# event 156 us, every 10 ms 120 us, every 50 ms 72 us, every 100 ms 69 us; at 200
# events/s: 50 ms 210 us, 100 ms 164 us. 100 ms of extra delay is nothing next to
# one-minute monitoring windows.
_DRAIN_INTERVAL_S = 0.1
# A flush that Kafka does not acknowledge in time is left to the producer's retries.
_FLUSH_TIMEOUT_S = 5.0
# The producer process runs at this nice value: where CPUs are short, the kernel prefers
# the serving process, and the child catches up in the gaps (events wait in its buffer a
# little longer; monitoring windows are a minute). The retraining process does the same.
_PRODUCER_PROCESS_NICENESS = 10
# Longest the sender thread needs to notice `close`: a bootstrap attempt (2 s), a blocked
# send (1 s) and the producer's close (2 s), with margin.
_THREAD_STOP_S = 8.0
# Events no retry can send: not JSON-encodable, or larger than a request may be.
_UNSENDABLE = (orjson.JSONEncodeError, MessageSizeTooLargeError)


# uuid4() reads os.urandom on every call, a system call that costs tens of microseconds
# in some sandboxes; ids only need to be unique, so draw them from a PRNG seeded once
# from the OS (128 bits: collisions are out of reach).
_ids = random.Random()
_LOW_62_BITS = (1 << 62) - 1


def new_id() -> str:
    """A 32-hex-digit UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then 74 random bits.

    Time-ordered rather than wholly random because the collector keeps every prediction
    under its request id for the label join: ids that grow with time are appended at the
    right edge of that index instead of landing on a random page of it, so a commit writes
    a few pages instead of most of the index (see docs/collector.md). 74 random bits per
    millisecond keep collisions out of reach.
    """
    random_bits = _ids.getrandbits(74)
    return "%032x" % ((time.time_ns() // 1_000_000) << 80 | 0x7 << 76 | (random_bits >> 62) << 64
                      | 0b10 << 62 | random_bits & _LOW_62_BITS)


# (epoch second, its RFC 3339 text), replaced as one tuple so threads never mix two seconds.
_second_text: tuple[int, str] = (-1, "")


def now_rfc3339() -> str:
    """Now as `driftline.events.rfc3339()` writes it (UTC, milliseconds truncated), in 0.6 us instead of 3.6.

    It runs once per served request: the date and time are formatted once a second.
    """
    global _second_text
    now_ns = time.time_ns()
    second = now_ns // 1_000_000_000
    cached_second, text = _second_text
    if second != cached_second:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second_text = (second, text)
    return "%s.%03dZ" % (text, now_ns // 1_000_000 % 1000)


def partition_for_key(key: bytes, partitions: Collection[int]) -> int:
    """The partition of a keyed record: crc32 of the key modulo the partition count.

    The same key always lands on the same partition while the partition count stays the
    same. It is not the partition a Java client (murmur2) would pick: keys produced by
    this client agree with each other, not with other producers' keys.
    """
    ordered = sorted(partitions)
    return ordered[zlib.crc32(key) % len(ordered)]


class KeyHashPartitioner(Partitioner):
    """kafka-python partitioner: `partition_for_key` for keyed records, a random available partition otherwise.

    kafka-python's default hashes keys with a pure-Python murmur2, about 8 us a record
    here (15 % of `send`); zlib's crc32 is C.
    """

    def partition(self, topic, key, serialized_key, value, serialized_value, cluster):  # noqa: ANN001
        partitions = cluster.partitions_for_topic(topic)
        if not partitions:
            raise ValueError(f"topic {topic} not found in the cluster metadata")
        if serialized_key is not None:
            return partition_for_key(serialized_key, partitions)
        return random.choice(list(cluster.available_partitions_for_topic(topic) or partitions))


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

    _thread_stop_s = _THREAD_STOP_S

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
                    delay = _RECONNECT_BACKOFF_S[min(attempt, len(_RECONNECT_BACKOFF_S) - 1)]
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
                            self._producer.flush(timeout=_FLUSH_TIMEOUT_S)
                        except Exception as exc:  # Kafka slow or down: the producer keeps retrying
                            log.debug("flush did not complete (%s)", exc)
                    if self._unacknowledged:
                        self._count_acknowledged()
                    if self._closing.is_set():
                        break
                    self._closing.wait(_DRAIN_INTERVAL_S)
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


_CLOSE_CHILD = b"close"


class ProcessEventSender(EventSender):
    """An `EventSender` whose Kafka producer runs in a child process, off the serving process's GIL.

    The background thread only encodes what is waiting and ships it, one pipe write per
    drain interval, to a child Python process that hands it to a `LibrdkafkaSender`
    (confluent-kafka: the per-record work in C, not kafka-python's Python) and reports
    its cumulative sent and failed counts back. The counts and the bound stay those of
    `EventSender`: an event counts as buffered until the child reports it acknowledged or
    failed, so the child never holds more than `max_buffered`. Kafka down at start or
    mid-run: the child buffers, as `EventSender` does. The child dies with us: it lives in
    its own session (a terminal's Ctrl-C reaches only us, and we stop it after flushing),
    and when this process dies its end of the pipe reads end-of-file, so it flushes what
    it holds (bounded) and exits. A child that dies is restarted; what it held counts as
    failed.
    """

    # The child's own close (up to _THREAD_STOP_S) and its exit.
    _thread_stop_s = _THREAD_STOP_S + 3.0

    def __init__(self, bootstrap_servers: str, max_buffered: int = DEFAULT_MAX_BUFFERED,
                 client_id: str = "driftline-logger", producer_config: Mapping[str, Any] | None = None):
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._shipped = 0            # events written to the current child
        self._child_settled = 0      # of those, reported sent or failed
        self._child_counts = (0, 0)  # (sent, failed) the current child reported last
        self._child_connected = False
        self._child_failures = 0     # children lost in a row (reset by a child's report)
        super().__init__(bootstrap_servers, max_buffered, client_id, producer_config)

    def _connected(self) -> bool:
        return self._child_connected

    @property
    def child_pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    def _start_child(self) -> None:
        self._process, self._conn = start_python_child(
            "import sys; from driftline.client import run_producer_process; run_producer_process(int(sys.argv[1]))",
            start_new_session=True)
        self._conn.send({"bootstrap_servers": self.bootstrap_servers, "max_buffered": self.max_buffered,
                         "client_id": self.client_id, "producer_config": self.producer_config,
                         "log_level": log.getEffectiveLevel(),
                         "kafka_log_level": logging.getLogger("kafka").getEffectiveLevel()})

    def _run(self) -> None:
        while True:
            if self._conn is None and not self._closing.is_set():
                if self._child_failures:  # a child that keeps dying is restarted with backoff
                    self._closing.wait(_RECONNECT_BACKOFF_S[min(self._child_failures, len(_RECONNECT_BACKOFF_S)) - 1])
                    if self._closing.is_set():
                        break
                try:
                    self._start_child()
                except Exception as exc:  # cannot start Python: keep buffering, retry
                    if not self._child_failures:
                        log.warning("cannot start the event producer process (%s); buffering events and retrying",
                                    exc)
                    self._child_lost()
                    continue
            if self._conn is not None:
                self._read_reports()
            if self._conn is not None and self._waiting:
                batch = []
                while self._waiting:
                    topic, key, event = self._waiting.popleft()
                    try:
                        batch.append((topic, key, event if isinstance(event, bytes) else encode_event(event)))
                    except orjson.JSONEncodeError as exc:
                        self._fail_unsendable(topic, exc)
                try:
                    self._conn.send_bytes(pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL))
                    self._shipped += len(batch)
                except OSError as exc:  # the child is gone: this batch waits for the next one
                    log.warning("the event producer process is gone (%s); restarting it", exc)
                    self._waiting.extendleft(reversed(batch))
                    self._child_lost()
            if self._closing.is_set():
                break
            self._closing.wait(_DRAIN_INTERVAL_S)
        self._stop_child()

    def _read_reports(self) -> None:
        try:
            while self._conn.poll(0):
                self._apply_report(self._conn.recv())
        except (EOFError, OSError):
            log.warning("the event producer process exited; restarting it")
            self._child_lost()

    def _apply_report(self, report: tuple[int, int, bool]) -> None:
        sent, failed, connected = report
        self._child_failures = 0
        new_sent, new_failed = sent - self._child_counts[0], failed - self._child_counts[1]
        self._child_counts = (sent, failed)
        self._child_settled += new_sent + new_failed
        self._settle(new_sent, new_failed)
        self._child_connected = connected

    def _child_lost(self) -> None:
        """Forget the current child: what it held and had not reported counts as failed."""
        self._child_failures += 1
        lost = self._shipped - self._child_settled
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        self._end_process(grace_s=0.0)
        self._shipped, self._child_settled, self._child_counts = 0, 0, (0, 0)
        self._settle(failed=lost)
        self._child_connected = False

    def _end_process(self, grace_s: float) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def _stop_child(self) -> None:
        """Ask the child to close (the parent has flushed already) and wait for its last report."""
        if self._conn is not None:
            try:
                self._conn.send_bytes(_CLOSE_CHILD)
                deadline = time.monotonic() + _THREAD_STOP_S
                while self._conn.poll(max(0.0, deadline - time.monotonic())):
                    self._apply_report(self._conn.recv())
            except (EOFError, OSError):
                pass  # the child closed its end after its final report
            self._conn.close()
            self._conn = None
            self._end_process(grace_s=2.0)
        leftover = self._shipped - self._child_settled + len(self._waiting)
        self._waiting.clear()
        self._shipped = self._child_settled = 0
        self._settle(failed=leftover)
        self._child_connected = False


class LibrdkafkaSender:
    """The producer process's Kafka side: a confluent-kafka (librdkafka) producer, fed whole batches.

    kafka-python spends about 50 us of Python per record (`send`, the record batch
    builder, its I/O thread); librdkafka does that work in C, and what is left in Python
    is one `produce` call and one delivery callback per record (about 5 us). Every
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


def run_producer_process(fd: int) -> None:
    """The child of `ProcessEventSender`: batches in from the pipe on `fd`, into a `LibrdkafkaSender`; counts out."""
    conn = Connection(fd)
    os.nice(_PRODUCER_PROCESS_NICENESS)
    options = conn.recv()
    logging.basicConfig(level=options.pop("log_level"),
                        format="%(asctime)s %(levelname)s driftline-event-producer %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(options.pop("kafka_log_level"))
    sender = LibrdkafkaSender(**options)
    reported: tuple[int, int, bool] | None = None
    close_timeout_s = _FLUSH_TIMEOUT_S  # the parent died: deliver what we hold, for a bounded time
    try:
        while True:
            if conn.poll(_DRAIN_INTERVAL_S):
                message = conn.recv_bytes()
                if message == _CLOSE_CHILD:
                    close_timeout_s = 0.0  # the parent has waited for delivery already
                    break
                sender.add(pickle.loads(message))
            sender.pump()
            report = (sender.sent, sender.failed, sender.connected)
            if report != reported:
                conn.send(report)
                reported = report
    except (EOFError, OSError):
        pass
    sender.close(close_timeout_s)
    try:
        conn.send((sender.sent, sender.failed, False))
        conn.close()
    except OSError:
        pass


def _as_dict(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """`mapping` itself when it is a dict (the event is encoded at once, so no copy is needed), else a dict of it."""
    return mapping if isinstance(mapping, dict) else dict(mapping)


class InferenceLogger:
    """Inference and label events in the contract's shape, sent through an `EventSender`.

    `producer_process=True` runs the Kafka producer in a child process
    (`ProcessEventSender`, with confluent-kafka there). `producer_config` adds to the
    producer's settings: kafka-python options on a thread, librdkafka properties in the
    child. Measured on a 2-core machine (`bench/worker.py --logger-cost`, events at
    2 000/s from a paced loop), CPU per event: in the serving process about 30 us with
    the child (`log()`, which builds and encodes the event, and the thread that ships
    batches to the child) against about 60 us with the producer on a thread; in the
    child about 8 us (45-50 us when it ran kafka-python); in the embedded broker about 8 us.
    `security` (`driftline.kafka_security.KafkaSecurity.from_settings(settings)`) adds TLS and
    SASL to either producer; `producer_config` still overrides single options.
    """

    def __init__(self, bootstrap_servers: str, model: str, version: str, *, max_buffered: int = DEFAULT_MAX_BUFFERED,
                 device: str | None = None, tags: Mapping[str, str] | None = None,
                 inference_topic: str = TOPIC_INFERENCE, labels_topic: str = TOPIC_LABELS,
                 producer_config: Mapping[str, Any] | None = None, producer_process: bool = False,
                 security: KafkaSecurity | None = None):
        self.model = model
        self.version = str(version)
        self.device = device
        self.tags = dict(tags) if tags else None
        self.inference_topic = inference_topic
        self.labels_topic = labels_topic
        self._soon: list[tuple[Any, ...]] = []  # log_soon's calls, until the end of the loop's iteration
        self._soon_lock = threading.Lock()
        sender_class = ProcessEventSender if producer_process else EventSender
        # TLS / SASL as librdkafka properties in the child, as kafka-python options on a thread (validated here)
        secure = librdkafka_config(security) if producer_process else kafka_python_options(security)
        producer_config = {**secure, **(producer_config or {})}
        self.sender = sender_class(bootstrap_servers, max_buffered=max_buffered, producer_config=producer_config,
                                   client_id=f"driftline-{model}")

    def log(self, features: Mapping[str, Any], prediction: Any, latency_ms: float | Mapping[str, float], *,
            request_id: str | None = None, inputs: Mapping[str, Any] | None = None, entity_id: str | None = None,
            version: str | None = None, ts: str | int | None = None, event_id: str | None = None,
            batch_size: int | None = None, cache_hit: bool | None = None, status: str = "ok",
            error: str | None = None, tags: Mapping[str, str] | None = None) -> str:
        """Queue one inference event; returns its event_id. Never blocks; see the module docstring.

        The event is encoded here: one that is not JSON-encodable raises `orjson.JSONEncodeError`.
        `latency_ms` is the total in milliseconds, or a dict with at least "total"
        (the worker also sends "queue" and "compute"). `version` overrides the
        logger's version for this event (a server that hot-swaps models).
        """
        event_id = event_id or new_id()
        # No message key: nothing downstream needs per-key order (labels join on request_id
        # in the store), and keyed partitioning costs a pure-Python murmur2 per event.
        # Encoded here, not by the sender thread: the caller's dicts need no copies, and
        # the event leaves no objects for the garbage collector to scan while it waits.
        self.sender.submit(self.inference_topic, None, encode_event(self._inference_event(
            features, prediction, latency_ms, request_id, inputs, entity_id, version,
            ts if ts is not None else now_rfc3339(), event_id, batch_size, cache_hit, status, error, tags)))
        return event_id

    def log_soon(self, features: Mapping[str, Any], prediction: Any, latency_ms: float | Mapping[str, float], *,
                 request_id: str | None = None, inputs: Mapping[str, Any] | None = None,
                 entity_id: str | None = None, version: str | None = None, ts: str | int | None = None,
                 event_id: str | None = None, batch_size: int | None = None, cache_hit: bool | None = None,
                 status: str = "ok", error: str | None = None, tags: Mapping[str, str] | None = None) -> str:
        """As `log`, for a server on an asyncio event loop; call it on the loop's thread.

        The event's id and time are taken now; building and encoding it waits for the end of
        the loop's current iteration, where the events of every request answered in that
        iteration are built and encoded one after another. The same work costs less that way:
        in the worker under load (2-core machine, c=32, ~16 requests answered per iteration;
        five runs each way) 7.4-8.4 us of the event loop per event (2.9-3.4 us in the call,
        4.4-5.1 us at the end of the iteration) against 8.5-11.9 us when each request builds
        and encodes its own event between its other work (`log` in a tight loop: 3.5 us).
        The caller must not change the dicts it passes until then (the worker builds fresh
        ones per request). An event that turns out not to be JSON-encodable (or a
        `latency_ms` that is neither a number nor a mapping) is logged and counted as failed
        instead of raising; the other events of the iteration go out.
        """
        event_id = event_id or new_id()
        call = (features, prediction, latency_ms, request_id, inputs, entity_id, version,
                ts if ts is not None else now_rfc3339(), event_id, batch_size, cache_hit, status, error, tags)
        with self._soon_lock:  # `flush` and `close` may take the list from another thread
            if not self._soon:
                asyncio.get_running_loop().call_soon(self._log_soon_events)
            self._soon.append(call)
        return event_id

    def _log_soon_events(self) -> None:
        """Build, encode and queue what `log_soon` collected (on the loop, or in `close`)."""
        with self._soon_lock:
            pending, self._soon = self._soon, []
        if not pending:
            return
        build = self._inference_event
        try:
            values = [encode_event(build(*call)) for call in pending]
        except Exception:  # rare: one by one, so only the bad ones fail (log() would have raised to its caller)
            values = []
            for call in pending:
                try:
                    values.append(encode_event(build(*call)))
                except Exception as exc:
                    self.sender.count_unsendable(self.inference_topic, exc)
        self.sender.submit_many(self.inference_topic, values)

    def _inference_event(self, features: Mapping[str, Any], prediction: Any,
                         latency_ms: float | Mapping[str, float], request_id: str | None,
                         inputs: Mapping[str, Any] | None, entity_id: str | None, version: str | None,
                         ts: str | int, event_id: str, batch_size: int | None, cache_hit: bool | None, status: str,
                         error: str | None, tags: Mapping[str, str] | None) -> dict[str, Any]:
        event: dict[str, Any] = {
            "schema": INFERENCE_SCHEMA,
            "event_id": event_id,
            "request_id": request_id or event_id,
            "ts": ts,
            "model": self.model,
            "version": str(version) if version is not None else self.version,
            "features": _as_dict(features),
            "latency_ms": ({"total": float(latency_ms)} if isinstance(latency_ms, (int, float))
                           else _as_dict(latency_ms)),
            "status": status,
        }
        if prediction is not None:
            event["prediction"] = prediction
        if error is not None:
            event["error"] = error
        if inputs is not None:
            event["inputs"] = _as_dict(inputs)
        if entity_id is not None:
            event["entity_id"] = entity_id
        if batch_size is not None:
            event["batch_size"] = batch_size
        if cache_hit is not None:
            event["cache_hit"] = cache_hit
        if self.device is not None:
            event["device"] = self.device
        if self.tags or tags:
            event["tags"] = {**(self.tags or {}), **(tags or {})}
        return event

    def log_label(self, request_id: str, label: Any, ts: str | int | None = None) -> None:
        """Queue the ground-truth label of an earlier request (joined on request_id)."""
        event = {"schema": LABEL_SCHEMA, "request_id": request_id, "ts": ts if ts is not None else now_rfc3339(),
                 "model": self.model, "label": label}
        self.sender.submit(self.labels_topic, None, event)

    def stats(self) -> SenderStats:
        return self.sender.stats()

    def flush(self, timeout_s: float = 10.0) -> bool:
        self._log_soon_events()
        return self.sender.flush(timeout_s)

    def close(self, timeout_s: float = 10.0) -> SenderStats:
        self._log_soon_events()
        return self.sender.close(timeout_s)

    def __enter__(self) -> "InferenceLogger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
