"""The retraining trigger: when drift persists or quality drops, ask for a retrain, once (DB only).

`apply_retrain_policy` is called by the scheduler after `process_window`. When the
policy (driftline.alerts.rules.RetrainPolicy) fires and the model is out of its cooldown, it
writes, in the caller's transaction, a `RetrainRequest` row (status "requested") and
an outbox row for the "retrain" channel; `deliver_due` then POSTs it to the
retraining webhook and records the outcome on the RetrainRequest: "running" (2xx:
accepted, the receiver's answer in `response`, the receiver owns the rest), "rejected"
(a 4xx), or "failed" (retry budget spent; `driftline alerts retry` sends it again). When
the receiver records the request in the same store under the Idempotency-Key (the
worker's POST /admin/retrain does, and tracks running -> succeeded there), its row
replaces the policy's row, so each request is one row.

Triggers:
- **drift**: each of the last `windows` windows of this model version (this one
  included, adjacent in event time, evaluated with status ok) has a breached result
  of one of `detectors` on one of `features` (any feature when the list is empty;
  the window-level dataset_drift result counts only then);
- **quality**: a model_quality result of this window (any metric, or one of
  `quality_metrics`) dropped by at least `quality_drop` against the reference the
  detector judged it by (``details["expected"]``, the calibration reference, or
  ``details["training"]``): ``reference - value`` for scores, ``value - reference``
  for losses and errors (`driftline.vocabulary`), and by more than the detector's
  noise ``details["margin"]``; insufficient data never counts (`quality_trigger`).

Cooldown: no request when any RetrainRequest of the model (from this policy, an
operator, or the worker itself) was made within `cooldown`. The request's key is
derived from (model, version, window), so running the policy twice for a window asks once.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from driftline.store.models import DetectorResult, Notification, RetrainRequest, WindowEvaluation
from driftline.vocabulary import MODEL_QUALITY, QUALITY_ERRORS, WINDOW_OK, QualityDetails
from driftline.windows import WindowKey

from driftline.alerts import outbox
from driftline.alerts.channels.retrain import RETRAIN
from driftline.alerts.fingerprint import retrain_key
from driftline.alerts.rules import RetrainPolicy
from driftline.alerts.times import as_utc, iso, iso_from_ms

SCHEMA = "driftline.retrain/v1"


def quality_drop(metric: str, value: float | None, details: dict[str, Any]) -> float | None:
    """How much worse than its reference a quality metric is (positive = worse), or None if unknown (pure).

    The reference is the one the model-quality detector judged against: ``expected``
    (what the window's own scores predict under the training calibration) when it
    compared with the calibration, else ``training`` (the training metric).
    """
    reference = QualityDetails.from_dict(details).reference
    if value is None or isinstance(reference, bool) or not isinstance(reference, (int, float)):
        return None
    return float(value - reference) if metric in QUALITY_ERRORS else float(reference - value)


def quality_trigger(metric: str, value: float | None, breached: bool, details: dict[str, Any],
                    min_drop: float) -> tuple[bool, float | None]:
    """Whether this model-quality result asks for a retrain, and its drop (None: unknown) (pure).

    A drop counts when it is at least `min_drop` and beyond the detector's noise
    ``margin`` (a drop inside the margin is sampling noise, whatever its size); a
    result with too few labels never counts. Without a reference, a breach counts.
    """
    typed = QualityDetails.from_dict(details)
    if typed.insufficient:
        return False, None
    drop = quality_drop(metric, value, details)
    if drop is None:
        return breached, None
    margin = typed.margin
    beyond_noise = drop > margin if isinstance(margin, (int, float)) and not isinstance(margin, bool) else breached
    return drop >= min_drop and beyond_noise, drop


def drift_features(rows: Iterable[Any], policy: RetrainPolicy) -> set[str]:
    """Features (or "" for a model-level result) on which a window's rows show drift per `policy` (pure)."""
    wanted = set(policy.features)
    out = set()
    for row in rows:
        if not row.breached or row.detector not in policy.detectors:
            continue
        feature = row.feature or ""
        if wanted and feature not in wanted:
            continue
        out.add(feature)
    return out


def apply_retrain_policy(session: Session, key: WindowKey, *, policy: RetrainPolicy,
                         now: datetime) -> RetrainRequest | None:
    """Request a retrain of the window's model if `policy` fires on this window; the new RetrainRequest, or None."""
    if not policy.enabled:
        return None
    now = as_utc(now)
    model, version, window_start_ms = key.model, key.version, key.window_start_ms
    windows = session.scalars(select(WindowEvaluation).where(
        WindowEvaluation.model == model, WindowEvaluation.version == version, WindowEvaluation.status == WINDOW_OK,
        WindowEvaluation.window_start_ms <= window_start_ms)
        .order_by(WindowEvaluation.window_start_ms.desc()).limit(policy.windows)).all()
    if not windows or windows[0].window_start_ms != window_start_ms:
        return None
    reason = _drift_reason(session, model, version, windows, policy) or _quality_reason(
        session, model, version, window_start_ms, policy)
    if reason is None:
        return None
    recent = session.scalar(select(RetrainRequest.id).where(
        RetrainRequest.model == model, RetrainRequest.requested_at > now - policy.cooldown).limit(1))
    if recent is not None:
        return None
    key = retrain_key(model, version, window_start_ms)
    if session.scalar(select(Notification.id).where(Notification.idempotency_key == key)) is not None:
        return None
    body = {"schema": SCHEMA, "model": model, "version": version, **reason, "rollout": policy.rollout,
            "idempotency_key": key, "requested_at": iso(now)}
    request = RetrainRequest(idempotency_key=outbox.RETRAIN_ROW_PREFIX + key, model=model, version=version,
                             reason=body, status="requested", requested_at=now)
    session.add(request)
    outbox.enqueue(session, idempotency_key=key, channel=RETRAIN, kind="retrain", payload=body,
                   alert_fingerprint=None, now=now)
    session.flush()
    return request


def _window_doc(w: WindowEvaluation) -> dict[str, Any]:
    return {"start": iso_from_ms(w.window_start_ms), "end": iso_from_ms(w.window_end_ms),
            "start_ms": w.window_start_ms, "end_ms": w.window_end_ms}


def _drift_reason(session: Session, model: str, version: str, windows: list[WindowEvaluation],
                  policy: RetrainPolicy) -> dict[str, Any] | None:
    if len(windows) < policy.windows:
        return None
    # Consecutive in event time: each window starts where the previous one ended (a gap restarts the count).
    if any(newer.window_start_ms != older.window_end_ms for newer, older in zip(windows, windows[1:], strict=False)):
        return None
    starts = [w.window_start_ms for w in windows]
    rows = session.scalars(select(DetectorResult).where(
        DetectorResult.model == model, DetectorResult.version == version,
        DetectorResult.window_start_ms.in_(starts), DetectorResult.detector.in_(policy.detectors),
        DetectorResult.breached.is_(True), DetectorResult.segment == "")).all()
    per_window = {start: drift_features([r for r in rows if r.window_start_ms == start], policy) for start in starts}
    if not all(per_window.values()):
        return None
    features = sorted(set().union(*per_window.values()) - {""})
    scope = f"features {', '.join(features)}" if features else "the dataset"
    return {
        "trigger": "drift",
        "reason": f"drift on {scope} in {policy.windows} consecutive windows of {model} v{version}",
        "windows": [_window_doc(w) for w in reversed(windows)],
        "features": features,
    }


def _quality_reason(session: Session, model: str, version: str, window_start_ms: int,
                    policy: RetrainPolicy) -> dict[str, Any] | None:
    if policy.quality_drop is None:
        return None
    rows = session.scalars(select(DetectorResult).where(
        DetectorResult.model == model, DetectorResult.version == version,
        DetectorResult.window_start_ms == window_start_ms, DetectorResult.detector == MODEL_QUALITY,
        DetectorResult.segment == "")
        .order_by(DetectorResult.metric)).all()
    for row in rows:
        if policy.quality_metrics and row.metric not in policy.quality_metrics:
            continue
        fires, drop = quality_trigger(row.metric, row.value, bool(row.breached), dict(row.details or {}),
                                      policy.quality_drop)
        if fires:
            window = session.scalar(select(WindowEvaluation).where(
                WindowEvaluation.model == model, WindowEvaluation.version == version,
                WindowEvaluation.window_start_ms == window_start_ms))
            what = f"dropped by {drop:.4g}" if drop is not None else "breached its threshold"
            return {
                "trigger": "quality",
                "reason": f"{row.metric} {what} (now {row.value}) on {model} v{version}",
                "windows": [_window_doc(window)],
                "features": [],
                "quality": {"metric": row.metric, "value": row.value, "threshold": row.threshold, "drop": drop},
            }
    return None
