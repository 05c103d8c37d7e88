"""The notification outbox (DB only): enqueue with the state change, claim, record outcomes.

Row life: pending --claim--> sending --success--> sent
                                     --failure--> pending (next_attempt_at = now + backoff)
                                     --give up--> failed (kept, visible, `requeue_failed` sends it again)

Claiming sets status 'sending' and uses `next_attempt_at` as the lease's expiry; a
row whose job died mid-send is due again once the lease expires. On PostgreSQL the
claim query takes the row with `FOR UPDATE SKIP LOCKED`, so several delivery jobs
never pick the same row; on SQLite writers are serialised and the claim is a
compare-and-set (`UPDATE ... WHERE status = <seen> AND attempts = <seen>`) there as
well. Outcomes are compare-and-set on (status 'sending', attempts = the claim's), so a
job whose lease expired and whose row was re-claimed cannot overwrite the newer
outcome, and a row is marked sent exactly once. Notifications of one (group,
channel) go out in order: a row waits while an older row of the same pair is
pending or sending (a resolve never overtakes its trigger).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, ContextManager, Iterable

from sqlalchemy import and_, exists, select, update
from sqlalchemy.orm import Session, aliased

from driftline.redact import scrub
from driftline.store.models import Notification, RetrainRequest
from driftline.vocabulary import (NOTIFICATION_FAILED, NOTIFICATION_OPEN, NOTIFICATION_PENDING, NOTIFICATION_SENDING,
                                  NOTIFICATION_SENT)

from driftline.alerts.channels.retrain import RETRAIN
from driftline.alerts.times import as_utc

SessionFactory = Callable[[], ContextManager[Session]]
# A retraining notification's RetrainRequest row: its key is this prefix + the notification's key.
# The HTTP Idempotency-Key is the bare key: a receiver that stores requests in the same store
# (the worker's /admin/retrain) keys its own row by it, and must not find ours under that key,
# or it would take the request for a duplicate and never run it.
RETRAIN_ROW_PREFIX = "policy:"


@dataclass(frozen=True)
class Claim:
    id: int
    idempotency_key: str
    channel: str
    kind: str
    payload: dict[str, Any]
    attempts: int  # including this one
    created_at: datetime


def enqueue(session: Session, *, idempotency_key: str, channel: str, kind: str, payload: dict[str, Any],
            alert_fingerprint: str | None, now: datetime) -> Notification | None:
    """Add an outbox row in the caller's transaction; None if this key is already queued."""
    existing = session.scalar(select(Notification.id).where(Notification.idempotency_key == idempotency_key))
    if existing is not None:
        return None
    now = as_utc(now)
    row = Notification(idempotency_key=idempotency_key, alert_fingerprint=alert_fingerprint, channel=channel,
                       kind=kind, payload=payload, status=NOTIFICATION_PENDING, attempts=0, next_attempt_at=now, created_at=now)
    session.add(row)
    return row


def _due(now: datetime, exclude: Iterable[int], channels: Iterable[str] | None = None,
         other_than: Iterable[str] = ()):  # noqa: ANN202 - a SQLAlchemy select
    older = aliased(Notification)
    blocked = exists().where(older.alert_fingerprint == Notification.alert_fingerprint,
                             older.channel == Notification.channel, older.id < Notification.id,
                             older.status.in_(NOTIFICATION_OPEN))
    query = (select(Notification)
             .where(Notification.status.in_(NOTIFICATION_OPEN), Notification.next_attempt_at <= now, ~blocked)
             .order_by(Notification.next_attempt_at, Notification.id)
             .limit(1)
             .with_for_update(skip_locked=True, of=Notification))
    exclude = list(exclude)
    if exclude:
        query = query.where(Notification.id.not_in(exclude))
    if channels is not None:
        query = query.where(Notification.channel.in_(list(channels)))
    other_than = list(other_than)
    if other_than:
        query = query.where(Notification.channel.not_in(other_than))
    return query


def claim_next(session_factory: SessionFactory, *, now: datetime, lease: timedelta, exclude: Iterable[int] = (),
               channels: Iterable[str] | None = None, other_than: Iterable[str] = ()) -> Claim | None:
    """Claim the next due row (pending and due, or 'sending' with an expired lease), in its own transaction.

    `channels`: only rows of these channels; `other_than`: no row of these (a delivery lane's share).
    """
    now = as_utc(now)
    exclude = set(exclude)
    channels = None if channels is None else list(channels)
    other_than = list(other_than)
    for _ in range(20):  # another job can win the compare-and-set; look again, a bounded number of times
        with session_factory() as session:
            row = session.scalar(_due(now, exclude, channels, other_than))
            if row is None:
                return None
            seen_status, seen_attempts = row.status, row.attempts
            result = session.execute(
                update(Notification)
                .where(Notification.id == row.id, Notification.status == seen_status,
                       Notification.attempts == seen_attempts)
                .values(status=NOTIFICATION_SENDING, attempts=seen_attempts + 1, next_attempt_at=now + lease)
                .execution_options(synchronize_session=False))
            if result.rowcount != 1:
                exclude.add(row.id)
                continue
            return Claim(id=row.id, idempotency_key=row.idempotency_key, channel=row.channel, kind=row.kind,
                         payload=dict(row.payload), attempts=seen_attempts + 1, created_at=as_utc(row.created_at))
    return None


def _finish(session: Session, claim: Claim, **values: Any) -> bool:
    result = session.execute(
        update(Notification)
        .where(Notification.id == claim.id, Notification.status == NOTIFICATION_SENDING,
               Notification.attempts == claim.attempts)
        .values(**values)
        .execution_options(synchronize_session=False))
    return result.rowcount == 1


def record_success(session_factory: SessionFactory, claim: Claim, *, now: datetime, status_code: int | None,
                   response: Any = None) -> bool:
    """Mark a claimed row sent; False if the claim was lost (lease expired and the row re-claimed)."""
    now = as_utc(now)
    with session_factory() as session:
        done = _finish(session, claim, status=NOTIFICATION_SENT, sent_at=now, response_status=status_code, last_error=None)
        if done and claim.channel == RETRAIN:
            _retrain_outcome(session, claim, "running", response, now)
        return done


def record_failure(session_factory: SessionFactory, claim: Claim, *, now: datetime, status_code: int | None,
                   error: str, retry_at: datetime | None, response: Any = None) -> bool:
    """Schedule the next attempt at `retry_at`, or give up (status 'failed') when it is None."""
    now = as_utc(now)
    error = scrub(error)[:4000]  # callers mask configured secrets; URL credentials never reach the table either
    with session_factory() as session:
        if retry_at is None:
            done = _finish(session, claim, status=NOTIFICATION_FAILED, response_status=status_code, last_error=error,
                           next_attempt_at=now)
            if done and claim.channel == RETRAIN:
                rejected = status_code is not None and 400 <= status_code < 500 and status_code != 429
                _retrain_outcome(session, claim, "rejected" if rejected else "failed",
                                 response if response is not None else {"error": error}, now)
            return done
        return _finish(session, claim, status=NOTIFICATION_PENDING, response_status=status_code, last_error=error,
                       next_attempt_at=as_utc(retry_at))


def _retrain_outcome(session: Session, claim: Claim, status: str, response: Any, now: datetime) -> None:
    """Record the receiver's answer on the policy's RetrainRequest row.

    Accepted ("running": the receiver owns the rest). If the receiver keeps its own row
    in this store under the same key (the worker's POST /admin/retrain does), that row
    becomes the one record of the request and the policy's row is removed, so a request
    is never counted twice.
    """
    row = session.scalar(select(RetrainRequest).where(
        RetrainRequest.idempotency_key == RETRAIN_ROW_PREFIX + claim.idempotency_key))
    if row is None:
        return
    if status == "running" and session.scalar(select(RetrainRequest.id).where(
            RetrainRequest.idempotency_key == claim.idempotency_key)) is not None:
        session.delete(row)
        return
    row.status = status
    row.response = response if isinstance(response, dict) else {"body": response}
    row.completed_at = None if status == "running" else now


def requeue_failed(session: Session, *, now: datetime, ids: Iterable[int] | None = None,
                   channel: str | None = None) -> tuple[list[int], list[int]]:
    """Send failed rows again with a fresh retry budget (`created_at` restarts the max age).

    Returns (requeued ids, skipped ids). A row is skipped when a later row of its
    (group, channel) was sent since: re-sending a trigger after its resolve would
    reopen an incident that is over.
    """
    now = as_utc(now)
    query = select(Notification).where(Notification.status == NOTIFICATION_FAILED)
    if ids is not None:
        query = query.where(Notification.id.in_(list(ids)))
    if channel is not None:
        query = query.where(Notification.channel == channel)
    requeued, skipped = [], []
    later = aliased(Notification)
    for row in session.scalars(query.order_by(Notification.id)):
        superseded = row.alert_fingerprint is not None and session.scalar(select(exists().where(and_(
            later.alert_fingerprint == row.alert_fingerprint, later.channel == row.channel,
            later.id > row.id, later.status == NOTIFICATION_SENT))))
        if superseded:
            skipped.append(row.id)
            continue
        row.status = NOTIFICATION_PENDING
        row.attempts = 0
        row.next_attempt_at = now
        row.last_error = f"requeued at {now.isoformat()} after: {row.last_error or 'failure'}"[:4000]
        row.created_at = now
        requeued.append(row.id)
        if row.channel == RETRAIN:
            request = session.scalar(select(RetrainRequest).where(
                RetrainRequest.idempotency_key == RETRAIN_ROW_PREFIX + row.idempotency_key))
            if request is not None:
                request.status = "requested"
                request.completed_at = None
    return requeued, skipped
