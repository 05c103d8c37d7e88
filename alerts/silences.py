"""Silences: mute notifications of matching alerts until an expiry (DB, plus a pure matcher).

A silence matches an alert when each of its fields (model, detector, feature) is
empty or equal to the alert's. A silenced alert still changes state and shows in
`driftline alerts list`; only its trigger and repeat notifications are held back,
and it is announced when the silence expires if it is still firing. A resolve for
something already announced is never held back.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from driftline.errors import UserError
from driftline.store.models import Silence

from driftline.alerts.rules import DETECTORS
from driftline.alerts.times import as_utc


def matches(silence: Any, alert: Any) -> bool:
    return all(getattr(silence, f) in (None, "", getattr(alert, f)) for f in ("model", "detector", "feature"))


def create_silence(session: Session, *, model: str, duration: timedelta, comment: str, now: datetime,
                   detector: str | None = None, feature: str | None = None, created_by: str = "") -> Silence:
    if not model:
        raise UserError("a silence needs --model")
    if detector is not None and detector not in DETECTORS:
        raise UserError(f"unknown detector {detector!r}; expected one of {', '.join(DETECTORS)}")
    if duration <= timedelta(0):
        raise UserError("--for must be a positive duration such as 30m or 2h")
    if not comment or not comment.strip():
        raise UserError("a silence needs a --comment saying why (it is shown to whoever wonders why nothing pages)")
    now = as_utc(now)
    silence = Silence(model=model, detector=detector, feature=feature, comment=comment.strip(),
                      created_by=created_by, starts_at=now, expires_at=now + duration)
    session.add(silence)
    session.flush()
    return silence


def expire_silence(session: Session, silence_id: int, *, now: datetime) -> Silence:
    silence = session.get(Silence, silence_id)
    if silence is None:
        raise UserError(f"no silence with id {silence_id}; `driftline alerts list` shows the active ones")
    now = as_utc(now)
    if as_utc(silence.expires_at) > now:
        silence.expires_at = now
    return silence


def active_silences(session: Session, *, now: datetime) -> list[Silence]:
    now = as_utc(now)
    return list(session.scalars(select(Silence).where(Silence.starts_at <= now, Silence.expires_at > now)
                                .order_by(Silence.expires_at)))
