"""Retraining on recent labelled traffic (POST /admin/retrain).

Where the training data comes from: the worker keeps the raw `inputs` of its most
recent requests in a bounded in-memory buffer (`RecentTraffic`, keyed by request_id),
and a background Kafka consumer (`LabelListener`) reads `driftline.labels` and attaches
each label to its buffered request. A retrain trains on the buffered requests that
have a label. This keeps the worker independent of the collector's store layout and
needs only Kafka; the price is that a restarted worker starts with an empty buffer.

A request is idempotent per key: the first POST with an Idempotency-Key inserts a
`RetrainRequest` row (unique key) and starts one background job; any later POST with
that key answers the same row. Jobs run one at a time on a single thread. The new
version is trained with the production version's architecture, evaluated next to the
production version on the same holdout of recent traffic, registered with its
baseline, and promoted only when its log loss is lower (`training.is_better`).
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

import pandas as pd
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from driftline.config import TOPIC_LABELS
from driftline.events import EventError, parse_label
from driftline.store.db import session_scope
from driftline.store.models import RetrainRequest
from worker.dataset import RAW_COLUMNS
from worker.publish import publish
from worker.registry import Registry
from worker.training import TrainConfig, classification_metrics, is_better, predict_proba, train_model

log = logging.getLogger(__name__)


def binary_label(value: Any) -> int | None:
    """0/1 from a label event's value (0, 1, true, false, "0", "1"); None for anything else."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return int(value.strip())
    return None


class RecentTraffic:
    """The last `max_rows` requests' raw inputs, with their labels once they arrive (thread-safe)."""

    def __init__(self, max_rows: int):
        self.max_rows = max_rows
        self._rows: OrderedDict[str, list[Any]] = OrderedDict()  # request_id -> [inputs, label or None]
        self._lock = threading.Lock()
        self.labels_matched = 0
        self.labels_unmatched = 0

    def add_request(self, request_id: str, inputs: dict[str, Any]) -> None:
        with self._lock:
            self._rows[request_id] = [inputs, None]
            if len(self._rows) > self.max_rows:
                self._rows.popitem(last=False)

    def add_label(self, request_id: str, label: int) -> bool:
        with self._lock:
            row = self._rows.get(request_id)
            if row is None:
                self.labels_unmatched += 1
                return False
            row[1] = label
            self.labels_matched += 1
            return True

    def labelled(self) -> tuple[list[dict[str, Any]], list[int]]:
        with self._lock:
            pairs = [(inputs, label) for inputs, label in self._rows.values() if label is not None]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def counts(self) -> dict[str, int]:
        with self._lock:
            labelled = sum(1 for _, label in self._rows.values() if label is not None)
            return {"requests": len(self._rows), "labelled": labelled, "labels_unmatched": self.labels_unmatched}


class LabelListener:
    """A background consumer of `driftline.labels` feeding `RecentTraffic` (for one model).

    It reads every partition from the earliest offset without a consumer group: labels
    for requests no longer (or never) in the buffer are simply not matched. When Kafka
    is down it retries every few seconds; serving never waits for it.
    """

    def __init__(self, bootstrap_servers: str, model: str, traffic: RecentTraffic):
        self.bootstrap_servers = bootstrap_servers
        self.model = model
        self.traffic = traffic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="driftline-label-listener", daemon=True)

    def start(self) -> "LabelListener":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        from kafka import KafkaConsumer

        while not self._stop.is_set():
            try:
                consumer = KafkaConsumer(TOPIC_LABELS, bootstrap_servers=self.bootstrap_servers, group_id=None,
                                         auto_offset_reset="earliest", enable_auto_commit=False,
                                         client_id="driftline-worker-labels", bootstrap_timeout_ms=2_000)
            except Exception as exc:  # Kafka down: try again later
                log.debug("label listener cannot reach Kafka (%s); retrying", exc)
                self._stop.wait(3.0)
                continue
            try:
                while not self._stop.is_set():
                    for records in consumer.poll(timeout_ms=500, max_records=5_000).values():
                        for record in records:
                            self._handle(record.value)
            except Exception as exc:  # a broker restart: reconnect from scratch
                log.warning("label listener lost Kafka (%s); reconnecting", exc)
                self._stop.wait(1.0)
            finally:
                consumer.close()

    def _handle(self, raw: bytes) -> None:
        try:
            event = parse_label(raw)
        except EventError:
            return  # the collector dead-letters bad labels; here they are just not used
        if event.model != self.model:
            return
        label = binary_label(event.label)
        if label is not None:
            self.traffic.add_label(event.request_id, label)


@dataclass(frozen=True)
class RetrainTicket:
    id: int
    idempotency_key: str
    status: str
    created: bool  # False: an earlier request with this key answered


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def request_document(row: RetrainRequest) -> dict[str, Any]:
    return {"request_id": str(row.id), "idempotency_key": row.idempotency_key, "model": row.model,
            "status": row.status, "new_version": row.new_version, "promoted": row.promoted,
            "reason": row.reason, "response": row.response,
            "requested_at": row.requested_at.isoformat() if row.requested_at else None,
            "completed_at": row.completed_at.isoformat() if row.completed_at else None}


class RetrainManager:
    """Accepts retrain requests (idempotent per key) and runs them one at a time in the background."""

    def __init__(self, registry: Registry, model: str, traffic: RecentTraffic, min_rows: int,
                 current: Callable[[], Any], epochs: int = 4):
        self.registry = registry
        self.model = model
        self.traffic = traffic
        self.min_rows = min_rows
        self.current = current  # -> the LoadedVersion being served (net, transform, version, metrics)
        self.epochs = epochs
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="driftline-retrain")

    def submit(self, idempotency_key: str, reason: dict[str, Any]) -> RetrainTicket:
        db = self.registry.db_url
        with session_scope(db) as session:
            existing = session.scalar(select(RetrainRequest).where(RetrainRequest.idempotency_key == idempotency_key))
            if existing is not None:
                return RetrainTicket(existing.id, idempotency_key, existing.status, created=False)
        try:
            with session_scope(db) as session:
                row = RetrainRequest(idempotency_key=idempotency_key, model=self.model, version=self.current().version,
                                     reason=reason, status="requested")
                session.add(row)
                session.flush()
                ticket = RetrainTicket(row.id, idempotency_key, row.status, created=True)
        except IntegrityError:  # the same key raced in from another request
            with session_scope(db) as session:
                existing = session.scalar(select(RetrainRequest)
                                          .where(RetrainRequest.idempotency_key == idempotency_key))
                return RetrainTicket(existing.id, idempotency_key, existing.status, created=False)
        self._executor.submit(self._run, ticket.id)
        return ticket

    def get(self, request_id: int) -> dict[str, Any] | None:
        with session_scope(self.registry.db_url) as session:
            row = session.get(RetrainRequest, request_id)
            return None if row is None else request_document(row)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _set(self, request_id: int, **changes: Any) -> None:
        with session_scope(self.registry.db_url) as session:
            row = session.get(RetrainRequest, request_id)
            for key, value in changes.items():
                setattr(row, key, value)

    def _run(self, request_id: int) -> None:
        self._set(request_id, status="running")
        try:
            outcome = self._retrain(request_id)
        except Exception as exc:
            log.exception("retrain request %s failed", request_id)
            self._set(request_id, status="failed", response={"error": str(exc)}, completed_at=_utcnow())
            return
        self._set(request_id, completed_at=_utcnow(), **outcome)

    def _retrain(self, request_id: int) -> dict[str, Any]:
        inputs, labels = self.traffic.labelled()
        if len(inputs) < self.min_rows:
            return {"status": "rejected",
                    "response": {"error": f"not enough labelled traffic: {len(inputs)} labelled requests in the "
                                          f"buffer, {self.min_rows} needed",
                                 **self.traffic.counts()}}
        incumbent = self.current()
        size = str(incumbent.metrics.get("size", "default"))
        frame = pd.DataFrame(inputs, columns=list(RAW_COLUMNS))
        result = train_model(frame, labels, TrainConfig(size=size, epochs=self.epochs, seed=request_id))
        # Both models answer the same holdout rows of recent traffic.
        holdout_features = [result.features[i] for i in result.holdout_index]
        holdout_labels = result.labels[result.holdout_index]
        incumbent_scores = predict_proba(incumbent.net, incumbent.transform.encode(holdout_features), incumbent.device)
        incumbent_metrics = classification_metrics(incumbent_scores, holdout_labels)
        better = is_better(result.metrics, incumbent_metrics)
        reason = (f"retrain request {request_id}: holdout log loss {result.metrics['log_loss']:.4f} vs "
                  f"{incumbent_metrics['log_loss']:.4f} for version {incumbent.version}")
        published = publish(self.registry, self.model, result, promote=better, action="retrain", reason=reason,
                            description=f"retrained on {len(inputs)} labelled requests (retrain request {request_id})")
        return {"status": "succeeded", "new_version": published.version, "promoted": better,
                "response": {"candidate": result.metrics, "incumbent": {"version": incumbent.version,
                                                                       **incumbent_metrics},
                             "decision": reason}}
