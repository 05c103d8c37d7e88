"""Advance alerts by one evaluated window and write the notifications it causes (DB only).

`process_window` is the scheduler's entry point, called once a window's
`WindowEvaluation` and `DetectorResult` rows are stored. It runs inside the caller's
session and never commits: the alert state changes and the outbox rows they cause
are committed together by the caller's transaction, or not at all.

Evidence, per (detector, feature, segment) of the model version (segment "" is the whole
population; a segment's alerts live beside the whole population's, with their own fingerprint):
- a result row: breached if any of its rows has `breached` (one row per metric is
  fine; value and threshold shown are the first breached row's, by metric name); under the
  sequential policy (a drift family's default) breached means its accumulated evidence pages
  (``details["evidence"]["paging"]``, driftline.detectors.families.evidence), and it fires at once;
  estimated quality's ``estimation_invalid`` (its own feature) is already a test over windows and
  breaches on its verdict, also firing at once under that policy;
- no row, but the detector reported other features of the same segment in this window:
  clean (the detector ran there and did not flag it);
- the detector reported nothing, or the window's status is not "ok"
  (no_baseline, insufficient_data): no evidence; the alert holds its state.

Each alert also records, in event time, the window its episode's evidence began in
(`first_window_start_ms`: the sequential evidence's ``since_window_start_ms``, else the episode's
first breaching window) and the window that moved it to firing (`fired_window_start_ms`).

Each alert advances at most once per window (`last_window_start_ms`), so calling
`process_window` twice for a window, or for an older window, changes nothing.
Alerts of *other* versions of the model that have had no evaluated window for their
rule's M windows resolve as stale (the version stopped serving: rolled back or
replaced by a retrained one), so their incidents close.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Callable, Iterable

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from driftline.store.models import Alert, DetectorResult, Silence, WindowEvaluation
from driftline.vocabulary import ESTIMATION_INVALID, WINDOW_OK
from driftline.windows import WindowKey

from driftline.alerts import outbox
from driftline.alerts.channels import render
from driftline.alerts.fingerprint import fingerprint, group_key, notification_key
from driftline.alerts.grouping import group_of, inhibited, plan_group
from driftline.alerts.messages import alert_summary, evidence_summary, group_message
from driftline.alerts.rules import AlertRules
from driftline.alerts.silences import matches
from driftline.alerts.state import ACTIVE, RESOLVED, advance
from driftline.alerts.times import as_utc, iso_from_ms


@dataclass(frozen=True)
class Observation:
    """What one window says about one (detector, feature)."""

    detector: str
    feature: str
    breached: bool
    metric: str
    value: float | None
    threshold: float | None
    details: dict[str, Any]
    segment: str = ""


def _paging(row: Any) -> bool:
    evidence = (row.details or {}).get("evidence")
    return bool(isinstance(evidence, dict) and evidence.get("paging"))


def observations(rows: Iterable[Any], sequential: Callable[[str], bool] = lambda detector: False,
                 ) -> dict[tuple[str, str, str], Observation]:
    """Fold a window's result rows into one observation per (detector, feature, segment) (pure).

    `sequential(detector)`: whether that detector's rule pages on evidence (then a whole-population
    row breaches when its evidence pages, not when its window alone breached)."""
    by_key: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for row in rows:
        by_key[(row.detector, row.feature or "", getattr(row, "segment", "") or "")].append(row)
    out = {}
    for (detector, feature, segment), group in by_key.items():
        # estimation_invalid carries no evidence: its own verdict is already a test over labelled windows
        paged = sequential(detector) and not segment and not all(r.metric == ESTIMATION_INVALID for r in group)
        flag = _paging if paged else (lambda r: bool(r.breached))
        group.sort(key=lambda r: (not flag(r), r.metric))
        primary = group[0]
        out[(detector, feature, segment)] = Observation(
            detector=detector, feature=feature, breached=any(flag(r) for r in group), metric=primary.metric,
            value=primary.value, threshold=primary.threshold, details=dict(primary.details or {}), segment=segment)
    return out


def process_window(session: Session, key: WindowKey, *, rules: AlertRules, now: datetime) -> list[Alert]:
    """Advance the alerts of the window's model version with that window.

    Reads the window's WindowEvaluation and DetectorResult rows, updates `Alert` rows
    (pending -> firing -> resolved, per `rules`), and adds the outbox `Notification`
    rows for the channels configured in `rules`. Does not commit. Returns the alerts
    this window advanced (including other versions' alerts resolved as stale).
    Raises LookupError if the window has not been evaluated.
    """
    now = as_utc(now)
    model, version, window_start_ms = key.model, key.version, key.window_start_ms
    evaluation = session.scalar(select(WindowEvaluation).where(
        WindowEvaluation.model == model, WindowEvaluation.version == version,
        WindowEvaluation.window_start_ms == window_start_ms))
    if evaluation is None:
        raise LookupError(f"window {iso_from_ms(window_start_ms)} of {model} v{version} has not been evaluated; "
                          "store its WindowEvaluation before calling process_window")
    alerts = {a.fingerprint: a for a in session.scalars(
        select(Alert).where(Alert.model == model, Alert.version == version))}
    advanced: dict[str, Alert] = {}

    if evaluation.status == WINDOW_OK:
        found = observations(session.scalars(select(DetectorResult).where(
            DetectorResult.model == model, DetectorResult.version == version,
            DetectorResult.window_start_ms == window_start_ms)),
            sequential=lambda detector: rules.rule_for(model, detector).sequential)
        reported = {(detector, segment) for detector, _, segment in found}
        for (detector, feature, segment), obs in sorted(found.items()):
            rule = rules.rule_for(model, detector)
            fp = fingerprint(model, version, detector, feature, segment)
            alert = alerts.get(fp)
            breached = obs.breached and rule.enabled  # a disabled rule's alerts wind down as if clean
            if alert is None:
                if not breached:
                    continue
                # A new alert starts from "no state"; advance_alert gives it one before it is added.
                alert = Alert(fingerprint=fp, model=model, version=version, detector=detector, feature=feature,
                              segment=segment, severity=rule.severity, state=None, consecutive_breaches=0, consecutive_clean=0,
                              started_at=now, summary="", details={})
                advance_alert(alert, breached, obs, rules, now, key)
                session.add(alert)
                alerts[fp] = advanced[fp] = alert
                continue
            if _already_advanced(alert, window_start_ms):
                continue
            advance_alert(alert, breached, obs if breached else None, rules, now, key)
            advanced[fp] = alert
        for alert in alerts.values():
            if (alert.state in ACTIVE and (alert.detector, alert.segment or "") in reported
                    and (alert.detector, alert.feature, alert.segment or "") not in found
                    and not _already_advanced(alert, window_start_ms)):
                advance_alert(alert, False, None, rules, now, key)
                advanced[alert.fingerprint] = alert

    stale = _resolve_stale_versions(session, model, version, evaluation, rules, now)
    advanced.update({a.fingerprint: a for a in stale})

    silences = session.scalars(select(Silence).where(
        Silence.starts_at <= now, Silence.expires_at > now,
        or_(Silence.model.is_(None), Silence.model == model))).all()
    versions: dict[str, list[Alert]] = {version: list(alerts.values())}
    for other in {a.version for a in stale}:
        versions[other] = list(session.scalars(select(Alert).where(Alert.model == model, Alert.version == other)))
    for ver, members in versions.items():  # a stale version's notices name the window that retired it
        notify_version(session, replace(key, version=ver), members, silences, rules=rules, now=now)
    session.flush()
    return list(advanced.values())


def _already_advanced(alert: Alert, window_start_ms: int) -> bool:
    return alert.last_window_start_ms is not None and alert.last_window_start_ms >= window_start_ms


def advance_alert(alert: Alert, breached: bool, obs: Observation | None, rules: AlertRules, now: datetime,
                  window: WindowKey) -> None:
    window_start_ms = window.window_start_ms
    rule = rules.rule_for(alert.model, alert.detector)
    step = advance(alert.state, alert.consecutive_breaches or 0, alert.consecutive_clean or 0, breached,
                   # a segment's results carry no evidence: they keep the K-windows rule
                   rule.for_windows if alert.segment else rule.windows_to_fire, rule.resolve_after_windows)
    alert.state = step.state
    alert.consecutive_breaches = step.consecutive_breaches
    alert.consecutive_clean = step.consecutive_clean
    alert.last_window_start_ms = window_start_ms
    if step.event in ("started", "fired") and alert.consecutive_breaches == 1:
        # A new episode: forget the previous one's timestamps.
        alert.started_at = now
        alert.fired_at = None
        alert.resolved_at = None
        alert.last_notified_at = None
        # event time, not wall clock (a backfill's wall-clock times are all the same minute)
        alert.first_window_start_ms = evidence_start_ms(obs, rule.sequential, window_start_ms)
        alert.fired_window_start_ms = None
    if step.event == "fired":
        alert.fired_at = now
        alert.fired_window_start_ms = window_start_ms
    if step.event in ("resolved", "dropped"):
        alert.resolved_at = now
    if obs is not None:
        reason = obs.details.get("reason")
        alert.severity = rule.severity
        alert.value = obs.value
        alert.threshold = obs.threshold
        alert.summary = alert_summary(obs.detector, obs.feature, obs.metric, obs.value, obs.threshold,
                                      reason if isinstance(reason, str) else None, obs.segment)
        evidence = obs.details.get("evidence") if rule.sequential and not obs.segment else None
        if isinstance(evidence, dict) and evidence.get("paging"):
            alert.summary += evidence_summary(evidence)
        alert.details = {**obs.details, "metric": obs.metric, "group": rule.group_name,
                         "window_start_ms": window_start_ms, "window_end_ms": window.window_end_ms}


def evidence_start_ms(obs: Observation | None, sequential: bool, window_start_ms: int) -> int:
    """The window an episode's evidence began in: its sequential evidence's run start (which may precede the
    window that pages), else this window, the episode's first breach (pure)."""
    evidence = obs.details.get("evidence") if obs is not None and sequential and not obs.segment else None
    since = evidence.get("since_window_start_ms") if isinstance(evidence, dict) else None
    if isinstance(since, (int, float)) and not isinstance(since, bool) and since <= window_start_ms:
        return int(since)
    return window_start_ms


def _resolve_stale_versions(session: Session, model: str, version: str, evaluation: WindowEvaluation,
                            rules: AlertRules, now: datetime) -> list[Alert]:
    """Resolve active alerts of other versions that have had no evaluated window for their M windows."""
    window_ms = max(1, evaluation.window_end_ms - evaluation.window_start_ms)
    candidates = session.scalars(select(Alert).where(
        Alert.model == model, Alert.version != version, Alert.state.in_(ACTIVE))).all()
    latest: dict[str, int | None] = {}
    resolved = []
    for alert in candidates:
        if alert.version not in latest:
            latest[alert.version] = session.scalar(select(func.max(WindowEvaluation.window_start_ms)).where(
                WindowEvaluation.model == model, WindowEvaluation.version == alert.version))
        last = latest[alert.version]
        if last is None:
            last = alert.last_window_start_ms or evaluation.window_start_ms
        rule = rules.rule_for(model, alert.detector)
        if evaluation.window_start_ms - last < rule.resolve_after_windows * window_ms:
            continue
        alert.consecutive_breaches = 0
        alert.resolved_at = now
        alert.details = {**(alert.details or {}),
                         "resolved_reason": f"stale: version {alert.version} has had no evaluated window since "
                                            f"{iso_from_ms(last)}; version {version} is serving"}
        alert.state = RESOLVED
        resolved.append(alert)
    return resolved


def notify_version(session: Session, window: WindowKey, members: list[Alert], silences: list[Silence], *,
                   rules: AlertRules, now: datetime) -> None:
    """Queue the group notifications that `members` (alerts of the window's model version) owe after a change of
    state in `window`."""
    model, version = window.version_key
    muted = inhibited(members, rules.inhibit)
    muted |= {a.fingerprint for a in members if any(matches(s, a) for s in silences)}
    groups: dict[str, list[Alert]] = defaultdict(list)
    for alert in members:
        groups[group_of(rules.rule_for(model, alert.detector).group_name, alert.segment or "")].append(alert)
    for group, group_members in sorted(groups.items()):
        repeat_interval = min(rules.rule_for(model, a.detector).repeat_interval for a in group_members)
        for plan in plan_group(group_members, muted=muted, now=now, repeat_interval=repeat_interval):
            key = group_key(model, version, group)
            related = _related_features(plan.alerts, members, rules) if plan.kind != "resolve" else []
            message = group_message(plan.kind, window=window, group=group, group_key=key, alerts=plan.alerts,
                                    related_features=related,
                                    dashboard_url=rules.dashboard_url, now=now)
            for channel in rules.channels_for(message["severity"]):
                idempotency_key = notification_key(key, channel, plan.kind, window.window_start_ms)
                payload = render(channel, message, idempotency_key)
                if payload is not None:
                    outbox.enqueue(session, idempotency_key=idempotency_key, channel=channel, kind=plan.kind,
                                   payload=payload, alert_fingerprint=key, now=now)
            for alert in plan.alerts:
                alert.last_notified_at = now


def _related_features(listed: Iterable[Alert], members: list[Alert], rules: AlertRules) -> list[str]:
    """Features of the alerts that the listed alerts inhibit (a dataset drift lists its drifted features)."""
    sources = {(a.detector, a.segment or "") for a in listed}
    targets = {(t, segment) for rule in rules.inhibit for source, segment in sources if rule.source == source
               for t in rule.targets}
    return sorted({a.feature for a in members
                   if (a.detector, a.segment or "") in targets and a.state in ACTIVE and a.feature})
