"""Read-only store queries of the Rollouts page: plans, steps, verdicts and each arm's windows (cached)."""
from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import func, select

from driftline.dashboard.queries import _frame, _utc, cached
from driftline.store import rollouts as store_rollouts
from driftline.store.db import session_scope
from driftline.store.aliases import alias_version
from driftline.store.models import DetectorResult, RolloutPlan, RolloutStep, WindowStateRecord
from driftline.vocabulary import ERROR_RATE, LATENCY, LATENCY_TOTAL, P50_MS, P95_MS, P99_MS

# The latency results compared per arm: model-level ("") or the whole request's part.
ARM_METRICS = (P50_MS, P95_MS, P99_MS, ERROR_RATE)


@cached
def rollout_models(db_url: str) -> list[str]:
    """Models with a routing plan now or a plan change in their history."""
    with session_scope(db_url) as session:
        found = set(session.scalars(select(RolloutPlan.model))) | set(session.scalars(select(RolloutStep.model)))
    return sorted(found)


@cached
def plans(db_url: str) -> pd.DataFrame:
    """Current plans. Columns: model, mode, candidate, production, plan, started_at, updated_at."""
    with session_scope(db_url) as session:
        rows = session.execute(select(RolloutPlan.model, RolloutPlan.mode, RolloutPlan.plan,
                                      RolloutPlan.production_version, RolloutPlan.started_at,
                                      RolloutPlan.updated_at).order_by(RolloutPlan.model)).all()
    frame = pd.DataFrame([{"model": m, "mode": mode, "candidate": plan["candidate"], "production": production,
                           "plan": dict(plan), "started_at": started, "updated_at": updated}
                          for m, mode, plan, production, started, updated in rows],
                         columns=["model", "mode", "candidate", "production", "plan", "started_at", "updated_at"])
    for column in ("started_at", "updated_at"):
        frame[column] = _utc(frame[column])
    return frame


@cached
def steps(db_url: str, model: str) -> pd.DataFrame:
    """Every plan change of the model, oldest first. Columns: at, by, action, from, to, reason."""
    with session_scope(db_url) as session:
        found = store_rollouts.steps(session, model)
    frame = pd.DataFrame(found, columns=["at", "by", "action", "from", "to", "reason"])
    frame["at"] = _utc(frame["at"])
    return frame


@cached
def verdicts(db_url: str, model: str) -> pd.DataFrame:
    """Verdicts per judged window, oldest first.

    Columns: candidate, window_start_ms, window_end_ms, verdict, reasons, details (the comparisons behind
    the verdict, `RolloutVerdictDetails`), evaluated_at.
    """
    with session_scope(db_url) as session:
        found = store_rollouts.verdicts(session, model)
    frame = pd.DataFrame(found, columns=["model", "candidate", "window_start_ms", "window_end_ms", "verdict",
                                         "reasons", "details", "evaluated_at"]).drop(columns="model")
    frame["evaluated_at"] = _utc(frame["evaluated_at"])
    return frame


@cached
def arm_traffic(db_url: str, model: str, versions: tuple[str, ...], start_ms: int, end_ms: int) -> pd.DataFrame:
    """Events per version per window in the range, from the window states. Columns: version, window_start_ms, events."""
    r = WindowStateRecord
    with session_scope(db_url) as session:
        rows = session.execute(
            select(r.version, r.window_start_ms, func.sum(r.events))
            .where(r.model == model, r.version.in_(versions), r.window_start_ms >= start_ms,
                   r.window_start_ms < end_ms, r.partition >= 0)
            .group_by(r.version, r.window_start_ms).order_by(r.window_start_ms)).all()
    frame = _frame(rows, ["version", "window_start_ms", "events"])
    frame["events"] = frame["events"].fillna(0).astype("int64")
    return frame


@cached
def arm_serving(db_url: str, model: str, versions: tuple[str, ...], start_ms: int, end_ms: int) -> pd.DataFrame:
    """The evaluated windows' latency quantiles and error rate per version.

    Columns: version, window_start_ms, metric, value.
    """
    r = DetectorResult
    with session_scope(db_url) as session:
        rows: list[Any] = session.execute(
            select(r.version, r.window_start_ms, r.metric, r.value)
            .where(r.model == model, r.version.in_(versions), r.window_start_ms >= start_ms,
                   r.window_start_ms < end_ms, r.detector == LATENCY, r.feature.in_(("", LATENCY_TOTAL)),
                   r.metric.in_(ARM_METRICS), r.value.is_not(None), r.segment == "")
            .order_by(r.window_start_ms)).all()
    frame = _frame(rows, ["version", "window_start_ms", "metric", "value"])
    frame["value"] = frame["value"].astype("float64")
    return frame


@cached
def production_version(db_url: str, model: str) -> str | None:
    with session_scope(db_url) as session:
        return alias_version(session, model)
