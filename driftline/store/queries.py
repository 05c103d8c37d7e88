"""Read-side queries shared by `driftline status`, the dashboard and the tests."""
from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from driftline.store.models import Alert, DeadLetter, ModelAlias, ModelVersion, WindowStateRecord


def status_report(session: Session) -> dict[str, Any]:
    """The `status --json` document (CONTRACTS.md §4).

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
    return {"models": models, "dead_letters": int(dead_letters), "alerts": alerts}
