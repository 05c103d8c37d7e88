"""Retraining on recent labelled traffic (POST /admin/retrain).

Where the training data comes from: the worker keeps the raw `inputs` of its most
recent requests in a bounded in-memory buffer (`RecentTraffic`, keyed by the worker's own
sequence numbers; labels join through a request_id map that refuses a repeated id),
and a background Kafka consumer (`LabelListener`) reads `driftline.labels` and attaches
each label to its buffered request. A retrain trains on the buffered requests that
have a label. This keeps the worker independent of the collector's store layout and
needs only Kafka; the price is that a restarted worker starts with an empty buffer.

A request is idempotent per key: the first POST with an Idempotency-Key inserts a
`RetrainRequest` row (unique key) and starts one background job; any later POST with
that key answers the same row. At most one request per model is pending (queued or
running) in a worker: a POST while one is pending, with any key or none, answers that
pending request (`duplicate: true`) and starts nothing, so a burst of POSTs makes one job. The new version is trained with
the production version's architecture, evaluated next to the production version on the
same holdout of recent traffic, registered with its baseline, and promoted only when its
log loss there is lower (`training.is_better`) and, on the production version's own
training holdout (stored with every version), at most `WORKER_RETRAIN_HOLDOUT_MARGIN`
higher (`training.is_not_worse`): recent traffic is chosen by clients and labelled by
whoever writes to Kafka, the training holdout is not.
With the request's ``rollout`` ("shadow" or "canary", from ``[alerts.retrain] rollout``) a winner is
not promoted but entered as the candidate of a new rollout plan, for the rollout analysis to judge.

Where the work runs: a job's thread in the worker only collects the labelled rows and
records the request's status; training, evaluation, the baseline and registration run
in a child process, a fresh interpreter (`run_retrain_job`), with one torch thread at a lower CPU
priority, so training competes with serving neither for the GIL nor for torch's thread
pool, and the kernel prefers the serving process's threads. The child gets plain data
(a DataFrame, the labels, the production version's registry entry) and registers the
new version itself; the worker's alias poll then picks up a promotion. The child is
terminated when the worker stops, and killed by the kernel if the worker dies (Linux).
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from driftline import defaults, vocabulary
from driftline.config import TOPIC_LABELS
from driftline.events import EventError, parse_label
from driftline.kafka_security import KafkaSecurity, kafka_python_options
from driftline.store.db import session_scope
from driftline.rollouts import RoutingPlan, canary_plan, shadow_plan
from driftline.store.models import RetrainRequest, utcnow
from driftline.store.rollouts import BY_POLICY, current_plan, set_plan
from driftline.supervisor import start_python_child
from driftline.worker.feature_transform import FeatureTransform
from driftline.worker.dataset import RAW_COLUMNS
from driftline.worker.model import load_model
from driftline.worker.publish import publish
from driftline.worker.registry import Registry, VersionInfo
from driftline.worker.training import (TrainConfig, classification_metrics, is_better, is_not_worse, predict_proba,
                             train_model)

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
    """The last `max_rows` requests' raw inputs, with their labels once they arrive (thread-safe).

    Rows are keyed by a sequence number the worker draws, never by the client's request_id:
    labels join through a map request_id -> row. A request_id seen twice while buffered is
    ambiguous (a label could belong to either request), so that row is poisoned: it is never
    trained on, and later requests or labels with that id are ignored until it leaves the
    buffer. A client can therefore not overwrite another request's inputs.
    """

    def __init__(self, max_rows: int):
        self.max_rows = max_rows
        self._rows: OrderedDict[int, list[Any]] = OrderedDict()  # row key -> [request_id, inputs or None, label]
        self._by_request: dict[str, int] = {}
        self._next_key = 0
        self._lock = threading.Lock()
        self.labels_matched = 0
        self.labels_unmatched = 0
        self.duplicate_ids = 0

    def add_request(self, request_id: str, inputs: dict[str, Any]) -> None:
        with self._lock:
            key = self._by_request.get(request_id)
            if key is not None:
                self._rows[key][1] = None  # ambiguous: neither request is trained on
                self.duplicate_ids += 1
                return
            key, self._next_key = self._next_key, self._next_key + 1
            self._rows[key] = [request_id, inputs, None]
            self._by_request[request_id] = key
            if len(self._rows) > self.max_rows:
                _, (evicted, _inputs, _label) = self._rows.popitem(last=False)
                del self._by_request[evicted]

    def add_label(self, request_id: str, label: int) -> bool:
        with self._lock:
            key = self._by_request.get(request_id)
            row = self._rows[key] if key is not None else None
            if row is None or row[1] is None:
                self.labels_unmatched += 1
                return False
            row[2] = label
            self.labels_matched += 1
            return True

    def labelled(self) -> tuple[list[dict[str, Any]], list[int]]:
        with self._lock:
            pairs = [(inputs, label) for _, inputs, label in self._rows.values()
                     if inputs is not None and label is not None]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def counts(self) -> dict[str, int]:
        with self._lock:
            labelled = sum(1 for _, inputs, label in self._rows.values() if inputs is not None and label is not None)
            return {"requests": len(self._rows), "labelled": labelled, "labels_unmatched": self.labels_unmatched,
                    "duplicate_request_ids": self.duplicate_ids}


class LabelListener:
    """A background consumer of `driftline.labels` feeding `RecentTraffic` (for one model).

    It reads every partition from the earliest offset without a consumer group: labels
    for requests no longer (or never) in the buffer are simply not matched. When Kafka
    is down it retries every few seconds; serving never waits for it.
    """

    def __init__(self, bootstrap_servers: str, model: str, traffic: RecentTraffic,
                 security: KafkaSecurity | None = None):
        self.bootstrap_servers = bootstrap_servers
        self.security = security
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
                                         client_id="driftline-worker-labels", bootstrap_timeout_ms=2_000,
                                         **kafka_python_options(self.security))
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


def request_document(row: RetrainRequest) -> dict[str, Any]:
    return {"request_id": str(row.id), "idempotency_key": row.idempotency_key, "model": row.model,
            "status": row.status, "new_version": row.new_version, "promoted": row.promoted,
            "reason": row.reason, "response": row.response,
            "requested_at": row.requested_at.isoformat() if row.requested_at else None,
            "completed_at": row.completed_at.isoformat() if row.completed_at else None}


@dataclass(frozen=True)
class RetrainJob:
    """What the training process needs, as plain picklable data."""

    request_id: int
    db_url: str
    artifacts_dir: str
    model: str
    inputs: pd.DataFrame
    labels: list[int]
    epochs: int
    incumbent: VersionInfo  # the production version when the job started: its architecture and holdout score
    torch_threads: int = defaults.WORKER_RETRAIN_TORCH_THREADS
    holdout_margin: float = defaults.WORKER_RETRAIN_HOLDOUT_MARGIN
    # what a winning candidate becomes (vocabulary.RETRAIN_ROLLOUTS; the request's "rollout")
    rollout: str = defaults.RETRAIN_ROLLOUT
    canary_weight: float = defaults.ROLLOUT_CANARY_STEPS[0]


def run_retrain_job(job: RetrainJob) -> dict[str, Any]:
    """Train, evaluate against the incumbent, register (and maybe promote): the retrain's outcome columns.

    Runs in the child process; callable in-process too (it only reads `job` and writes the registry).
    """
    import torch

    started = time.perf_counter()
    torch.set_num_threads(job.torch_threads)
    incumbent = job.incumbent
    size = str(incumbent.metrics.get("size", "default"))
    result = train_model(job.inputs, job.labels, TrainConfig(size=size, epochs=job.epochs, seed=job.request_id))
    # Both models answer the same holdout rows of recent traffic.
    holdout_features = [result.features[i] for i in result.holdout_index]
    holdout_labels = result.labels[result.holdout_index]
    registry = Registry(job.db_url, Path(job.artifacts_dir))
    incumbent_net = load_model(registry.artifact_file(incumbent), incumbent.artifact_sha256, "cpu")
    incumbent_transform = FeatureTransform.from_dict(incumbent.transform)
    incumbent_scores = predict_proba(incumbent_net, incumbent_transform.encode(holdout_features))
    incumbent_metrics = classification_metrics(incumbent_scores, holdout_labels)
    better = is_better(result.metrics, incumbent_metrics)
    # The recent traffic is untrusted (clients choose inputs, anyone on Kafka sends labels): the
    # candidate must also hold up on the incumbent's own training holdout.
    trusted = _on_training_holdout(registry, incumbent, incumbent_net, incumbent_transform, result)
    safe = trusted is not None and is_not_worse(trusted["candidate"], trusted["incumbent"], job.holdout_margin)
    promote = better and safe
    reason = (f"retrain request {job.request_id}: recent-traffic holdout log loss {result.metrics['log_loss']:.4f} "
              f"vs {incumbent_metrics['log_loss']:.4f} for version {incumbent.version}; "
              + (f"version {incumbent.version}'s training holdout: {trusted['candidate']['log_loss']:.4f} vs "
                 f"{trusted['incumbent']['log_loss']:.4f} (margin {job.holdout_margin:.0%})" if trusted is not None
                 else f"version {incumbent.version} kept no training holdout, so the candidate is not promoted"))
    as_rollout = promote and job.rollout != vocabulary.STEP_PROMOTE
    published = publish(registry, job.model, result, promote=promote and not as_rollout, action="retrain",
                        reason=reason, description=f"retrained on {len(job.inputs)} labelled requests "
                                                   f"(retrain request {job.request_id})")
    plan = None
    if as_rollout:
        plan, reason = _enter_rollout(job, published.version, reason)
    return {"status": "succeeded", "new_version": published.version, "promoted": promote and not as_rollout,
            "response": {"rollout": plan.to_dict() if plan is not None else None, "candidate": result.metrics,
                         "incumbent": {"version": incumbent.version, **incumbent_metrics},
                         "training_holdout": trusted, "decision": reason,
                         "trainer": {"pid": os.getpid(), "torch_threads": torch.get_num_threads(),
                                     "niceness": os.nice(0), "seconds": round(time.perf_counter() - started, 2)}}}


def _enter_rollout(job: RetrainJob, version: str, reason: str) -> tuple[RoutingPlan | None, str]:
    """Make the winning `version` the candidate of a new shadow or canary plan; (the plan or None, the decision).

    A plan already running (a person's, or an earlier retrain's) is left alone: the version stays registered.
    """
    plan = (shadow_plan(job.model, version) if job.rollout == vocabulary.ROLLOUT_SHADOW
            else canary_plan(job.model, version, job.canary_weight))
    with session_scope(job.db_url) as session:
        running = current_plan(session, job.model)
        if running is not None:
            return None, (f"{reason}; version {version} is registered but not entered as a {job.rollout}: the "
                          f"{running.mode} of version {running.candidate} is still running")
        set_plan(session, plan, by=BY_POLICY, reason=f"retrained version entered as a {job.rollout} ({reason})")
    return plan, f"{reason}; version {version} entered as a {job.rollout}"


def _on_training_holdout(registry: Registry, incumbent: VersionInfo, incumbent_net: Any,
                         incumbent_transform: FeatureTransform, result: Any) -> dict[str, Any] | None:
    """Both models' metrics on the incumbent's stored training holdout; None when it kept none."""
    holdout = registry.holdout(incumbent.model, incumbent.version)
    if holdout is None or not holdout["labels"]:
        return None
    labels = np.asarray(holdout["labels"], dtype=np.int64)
    return {"version": incumbent.version,
            "candidate": classification_metrics(
                predict_proba(result.model, result.transform.encode(holdout["features"])), labels),
            "incumbent": classification_metrics(
                predict_proba(incumbent_net, incumbent_transform.encode(holdout["features"])), labels)}


def child_main() -> None:
    """Entry point of the training process: argv = socket fd, the worker's pid; one job in, one answer out."""
    from driftline.supervisor import set_parent_death_signal

    fd, worker_pid = int(sys.argv[1]), int(sys.argv[2])
    set_parent_death_signal(signal.SIGKILL)  # a SIGKILLed worker leaves no training behind
    if os.getppid() != worker_pid:  # the worker died before the line above
        os._exit(1)
    # Ctrl-C reaches the whole process group; the worker's shut-down stops this process itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    job: RetrainJob = conn.recv()
    try:
        conn.send(("succeeded", run_retrain_job(job)))
    except Exception as exc:
        conn.send(("failed", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    finally:
        conn.close()


class RetrainInterrupted(Exception):
    """The worker stopped while the request was waiting or training."""


@dataclass(frozen=True)
class RetrainLimits:
    """What one retraining may take: its epochs, its torch threads, its process's niceness, and how long it is
    given to stop before it is killed."""

    epochs: int = 4
    torch_threads: int = defaults.WORKER_RETRAIN_TORCH_THREADS
    niceness: int = defaults.WORKER_RETRAIN_NICENESS
    stop_grace_s: float = defaults.WORKER_RETRAIN_STOP_GRACE_SECONDS


class RetrainManager:
    """Accepts retrain requests (idempotent per key) and runs them one at a time, each in a child process."""

    def __init__(self, registry: Registry, model: str, traffic: RecentTraffic, min_rows: int,
                 current: Callable[[], Any], limits: RetrainLimits = RetrainLimits()):
        self.registry = registry
        self.model = model
        self.traffic = traffic
        self.min_rows = min_rows
        self.current = current  # -> the LoadedVersion being served (its `info`: the registry entry)
        self.epochs = limits.epochs
        self.torch_threads = limits.torch_threads
        self.niceness = limits.niceness
        self.stop_grace_s = limits.stop_grace_s
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="driftline-retrain")
        self._lock = threading.Lock()
        self._submit_lock = threading.Lock()  # one submit at a time: the pending check and the insert are one step
        self._pending: int | None = None  # id of the request queued or running, if any
        self._stopping = False
        self.process: subprocess.Popen[bytes] | None = None  # the running training process, if any

    def submit(self, idempotency_key: str, reason: dict[str, Any]) -> RetrainTicket:
        with self._submit_lock:
            return self._submit(idempotency_key, reason)

    def _submit(self, idempotency_key: str, reason: dict[str, Any]) -> RetrainTicket:
        db = self.registry.db_url
        with session_scope(db) as session:
            existing = session.scalar(select(RetrainRequest).where(RetrainRequest.idempotency_key == idempotency_key))
            if existing is not None:
                return RetrainTicket(existing.id, idempotency_key, existing.status, created=False)
            pending = session.get(RetrainRequest, self._pending) if self._pending is not None else None
            if pending is not None and pending.status in ("requested", "running"):
                return RetrainTicket(pending.id, pending.idempotency_key, pending.status, created=False)
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
        try:
            self._pending = ticket.id
            self._executor.submit(self._run, ticket.id)
        except RuntimeError:  # after shutdown(): recorded, never run
            self._set(ticket.id, status="failed", response={"error": "interrupted: the worker is shutting down"},
                      completed_at=utcnow())
            return RetrainTicket(ticket.id, idempotency_key, "failed", created=True)
        return ticket

    def get(self, request_id: int) -> dict[str, Any] | None:
        with session_scope(self.registry.db_url) as session:
            row = session.get(RetrainRequest, request_id)
            return None if row is None else request_document(row)

    def shutdown(self) -> None:
        """Stop the running child (SIGTERM, then SIGKILL after the grace) and drop queued requests."""
        with self._lock:
            self._stopping = True
            process = self.process
        self._executor.shutdown(wait=False, cancel_futures=True)
        if process is not None:
            _stop_process(process, self.stop_grace_s)
        self._executor.shutdown(wait=True)  # the job's thread records the interruption

    def _set(self, request_id: int, **changes: Any) -> None:
        with session_scope(self.registry.db_url) as session:
            row = session.get(RetrainRequest, request_id)
            for key, value in changes.items():
                setattr(row, key, value)

    def _run(self, request_id: int) -> None:
        self._set(request_id, status="running")
        try:
            outcome = self._retrain(request_id)
        except RetrainInterrupted as exc:
            log.warning("retrain request %s interrupted: %s", request_id, exc)
            self._set(request_id, status="failed", response={"error": f"interrupted: {exc}"}, completed_at=utcnow())
            return
        except Exception as exc:
            log.exception("retrain request %s failed", request_id)
            self._set(request_id, status="failed", response={"error": str(exc)}, completed_at=utcnow())
            return
        self._set(request_id, completed_at=utcnow(), **outcome)

    def _retrain(self, request_id: int) -> dict[str, Any]:
        inputs, labels = self.traffic.labelled()
        if len(inputs) < self.min_rows:
            return {"status": "rejected",
                    "response": {"error": f"not enough labelled traffic: {len(inputs)} labelled requests in the "
                                          f"buffer, {self.min_rows} needed",
                                 **self.traffic.counts()}}
        with session_scope(self.registry.db_url) as session:
            rollout = (session.get(RetrainRequest, request_id).reason or {}).get("rollout", defaults.RETRAIN_ROLLOUT)
        if rollout not in vocabulary.RETRAIN_ROLLOUTS:
            return {"status": "rejected",
                    "response": {"error": f"rollout must be one of {', '.join(vocabulary.RETRAIN_ROLLOUTS)}, "
                                          f"got {rollout!r}"}}
        job = RetrainJob(request_id=request_id, db_url=self.registry.db_url,
                         artifacts_dir=str(self.registry.artifacts_dir), model=self.model,
                         inputs=pd.DataFrame(inputs, columns=list(RAW_COLUMNS)), labels=labels, epochs=self.epochs,
                         incumbent=self.current().info, torch_threads=self.torch_threads, rollout=rollout)
        return self._in_child(job)

    def _in_child(self, job: RetrainJob) -> dict[str, Any]:
        with self._lock:
            if self._stopping:
                raise RetrainInterrupted("the worker is shutting down")
            # Lower priority before the imports (torch, pandas: seconds of CPU) as well.
            process, conn = start_python_child(
                f"import os; os.nice({int(self.niceness)}); from driftline.worker.retrain import child_main; child_main()",
                str(os.getpid()))
            self.process = process
        try:
            try:
                conn.send(job)
                message = conn.recv()
            except (EOFError, OSError):
                message = None
            finally:
                conn.close()
            try:
                process.wait(timeout=self.stop_grace_s)
            except subprocess.TimeoutExpired:  # it answered but hangs on exit: its work is done
                _stop_process(process, self.stop_grace_s)
        finally:
            with self._lock:
                self.process = None
        if message is None:
            # SIGTERM or SIGINT reach the child straight from its process group when the whole stack stops,
            # possibly before this worker hears of it: a stop, not a failure.
            if self._stopping or process.poll() in (-signal.SIGTERM, -signal.SIGINT):
                raise RetrainInterrupted("the worker stopped during training")
            raise RuntimeError(f"the training process exited with code {process.poll()} without an answer")
        if message[0] == "failed":
            log.error("retrain request %s failed in the training process:\n%s", job.request_id, message[2])
            raise RuntimeError(message[1])
        return message[1]


def _stop_process(process: subprocess.Popen[bytes], grace_s: float) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
