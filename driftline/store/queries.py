"""Read-side queries shared by `driftline status`, the dashboard and the tests."""
from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from driftline import defaults
from driftline.vocabulary import ALERT_ACTIVE
from driftline.store.models import (Alert, DeadLetter, ModelAlias, ModelVersion, WindowEvaluation, WindowQuarantine,
                                    WindowRollup, WindowStateRecord)
from driftline.store.rollout_history import status_rollouts
from driftline.store.watermarks import judged_up_to, stream_watermark, watermark_report


def status_report(session: Session, *, now_ms: int | None = None,
                  idle_ms: int = defaults.IDLE_PARTITION_SECONDS * 1000) -> dict[str, Any]:
    """The `status --json` document, a stable interface for programs.

    `events` counts valid events ingested per model version (the window states
    are the ledger, so the count is exact under the collector's exactly-once flush);
    `windows` counts distinct event-time windows; `judged_up_to_ms` is the end of its latest
    judged window and `late_events` the events stored after their window was first judged.
    `watermarks` are the collectors' partitions as of `now_ms` (default: the wall clock), a partition
    idle for `idle_ms` no longer holding the windows back (Settings.idle_partition_seconds).
    """
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    counts = {
        (model, version): (int(events or 0), int(windows or 0))
        for model, version, events, windows in session.execute(
            select(WindowStateRecord.model, WindowStateRecord.version, func.sum(WindowStateRecord.events),
                   func.count(func.distinct(WindowStateRecord.window_start_ms)))
            .group_by(WindowStateRecord.model, WindowStateRecord.version))
    }
    # windows past the re-evaluation horizon are counted in their hourly and daily rollups
    for model, version, events, windows in session.execute(
            select(WindowRollup.model, WindowRollup.version, func.sum(WindowRollup.events),
                   func.sum(WindowRollup.windows)).group_by(WindowRollup.model, WindowRollup.version)):
        had_events, had_windows = counts.get((model, version), (0, 0))
        counts[(model, version)] = (had_events + int(events or 0), had_windows + int(windows or 0))
    registered = {(m, v) for m, v in session.execute(select(ModelVersion.model, ModelVersion.version))}
    judged = judged_up_to(session)
    late = {(m, v): int(n or 0) for m, v, n in session.execute(
        select(WindowEvaluation.model, WindowEvaluation.version, func.sum(WindowEvaluation.late_events))
        .group_by(WindowEvaluation.model, WindowEvaluation.version))}
    production = {(m, v) for m, v in session.execute(
        select(ModelAlias.model, ModelAlias.version).where(ModelAlias.alias == "production"))}
    models = []
    for model, version in sorted(registered | set(counts)):
        events, windows = counts.get((model, version), (0, 0))
        models.append({"model": model, "version": version, "events": events, "windows": windows,
                       "registered": (model, version) in registered,
                       "production": (model, version) in production,
                       "judged_up_to_ms": judged.get((model, version)),
                       "judged_up_to": _iso_ms(judged.get((model, version))),
                       "late_events": late.get((model, version), 0)})
    dead_letters = session.scalar(select(func.count()).select_from(DeadLetter)) or 0
    alerts = [
        {"fingerprint": a.fingerprint, "model": a.model, "version": a.version, "detector": a.detector,
         "feature": a.feature, "state": a.state, "severity": a.severity, "summary": a.summary,
         # the event-time windows its evidence began and it fired in (None: not yet, or unknown)
         "first_window_start_ms": a.first_window_start_ms, "first_window_start": _iso_ms(a.first_window_start_ms),
         "fired_window_start_ms": a.fired_window_start_ms, "fired_window_start": _iso_ms(a.fired_window_start_ms)}
        for a in session.scalars(select(Alert).where(Alert.state.in_(ALERT_ACTIVE))
                                 .order_by(Alert.started_at))
    ]
    watermarks = watermark_report(session, now_ms, idle_ms)
    return {"models": models, "dead_letters": int(dead_letters), "alerts": alerts,
            "quarantined_windows": quarantined_windows(session), "rollouts": status_rollouts(session),
            "watermarks": watermarks,
            # None without a collector's watermark (the wall clock closes windows) or while a partition holds all back
            "stream_watermark_ms": stream_watermark(session, now_ms, idle_ms) if watermarks else None}


def quarantined_windows(session: Session, model: str | None = None, version: str | None = None,
                        limit: int | None = None) -> list[dict[str, Any]]:
    """Windows whose evaluation failed and waits for a retry (driftline.scheduler.quarantine), oldest window first."""
    query = select(WindowQuarantine).order_by(WindowQuarantine.window_start_ms, WindowQuarantine.model,
                                              WindowQuarantine.version).limit(limit)
    if model is not None:
        query = query.where(WindowQuarantine.model == model)
    if version is not None:
        query = query.where(WindowQuarantine.version == version)
    return [
        {"model": q.model, "version": q.version, "window_start": _iso_ms(q.window_start_ms),
         "window_start_ms": q.window_start_ms, "window_end_ms": q.window_end_ms, "error_type": q.error_type,
         "error": q.error, "attempts": q.attempts, "first_failed": _iso(q.first_failed_at),
         "next_retry": _iso(q.next_retry_at)}
        for q in session.scalars(query)
    ]


def _iso_ms(ms: int | None) -> str | None:
    return None if ms is None else _iso(datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc))


def _iso(at: datetime) -> str:
    # SQLite hands back naive datetimes (stored as UTC), PostgreSQL aware ones
    at = at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
