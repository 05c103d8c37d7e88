"""Read-only store queries for the dashboard, each bounded by a time range and cached.

Every function takes the store URL first and returns plain data (pandas frames,
dicts, bytes): what `st.cache_data` can copy safely. They only read; nothing here
computes statistics (dashboard/presentation.py does, from what these return).

Time filters use the indexed columns: window starts (epoch ms) for evaluations,
results and states; wall-clock datetimes for alerts, notifications, retraining.
Long ranges are folded into time buckets in SQL (`detector_buckets`), so a month
of one-minute windows returns a few thousand rows, not millions.
"""
from __future__ import annotations

from datetime import datetime, timezone
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import and_, case, false, func, inspect, or_, select, tuple_

from driftline import defaults
from driftline.redact import scrub
from driftline.store.db import get_engine, session_scope
from driftline.store.models import (Alert, AliasEvent, BaselineRecord, DeadLetter, DetectorResult, ModelAlias,
                                    ModelVersion, Notification, ResultRollup, RetrainRequest, Silence,
                                    WindowEvaluation, WindowRollup, WindowStateRecord)
from driftline.store.rolled import unrolled
from driftline.store.watermarks import judged_up_to, stream_watermark, watermark_report
from driftline.vocabulary import (ALERT_ACTIVE, ALERT_FIRING, ALERT_PENDING, DATA_DRIFT, ESTIMATED_QUALITY, INSUFFICIENT_DATA, NOTIFICATION_OPEN,
                                  QUALITY_SCORES)

PRODUCTION = "production"
TTL = defaults.DASHBOARD_CACHE_TTL_SECONDS
# Rows a listing returns at most (newest first): a page shows what a person reads.
LIST_LIMIT = 500

cached = st.cache_data(ttl=TTL, show_spinner=False, max_entries=256)


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


def _utc(column: pd.Series) -> pd.Series:
    # SQLite hands back naive datetimes (stored as UTC), PostgreSQL aware ones.
    return pd.to_datetime(column, utc=True)


def _frame(rows: list[Any], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame([tuple(r) for r in rows], columns=columns)


@cached
def store_is_migrated(db_url: str) -> bool:
    """False when the store has no tables yet (the page then says how to create them)."""
    return inspect(get_engine(db_url)).has_table("alembic_version")


@cached
def model_versions(db_url: str, start_ms: int, end_ms: int) -> pd.DataFrame:
    """Registered versions plus any version with windows in the range.

    Columns: model, version, registered, production, stage, created_at, description, metrics.
    """
    with session_scope(db_url) as session:
        registered = session.execute(
            select(ModelVersion.model, ModelVersion.version, ModelVersion.stage, ModelVersion.created_at,
                   ModelVersion.description, ModelVersion.metrics)).all()
        active = session.execute(
            select(WindowEvaluation.model, WindowEvaluation.version).distinct()
            .where(WindowEvaluation.window_start_ms >= start_ms, WindowEvaluation.window_start_ms < end_ms)).all()
        unevaluated = session.execute(
            select(WindowStateRecord.model, WindowStateRecord.version).distinct()
            .where(WindowStateRecord.window_start_ms >= start_ms, WindowStateRecord.window_start_ms < end_ms)).all()
        production = {m: v for m, v in session.execute(
            select(ModelAlias.model, ModelAlias.version).where(ModelAlias.alias == PRODUCTION))}
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for model, version, stage, created, description, metrics in registered:
        rows[(model, version)] = {"model": model, "version": version, "registered": True, "stage": stage,
                                  "created_at": created, "description": description or "",
                                  "metrics": dict(metrics or {})}
    for model, version in list(active) + list(unevaluated):
        rows.setdefault((model, version), {"model": model, "version": version, "registered": False,
                                           "stage": "unregistered", "created_at": None, "description": "",
                                           "metrics": {}})
    frame = pd.DataFrame(list(rows.values()), columns=["model", "version", "registered", "stage", "created_at",
                                                       "description", "metrics"])
    frame["production"] = [production.get(m) == v for m, v in zip(frame["model"], frame["version"])]
    frame["created_at"] = _utc(frame["created_at"])
    return frame.sort_values(["model", "version"], key=lambda c: c.map(_version_key) if c.name == "version" else c,
                             ignore_index=True)


def _version_key(version: str) -> tuple[int, Any]:
    return (0, int(version)) if str(version).isdigit() else (1, str(version))


@cached
def version_activity(db_url: str, start_ms: int, end_ms: int) -> pd.DataFrame:
    """Per model version in the range: windows, events, last window, last write.

    Columns: model, version, windows, events, evaluated_windows, last_window_start_ms,
    last_window_end_ms, last_evaluated_start_ms, last_update.
    """
    with session_scope(db_url) as session:
        states = session.execute(
            select(WindowStateRecord.model, WindowStateRecord.version,
                   func.count(func.distinct(WindowStateRecord.window_start_ms)), func.sum(WindowStateRecord.events),
                   func.max(WindowStateRecord.window_start_ms), func.max(WindowStateRecord.window_end_ms),
                   func.max(WindowStateRecord.updated_at))
            .where(WindowStateRecord.window_start_ms >= start_ms, WindowStateRecord.window_start_ms < end_ms)
            .group_by(WindowStateRecord.model, WindowStateRecord.version)).all()
        evaluations = session.execute(
            select(WindowEvaluation.model, WindowEvaluation.version, func.count(),
                   func.max(WindowEvaluation.window_start_ms))
            .where(WindowEvaluation.window_start_ms >= start_ms, WindowEvaluation.window_start_ms < end_ms)
            .group_by(WindowEvaluation.model, WindowEvaluation.version)).all()
        # windows past the re-evaluation horizon live on in hourly and daily rollups (scheduler/rollups.py)
        rolled = session.execute(
            select(WindowRollup.model, WindowRollup.version, func.sum(WindowRollup.windows),
                   func.sum(WindowRollup.events), func.max(WindowRollup.start_ms), func.max(WindowRollup.end_ms),
                   func.max(WindowRollup.updated_at))
            .where(WindowRollup.start_ms >= start_ms, WindowRollup.start_ms < end_ms)
            .group_by(WindowRollup.model, WindowRollup.version)).all()
    frame = _frame(list(states) + list(rolled), ["model", "version", "windows", "events", "last_window_start_ms",
                                                 "last_window_end_ms", "last_update"])
    if len(rolled):
        frame = frame.groupby(["model", "version"], as_index=False, sort=False).agg(
            {"windows": "sum", "events": "sum", "last_window_start_ms": "max", "last_window_end_ms": "max",
             "last_update": "max"})
    evaluated = _frame(evaluations, ["model", "version", "evaluated_windows", "last_evaluated_start_ms"])
    frame = frame.merge(evaluated, on=["model", "version"], how="outer")
    frame["last_update"] = _utc(frame["last_update"])
    for column in ("windows", "events", "evaluated_windows"):
        frame[column] = frame[column].fillna(0).astype("int64")
    return frame


@cached
def first_window_ms(db_url: str, model: str | None, version: str | None, start_ms: int, end_ms: int) -> int | None:
    """The earliest evaluated window start in the range (charts start there, not at the range's start)."""
    query = select(func.min(WindowEvaluation.window_start_ms)).where(WindowEvaluation.window_start_ms >= start_ms,
                                                                      WindowEvaluation.window_start_ms < end_ms)
    if model is not None:
        query = query.where(WindowEvaluation.model == model)
    if version is not None:
        query = query.where(WindowEvaluation.version == version)
    with session_scope(db_url) as session:
        value = session.scalar(query)
    return int(value) if value is not None else None


@cached
def window_results(db_url: str, model: str, version: str, window_start_ms: int, segment: str = "") -> pd.DataFrame:
    """Every detector result of one window (the statistics and decisions) of `segment` ("": the whole population).

    Columns: detector, feature, metric, value, threshold, breached, details.
    """
    with session_scope(db_url) as session:
        rows = session.execute(
            select(DetectorResult.detector, DetectorResult.feature, DetectorResult.metric, DetectorResult.value,
                   DetectorResult.threshold, DetectorResult.breached, DetectorResult.details)
            .where(DetectorResult.model == model, DetectorResult.version == version,
                   DetectorResult.window_start_ms == window_start_ms, DetectorResult.segment == segment)
            .order_by(DetectorResult.detector, DetectorResult.feature, DetectorResult.metric)).all()
    frame = _frame(rows, ["detector", "feature", "metric", "value", "threshold", "breached", "details"])
    frame["breached"] = frame["breached"].astype(bool)
    return frame


@cached
def estimated_quality(db_url: str, model: str, version: str, start_ms: int, end_ms: int,
                      segment: str = "") -> pd.DataFrame:
    """Estimated quality per window with its band and, once labels joined, realized (the newest
    `DASHBOARD_MAX_TIME_BUCKETS` windows of the range: as many points as any chart draws).

    Columns: window_start_ms, metric, value, threshold, breached, lower, upper, realized, insufficient.
    """
    r = DetectorResult
    with session_scope(db_url) as session:
        starts = select(r.window_start_ms).distinct().where(
            r.model == model, r.version == version, r.detector == ESTIMATED_QUALITY, r.segment == segment,
            r.window_start_ms >= start_ms, r.window_start_ms < end_ms
        ).order_by(r.window_start_ms.desc()).limit(defaults.DASHBOARD_MAX_TIME_BUCKETS).subquery()
        rows = session.execute(
            select(r.window_start_ms, r.metric, r.value, r.threshold, r.breached, r.details)
            .where(r.model == model, r.version == version, r.detector == ESTIMATED_QUALITY, r.segment == segment,
                   r.window_start_ms.in_(select(starts.c.window_start_ms)))
            .order_by(r.window_start_ms, r.metric)).all()
    records = [(start, metric, value, threshold, bool(breached), (details or {}).get("lower"),
                (details or {}).get("upper"), (details or {}).get("realized"),
                bool((details or {}).get(INSUFFICIENT_DATA)))
               for start, metric, value, threshold, breached, details in rows]
    frame = _frame(records, ["window_start_ms", "metric", "value", "threshold", "breached", "lower", "upper",
                             "realized", "insufficient"])
    for column in ("value", "threshold", "lower", "upper", "realized"):
        frame[column] = frame[column].astype("float64")
    return frame


@cached
def evidence_history(db_url: str, model: str, version: str, detector: str, feature: str, start_ms: int,
                     end_ms: int) -> pd.DataFrame:
    """A stream's sequential evidence per window (the newest `DASHBOARD_MAX_TIME_BUCKETS` windows of the range).

    Columns: window_start_ms, e_value, line, paging (rows whose result carries evidence only)."""
    r = DetectorResult
    with session_scope(db_url) as session:
        rows = session.execute(
            select(r.window_start_ms, r.details)
            .where(r.model == model, r.version == version, r.detector == detector, r.feature == feature,
                   r.segment == "", r.window_start_ms >= start_ms, r.window_start_ms < end_ms)
            .order_by(r.window_start_ms.desc()).limit(defaults.DASHBOARD_MAX_TIME_BUCKETS)).all()
    records = []
    for start, details in reversed(rows):
        evidence = (details or {}).get("evidence")
        if isinstance(evidence, dict) and evidence.get("e_value") is not None and evidence.get("line"):
            records.append((start, float(evidence["e_value"]), float(evidence["line"]), bool(evidence.get("paging"))))
    return _frame(records, ["window_start_ms", "e_value", "line", "paging"])


@cached
def newest_details(db_url: str, model: str, version: str, detector: str, start_ms: int, end_ms: int,
                   segment: str = "") -> pd.DataFrame:
    """One detector's results in the newest window of the range that has any, with their details.

    Columns: window_start_ms, window_end_ms, feature, breached, details."""
    r = DetectorResult
    scope = (r.model == model, r.version == version, r.detector == detector, r.segment == segment,
             r.window_start_ms >= start_ms, r.window_start_ms < end_ms)
    with session_scope(db_url) as session:
        newest = session.scalar(select(func.max(r.window_start_ms)).where(*scope))
        rows = [] if newest is None else session.execute(
            select(r.window_start_ms, r.window_end_ms, r.feature, r.breached, r.details)
            .where(*scope, r.window_start_ms == newest).order_by(r.feature)).all()
    frame = _frame(rows, ["window_start_ms", "window_end_ms", "feature", "breached", "details"])
    frame["breached"] = frame["breached"].astype(bool)
    return frame


def _newest_windows(start_ms: int, end_ms: int, versions: tuple[tuple[str, str], ...] | None = None):
    """Each version's (of `versions`, None: every one) newest evaluated window start in the range, as a subquery
    (model, version, start_ms): what the results are joined to, so their index is probed once per version."""
    query = (select(WindowEvaluation.model, WindowEvaluation.version,
                    func.max(WindowEvaluation.window_start_ms).label("start_ms"))
             .where(WindowEvaluation.window_start_ms >= start_ms, WindowEvaluation.window_start_ms < end_ms))
    if versions is not None:
        query = query.where(tuple_(WindowEvaluation.model, WindowEvaluation.version).in_(list(versions))
                            if versions else false())
    return query.group_by(WindowEvaluation.model, WindowEvaluation.version).subquery()


def _in_newest(newest) -> Any:
    r = DetectorResult
    return and_(r.model == newest.c.model, r.version == newest.c.version, r.window_start_ms == newest.c.start_ms)


@cached
def latest_results(db_url: str, start_ms: int, end_ms: int,
                   versions: tuple[tuple[str, str], ...] | None = None) -> pd.DataFrame:
    """The results of each version's newest evaluated window in the range (the overview's "now"), of every version
    or of `versions` ((model, version) pairs) only; one query.

    Columns: model, version, window_start_ms, detector, feature, metric, value, threshold, breached.
    """
    r, newest = DetectorResult, _newest_windows(start_ms, end_ms, versions)
    query = (select(r.model, r.version, r.window_start_ms, r.detector, r.feature, r.metric, r.value, r.threshold,
                    r.breached).join(newest, _in_newest(newest)).where(r.segment == ""))
    with session_scope(db_url) as session:
        rows = session.execute(query).all()
    frame = _frame(rows, ["model", "version", "window_start_ms", "detector", "feature", "metric", "value",
                          "threshold", "breached"])
    frame["breached"] = frame["breached"].astype(bool)
    return frame


@cached
def version_health(db_url: str, start_ms: int, end_ms: int) -> pd.DataFrame:
    """Each version's newest evaluated window in the range: what the overview ranks a fleet by (dashboard/attention.py).
    Two queries whatever the number of versions: the windows' own list of their breached results, and the estimates.

    Columns: model, version, window_start_ms, breached (the window's breached results as its evaluation listed them:
    "detector:feature", or the detector alone), quality_margin (the lowest estimate less its threshold over the
    quality scores estimated; NaN without estimates).
    """
    r, e, newest = DetectorResult, WindowEvaluation, _newest_windows(start_ms, end_ms)
    with session_scope(db_url) as session:
        # the evaluation's summary lists the breached results: a row per window, not the window's hundreds of results
        rows = session.execute(
            select(e.model, e.version, e.window_start_ms, e.summary)
            .join(newest, and_(e.model == newest.c.model, e.version == newest.c.version,
                               e.window_start_ms == newest.c.start_ms))).all()
        margins = dict(((m, v), margin) for m, v, margin in session.execute(
            select(r.model, r.version, func.min(r.value - r.threshold)).join(newest, _in_newest(newest))
            .where(r.segment == "", r.detector == ESTIMATED_QUALITY, r.metric.in_(sorted(QUALITY_SCORES)))
            .group_by(r.model, r.version)))
    records = [(m, v, int(start), tuple((summary or {}).get("breached") or ()), margins.get((m, v)))
               for m, v, start, summary in rows]
    frame = _frame(records, ["model", "version", "window_start_ms", "breached", "quality_margin"])
    frame["quality_margin"] = frame["quality_margin"].astype("float64")
    return frame


@cached
def alert_counts(db_url: str) -> pd.DataFrame:
    """Alerts firing and pending now per model version, counted in the store (every one, however many).

    Columns: model, version, firing, pending."""
    with session_scope(db_url) as session:
        rows = session.execute(
            select(Alert.model, Alert.version, func.sum(case((Alert.state == ALERT_FIRING, 1), else_=0)),
                   func.sum(case((Alert.state == ALERT_PENDING, 1), else_=0)))
            .where(Alert.state.in_((ALERT_FIRING, ALERT_PENDING))).group_by(Alert.model, Alert.version)).all()
    frame = _frame(rows, ["model", "version", "firing", "pending"])
    for column in ("firing", "pending"):
        frame[column] = frame[column].fillna(0).astype("int64")
    return frame


@dataclass(frozen=True)
class BucketQuery:
    """Which detector results `detector_buckets` folds: of `model`/`version` (None: all), windows starting in
    [start_ms, end_ms), in buckets of `bucket_ms`; only these `detectors` and `metrics` (None: all), and one
    `segment` ("" is the whole population)."""

    model: str | None
    version: str | None
    start_ms: int
    end_ms: int
    bucket_ms: int
    detectors: tuple[str, ...] | None = None
    metrics: tuple[str, ...] | None = None
    segment: str = ""


def detector_buckets(db_url: str, query: BucketQuery) -> pd.DataFrame:
    """Detector results folded into time buckets of `bucket_ms` (one bucket per window when equal).

    Per (model, version, detector, feature, metric, bucket): min/max/mean value, the
    largest threshold, how many windows, how many breached, and on which side of the
    threshold the breached and clean values lay (scores.worse_direction reads those).

    Buckets are aligned to multiples of `bucket_ms` since the epoch (the first one may
    begin a little before `start_ms`), so the completed buckets are one query whose
    cache key changes only when a bucket completes (cached DASHBOARD_HISTORY_CACHE_TTL_SECONDS),
    and only the bucket in progress is read again at every refresh.
    """
    aligned = query.start_ms // query.bucket_ms * query.bucket_ms
    cut = max(query.end_ms // query.bucket_ms * query.bucket_ms, aligned)
    parts = [_completed_buckets(db_url, replace(query, start_ms=aligned, end_ms=cut))]
    if cut < query.end_ms:
        parts.append(_recent_buckets(db_url, replace(query, start_ms=cut)))
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def _buckets(db_url: str, query: BucketQuery) -> pd.DataFrame:
    """Per-window results past their version's rolled-up span, and the hourly rollups before it
    (driftline.store.rolled), folded into the same buckets: a bucket of whole hours reads the same either way."""
    start_ms, end_ms, bucket_ms, segment = query.start_ms, query.end_ms, query.bucket_ms, query.segment
    r, u = DetectorResult, ResultRollup
    one = lambda condition: func.sum(case((condition, 1), else_=0))  # noqa: E731 - a conditional count
    has_both = and_(r.value.is_not(None), r.threshold.is_not(None))
    bucket = (start_ms + ((r.window_start_ms - start_ms) // bucket_ms) * bucket_ms).label("bucket_ms")
    raw = unrolled(select(r.model, r.version, r.detector, r.feature, r.metric, bucket, func.min(r.value),
                          func.max(r.value), func.sum(r.value), func.count(r.value), func.max(r.threshold),
                          func.count(), one(r.breached), one(and_(has_both, r.breached, r.value > r.threshold)),
                          one(and_(has_both, r.breached, r.value < r.threshold)),
                          one(and_(has_both, ~r.breached, r.value > r.threshold)),
                          one(and_(has_both, ~r.breached, r.value < r.threshold)))
                   .where(r.window_start_ms >= start_ms, r.window_start_ms < end_ms, r.segment == segment)
                   .group_by(r.model, r.version, r.detector, r.feature, r.metric, bucket))
    rolled_bucket = (start_ms + ((u.start_ms - start_ms) // bucket_ms) * bucket_ms).label("bucket_ms")
    rolled = (select(u.model, u.version, u.detector, u.feature, u.metric, rolled_bucket, func.min(u.value_min),
                     func.max(u.value_max), func.sum(u.value_sum), func.sum(u.values), func.max(u.threshold),
                     func.sum(u.windows), func.sum(u.breached), func.sum(u.breached_above), func.sum(u.breached_below),
                     func.sum(u.clean_above), func.sum(u.clean_below))
              .where(u.start_ms >= start_ms, u.start_ms < end_ms, u.segment == segment)
              .group_by(u.model, u.version, u.detector, u.feature, u.metric, rolled_bucket))
    statements = []
    for statement, table in ((raw, r), (rolled, u)):
        if query.model is not None:
            statement = statement.where(table.model == query.model)
        if query.version is not None:
            statement = statement.where(table.version == query.version)
        if query.detectors:
            statement = statement.where(table.detector.in_(query.detectors))
        if query.metrics:
            statement = statement.where(table.metric.in_(query.metrics))
        statements.append(statement)
    with session_scope(db_url) as session:
        found = [session.execute(statement).all() for statement in statements] if end_ms > start_ms else [[], []]
    keys = ["model", "version", "detector", "feature", "metric", "bucket_ms"]
    counts = ["windows", "breached", "breached_above", "breached_below", "clean_above", "clean_below"]
    frame = _frame(found[0] + found[1], [*keys, "min_value", "max_value", "value_sum", "values", "threshold", *counts])
    if found[0] and found[1]:  # a bucket may hold both per-window rows and rollups
        for column in ("min_value", "max_value", "value_sum", "threshold"):
            frame[column] = frame[column].astype("float64")
        frame = frame.groupby(keys, as_index=False, sort=False).agg(
            {"min_value": "min", "max_value": "max", "value_sum": "sum", "values": "sum", "threshold": "max",
             **{c: "sum" for c in counts}})
    values = frame["values"].astype("float64")
    frame["mean_value"] = (frame["value_sum"].astype("float64") / values).where(values > 0)
    frame = frame[[*keys, "min_value", "max_value", "mean_value", "threshold", *counts]]
    for column in ("bucket_ms", *counts):
        frame[column] = frame[column].fillna(0).astype("int64")
    for column in ("min_value", "max_value", "mean_value", "threshold"):
        frame[column] = frame[column].astype("float64")
    return frame


# Two functions, not two caches of one: Streamlit keys a cache by the function's code (and a query by its fields).
@st.cache_data(ttl=defaults.DASHBOARD_HISTORY_CACHE_TTL_SECONDS, show_spinner=False, max_entries=64)
def _completed_buckets(db_url: str, query: BucketQuery) -> pd.DataFrame:
    return _buckets(db_url, query)


@cached
def _recent_buckets(db_url: str, query: BucketQuery) -> pd.DataFrame:
    return _buckets(db_url, query)


@cached
def breached_features(db_url: str, model: str, version: str, start_ms: int, end_ms: int,
                      detector: str = DATA_DRIFT, segment: str = "") -> pd.DataFrame:
    """(window_start_ms, feature) of every feature with a breached `detector` result of `segment` in the range."""
    with session_scope(db_url) as session:
        rows = session.execute(
            select(DetectorResult.window_start_ms, DetectorResult.feature).distinct()
            .where(DetectorResult.model == model, DetectorResult.version == version,
                   DetectorResult.window_start_ms >= start_ms, DetectorResult.window_start_ms < end_ms,
                   DetectorResult.detector == detector, DetectorResult.breached, DetectorResult.feature != "",
                   DetectorResult.segment == segment)).all()
    return _frame(rows, ["window_start_ms", "feature"])


@cached
def segments(db_url: str, model: str, version: str, start_ms: int, end_ms: int) -> list[str]:
    """The segments ("column=value") with results for a version in the range, sorted ("" not included)."""
    with session_scope(db_url) as session:
        return sorted(session.scalars(
            select(DetectorResult.segment).distinct()
            .where(DetectorResult.model == model, DetectorResult.version == version, DetectorResult.segment != "",
                   DetectorResult.window_start_ms >= start_ms, DetectorResult.window_start_ms < end_ms)))


@cached
def windows(db_url: str, model: str, version: str, start_ms: int, end_ms: int) -> pd.DataFrame:
    """Evaluated windows of a version in the range, newest first (at most LIST_LIMIT).

    Columns: window_start_ms, window_end_ms, events, partitions, status, summary.
    """
    with session_scope(db_url) as session:
        rows = session.execute(
            select(WindowEvaluation.window_start_ms, WindowEvaluation.window_end_ms, WindowEvaluation.events,
                   WindowEvaluation.partitions, WindowEvaluation.status, WindowEvaluation.summary)
            .where(WindowEvaluation.model == model, WindowEvaluation.version == version,
                   WindowEvaluation.window_start_ms >= start_ms, WindowEvaluation.window_start_ms < end_ms)
            .order_by(WindowEvaluation.window_start_ms.desc()).limit(LIST_LIMIT)).all()
    return _frame(rows, ["window_start_ms", "window_end_ms", "events", "partitions", "status", "summary"])


@cached
def window_state_blobs(db_url: str, model: str, version: str, window_start_ms: int) -> list[bytes]:
    """The partial states of one window (one per collector partition), to be merged."""
    with session_scope(db_url) as session:
        return [bytes(b) for b in session.scalars(
            select(WindowStateRecord.state)
            .where(WindowStateRecord.model == model, WindowStateRecord.version == version,
                   WindowStateRecord.window_start_ms == window_start_ms)
            .order_by(WindowStateRecord.partition))]


@cached
def sampled_state_blobs(db_url: str, model: str, version: str, start_ms: int, end_ms: int,
                        max_windows: int) -> list[tuple[int, int, bytes]]:
    """(start_ms, end_ms, blob) of at most `max_windows` evenly spaced windows of the range; past the re-evaluation
    horizon the hourly and daily rollups stand for their windows (scheduler/rollups.py)."""
    states, rollups = WindowStateRecord, WindowRollup
    with session_scope(db_url) as session:
        keys = [(int(s), None) for s in session.scalars(
            select(states.window_start_ms).distinct()
            .where(states.model == model, states.version == version,
                   states.window_start_ms >= start_ms, states.window_start_ms < end_ms))]
        keys += [(int(s), int(i)) for s, i in session.execute(
            select(rollups.start_ms, rollups.id)
            .where(rollups.model == model, rollups.version == version,
                   rollups.start_ms >= start_ms, rollups.start_ms < end_ms))]
        keys.sort()
        if len(keys) > max_windows:
            step = len(keys) / max_windows
            keys = [keys[int(i * step)] for i in range(max_windows)]
        starts = [s for s, rollup in keys if rollup is None]
        ids = [rollup for _, rollup in keys if rollup is not None]
        rows = session.execute(
            select(states.window_start_ms, states.window_end_ms, states.state)
            .where(states.model == model, states.version == version, states.window_start_ms.in_(starts))).all()
        rows += session.execute(select(rollups.start_ms, rollups.end_ms, rollups.state).where(rollups.id.in_(ids))).all()
    return [(int(s), int(e), bytes(b)) for s, e, b in rows]


@cached
def baseline_summary(db_url: str, model: str, version: str) -> dict[str, Any] | None:
    """The version's `Baseline.to_dict()` as stored, or None."""
    with session_scope(db_url) as session:
        return session.scalar(select(BaselineRecord.summary).where(BaselineRecord.model == model,
                                                                    BaselineRecord.version == version))


@cached
def alerts(db_url: str, start_ms: int, model: str | None = None) -> pd.DataFrame:
    """Alerts active now, or started, fired or resolved since `start_ms` (newest first)."""
    since = _dt(start_ms)
    query = (select(Alert.fingerprint, Alert.model, Alert.version, Alert.detector, Alert.feature, Alert.severity,
                    Alert.state, Alert.value, Alert.threshold, Alert.summary, Alert.started_at, Alert.fired_at,
                    Alert.resolved_at, Alert.last_notified_at, Alert.consecutive_breaches,
                    Alert.first_window_start_ms, Alert.fired_window_start_ms)
             .where(or_(Alert.state.in_(ALERT_ACTIVE), Alert.started_at >= since,
                        Alert.resolved_at >= since))
             .order_by(Alert.started_at.desc()).limit(LIST_LIMIT))
    if model is not None:
        query = query.where(Alert.model == model)
    with session_scope(db_url) as session:
        rows = session.execute(query).all()
    frame = _frame(rows, ["fingerprint", "model", "version", "detector", "feature", "severity", "state", "value",
                          "threshold", "summary", "started_at", "fired_at", "resolved_at", "last_notified_at",
                          "consecutive_breaches", "first_window_start_ms", "fired_window_start_ms"])
    for column in ("started_at", "fired_at", "resolved_at", "last_notified_at"):
        frame[column] = _utc(frame[column])
    # the event-time windows its evidence began and it fired in (a backfill's wall-clock times are one minute)
    for column in ("first_window_start", "fired_window_start"):
        frame[column] = pd.to_datetime(frame[f"{column}_ms"].astype("Float64"), unit="ms", utc=True)
    return frame


@cached
def notifications(db_url: str, start_ms: int, fingerprints: tuple[str, ...] = ()) -> pd.DataFrame:
    """Outbox rows created since `start_ms`, or belonging to the given alerts, or not delivered yet."""
    since = _dt(start_ms)
    condition = or_(Notification.created_at >= since, Notification.status.in_(NOTIFICATION_OPEN))
    if fingerprints:
        condition = or_(condition, Notification.alert_fingerprint.in_(fingerprints))
    with session_scope(db_url) as session:
        rows = session.execute(
            select(Notification.id, Notification.alert_fingerprint, Notification.channel, Notification.kind,
                   Notification.status, Notification.attempts, Notification.last_error, Notification.response_status,
                   Notification.created_at, Notification.next_attempt_at, Notification.sent_at)
            .where(condition).order_by(Notification.created_at.desc()).limit(LIST_LIMIT)).all()
    frame = _frame(rows, ["id", "alert_fingerprint", "channel", "kind", "status", "attempts", "last_error",
                          "response_status", "created_at", "next_attempt_at", "sent_at"])
    for column in ("created_at", "next_attempt_at", "sent_at"):
        frame[column] = _utc(frame[column])
    # Rows stored before error text was scrubbed may still hold a URL's token.
    frame["last_error"] = frame["last_error"].map(lambda text: scrub(text) if isinstance(text, str) else text)
    return frame


@cached
def silences(db_url: str, start_ms: int) -> pd.DataFrame:
    """Silences that were in force at some point since `start_ms`."""
    with session_scope(db_url) as session:
        rows = session.execute(
            select(Silence.id, Silence.model, Silence.detector, Silence.feature, Silence.comment, Silence.created_by,
                   Silence.starts_at, Silence.expires_at)
            .where(Silence.expires_at >= _dt(start_ms)).order_by(Silence.expires_at.desc()).limit(LIST_LIMIT)).all()
    frame = _frame(rows, ["id", "model", "detector", "feature", "comment", "created_by", "starts_at", "expires_at"])
    for column in ("starts_at", "expires_at"):
        frame[column] = _utc(frame[column])
    return frame


@cached
def retrain_requests(db_url: str, start_ms: int, model: str | None = None) -> pd.DataFrame:
    """Retraining requests made since `start_ms`, or still open."""
    query = (select(RetrainRequest.id, RetrainRequest.model, RetrainRequest.version, RetrainRequest.reason,
                    RetrainRequest.status, RetrainRequest.new_version, RetrainRequest.promoted,
                    RetrainRequest.response, RetrainRequest.requested_at, RetrainRequest.completed_at)
             .where(or_(RetrainRequest.requested_at >= _dt(start_ms),
                        RetrainRequest.status.in_(("requested", "running"))))
             .order_by(RetrainRequest.requested_at.desc()).limit(LIST_LIMIT))
    if model is not None:
        query = query.where(RetrainRequest.model == model)
    with session_scope(db_url) as session:
        rows = session.execute(query).all()
    frame = _frame(rows, ["id", "model", "version", "reason", "status", "new_version", "promoted", "response",
                          "requested_at", "completed_at"])
    for column in ("requested_at", "completed_at"):
        frame[column] = _utc(frame[column])
    return frame


@cached
def alias_events(db_url: str, model: str | None = None) -> pd.DataFrame:
    """The production alias's history (newest first, at most LIST_LIMIT moves)."""
    query = (select(AliasEvent.model, AliasEvent.alias, AliasEvent.version, AliasEvent.previous_version,
                    AliasEvent.action, AliasEvent.reason, AliasEvent.at)
             .where(AliasEvent.alias == PRODUCTION).order_by(AliasEvent.at.desc(), AliasEvent.id.desc())
             .limit(LIST_LIMIT))
    if model is not None:
        query = query.where(AliasEvent.model == model)
    with session_scope(db_url) as session:
        rows = session.execute(query).all()
    frame = _frame(rows, ["model", "alias", "version", "previous_version", "action", "reason", "at"])
    frame["at"] = _utc(frame["at"])
    return frame


@cached
def dead_letter_count(db_url: str, start_ms: int) -> int:
    with session_scope(db_url) as session:
        return int(session.scalar(select(func.count()).select_from(DeadLetter)
                                  .where(DeadLetter.received_at >= _dt(start_ms))) or 0)


@cached
def quarantined_windows(db_url: str, model: str | None = None, version: str | None = None) -> pd.DataFrame:
    """Windows whose evaluation failed, waiting for their retry (all of them: a current condition, not
    history), oldest first, at most LIST_LIMIT. Columns: those of `driftline status --json`."""
    from driftline.store.queries import quarantined_windows as listed

    with session_scope(db_url) as session:
        rows = listed(session, model, version, limit=LIST_LIMIT)
    return pd.DataFrame(rows, columns=["model", "version", "window_start", "window_start_ms", "window_end_ms",
                                       "error_type", "error", "attempts", "first_failed", "next_retry"])


@cached
def window_length_ms(db_url: str, model: str | None = None) -> int | None:
    """The length of the newest evaluated window (all windows of a deployment share it)."""
    query = select(WindowEvaluation.window_end_ms - WindowEvaluation.window_start_ms)
    if model is not None:
        query = query.where(WindowEvaluation.model == model)
    with session_scope(db_url) as session:
        value = session.scalar(query.order_by(WindowEvaluation.window_start_ms.desc()).limit(1))
    return int(value) if value else None


@cached
def judging_progress(db_url: str, now_ms: int, idle_ms: int) -> dict[str, Any]:
    """How far results are complete, as of `now_ms` (pass the page's rounded "now", so the cache is reused):
    `judged` (model -> end of its latest judged window, any version), `watermark_ms` (the collectors' low
    watermark; None without a collector's watermark or while a partition holds every window back) and
    `watermarks` (the partitions, as `driftline status --json` lists them)."""
    with session_scope(db_url) as session:
        judged: dict[str, int] = {}
        for (model, _version), end_ms in judged_up_to(session).items():
            judged[model] = max(judged.get(model, end_ms), end_ms)
        marks = watermark_report(session, now_ms, idle_ms)
        low = stream_watermark(session, now_ms, idle_ms) if marks else None
    return {"judged": judged, "watermark_ms": low, "watermarks": marks}
