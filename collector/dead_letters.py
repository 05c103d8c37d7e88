"""Dead letters: a message that fails validation, with why and where it came from.

Every invalid message goes two ways, neither of them silent:

* to the Kafka topic ``driftline.inference.dlq``: the original bytes untouched, with
  headers ``driftline.reason``, ``driftline.field``, ``driftline.topic``,
  ``driftline.partition``, ``driftline.offset`` (so a fixed message can be replayed);
* to the store's ``dead_letters`` table, in the same transaction as the offsets that
  consumed it: reason, field, partition, offset, the model when it can be read, and the
  raw bytes cut to `defaults.COLLECTOR_DEAD_LETTER_RAW_BYTES` (``raw_size`` keeps the size).

The store is exactly once. The topic is at least once: messages are produced and
acknowledged before the transaction commits, so a crash between the two produces them
again when the offsets are replayed.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from driftline import defaults
from driftline.config import TOPIC_DEAD_LETTERS
from driftline.dead_letters import dead_letter_headers, dead_letter_values, model_of_raw
from driftline.events import EventError
from driftline.kafka_security import KafkaSecurity, kafka_python_options

log = logging.getLogger(__name__)


@dataclass(slots=True)
class DeadLetterRow:
    topic: str
    partition: int
    offset: int
    reason: str
    field: str | None
    model: str | None
    raw: bytes  # the whole message; cut to the bound only when stored
    published: bool = False  # acknowledged on the DLQ topic (not produced again on a flush retry)
    # False: a valid event whose prediction or label row was refused (its request id taken): store only
    to_topic: bool = True

    @classmethod
    def from_error(cls, topic: str, partition: int, offset: int, value: bytes | None, error: EventError,
                   ) -> "DeadLetterRow":
        raw = bytes(value) if value is not None else b""
        return cls(topic, partition, offset, error.reason, error.field, model_of_raw(raw), raw)

    def store_values(self, raw_bound: int = defaults.COLLECTOR_DEAD_LETTER_RAW_BYTES) -> dict[str, Any]:
        """Column values for the `dead_letters` table."""
        return dead_letter_values(self.topic, self.partition, self.offset, self.reason, self.field, self.model,
                                  self.raw, raw_bound)

    def headers(self) -> list[tuple[str, bytes]]:
        return dead_letter_headers(self.reason, self.field, self.topic, self.partition, self.offset)


class DeadLetterPublisher:
    """Produces dead letters to the DLQ topic; `publish` returns once Kafka acknowledged them all."""

    def __init__(self, bootstrap_servers: str, topic: str = TOPIC_DEAD_LETTERS, timeout_s: float = 10.0,
                 security: KafkaSecurity | None = None):
        self.bootstrap_servers = bootstrap_servers
        self.security = security
        self.topic = topic
        self.timeout_s = timeout_s
        self._producer: Any = None

    def _connect(self) -> Any:
        from kafka import KafkaProducer

        # No idempotence: a restarted in-memory broker would fail an idempotent producer for good.
        return KafkaProducer(bootstrap_servers=self.bootstrap_servers, client_id="driftline-collector-dlq",
                             enable_idempotence=False, acks="all", linger_ms=5, max_block_ms=5_000,
                             bootstrap_timeout_ms=5_000, request_timeout_ms=int(self.timeout_s * 1000),
                             delivery_timeout_ms=int(self.timeout_s * 1000) + 1_000,
                             max_request_size=16 << 20, reconnect_backoff_max_ms=1_000,
                             **kafka_python_options(self.security))

    def publish(self, letters: list[DeadLetterRow]) -> None:
        """Send the letters not yet acknowledged; raises (KafkaError, ...) if any is not acknowledged."""
        todo = [letter for letter in letters if letter.to_topic and not letter.published]
        if not todo:
            return
        if self._producer is None:
            self._producer = self._connect()
        try:
            futures = [(letter, self._producer.send(self.topic, value=letter.raw, headers=letter.headers()))
                       for letter in todo]
            self._producer.flush(timeout=self.timeout_s)
            for letter, future in futures:
                future.get(timeout=self.timeout_s)
                letter.published = True
        except Exception:
            self.close()  # a fresh producer next time: the old one may be wedged on a dead broker
            raise

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.close(timeout=2)
            except Exception as exc:  # closing must not raise; nothing unacknowledged is marked published
                log.debug("closing the DLQ producer: %s", exc)
