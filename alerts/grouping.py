"""Which group notifications a window causes (pure: no I/O).

A group is the alerts of one model version that share a rule's group name and segment
(`group_of`: a segment's alerts are one incident per segment, apart from the whole
population's and from other segments'). Per group, after the window's state changes
(Alertmanager's semantics):

- *announced* alerts are the firing ones that are neither silenced nor inhibited;
- **trigger**: some announced alert has not been announced in its current episode
  (it just fired, or its silence expired, or its inhibitor resolved). The message
  lists every announced alert of the group, so a group is one message, not N;
- **repeat**: otherwise, if the group was announced at least `repeat_interval` ago
  and still has announced alerts;
- **resolve**: alerts that were announced in their episode have resolved, and no
  alert of the group that was announced is still firing. Silences and inhibition
  never hold back a resolve of something that was announced: an incident opened on
  PagerDuty must be closed.

"Announced in the current episode" is ``last_notified_at >= fired_at``; a resolve
is still owed while ``last_notified_at < resolved_at``.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Iterable, Protocol, Sequence

from driftline.alerts.state import FIRING, RESOLVED
from driftline.alerts.times import as_utc


class AlertLike(Protocol):
    fingerprint: str
    detector: str
    feature: str
    segment: str
    state: str
    fired_at: datetime | None
    resolved_at: datetime | None
    last_notified_at: datetime | None


@dataclass(frozen=True)
class PlannedNotification:
    kind: str  # trigger | repeat | resolve
    alerts: tuple[Any, ...]


def announced_in_episode(alert: AlertLike) -> bool:
    fired, notified = as_utc(alert.fired_at), as_utc(alert.last_notified_at)
    return fired is not None and notified is not None and notified >= fired


def resolve_owed(alert: AlertLike) -> bool:
    resolved, notified = as_utc(alert.resolved_at), as_utc(alert.last_notified_at)
    return (alert.state == RESOLVED and announced_in_episode(alert) and resolved is not None
            and notified is not None and notified < resolved)


def plan_group(members: Sequence[AlertLike], *, muted: set[str], now: datetime,
               repeat_interval: timedelta) -> list[PlannedNotification]:
    """The notifications one group needs now; `muted` holds silenced or inhibited fingerprints."""
    now = as_utc(now)
    announced = sorted((a for a in members if a.state == FIRING and a.fingerprint not in muted), key=_order)
    plans: list[PlannedNotification] = []
    if any(not announced_in_episode(a) for a in announced):
        plans.append(PlannedNotification("trigger", tuple(announced)))
    elif announced:
        last = max((as_utc(a.last_notified_at) for a in announced if announced_in_episode(a)), default=None)
        if last is not None and now - last >= repeat_interval:
            plans.append(PlannedNotification("repeat", tuple(announced)))
    will_be_announced = {a.fingerprint for a in announced} if plans else set()
    still_open = [a for a in members if a.state == FIRING
                  and (announced_in_episode(a) or a.fingerprint in will_be_announced)]
    owed = sorted((a for a in members if resolve_owed(a)), key=_order)
    if owed and not still_open:
        plans.append(PlannedNotification("resolve", tuple(owed)))
    return plans


def group_of(group: str, segment: str) -> str:
    """The group name of an alert: its rule's group, and for a segment's alert that segment too."""
    return f"{group} [{segment}]" if segment else group


def inhibited(alerts: Iterable[AlertLike], rules: Iterable[Any]) -> set[str]:
    """Fingerprints muted by inhibition: a firing source alert mutes its targets of the same model version
    and segment (the caller passes one model version's alerts)."""
    alerts = list(alerts)
    firing = {(a.detector, _segment(a)) for a in alerts if a.state == FIRING}
    muted = {(t, segment) for rule in rules for detector, segment in firing if rule.source == detector
             for t in rule.targets}
    return {a.fingerprint for a in alerts if (a.detector, _segment(a)) in muted}


def _segment(alert: AlertLike) -> str:
    return getattr(alert, "segment", "") or ""


def _order(alert: AlertLike) -> tuple[str, str, str]:
    return _segment(alert), alert.detector, alert.feature
