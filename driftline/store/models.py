"""The store's tables (SQLAlchemy 2). Created only by the Alembic migrations in migrations/.

Times that belong to the data (event time, window bounds) are epoch milliseconds
in BIGINT columns, exact and identical on SQLite and PostgreSQL; wall-clock
bookkeeping times (created, updated, sent) are timezone-aware datetimes.
Summaries that only the detectors read (baselines, window states) are stored as
JSON or binary blobs, not exploded into rows: a window's cost stays constant.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (JSON, BigInteger, Boolean, DateTime, Float, Index, Integer, LargeBinary,
                        MetaData, String, Text, UniqueConstraint, text)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from driftline.events import MODEL_CHARS, REQUEST_ID_CHARS, SEGMENT_CHARS, VERSION_CHARS



def utcnow() -> datetime:
    return datetime.now(timezone.utc)


NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


# --- Model registry -------------------------------------------------------------

class ModelVersion(Base):
    """An immutable, registered model version: its artifact and what it was trained on."""

    __tablename__ = "model_versions"
    __table_args__ = (UniqueConstraint("model", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS))
    version: Mapped[str] = mapped_column(String(VERSION_CHARS))
    artifact_path: Mapped[str | None] = mapped_column(Text)
    artifact_sha256: Mapped[str | None] = mapped_column(String(64))
    training_data_sha256: Mapped[str | None] = mapped_column(String(64))
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    feature_schema: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    # The feature transform's spec (driftline.transform), re-run for parity-skew checks.
    transform: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # "registered" | "production" | "archived"; the production alias is the source of truth.
    stage: Mapped[str] = mapped_column(String(20), default="registered")
    description: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ModelAlias(Base):
    """A movable name (e.g. "production") pointing at one version of a model."""

    __tablename__ = "model_aliases"

    model: Mapped[str] = mapped_column(String(MODEL_CHARS), primary_key=True)
    alias: Mapped[str] = mapped_column(String(50), primary_key=True)
    version: Mapped[str] = mapped_column(String(VERSION_CHARS))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class AliasEvent(Base):
    """History of alias moves, so rollback knows the previous version and the dashboard shows the story."""

    __tablename__ = "alias_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS), index=True)
    alias: Mapped[str] = mapped_column(String(50))
    version: Mapped[str] = mapped_column(String(VERSION_CHARS))
    previous_version: Mapped[str | None] = mapped_column(String(VERSION_CHARS))
    action: Mapped[str] = mapped_column(String(20))  # promote | rollback | retrain
    reason: Mapped[str | None] = mapped_column(Text)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RolloutPlan(Base):
    """A model's current rollout routing plan (driftline.rollouts), next to its production alias; none: production only.

    Written only by `driftline.store.rollouts`; workers poll it as they poll the alias.
    """

    __tablename__ = "rollout_plans"

    model: Mapped[str] = mapped_column(String(MODEL_CHARS), primary_key=True)
    mode: Mapped[str] = mapped_column(String(20))  # shadow | canary | ab
    # RoutingPlan.to_dict(): candidate, and share (shadow), weight (canary) or arms (ab)
    plan: Mapped[dict[str, Any]] = mapped_column(JSON)
    # the production version when the plan was set: the rollout compares its candidate with it
    production_version: Mapped[str | None] = mapped_column(String(VERSION_CHARS))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class RolloutStep(Base):
    """Append-only history of plan changes: who changed it (cli, policy), from what, to what."""

    __tablename__ = "rollout_steps"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS), index=True)
    by: Mapped[str] = mapped_column(String(20))  # cli | policy
    action: Mapped[str] = mapped_column(String(20))  # set | clear
    from_plan: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    to_plan: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    reason: Mapped[str | None] = mapped_column(Text)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RolloutVerdictRecord(Base):
    """The rollout analysis' verdict on a candidate for one window (re-analysis replaces it)."""

    __tablename__ = "rollout_verdicts"
    __table_args__ = (UniqueConstraint("model", "candidate", "window_start_ms"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS))
    candidate: Mapped[str] = mapped_column(String(VERSION_CHARS))
    window_start_ms: Mapped[int] = mapped_column(BigInteger)
    window_end_ms: Mapped[int] = mapped_column(BigInteger)
    verdict: Mapped[str] = mapped_column(String(20))  # pass | fail | inconclusive
    reasons: Mapped[list[Any]] = mapped_column(JSON, default=list)
    # the comparisons behind the verdict (metric, value, interval, arm) for the dashboard's intervals
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    evaluated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class BaselineRecord(Base):
    """A version's training baseline (driftline.baseline.Baseline.to_dict())."""

    __tablename__ = "baselines"
    __table_args__ = (UniqueConstraint("model", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS))
    version: Mapped[str] = mapped_column(String(VERSION_CHARS))
    rows: Mapped[int] = mapped_column(BigInteger, default=0)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON)
    source: Mapped[str | None] = mapped_column(Text)  # "train" or the file it was computed from
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


# --- Collector ------------------------------------------------------------------

class WindowStateRecord(Base):
    """A partial window state: one per (model, version, window, Kafka topic partition).

    Several collectors each own some partitions; the detectors merge the rows of a window.
    `partition` >= 0 is a partition of driftline.inference; a negative one holds labels joined
    from driftline.labels partition ``-1 - partition`` (events = 0; see docs/collector.md).
    """

    __tablename__ = "window_states"
    __table_args__ = (
        UniqueConstraint("model", "version", "window_start_ms", "partition"),
        Index("ix_window_states_window", "window_start_ms"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS))
    version: Mapped[str] = mapped_column(String(VERSION_CHARS))
    window_start_ms: Mapped[int] = mapped_column(BigInteger)
    window_end_ms: Mapped[int] = mapped_column(BigInteger)
    partition: Mapped[int] = mapped_column(Integer)
    events: Mapped[int] = mapped_column(BigInteger, default=0)
    # Events folded in after the window had been evaluated (re-evaluation picks them up).
    late_events: Mapped[int] = mapped_column(BigInteger, default=0)
    state: Mapped[bytes] = mapped_column(LargeBinary)  # driftline.window_state.WindowState.to_bytes()
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


# The `partition` of the one row a judged window's partial states are merged into (scheduler/compaction.py):
# below every label row's (-1 - partition), so it never meets a collector's row.
MERGED_PARTITION = -2**31


class WindowRollup(Base):
    """The merge of a model version's window states over one hour or one day (scheduler/rollups.py).

    Written by retention once the windows are past the re-evaluation horizon (hourly) and later (daily):
    window states merge exactly, so a rollup is the state of every event of its hour or day.
    """

    __tablename__ = "window_rollups"
    __table_args__ = (
        UniqueConstraint("model", "version", "grain", "start_ms"),
        Index("ix_window_rollups_start", "start_ms"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS))
    version: Mapped[str] = mapped_column(String(VERSION_CHARS))
    grain: Mapped[str] = mapped_column(String(10))  # vocabulary: "hour" | "day"
    start_ms: Mapped[int] = mapped_column(BigInteger)
    end_ms: Mapped[int] = mapped_column(BigInteger)
    windows: Mapped[int] = mapped_column(Integer, default=0)  # the windows merged into it
    events: Mapped[int] = mapped_column(BigInteger, default=0)
    late_events: Mapped[int] = mapped_column(BigInteger, default=0)
    state: Mapped[bytes] = mapped_column(LargeBinary)  # WindowState.to_bytes()
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class ConsumerOffset(Base):
    """The next offset to read per (group, topic, partition), written in the same transaction as the data."""

    __tablename__ = "consumer_offsets"

    group_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    topic: Mapped[str] = mapped_column(String(200), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    next_offset: Mapped[int] = mapped_column(BigInteger)
    # Kafka's id of the topic incarnation next_offset refers to: a recreated topic (or a
    # restarted in-memory broker) starts a new log, and offsets of the old one mean nothing.
    topic_id: Mapped[str | None] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class PartitionWatermark(Base):
    """How far in event time one collector group has consumed *and stored* one partition of a topic.

    Written by the collector in the flush transaction that stores the events (and between flushes, as a
    heartbeat); read by the scheduler, whose low watermark over a topic's partitions closes windows
    (driftline.watermarks). A row with no event time yet (registered when partitions were assigned) holds
    every window back until its partition's first events are stored.
    """

    __tablename__ = "partition_watermarks"

    group_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    topic: Mapped[str] = mapped_column(String(200), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    event_time_ms: Mapped[int | None] = mapped_column(BigInteger)  # the largest event time stored
    # since when its reader has been at the end of the log with nothing new (None: records are flowing)
    idle_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)  # the reader's last word


class DeadLetter(Base):
    """A message that failed validation, with the reason; never silently dropped."""

    __tablename__ = "dead_letters"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    topic: Mapped[str] = mapped_column(String(200))
    partition: Mapped[int | None] = mapped_column(Integer)
    offset: Mapped[int | None] = mapped_column(BigInteger)
    reason: Mapped[str] = mapped_column(Text)
    field: Mapped[str | None] = mapped_column(String(500))
    model: Mapped[str | None] = mapped_column(String(MODEL_CHARS))
    raw: Mapped[bytes | None] = mapped_column(LargeBinary)  # truncated to a bound
    raw_size: Mapped[int] = mapped_column(BigInteger, default=0)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)


class PredictionRecord(Base):
    """Predictions kept for the label join (retention: default 7 days).

    Keyed by (request id, model) (migration 0007): two models may score the same business id,
    and a request id names a request only within its model. Request id first: the collector
    looks rows up by lists of request ids.
    """

    __tablename__ = "predictions"
    __table_args__ = (Index("ix_predictions_ts", "ts_ms"),)

    request_id: Mapped[str] = mapped_column(String(REQUEST_ID_CHARS), primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS), primary_key=True)
    version: Mapped[str] = mapped_column(String(VERSION_CHARS))
    ts_ms: Mapped[int] = mapped_column(BigInteger)
    window_start_ms: Mapped[int] = mapped_column(BigInteger)
    prediction: Mapped[Any] = mapped_column(JSON)
    label: Mapped[Any | None] = mapped_column(JSON)
    labelled_at_ms: Mapped[int | None] = mapped_column(BigInteger)
    # {segment column: value key} when [segments] is set, so joined labels count per segment too
    segments: Mapped[Any | None] = mapped_column(JSON)


class LabelRecord(Base):
    """A ground-truth label as received (may arrive days after its prediction), keyed like its prediction."""

    __tablename__ = "labels"
    # The labels still waiting for their prediction: the collector lists them for every batch
    # of predictions it stores (driftline.collector.store.unjoined_labels), and most labels are joined.
    __table_args__ = (Index("ix_labels_waiting", "request_id", sqlite_where=text("joined = 0"),
                            postgresql_where=text("joined = false")),)

    request_id: Mapped[str] = mapped_column(String(REQUEST_ID_CHARS), primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS), primary_key=True, index=True)
    label: Mapped[Any] = mapped_column(JSON)
    ts_ms: Mapped[int] = mapped_column(BigInteger)
    joined: Mapped[bool] = mapped_column(Boolean, default=False)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


# --- Detectors ------------------------------------------------------------------

class WindowEvaluation(Base):
    """One evaluation of a closed window (idempotent: re-evaluation replaces its results)."""

    __tablename__ = "window_evaluations"
    __table_args__ = (UniqueConstraint("model", "version", "window_start_ms"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS))
    version: Mapped[str] = mapped_column(String(VERSION_CHARS))
    window_start_ms: Mapped[int] = mapped_column(BigInteger)
    window_end_ms: Mapped[int] = mapped_column(BigInteger)
    events: Mapped[int] = mapped_column(BigInteger, default=0)
    partitions: Mapped[int] = mapped_column(Integer, default=0)
    # events stored after the window was first judged (truly late: they update its results, not the evidence)
    late_events: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    status: Mapped[str] = mapped_column(String(30))  # vocabulary.WINDOW_STATUSES
    summary: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    evaluated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class WindowQuarantine(Base):
    """A window whose evaluation failed: the error, and when it is tried again (backoff).

    Its row goes when an evaluation of the window succeeds; meanwhile other windows and
    models are evaluated as usual (scheduler/quarantine.py).
    """

    __tablename__ = "window_quarantine"
    __table_args__ = (UniqueConstraint("model", "version", "window_start_ms"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS))
    version: Mapped[str] = mapped_column(String(VERSION_CHARS))
    window_start_ms: Mapped[int] = mapped_column(BigInteger)
    window_end_ms: Mapped[int] = mapped_column(BigInteger)
    error_type: Mapped[str] = mapped_column(String(200))
    error: Mapped[str] = mapped_column(Text)  # secrets scrubbed, length bounded
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    first_failed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_failed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    next_retry_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


class DetectorResult(Base):
    """One metric of one detector family on one window (and feature, where it has one)."""

    __tablename__ = "detector_results"
    __table_args__ = (
        Index("ix_detector_results_window", "model", "version", "window_start_ms"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS))
    version: Mapped[str] = mapped_column(String(VERSION_CHARS))
    window_start_ms: Mapped[int] = mapped_column(BigInteger)
    window_end_ms: Mapped[int] = mapped_column(BigInteger)
    # data_drift | prediction_drift | data_quality | skew | latency | model_quality | dataset_drift
    detector: Mapped[str] = mapped_column(String(50))
    feature: Mapped[str] = mapped_column(String(MODEL_CHARS), default="")  # "" for model-level results
    # "column=value" of a segment ([segments]); "" for the whole population
    segment: Mapped[str] = mapped_column(String(SEGMENT_CHARS), default="")
    metric: Mapped[str] = mapped_column(String(VERSION_CHARS))
    value: Mapped[float | None] = mapped_column(Float)
    threshold: Mapped[float | None] = mapped_column(Float)
    breached: Mapped[bool] = mapped_column(Boolean, default=False)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    evaluated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ResultRollup(Base):
    """One metric's detector results over one hour of windows (scheduler/rollups.py), once the per-window
    rows are past `[retention] result_rollup_days`: what the dashboard's time buckets read (min, max,
    sum and count of the values, the largest threshold, the windows breached and on which side)."""

    __tablename__ = "result_rollups"
    # no unique key over the metric's names: it would outweigh the rows; a model-day is folded once, in one go
    __table_args__ = (
        Index("ix_result_rollups_version", "model", "version", "start_ms"),
        Index("ix_result_rollups_start", "start_ms"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS))
    version: Mapped[str] = mapped_column(String(VERSION_CHARS))
    start_ms: Mapped[int] = mapped_column(BigInteger)
    end_ms: Mapped[int] = mapped_column(BigInteger)
    detector: Mapped[str] = mapped_column(String(50))
    feature: Mapped[str] = mapped_column(String(MODEL_CHARS), default="")
    segment: Mapped[str] = mapped_column(String(SEGMENT_CHARS), default="")
    metric: Mapped[str] = mapped_column(String(VERSION_CHARS))
    windows: Mapped[int] = mapped_column(Integer, default=0)
    value_min: Mapped[float | None] = mapped_column(Float)
    value_max: Mapped[float | None] = mapped_column(Float)
    value_sum: Mapped[float | None] = mapped_column(Float)
    values: Mapped[int] = mapped_column(Integer, default=0)  # windows with a value (the mean's count)
    threshold: Mapped[float | None] = mapped_column(Float)  # the largest
    breached: Mapped[int] = mapped_column(Integer, default=0)
    breached_above: Mapped[int] = mapped_column(Integer, default=0)
    breached_below: Mapped[int] = mapped_column(Integer, default=0)
    clean_above: Mapped[int] = mapped_column(Integer, default=0)
    clean_below: Mapped[int] = mapped_column(Integer, default=0)


class EvidenceState(Base):
    """One sequential-evidence stream of a model version between windows (driftline.detectors.families.evidence).

    Stored so that a restarted scheduler, or several, go on from the same evidence; a new
    version, or its baseline registered again (``state["baseline"]``, the fingerprint), starts from
    none. ``stream`` is "detector/feature/metric".
    """

    __tablename__ = "evidence_states"
    __table_args__ = (UniqueConstraint("model", "version", "stream"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS))
    version: Mapped[str] = mapped_column(String(VERSION_CHARS))
    stream: Mapped[str] = mapped_column(String(2 * MODEL_CHARS + 120))
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    last_window_start_ms: Mapped[int | None] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


# --- Alerts ---------------------------------------------------------------------

class Alert(Base):
    """An alert's lifecycle (pending -> firing -> resolved), keyed by a stable fingerprint."""

    __tablename__ = "alerts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS))
    version: Mapped[str] = mapped_column(String(VERSION_CHARS))
    detector: Mapped[str] = mapped_column(String(50))
    feature: Mapped[str] = mapped_column(String(MODEL_CHARS), default="")
    segment: Mapped[str] = mapped_column(String(SEGMENT_CHARS), default="")  # "" for the whole population
    severity: Mapped[str] = mapped_column(String(20), default="warning")
    state: Mapped[str] = mapped_column(String(20), index=True)  # vocabulary.ALERT_STATES
    value: Mapped[float | None] = mapped_column(Float)
    threshold: Mapped[float | None] = mapped_column(Float)
    summary: Mapped[str] = mapped_column(Text, default="")
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    consecutive_breaches: Mapped[int] = mapped_column(Integer, default=0)
    consecutive_clean: Mapped[int] = mapped_column(Integer, default=0)
    last_window_start_ms: Mapped[int | None] = mapped_column(BigInteger)
    # the event-time windows in which its evidence started and in which it fired (a backfill's wall-clock
    # times are all the same minute; these say when it happened in the stream)
    first_window_start_ms: Mapped[int | None] = mapped_column(BigInteger)
    fired_window_start_ms: Mapped[int | None] = mapped_column(BigInteger)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    fired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_notified_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class Silence(Base):
    """Mutes notifications for alerts matching (model, detector, feature) until it expires."""

    __tablename__ = "silences"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str | None] = mapped_column(String(MODEL_CHARS))
    detector: Mapped[str | None] = mapped_column(String(50))
    feature: Mapped[str | None] = mapped_column(String(MODEL_CHARS))
    comment: Mapped[str] = mapped_column(Text, default="")
    created_by: Mapped[str] = mapped_column(String(MODEL_CHARS), default="")
    starts_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Notification(Base):
    """The outbox: written with the alert's state change, delivered later with retries."""

    __tablename__ = "notifications"
    __table_args__ = (Index("ix_notifications_due", "status", "next_attempt_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(128), unique=True)
    alert_fingerprint: Mapped[str | None] = mapped_column(String(64), index=True)
    channel: Mapped[str] = mapped_column(String(30))  # a name of driftline.alerts.channels.registry
    kind: Mapped[str] = mapped_column(String(20))  # trigger | resolve | repeat | retrain
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(20), default="pending")  # vocabulary.NOTIFICATION_STATES
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_error: Mapped[str | None] = mapped_column(Text)
    response_status: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class RetrainRequest(Base):
    """A retraining request (from the policy or an operator) and its outcome."""

    __tablename__ = "retrain_requests"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(128), unique=True)
    model: Mapped[str] = mapped_column(String(MODEL_CHARS), index=True)
    version: Mapped[str | None] = mapped_column(String(VERSION_CHARS))
    reason: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(20), default="requested")  # requested | running | succeeded | failed | rejected
    new_version: Mapped[str | None] = mapped_column(String(VERSION_CHARS))
    promoted: Mapped[bool] = mapped_column(Boolean, default=False)
    response: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    requested_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
