"""Rollouts after the fact: every rollout of a model, read back from its append-only steps (DB only).

A rollout is the run of `RolloutStep` rows from a `set` on a model without a plan to the
`clear` that ends it (or to now, while it runs). Its outcome:
- ``running``: no `clear` yet;
- ``promoted``: the production alias moved to the candidate (an `AliasEvent` "promote") between
  the rollout's start and ROLLOUT_OUTCOME_MATCH_SECONDS after its `clear`;
- ``rolled_back``: the rollout policy cleared it otherwise (a failed verdict);
- ``cleared``: a person cleared it (`driftline rollout clear`).
`ended_rollouts` keeps those that ended in the last ROLLOUT_ENDED_VISIBLE_SECONDS for the status views.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from driftline import defaults
from driftline.store.models import AliasEvent, RolloutStep
from driftline.store.rollouts import BY_POLICY, CLEAR, latest_verdict, rollouts

RUNNING = "running"
PROMOTED = "promoted"
ROLLED_BACK = "rolled_back"
CLEARED = "cleared"
OUTCOMES = (RUNNING, PROMOTED, ROLLED_BACK, CLEARED)


def rollout_history(session: Session, model: str) -> list[dict[str, Any]]:
    """Every rollout of `model`, oldest first: mode, candidate, start, end, outcome, final verdict, steps."""
    found: list[dict[str, Any]] = []
    current: list[RolloutStep] = []
    for step in session.scalars(select(RolloutStep).where(RolloutStep.model == model).order_by(RolloutStep.id)):
        current.append(step)
        if step.action == CLEAR:
            found.append(_document(session, model, current))
            current = []
    if current:
        found.append(_document(session, model, current))
    return found


def ended_rollouts(session: Session, now: datetime | None = None,
                   keep: timedelta = timedelta(seconds=defaults.ROLLOUT_ENDED_VISIBLE_SECONDS)) -> list[dict[str, Any]]:
    """Rollouts of any model that ended within `keep` of `now`, most recent end first."""
    now = now or datetime.now(timezone.utc)
    models = session.scalars(select(RolloutStep.model).where(
        RolloutStep.action == CLEAR, RolloutStep.at >= _naive_or_aware(session, now - keep)).distinct()).all()
    ended = [r for model in sorted(models) for r in rollout_history(session, model)
             if r["outcome"] != RUNNING and _utc(r["_ended"]) >= now - keep]
    ended.sort(key=lambda r: r["_ended"], reverse=True)
    return [public(r) for r in ended]


def public(document: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if not k.startswith("_")}


def _document(session: Session, model: str, steps: list[RolloutStep]) -> dict[str, Any]:
    first, last = steps[0], steps[-1]
    ended = last.action == CLEAR
    # the plan as it ended (or stands): a rollout may change mode or candidate on the way
    final = (last.from_plan if ended else last.to_plan) or first.to_plan or {}
    candidate = final.get("candidate")
    verdict = latest_verdict(session, model, candidate) if candidate else None
    outcome = RUNNING
    if ended:
        outcome = CLEARED if last.by != BY_POLICY else (
            PROMOTED if _promoted(session, model, candidate, first.at, last.at) else ROLLED_BACK)
    return {
        "model": model, "mode": final.get("mode"), "candidate": candidate, "plan": final,
        "outcome": outcome, "started_at": _iso(first.at), "ended_at": _iso(last.at) if ended else None,
        "ended_by": last.by if ended else None, "end_reason": last.reason if ended else None,
        "verdict": verdict["verdict"] if verdict else None, "reasons": verdict["reasons"] if verdict else [],
        "steps": [{"by": s.by, "action": s.action, "from": s.from_plan, "to": s.to_plan, "reason": s.reason,
                   "at": _iso(s.at)} for s in steps],
        "_ended": last.at if ended else None,
    }


def _promoted(session: Session, model: str, candidate: str | None, start: datetime, end: datetime) -> bool:
    if candidate is None:
        return False
    until = _utc(end) + timedelta(seconds=defaults.ROLLOUT_OUTCOME_MATCH_SECONDS)
    moves = session.scalars(select(AliasEvent.at).where(
        AliasEvent.model == model, AliasEvent.version == candidate, AliasEvent.action == "promote")).all()
    return any(_utc(start) <= _utc(at) <= until for at in moves)


def _utc(at: datetime) -> datetime:
    # SQLite hands back naive datetimes (stored as UTC), PostgreSQL aware ones
    return at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)


def _naive_or_aware(session: Session, at: datetime) -> datetime:
    """`at` as the dialect compares it: SQLite stores naive UTC text."""
    return at.replace(tzinfo=None) if session.get_bind().dialect.name == "sqlite" else at


def _iso(at: datetime | None) -> str | None:
    return None if at is None else _utc(at).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def status_rollouts(session: Session, now: datetime | None = None) -> list[dict[str, Any]]:
    """The status views' rollouts: the running ones (outcome "running"), then those ended within
    ROLLOUT_ENDED_VISIBLE_SECONDS (production: None, as the plan row that held it is gone)."""
    running = [{**r, "outcome": RUNNING, "ended_at": None, "ended_by": None, "end_reason": None}
               for r in rollouts(session)]
    ended = [{**r, "production": None, "winner": None} for r in ended_rollouts(session, now)]
    return running + ended
