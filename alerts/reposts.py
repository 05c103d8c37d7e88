"""Re-post firing groups to Alertmanager before their endsAt passes (DB only).

Alertmanager resolves an alert whose endsAt has passed, so, as Prometheus does, driftline
posts a firing alert again while it fires: every ALERTMANAGER_REPOST_INTERVAL_SECONDS
(a quarter of ALERTMANAGER_ENDS_AFTER_SECONDS) a group that is announced (firing, neither
silenced nor inhibited, its trigger written) and routed to Alertmanager by its severity
gets a `repeat` outbox row for the alertmanager channel only. It runs on the scheduler's
clock, not the windows': a model whose traffic pauses holds its alerts' state, and
Alertmanager must keep seeing them. Other channels keep their own repeat_interval, since
`last_notified_at` is not touched. Idempotent per call time; the caller commits.
"""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from driftline import defaults
from driftline.store.models import Alert, Notification, Silence
from driftline.windows import WindowKey

from driftline.alerts import outbox
from driftline.alerts.channels import render
from driftline.alerts.channels.alertmanager import ALERTMANAGER
from driftline.alerts.fingerprint import group_key, notification_key
from driftline.alerts.grouping import announced_in_episode, group_of, inhibited
from driftline.alerts.messages import group_message
from driftline.alerts.rules import AlertRules
from driftline.alerts.silences import matches
from driftline.alerts.state import FIRING
from driftline.alerts.times import as_utc

REPOST_INTERVAL = timedelta(seconds=defaults.ALERTMANAGER_REPOST_INTERVAL_SECONDS)


def repost_firing(session: Session, *, rules: AlertRules, now: datetime,
                  interval: timedelta = REPOST_INTERVAL) -> list[str]:
    """Queue an Alertmanager re-post for each announced group last posted `interval` ago; returns their keys."""
    if ALERTMANAGER not in rules.channels:
        return []
    now = as_utc(now)
    by_version: dict[tuple[str, str], list[Alert]] = defaultdict(list)
    for alert in session.scalars(select(Alert).where(Alert.state == FIRING)):
        by_version[(alert.model, alert.version)].append(alert)
    if not by_version:
        return []
    silences = session.scalars(select(Silence).where(Silence.starts_at <= now, Silence.expires_at > now)).all()
    queued = []
    for (model, version), members in sorted(by_version.items()):
        muted = inhibited(members, rules.inhibit)
        muted |= {a.fingerprint for a in members
                  if any(matches(s, a) for s in silences if s.model in (None, model))}
        groups: dict[str, list[Alert]] = defaultdict(list)
        for alert in members:
            if alert.fingerprint not in muted and announced_in_episode(alert):
                groups[group_of(rules.rule_for(model, alert.detector).group_name, alert.segment or "")].append(alert)
        for group, announced in sorted(groups.items()):
            key = group_key(model, version, group)
            last = session.scalar(select(func.max(Notification.created_at)).where(
                Notification.alert_fingerprint == key, Notification.channel == ALERTMANAGER))
            if last is not None and now - as_utc(last) < interval:
                continue
            announced.sort(key=lambda a: (a.segment or "", a.detector, a.feature))
            starts = [a.last_window_start_ms or 0 for a in announced]
            ends = [(a.details or {}).get("window_end_ms") or 0 for a in announced]
            message = group_message("repeat", window=WindowKey(model, version, max(starts), max(ends)), group=group,
                                    group_key=key, alerts=announced, related_features=[],
                                    dashboard_url=rules.dashboard_url, now=now)
            if ALERTMANAGER not in rules.channels_for(message["severity"]):
                continue
            idempotency_key = notification_key(key, ALERTMANAGER, "repost", int(now.timestamp() * 1000))
            row = outbox.enqueue(session, idempotency_key=idempotency_key, channel=ALERTMANAGER, kind="repeat",
                                 payload=render(ALERTMANAGER, message, idempotency_key), alert_fingerprint=key,
                                 now=now)
            if row is not None:
                queued.append(key)
    session.flush()
    return queued
