"""Deliver due outbox notifications through their channels, with retries (DB + HTTP or SMTP).

`deliver_due` is the scheduler's periodic job. Each channel is its own lane: its rows are
claimed and sent by their own loop, in their own thread (the scheduler runs one job per lane),
so a stalled webhook never delays a PagerDuty page; rows of a channel without an endpoint
have a lane of their own, where they fail visibly. Within a lane, one row at a time: claim
it (a short transaction, see driftline.alerts.outbox), make one attempt through its channel (an HTTP
call, or an SMTP session for e-mail; bounded as a whole by the delivery timeout, `ALERT_HTTP_TIMEOUT_SECONDS`, well inside the
claim lease, so a live call never sees its row claimed again), record the outcome (another
short transaction). No transaction is open during the call.

Retries: a 2xx is success. 408, 425, 429, 5xx and network errors (refused, reset,
timed out) are retried: after Retry-After when the answer has one (429; clamped to
``ALERT_RETRY_AFTER_MAX_SECONDS``, so ``inf`` or a date years ahead cannot break a run), else after
an exponential backoff with jitter, ``d = min(backoff_max, backoff_initial * 2**(n-1))``
and the wait drawn uniformly from ``[d/2, d]``. Other 4xx answers (PagerDuty's 400
"invalid event", Slack's invalid_payload) are not retried: the row is failed at once. Each
channel says which of its failures are worth retrying (`SendResult.retryable`): for e-mail a
4xx SMTP reply is, a 5xx is not.
A row is also failed when its next attempt would fall after ``created_at + max_age``
or it has had ``max_attempts`` attempts; failed rows stay in the table, shown by
`driftline alerts list`, and `driftline alerts retry` sends them again with a fresh
budget (the group's next repeat notification also re-announces a still-firing alert).
A row is always tried at least once, however old, so a resolve is never dropped for age.

Isolation: an unexpected error while handling one row (a channel bug, the store
failing on that row's outcome) is caught and logged; the row is retried after a
backoff, or failed once its budget is spent, and the run goes on with the next row.
Error text is scrubbed of configured secrets and URL credentials (`driftline.redact`)
before it is logged or stored.

Exactly once, as far as HTTP allows: a row is marked sent only after a 2xx, and only
by the job holding its claim; it is never claimed again after that. The one ambiguous
case is a crash after the receiver answered 2xx and before the row was marked sent:
when the lease expires the row is sent once more. PagerDuty deduplicates that by
`dedup_key`, webhook and retraining receivers by the `Idempotency-Key` header (the
same on every attempt), mail clients by Message-ID; Slack and Teams have no deduplication, so
a duplicate message is possible there and only there.
"""
from __future__ import annotations

import logging
import math
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Callable, ContextManager

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from driftline import defaults
from driftline.store.db import session_scope

from driftline.alerts import outbox
from driftline.alerts.channels import Channels
from driftline.alerts.channels.http import SendResult
from driftline.alerts.rules import DeliveryPolicy
from driftline.alerts.times import as_utc, utcnow

log = logging.getLogger(__name__)


@dataclass
class DeliveryReport:
    """What one `deliver_due` run did."""

    sent: list[int] = field(default_factory=list)
    retrying: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    lost_claims: list[int] = field(default_factory=list)  # lease expired mid-send and the row was re-claimed
    errors: dict[int, str] = field(default_factory=dict)

    @property
    def attempted(self) -> int:
        return len(self.sent) + len(self.retrying) + len(self.failed) + len(self.lost_claims)

    def add(self, other: "DeliveryReport") -> None:
        self.sent += other.sent
        self.retrying += other.retrying
        self.failed += other.failed
        self.lost_claims += other.lost_claims
        self.errors.update(other.errors)


# The lane of rows whose channel has no endpoint here (they fail visibly, not wait forever).
UNCONFIGURED = "(unconfigured)"


def delivery_lanes(channels: Channels) -> list[str]:
    """One lane per configured channel, and one for rows of channels without an endpoint."""
    return [*channels.enabled(), UNCONFIGURED]


def retry_delay(attempts: int, policy: DeliveryPolicy, rng: random.Random | None = None) -> timedelta:
    """Backoff before attempt `attempts + 1`: uniform in [d/2, d], d = min(max, initial * 2**(attempts-1))."""
    rng = rng or random
    ceiling = min(policy.backoff_max.total_seconds(),
                  policy.backoff_initial.total_seconds() * 2 ** max(0, min(attempts - 1, 60)))
    return timedelta(seconds=rng.uniform(ceiling / 2, ceiling))


def next_attempt(result: SendResult, attempts: int, created_at: datetime, now: datetime, policy: DeliveryPolicy,
                 rng: random.Random | None = None) -> datetime | None:
    """When to try again after a failed attempt, or None to give up (pure)."""
    if not result.retryable or attempts >= policy.max_attempts:
        return None
    retry_after = result.retry_after
    if retry_after is not None and not math.isnan(retry_after):
        # SendResult may come from any channel: the clamp of parse_retry_after holds here too.
        delay = timedelta(seconds=min(max(0.0, retry_after), defaults.ALERT_RETRY_AFTER_MAX_SECONDS))
    else:
        delay = retry_delay(attempts, policy, rng)
    when = now + delay
    if when > as_utc(created_at) + policy.max_age:
        return None
    return when


SessionFactory = Callable[[], ContextManager[Session]]


def _session_factory(target: str | Engine | SessionFactory) -> SessionFactory:
    if isinstance(target, (str, Engine)):
        return lambda: session_scope(target)
    return target


def deliver_due(url_or_session_factory: str | Engine | SessionFactory, *, channels: Channels,
                now: datetime | None = None, limit: int = 100, policy: DeliveryPolicy | None = None,
                rng: random.Random | None = None, lane: str | None = None) -> DeliveryReport:
    """Send up to `limit` due notifications per lane; returns what happened to each.

    `url_or_session_factory`: a database URL or Engine, or a callable returning a
    context manager that yields a Session and commits on exit (like
    `driftline.store.db.session_scope`). `now` fixes the clock (tests); by default
    the wall clock is read at each step. `lane`: one channel's rows only (a name from
    `delivery_lanes`); by default every lane at once, each in its own thread. Never
    raises for a channel's failure.
    """
    policy = policy or DeliveryPolicy()
    factory = _session_factory(url_or_session_factory)
    clock: Callable[[], datetime] = (lambda: as_utc(now)) if now is not None else utcnow
    lanes = delivery_lanes(channels) if lane is None else [lane]
    if len(lanes) == 1:
        return _deliver_lane(factory, channels, lanes[0], clock, limit, policy, rng)
    with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="driftline-delivery") as pool:
        futures = [pool.submit(_deliver_lane, factory, channels, name, clock, limit, policy, rng) for name in lanes]
    report = DeliveryReport()
    for future in futures:
        report.add(future.result())  # re-raises what a lane raised (SystemExit included)
    return report


def _deliver_lane(factory: SessionFactory, channels: Channels, lane: str, clock: Callable[[], datetime], limit: int,
                  policy: DeliveryPolicy, rng: random.Random | None) -> DeliveryReport:
    """Claim and send the due rows of one lane, one at a time."""
    only, other_than = (None, channels.enabled()) if lane == UNCONFIGURED else ([lane], ())
    report = DeliveryReport()
    seen: set[int] = set()
    for _ in range(max(0, limit)):
        try:
            claim = outbox.claim_next(factory, now=clock(), lease=policy.lease, exclude=seen, channels=only,
                                      other_than=other_than)
        except Exception as exc:  # the store is unreachable: the next run tries again
            log.warning("could not claim a notification: %s", channels.scrub(f"{type(exc).__name__}: {exc}"))
            break
        if claim is None:
            break
        seen.add(claim.id)
        try:
            _deliver_one(factory, claim, channels, clock, policy, rng, report)
        except Exception as exc:  # one row's trouble must not stop the others, nor leave it 'sending'
            error = channels.scrub(f"delivery failed: {type(exc).__name__}: {exc}")[:4000]
            log.warning("notification %s (%s %s): %s", claim.id, claim.channel, claim.kind, error)
            report.errors[claim.id] = error
            _record_crash(factory, claim, clock(), error, policy, rng, report)
    return report


def _deliver_one(factory: SessionFactory, claim: outbox.Claim, channels: Channels, clock: Callable[[], datetime],
                 policy: DeliveryPolicy, rng: random.Random | None, report: DeliveryReport) -> None:
    channel = channels.get(claim.channel)
    if channel is None:
        result = SendResult(ok=False, error=f"no endpoint configured for channel {claim.channel!r}",
                            retryable=False)
    else:
        try:
            result = channel.send(claim.payload, claim.idempotency_key)
        except Exception as exc:  # a channel bug must not stop the others
            result = SendResult(ok=False, error=f"{type(exc).__name__}: {exc}")
    at = clock()
    if result.ok:
        recorded = outbox.record_success(factory, claim, now=at, status_code=result.status,
                                         response=result.response)
        (report.sent if recorded else report.lost_claims).append(claim.id)
        return
    retry_at = next_attempt(result, claim.attempts, claim.created_at, at, policy, rng)
    error = channels.scrub(result.error or "failed")
    if retry_at is None and result.retryable:
        error = f"gave up after {claim.attempts} attempt(s): {error}"
    recorded = outbox.record_failure(factory, claim, now=at, status_code=result.status, error=error,
                                     retry_at=retry_at, response=result.response)
    report.errors[claim.id] = error
    if not recorded:
        report.lost_claims.append(claim.id)
    elif retry_at is None:
        log.warning("notification %s (%s %s) failed for good: %s", claim.id, claim.channel, claim.kind, error)
        report.failed.append(claim.id)
    else:
        report.retrying.append(claim.id)


def _record_crash(factory: SessionFactory, claim: outbox.Claim, at: datetime, error: str, policy: DeliveryPolicy,
                  rng: random.Random | None, report: DeliveryReport) -> None:
    """After an unexpected error: retry the row after a backoff (within its budget), else fail it."""
    retry_at = next_attempt(SendResult(ok=False, error=error), claim.attempts, claim.created_at, at, policy, rng)
    try:
        recorded = outbox.record_failure(factory, claim, now=at, status_code=None, error=error, retry_at=retry_at)
    except Exception as exc:  # the store itself failed: the lease brings the row back
        log.warning("notification %s: could not record the failure (%s); it is retried when its lease expires",
                    claim.id, type(exc).__name__)
        return
    if not recorded:
        report.lost_claims.append(claim.id)
    else:
        (report.failed if retry_at is None else report.retrying).append(claim.id)
