"""The receiver's dead letters on `driftline.inference.dlq`, in the collector's shape (driftline.dead_letters).

A letter carries the bytes that could not become an event: a CloudEvent half's body, a JSON line of
POST /events, or one built event that failed validation; for a half, `driftline.ce_id` and
`driftline.ce_type` headers say which. `driftline.topic` names the receiver's endpoint it came
through (partition and offset are -1, or the line number of a JSON line in `driftline.offset`).
Sending is asynchronous and bounded (kafka-python's buffer); a letter Kafka does not take is
logged and counted in `failed`, never silently lost. With a `DeadLetterStore`, each letter is also
a row of the store's `dead_letters` table (receiver/dead_letter_store.py).
"""
from __future__ import annotations

import logging
import threading
from typing import Any

from driftline import defaults
from driftline.config import TOPIC_DEAD_LETTERS
from driftline.dead_letters import dead_letter_headers, dead_letter_values, model_of_raw
from driftline.kafka_security import KafkaSecurity, kafka_python_options
from driftline.receiver.dead_letter_store import DeadLetterStore

log = logging.getLogger(__name__)


class DeadLetterSink:
    def __init__(self, bootstrap_servers: str, security: KafkaSecurity | None = None,
                 topic: str = TOPIC_DEAD_LETTERS, store: DeadLetterStore | None = None):
        self.bootstrap_servers = bootstrap_servers
        self.store = store
        self.security = security
        self.topic = topic
        self.sent = 0
        self.failed = 0
        self._lock = threading.Lock()
        self._producer: Any = None

    def _connect(self) -> Any:
        from kafka import KafkaProducer

        # No idempotence: a restarted in-memory broker would fail an idempotent producer for good.
        return KafkaProducer(bootstrap_servers=self.bootstrap_servers, client_id="driftline-receiver-dlq",
                             enable_idempotence=False, acks="all", linger_ms=5, max_block_ms=5_000,
                             max_request_size=16 << 20, reconnect_backoff_max_ms=1_000,
                             **kafka_python_options(self.security))

    def send(self, raw: bytes, reason: str, field: str | None, origin: str, offset: int = -1,
             extra: dict[str, str] | None = None, model: str | None = None) -> None:
        """`model`: the letter's model when the caller knows it (a half's service), else read from `raw`."""
        if self.store is not None:
            self.store.add(dead_letter_values(origin, None, offset if offset >= 0 else None, reason, field,
                                              model or model_of_raw(raw), raw, defaults.COLLECTOR_DEAD_LETTER_RAW_BYTES))
        headers = dead_letter_headers(reason, field, origin, -1, offset, extra)
        try:
            with self._lock:
                if self._producer is None:
                    self._producer = self._connect()
                future = self._producer.send(self.topic, value=raw, headers=headers)
            future.add_callback(self._sent).add_errback(self._failed, reason)
        except Exception as exc:  # Kafka unreachable or the buffer full: counted and said, not hidden
            self._failed(exc, reason)

    def _sent(self, _metadata: Any) -> None:
        with self._lock:
            self.sent += 1

    def _failed(self, exc: BaseException, reason: str) -> None:
        with self._lock:
            self.failed += 1
        log.error("a dead letter (%s) was not written to %s: %s", reason, self.topic, exc)

    def store_stats(self) -> dict[str, int]:
        """Rows written to the store, refused or unwritten, and waiting (empty without a store)."""
        if self.store is None:
            return {}
        return {"dead_letters_stored": self.store.stored, "dead_letters_not_stored": self.store.not_stored,
                "dead_letters_store_pending": self.store.pending()}

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
