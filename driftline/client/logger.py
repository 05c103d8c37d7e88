"""`InferenceLogger`: inference and label events in the contract's shape, handed to a sender."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Mapping

from driftline.client.ids import new_id, now_rfc3339
from driftline.client.inference_call import InferenceCall, LoggerIdentity
from driftline.client.process_sender import ProcessEventSender
from driftline.client.sender import EventSender, SenderStats
from driftline.client.tuning import DEFAULT_MAX_BUFFERED
from driftline.config import TOPIC_INFERENCE, TOPIC_LABELS
from driftline.events import LABEL_SCHEMA, encode_event
from driftline.kafka_security import KafkaSecurity, kafka_python_options, librdkafka_config


class InferenceLogger:
    """Inference and label events in the contract's shape, sent through an `EventSender`.

    `producer_process=True` runs the Kafka producer in a child process
    (`ProcessEventSender`, with confluent-kafka there). `producer_config` adds to the
    producer's settings: kafka-python options on a thread, librdkafka properties in the
    child. The child halves the serving process's CPU per event against the producer on a
    thread (`bench/worker.py --logger-cost`).
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
        self.identity = LoggerIdentity(self.model, self.version, device, self.tags)
        self._soon: list[InferenceCall] = []  # log_soon's calls, until the end of the loop's iteration
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
            error: str | None = None, tags: Mapping[str, str] | None = None, role: str | None = None,
            feature_ts: Mapping[str, str | int] | None = None,
            feature_age_ms: Mapping[str, float] | None = None,
            embeddings: Mapping[str, Any] | None = None, tokens_in: int | None = None,
            tokens_out: int | None = None, predicted_class: Any = None) -> str:
        """Queue one inference event; returns its event_id. Never blocks; see the module docstring.

        The event is encoded here: one that is not JSON-encodable raises `orjson.JSONEncodeError`.
        `latency_ms` is the total in milliseconds, or a dict with at least "total"
        (the worker also sends "queue" and "compute"). `version` overrides the
        logger's version for this event (a server that hot-swaps models). `role` says which part of a
        rollout answered (driftline.rollouts: production, shadow, canary, arm:<version>).
        `feature_ts` (feature -> event time of the value, RFC 3339 or epoch ms) or `feature_age_ms`
        (feature -> age in ms) say how fresh the features fetched from an online store were.
        `embeddings`: named vectors (numpy arrays or lists; one dimension per name and model version), e.g. the
        prompt's sentence embedding, for embedding drift; a vector that is not one-dimensional raises ValueError.
        A generated (LLM) answer gives `latency_ms` its "ttft" (time to the first token) and "tpot" (time per output
        token after the first) beside "total", and its token counts `tokens_in` / `tokens_out` (whole numbers from 0
        to `defaults.TOKENS_MAX`; another value raises ValueError). `predicted_class`: the model's own decision beside
        its score (a binary classifier's 1 or 0), which its estimated accuracy, precision, recall and F1 follow.
        """
        # No message key: nothing downstream needs per-key order (labels join on request_id
        # in the store), and keyed partitioning costs a pure-Python murmur2 per event.
        # Encoded here, not by the sender thread: the caller's dicts need no copies, and
        # the event leaves no objects for the garbage collector to scan while it waits.
        call = InferenceCall(features, prediction, latency_ms, ts if ts is not None else now_rfc3339(),
                             event_id or new_id(), request_id, inputs, entity_id, version, batch_size, cache_hit,
                             status, error, tags, role, feature_ts, feature_age_ms, embeddings, tokens_in,
                             tokens_out, predicted_class)
        self.sender.submit(self.inference_topic, None, encode_event(call.event(self.identity)))
        return call.event_id

    def log_soon(self, features: Mapping[str, Any], prediction: Any, latency_ms: float | Mapping[str, float], *,
                 request_id: str | None = None, inputs: Mapping[str, Any] | None = None,
                 entity_id: str | None = None, version: str | None = None, ts: str | int | None = None,
                 event_id: str | None = None, batch_size: int | None = None, cache_hit: bool | None = None,
                 status: str = "ok", error: str | None = None, tags: Mapping[str, str] | None = None,
                 role: str | None = None, feature_ts: Mapping[str, str | int] | None = None,
                 feature_age_ms: Mapping[str, float] | None = None,
                 embeddings: Mapping[str, Any] | None = None, tokens_in: int | None = None,
                 tokens_out: int | None = None, predicted_class: Any = None) -> str:
        """As `log`, for a server on an asyncio event loop; call it on the loop's thread.

        The event's id and time are taken now; building and encoding it waits for the end of
        the loop's current iteration, where the events of every request answered in that
        iteration are built and encoded one after another, which costs the loop less than
        each request building its own event between its other work.
        The caller must not change the dicts it passes until then (the worker builds fresh
        ones per request). An event that turns out not to be JSON-encodable (or a
        `latency_ms` that is neither a number nor a mapping) is logged and counted as failed
        instead of raising; the other events of the iteration go out.
        """
        call = InferenceCall(features, prediction, latency_ms, ts if ts is not None else now_rfc3339(),
                             event_id or new_id(), request_id, inputs, entity_id, version, batch_size, cache_hit,
                             status, error, tags, role, feature_ts, feature_age_ms, embeddings, tokens_in,
                             tokens_out, predicted_class)
        with self._soon_lock:  # `flush` and `close` may take the list from another thread
            if not self._soon:
                asyncio.get_running_loop().call_soon(self._log_soon_events)
            self._soon.append(call)
        return call.event_id

    def _log_soon_events(self) -> None:
        """Build, encode and queue what `log_soon` collected (on the loop, or in `close`)."""
        with self._soon_lock:
            pending, self._soon = self._soon, []
        if not pending:
            return
        identity = self.identity
        try:
            values = [encode_event(call.event(identity)) for call in pending]
        except Exception:  # rare: one by one, so only the bad ones fail (log() would have raised to its caller)
            values = []
            for call in pending:
                try:
                    values.append(encode_event(call.event(identity)))
                except Exception as exc:
                    self.sender.count_unsendable(self.inference_topic, exc)
        self.sender.submit_many(self.inference_topic, values)

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
