"""Log inference events from any Python model server (CONTRACTS.md §1-2).

>>> from driftline.client import InferenceLogger          # doctest: +SKIP
>>> logger = InferenceLogger("127.0.0.1:9092", model="credit-default", version="3")
>>> logger.log({"income": 5300.0, "region": "north"}, prediction=0.83, latency_ms=12.3,
...            request_id="9a1e", inputs={"income": "5300", "region": " North"})
>>> logger.log_label("9a1e", 1)            # later, when the outcome is known
>>> logger.close()                          # flushes what is buffered (bounded wait)

`log` never blocks the caller and never raises for Kafka trouble: events go into a
bounded in-memory buffer that one background thread drains into a kafka-python
producer. When Kafka is slow or down, at start or mid-run, events wait in the buffer
up to `max_buffered` (counting those handed to the producer and not yet acknowledged);
beyond that they are dropped and counted in `stats()`. The producer runs without
idempotence because a restarted in-memory broker (the embedded default) makes an
idempotent producer fail for good; a retried batch may therefore arrive twice, and
consumers de-duplicate on `event_id`.
"""
from __future__ import annotations

import collections
import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping

from driftline.config import TOPIC_INFERENCE, TOPIC_LABELS
from driftline.events import INFERENCE_SCHEMA, LABEL_SCHEMA, encode_event, rfc3339

log = logging.getLogger(__name__)

# Events held in memory while Kafka is slow or down (about 1-3 KB each).
DEFAULT_MAX_BUFFERED = 20_000
# Batching on the producer: 20 ms of linger fills batches at serving rates
# without adding noticeable delay to monitoring (windows are a minute).
PRODUCER_LINGER_MS = 20
PRODUCER_BATCH_BYTES = 262_144
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
# Longest the sender thread needs to notice `close`: a bootstrap attempt (2 s), a blocked
# send (1 s) and the producer's close (2 s), with margin.
_THREAD_STOP_S = 8.0


# uuid4() reads os.urandom on every call, a system call that costs tens of microseconds
# in some sandboxes; ids only need to be unique, so draw them from a PRNG seeded once
# from the OS (128 bits: collisions are out of reach).
_ids = random.Random()


def new_id() -> str:
    """A random 32-hex-digit id (event ids, request ids)."""
    return "%032x" % _ids.getrandbits(128)


@dataclass(frozen=True)
class SenderStats:
    sent: int       # acknowledged by Kafka
    buffered: int   # waiting in memory or in the producer, not yet acknowledged
    dropped: int    # refused because the buffer was full
    failed: int     # accepted, then not delivered within the delivery timeout
    connected: bool


class EventSender:
    """A bounded buffer drained by one background thread into a Kafka producer."""

    def __init__(self, bootstrap_servers: str, max_buffered: int = DEFAULT_MAX_BUFFERED,
                 client_id: str = "driftline-logger", producer_config: Mapping[str, Any] | None = None):
        if max_buffered < 1:
            raise ValueError("max_buffered must be at least 1")
        self.bootstrap_servers = bootstrap_servers
        self.max_buffered = max_buffered
        self.client_id = client_id
        self.producer_config = dict(producer_config or {})
        # deque.append/popleft are atomic: the serving thread appends, the sender thread pops.
        self._waiting: collections.deque[tuple[str, bytes | None, dict[str, Any]]] = collections.deque()
        self._lock = threading.Lock()
        self._buffered = 0
        self._sent = 0
        self._dropped = 0
        self._failed = 0
        self._producer: Any = None
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="driftline-event-sender", daemon=True)
        self._thread.start()

    # --- called by the serving path: cheap, never blocks ----------------------------
    def submit(self, topic: str, key: str | None, event: dict[str, Any]) -> bool:
        """Queue an event; False (and counted as dropped) when the buffer is full or closed."""
        with self._lock:
            if self._buffered >= self.max_buffered or self._closing.is_set():
                self._dropped += 1
                return False
            self._buffered += 1
        self._waiting.append((topic, key.encode() if key else None, event))
        return True

    def stats(self) -> SenderStats:
        with self._lock:
            return SenderStats(self._sent, self._buffered, self._dropped, self._failed, self._producer is not None)

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
        self._thread.join(timeout=_THREAD_STOP_S)
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
            "max_block_ms": 1_000,
            "bootstrap_timeout_ms": 2_000,
            "request_timeout_ms": 10_000,
            "delivery_timeout_ms": DELIVERY_TIMEOUT_MS,
            "reconnect_backoff_max_ms": 1_000,
        }
        config.update(self.producer_config)
        return KafkaProducer(**config)

    def _run(self) -> None:
        attempt = 0
        sent_since_flush = 0
        pending: tuple[str, bytes | None, dict[str, Any]] | None = None
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
                    if self._closing.is_set():
                        break
                    self._closing.wait(_DRAIN_INTERVAL_S)
                    continue
                pending = self._waiting.popleft()
            topic, key, event = pending
            try:
                future = self._producer.send(topic, key=key, value=encode_event(event))
            except Exception as exc:  # metadata unavailable (Kafka down mid-run): hold it and retry
                if self._closing.is_set():
                    break
                log.debug("send to %s failed (%s); retrying", topic, exc)
                self._closing.wait(0.2)
                continue
            pending = None
            sent_since_flush += 1
            future.add_callback(self._on_sent)
            future.add_errback(self._on_failed)
        self._shutdown(pending)

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
        leftover = (1 if pending is not None else 0) + len(self._waiting)
        self._waiting.clear()
        with self._lock:
            self._failed += leftover
            self._buffered -= leftover
            self._producer = None

    def _on_sent(self, _metadata: Any) -> None:
        with self._lock:
            self._sent += 1
            self._buffered -= 1

    def _on_failed(self, exc: BaseException) -> None:
        log.warning("an event was not delivered to Kafka: %s", exc)
        with self._lock:
            self._failed += 1
            self._buffered -= 1


class InferenceLogger:
    """Inference and label events in the contract's shape, sent through an `EventSender`."""

    def __init__(self, bootstrap_servers: str, model: str, version: str, *, max_buffered: int = DEFAULT_MAX_BUFFERED,
                 device: str | None = None, tags: Mapping[str, str] | None = None,
                 inference_topic: str = TOPIC_INFERENCE, labels_topic: str = TOPIC_LABELS,
                 producer_config: Mapping[str, Any] | None = None):
        self.model = model
        self.version = str(version)
        self.device = device
        self.tags = dict(tags) if tags else None
        self.inference_topic = inference_topic
        self.labels_topic = labels_topic
        self.sender = EventSender(bootstrap_servers, max_buffered=max_buffered, producer_config=producer_config,
                                  client_id=f"driftline-{model}")

    def log(self, features: Mapping[str, Any], prediction: Any, latency_ms: float | Mapping[str, float], *,
            request_id: str | None = None, inputs: Mapping[str, Any] | None = None, entity_id: str | None = None,
            version: str | None = None, ts: str | int | None = None, event_id: str | None = None,
            batch_size: int | None = None, cache_hit: bool | None = None, status: str = "ok",
            error: str | None = None, tags: Mapping[str, str] | None = None) -> str:
        """Queue one inference event; returns its event_id. Never blocks; see the module docstring.

        `latency_ms` is the total in milliseconds, or a dict with at least "total"
        (the worker also sends "queue" and "compute"). `version` overrides the
        logger's version for this event (a server that hot-swaps models).
        """
        event_id = event_id or new_id()
        event: dict[str, Any] = {
            "schema": INFERENCE_SCHEMA,
            "event_id": event_id,
            "request_id": request_id or event_id,
            "ts": ts if ts is not None else rfc3339(),
            "model": self.model,
            "version": str(version) if version is not None else self.version,
            "features": dict(features),
            "latency_ms": {"total": float(latency_ms)} if isinstance(latency_ms, (int, float)) else dict(latency_ms),
            "status": status,
        }
        if prediction is not None:
            event["prediction"] = prediction
        if error is not None:
            event["error"] = error
        if inputs is not None:
            event["inputs"] = dict(inputs)
        if entity_id is not None:
            event["entity_id"] = entity_id
        if batch_size is not None:
            event["batch_size"] = batch_size
        if cache_hit is not None:
            event["cache_hit"] = cache_hit
        if self.device is not None:
            event["device"] = self.device
        merged_tags = {**(self.tags or {}), **(tags or {})}
        if merged_tags:
            event["tags"] = merged_tags
        # No message key: nothing downstream needs per-key order (labels join on request_id
        # in the store), and keyed partitioning costs a pure-Python murmur2 per event.
        self.sender.submit(self.inference_topic, None, event)
        return event_id

    def log_label(self, request_id: str, label: Any, ts: str | int | None = None) -> None:
        """Queue the ground-truth label of an earlier request (joined on request_id)."""
        event = {"schema": LABEL_SCHEMA, "request_id": request_id, "ts": ts if ts is not None else rfc3339(),
                 "model": self.model, "label": label}
        self.sender.submit(self.labels_topic, None, event)

    def stats(self) -> SenderStats:
        return self.sender.stats()

    def flush(self, timeout_s: float = 10.0) -> bool:
        return self.sender.flush(timeout_s)

    def close(self, timeout_s: float = 10.0) -> SenderStats:
        return self.sender.close(timeout_s)

    def __enter__(self) -> "InferenceLogger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
