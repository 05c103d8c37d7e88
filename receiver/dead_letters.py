"""The receiver's dead letters on `driftline.inference.dlq`, in the collector's shape (driftline.dead_letters).

A letter carries the bytes that could not become an event: a CloudEvent half's body, a JSON line of
POST /events, or one built event that failed validation; for a half, `driftline.ce_id` and
`driftline.ce_type` headers say which. `driftline.topic` names the receiver's endpoint it came
through (partition and offset are -1, or the line number of a JSON line in `driftline.offset`).
The bytes are cut to `raw_bytes` (RECEIVER_DEAD_LETTER_RAW_BYTES, well under a stock broker's 1 MiB
message limit, where a 4 MiB half would never be taken); a cut letter has `driftline.raw_size`, the
full size. Sending is asynchronous and bounded: at most `max_inflight` letters and `max_inflight_bytes`
bytes wait for Kafka (kafka-python's own buffer has no bound for large records, so a stopped broker
would hold them all until the delivery timeout); beyond it a letter is not sent, counted in
`not_sent` and logged, never silently lost. A letter Kafka does not take is logged and counted in
`failed`. With a `DeadLetterStore`, each letter is also a row of the store's `dead_letters` table
(receiver/dead_letter_store.py), whatever the topic did.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from driftline import defaults
from driftline.config import TOPIC_DEAD_LETTERS
from driftline.dead_letters import dead_letter_headers, dead_letter_values, model_of_raw
from driftline.kafka_security import KafkaSecurity, kafka_python_options
from driftline.receiver.dead_letter_store import DeadLetterStore, LogThrottle

log = logging.getLogger(__name__)

# What kafka-python holds per record besides its value and headers (record, future, batch share).
_RECORD_OVERHEAD_BYTES = 512


class DeadLetterSink:
    def __init__(self, bootstrap_servers: str, security: KafkaSecurity | None = None,
                 topic: str = TOPIC_DEAD_LETTERS, store: DeadLetterStore | None = None,
                 raw_bytes: int = defaults.RECEIVER_DEAD_LETTER_RAW_BYTES,
                 max_inflight: int = defaults.RECEIVER_DEAD_LETTER_INFLIGHT,
                 max_inflight_bytes: int = defaults.RECEIVER_DEAD_LETTER_INFLIGHT_BYTES):
        if raw_bytes < 1 or max_inflight < 1 or max_inflight_bytes < 1:
            raise ValueError("raw_bytes, max_inflight and max_inflight_bytes must be at least 1")
        self.bootstrap_servers = bootstrap_servers
        self.store = store
        self.security = security
        self.topic = topic
        self.raw_bytes = raw_bytes
        self.max_inflight = max_inflight
        self.max_inflight_bytes = max_inflight_bytes
        self.sent = 0
        self.failed = 0
        self.not_sent = 0  # refused by the in-flight bound (Kafka slow or down)
        self.inflight = 0
        self.inflight_bytes = 0
        self._lock = threading.Lock()
        self._connecting = threading.Lock()
        self._producer: Any = None
        self._connect_failed_at = float("-inf")
        self._failures = LogThrottle(log)
        self._refusals = LogThrottle(log)

    def _connect(self) -> Any:
        from kafka import KafkaProducer

        # No idempotence: a restarted in-memory broker would fail an idempotent producer for good.
        return KafkaProducer(bootstrap_servers=self.bootstrap_servers, client_id="driftline-receiver-dlq",
                             enable_idempotence=False, acks="all", linger_ms=5, max_block_ms=5_000,
                             bootstrap_timeout_ms=2_000,
                             max_request_size=max(1 << 20, 2 * self.raw_bytes), reconnect_backoff_max_ms=1_000,
                             **kafka_python_options(self.security))

    def send(self, raw: bytes, reason: str, field: str | None, origin: str, offset: int = -1,
             extra: dict[str, str] | None = None, model: str | None = None, raw_size: int | None = None) -> None:
        """`model`: the letter's model when the caller knows it (a half's service), else read from `raw`;
        `raw_size`: the size of the bytes `raw` was cut from, when the caller cut them already."""
        size = len(raw) if raw_size is None else raw_size
        if self.store is not None:
            values = dead_letter_values(origin, None, offset if offset >= 0 else None, reason, field,
                                        model or model_of_raw(raw), raw, defaults.COLLECTOR_DEAD_LETTER_RAW_BYTES)
            self.store.add({**values, "raw_size": size})
        value = raw[:self.raw_bytes]
        headers = dead_letter_headers(reason, field, origin, -1, offset, extra)
        if len(value) < size:
            headers.append(("driftline.raw_size", str(size).encode()))
        cost = len(value) + sum(len(name) + len(data) for name, data in headers) + _RECORD_OVERHEAD_BYTES
        with self._lock:
            room = self.inflight < self.max_inflight and self.inflight_bytes + cost <= self.max_inflight_bytes
            if room:
                self.inflight += 1
                self.inflight_bytes += cost
            else:
                self.not_sent += 1
                waiting, waiting_bytes = self.inflight, self.inflight_bytes
        if not room:
            self._refusals.error("a dead letter (%s) was not sent to %s: %d letters of %d bytes wait for Kafka "
                                 "(receiver dead-letter in-flight bound); counted, and in the store when it has room",
                                 reason, self.topic, waiting, waiting_bytes)
            return
        try:
            future = self._producer_now().send(self.topic, value=value, headers=headers)
        except Exception as exc:  # Kafka unreachable: counted and said, not hidden
            self._failed(reason, cost, exc)
            return
        future.add_callback(self._sent, cost).add_errback(self._failed, reason, cost)

    def _producer_now(self) -> Any:
        with self._connecting:  # one producer, made on the first letter (the broker may start after the receiver)
            if self._producer is None:
                wait = self._connect_failed_at + defaults.RECEIVER_DEAD_LETTER_RECONNECT_SECONDS - time.monotonic()
                if wait > 0:  # each try blocks its request thread: letters meanwhile fail at once
                    raise ConnectionError(f"Kafka at {self.bootstrap_servers} was unreachable; next try in "
                                          f"{wait:.1f} s")
                try:
                    self._producer = self._connect()
                except Exception:
                    self._connect_failed_at = time.monotonic()
                    raise
            return self._producer

    def _sent(self, cost: int, _metadata: Any) -> None:
        with self._lock:
            self.sent += 1
            self.inflight -= 1
            self.inflight_bytes -= cost

    def _failed(self, reason: str, cost: int, exc: BaseException) -> None:
        with self._lock:
            self.failed += 1
            self.inflight -= 1
            self.inflight_bytes -= cost
        self._failures.error("a dead letter (%s) was not written to %s: %s", reason, self.topic, exc)

    def stats(self) -> dict[str, int]:
        """Letters sent, failed, not sent for the in-flight bound, and in flight; the store's rows written,
        refused or unwritten, and waiting (when there is a store)."""
        with self._lock:
            out = {"dead_letters_sent": self.sent, "dead_letters_failed": self.failed,
                   "dead_letters_not_sent": self.not_sent, "dead_letters_inflight": self.inflight,
                   "dead_letters_inflight_bytes": self.inflight_bytes}
        if self.store is not None:
            out.update({"dead_letters_stored": self.store.stored, "dead_letters_not_stored": self.store.not_stored,
                        "dead_letters_store_pending": self.store.pending()})
        return out

    def flush(self, timeout_s: float = 10.0) -> None:
        if self.store is not None:
            self.store.write()
        if self._producer is not None:
            self._producer.flush(timeout=timeout_s)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.close(timeout=5)
            except Exception as exc:  # closing must not raise
                log.debug("closing the receiver's DLQ producer: %s", exc)
