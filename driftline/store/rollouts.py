"""The one writer of rollout plans: every change of a model's routing plan goes through `set_plan` or `clear_plan`.

A plan (driftline.rollouts.RoutingPlan) lives in `RolloutPlan`, one row per model next to its
production alias; each change appends a `RolloutStep` (who: ``cli`` or ``policy``; from; to; when),
so the history is never rewritten. Versions are checked against the registry here, in the
writer, so the command line and a rollout policy refuse the same plans with the same words.
The rollout analysis writes its verdicts per window with `record_verdict`.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from driftline.errors import UserError
from driftline.rollouts import AB, RoutingPlan
from driftline.store.aliases import alias_version
from driftline.store.models import ModelVersion, RolloutPlan, RolloutStep, RolloutVerdictRecord
from driftline.vocabulary import VERDICT_FAIL, VERDICT_INCONCLUSIVE, VERDICT_PASS, VERDICTS

# who changed a plan
BY_CLI = "cli"
BY_POLICY = "policy"
AUTHORS = (BY_CLI, BY_POLICY)
# what a step did
SET = "set"
CLEAR = "clear"
# the rollout analysis' verdicts on a candidate's window
PASS, FAIL, INCONCLUSIVE = VERDICT_PASS, VERDICT_FAIL, VERDICT_INCONCLUSIVE  # the vocabulary's, by short names
# a version whose artifact folder is gone (driftline.worker.registry prunes them)
_PRUNED = "pruned"


def set_plan(session: Session, plan: RoutingPlan, by: str = BY_CLI, reason: str | None = None) -> dict[str, Any] | None:
    """Make `plan` the model's routing plan and record the step; returns the plan it replaced (as a dict)."""
    _check_author(by)
    production = _production(session, plan.model)
    known = {v: stage for v, stage in session.execute(
        select(ModelVersion.version, ModelVersion.stage).where(ModelVersion.model == plan.model))}
    for version in plan.versions:
        if version not in known:
            raise UserError(f"model {plan.model!r} has no version {version!r} "
                            f"(registered: {', '.join(sorted(known, key=_version_order)) or 'none'})")
        if known[version] == _PRUNED:
            raise UserError(f"{plan.model} version {version} was pruned: its artifact is gone and no worker can load it")
    if plan.mode == AB:
        if all(version == production for version in plan.versions):
            raise UserError(f"an A/B test of {plan.model} needs an arm other than production (version {production})")
    elif plan.versions[0] == production:
        raise UserError(f"version {production} is {plan.model}'s production version; a {plan.mode} needs another "
                        "version as its candidate")
    # the row lock serialises two concurrent changes, so neither loses its step's from_plan
    row = session.get(RolloutPlan, plan.model, with_for_update=True)
    previous = dict(row.plan) if row is not None else None
    document = plan.to_dict()
    if row is None:
        session.add(RolloutPlan(model=plan.model, mode=plan.mode, plan=document, production_version=production))
    else:
        row.mode, row.plan, row.production_version = plan.mode, document, production
        row.updated_at = datetime.now(timezone.utc)
    session.add(RolloutStep(model=plan.model, by=by, action=SET, from_plan=previous, to_plan=document, reason=reason))
    return previous


def clear_plan(session: Session, model: str, by: str = BY_CLI, reason: str | None = None) -> dict[str, Any] | None:
    """Back to production only; returns the plan that was cleared (None, and no step, when there was none)."""
    _check_author(by)
    row = session.get(RolloutPlan, model, with_for_update=True)
    if row is None:
        return None
    previous = dict(row.plan)
    session.execute(delete(RolloutPlan).where(RolloutPlan.model == model))
    session.add(RolloutStep(model=model, by=by, action=CLEAR, from_plan=previous, to_plan=None, reason=reason))
    return previous


def current_plan(session: Session, model: str) -> RoutingPlan | None:
    """The model's plan, or None (cheap: one primary-key read, polled by the worker)."""
    row = session.get(RolloutPlan, model)
    return RoutingPlan.from_dict(row.plan) if row is not None else None


def steps(session: Session, model: str, current_only: bool = False) -> list[dict[str, Any]]:
    """The model's plan changes, oldest first (`current_only`: those since the last `clear`, the current rollout's)."""
    query = select(RolloutStep).where(RolloutStep.model == model).order_by(RolloutStep.id)
    if current_only:
        last_clear = session.scalar(select(func.max(RolloutStep.id)).where(RolloutStep.model == model,
                                                                           RolloutStep.action == CLEAR))
        if last_clear is not None:
            query = query.where(RolloutStep.id > last_clear)
    return [{"by": s.by, "action": s.action, "from": s.from_plan, "to": s.to_plan, "reason": s.reason,
             "at": _iso(s.at)} for s in session.scalars(query)]


def rollouts(session: Session) -> list[dict[str, Any]]:
    """The current rollouts, for `driftline status --json`: mode, candidate, the latest verdict (its reasons,
    an A/B test's winner), the steps.

    `steps` are the changes since the rollout started (since the model's last `clear`).
    """
    documents = []
    for row in session.scalars(select(RolloutPlan).order_by(RolloutPlan.model)):
        candidate = row.plan["candidate"]
        latest = latest_verdict(session, row.model, candidate)
        documents.append({"model": row.model, "mode": row.mode, "candidate": candidate,
                          "production": row.production_version, "plan": row.plan,
                          "verdict": latest["verdict"] if latest else None,
                          "reasons": latest["reasons"] if latest else [],
                          "winner": latest["details"].get("winner") if latest else None,
                          "steps": steps(session, row.model, current_only=True)})
    return documents


def record_verdict(session: Session, model: str, candidate: str, window_start_ms: int, window_end_ms: int,
                   verdict: str, reasons: list[Any] | None = None, details: dict[str, Any] | None = None) -> None:
    """Store the analysis' verdict on `candidate` for one window, replacing an earlier one for that window.

    `details` are the comparisons behind it (`RolloutVerdictDetails`: per arm and metric the
    value and interval, the shadow's examples, the A/B winner); they must be JSON numbers,
    finite (the rollout analysis' `verdict_details` makes them so).
    """
    if verdict not in VERDICTS:
        raise UserError(f"a rollout verdict is one of {', '.join(VERDICTS)}, got {verdict!r}")
    document = _json_document(details)
    row = session.scalar(select(RolloutVerdictRecord).where(
        RolloutVerdictRecord.model == model, RolloutVerdictRecord.candidate == candidate,
        RolloutVerdictRecord.window_start_ms == window_start_ms).with_for_update())
    if row is None:
        session.add(RolloutVerdictRecord(model=model, candidate=candidate, window_start_ms=window_start_ms,
                                   window_end_ms=window_end_ms, verdict=verdict, reasons=list(reasons or []),
                                   details=document))
    else:
        row.window_end_ms, row.verdict, row.reasons = window_end_ms, verdict, list(reasons or [])
        row.details = document
        row.evaluated_at = datetime.now(timezone.utc)


def verdicts(session: Session, model: str, candidate: str | None = None) -> list[dict[str, Any]]:
    """Verdicts per window, oldest window first."""
    query = select(RolloutVerdictRecord).where(RolloutVerdictRecord.model == model).order_by(
        RolloutVerdictRecord.window_start_ms, RolloutVerdictRecord.candidate)
    if candidate is not None:
        query = query.where(RolloutVerdictRecord.candidate == candidate)
    return [{"model": v.model, "candidate": v.candidate, "window_start_ms": v.window_start_ms,
             "window_end_ms": v.window_end_ms, "verdict": v.verdict, "reasons": v.reasons,
             "details": dict(v.details or {}), "evaluated_at": _iso(v.evaluated_at)} for v in session.scalars(query)]


def latest_verdict(session: Session, model: str, candidate: str) -> dict[str, Any] | None:
    """The verdict of the candidate's latest analysed window, or None."""
    found = verdicts(session, model, candidate)
    return found[-1] if found else None


def _json_document(details: dict[str, Any] | None) -> dict[str, Any]:
    """`details` checked to be a JSON object of finite numbers: PostgreSQL refuses NaN in JSON, SQLite would
    store a string no reader parses back, so a bad value is an error naming it rather than a lost verdict."""
    if details is None:
        return {}
    if not isinstance(details, dict):
        raise UserError(f"rollout verdict details must be a JSON object, got {type(details).__name__}")
    try:
        json.dumps(details, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UserError(f"rollout verdict details are not storable JSON: {exc}") from None
    return details


def _production(session: Session, model: str) -> str:
    version = alias_version(session, model)
    if version is None:
        raise UserError(f"model {model!r} has no production version; a rollout starts from one "
                        f"(`driftline promote VERSION --model {model}`)")
    return version


def _check_author(by: str) -> None:
    if by not in AUTHORS:
        raise UserError(f"a plan change is made by one of {', '.join(AUTHORS)}, got {by!r}")


def _version_order(version: str) -> tuple[int, int | str]:
    return (0, int(version)) if version.isdigit() else (1, version)


def _iso(at: datetime | None) -> str | None:
    if at is None:
        return None
    # SQLite hands back naive datetimes (stored as UTC), PostgreSQL aware ones
    at = at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
