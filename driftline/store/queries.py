"""Read-side queries shared by `driftline status`, the dashboard and the tests."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from driftline.store.models import Alert, DeadLetter, ModelAlias, ModelVersion, WindowQuarantine, WindowStateRecord
from driftline.store.rollout_history import status_rollouts


def status_report(session: Session) -> dict[str, Any]:
    """The `status --json` document, a stable interface for programs.

    `events` counts valid events ingested per model version (the window states
    are the ledger, so the count is exact under the collector's exactly-once flush);
    `windows` counts distinct event-time windows.
    """
    counts = {
        (model, version): (int(events or 0), int(windows or 0))
        for model, version, events, windows in session.execute(
            select(WindowStateRecord.model, WindowStateRecord.version, func.sum(WindowStateRecord.events),
                   func.count(func.distinct(WindowStateRecord.window_start_ms)))
            .group_by(WindowStateRecord.model, WindowStateRecord.version))
    }
    registered = {(m, v) for m, v in session.execute(select(ModelVersion.model, ModelVersion.version))}
    production = {(m, v) for m, v in session.execute(
        select(ModelAlias.model, ModelAlias.version).where(ModelAlias.alias == "production"))}
    models = []
    for model, version in sorted(registered | set(counts)):
        events, windows = counts.get((model, version), (0, 0))
        models.append({"model": model, "version": version, "events": events, "windows": windows,
                       "registered": (model, version) in registered,
                       "production": (model, version) in production})
    dead_letters = session.scalar(select(func.count()).select_from(DeadLetter)) or 0
    alerts = [
        {"fingerprint": a.fingerprint, "model": a.model, "version": a.version, "detector": a.detector,
         "feature": a.feature, "state": a.state, "severity": a.severity, "summary": a.summary}
        for a in session.scalars(select(Alert).where(Alert.state.in_(("firing", "pending")))
                                 .order_by(Alert.started_at))
    ]
    return {"models": models, "dead_letters": int(dead_letters), "alerts": alerts,
            "quarantined_windows": quarantined_windows(session), "rollouts": status_rollouts(session)}


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


def _iso_ms(ms: int) -> str:
    return _iso(datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc))


def _iso(at: datetime) -> str:
    # SQLite hands back naive datetimes (stored as UTC), PostgreSQL aware ones
    at = at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
