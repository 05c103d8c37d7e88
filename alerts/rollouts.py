"""Alerts on rollouts: a candidate's failed verdict fires through the same lifecycle, rules and outbox as a detector's.

The scheduler's rollout analysis hands each judged window (a `RolloutOutcome`: the verdict stored and the
policy's transition) to `process_rollout_verdict`, in its transaction:

- one alert per (model, candidate), family `rollout` (fingerprint [model, candidate, "rollout", ""]),
  its rule `[alerts.detectors.rollout]` over `defaults.ALERT_ROLLOUT_DEFAULTS` (an error: PagerDuty
  pages, Slack and webhooks are told; one failed verdict fires it);
- ``fail`` is a breach, its summary names the candidate, the verdict's reasons and the policy's step
  (rolled back automatically, or held for a person when auto_rollback is off);
- ``pass`` is clean (the candidate recovered); ``inconclusive`` is no evidence (the alert holds);
- `resolve_ended_rollouts` resolves the alerts whose rollout is over (the plan cleared, by the rollback itself,
  a promotion or a person, or moved to another candidate). The scheduler calls it before judging, so an
  automatic rollback is announced on one run and resolved on the next, after its trigger was queued.
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from driftline import vocabulary
from driftline.detectors.rollout.outcome import RolloutOutcome
from driftline.store.models import Alert, RolloutPlan, Silence
from driftline.windows import WindowKey

from driftline.alerts.fingerprint import fingerprint
from driftline.alerts.lifecycle import Observation, advance_alert, notify_version
from driftline.alerts.rules import AlertRules
from driftline.alerts.state import ACTIVE, RESOLVED
from driftline.alerts.times import as_utc

# Reasons quoted in a summary before "and N more", so a title stays readable in a page.
SUMMARY_REASONS = 3


def rollout_summary(candidate: str, mode: str, reasons: list[str], action: str, production: str | None,
                    dropped: list[str] | None = None) -> str:
    """One line naming the candidate, what happened to it and why (pure)."""
    shown = "; ".join(reasons[:SUMMARY_REASONS]) + (
        f" and {len(reasons) - SUMMARY_REASONS} more" if len(reasons) > SUMMARY_REASONS else "")
    if action == vocabulary.STEP_ROLLBACK:
        outcome = "rolled back automatically" + (f" to production version {production}" if production else "")
    elif action == vocabulary.STEP_DROP_ARMS:
        outcome = (f"without arm {', '.join(dropped or [])} from now on (taken out automatically, its traffic to "
                   f"the control arm; the other arms go on)")
    else:
        outcome = "not rolled back (auto_rollback is off): the plan holds until a person decides"
    return f"{vocabulary.family(vocabulary.ROLLOUT).problem}: {mode} of version {candidate} {outcome}" + (
        f"; {shown}" if shown else "")


def process_rollout_verdict(session: Session, outcome: RolloutOutcome, *, rules: AlertRules,
                            now: datetime) -> Alert | None:
    """Advance the (model, candidate) rollout alert with one stored verdict and queue what it owes (no commit)."""
    model, candidate, mode, production = outcome.model, outcome.candidate, outcome.mode, outcome.production
    window_start_ms, window_end_ms = outcome.window_start_ms, outcome.window_end_ms
    verdict, reasons = outcome.verdict.verdict, list(outcome.verdict.reasons)
    action, dropped = outcome.transition.action, list(outcome.transition.arms)
    if verdict == vocabulary.VERDICT_INCONCLUSIVE:
        return None
    now = as_utc(now)
    rule = rules.rule_for(model, vocabulary.ROLLOUT)
    fp = fingerprint(model, candidate, vocabulary.ROLLOUT)
    alert = session.scalar(select(Alert).where(Alert.fingerprint == fp))
    breached = verdict == vocabulary.VERDICT_FAIL and rule.enabled
    if alert is None:
        if not breached:
            return None
        alert = Alert(fingerprint=fp, model=model, version=candidate, detector=vocabulary.ROLLOUT, feature="",
                      severity=rule.severity, state=None, consecutive_breaches=0, consecutive_clean=0,
                      started_at=now, summary="", details={})
    elif alert.last_window_start_ms is not None and alert.last_window_start_ms >= window_start_ms:
        return None  # this window's verdict was seen already
    details = vocabulary.RolloutAlertDetails(
        candidate=candidate, production=production, mode=mode, verdict=verdict, reasons=reasons,
        action=action, rolled_back=action == vocabulary.STEP_ROLLBACK, dropped_arms=dropped or None
    ).to_dict()
    obs = Observation(detector=vocabulary.ROLLOUT, feature="", breached=breached, metric=vocabulary.ROLLOUT_VERDICT,
                      value=None, threshold=None, details=details)
    window = WindowKey(model, candidate, window_start_ms, window_end_ms)
    advance_alert(alert, breached, obs if breached else None, rules, now, window)
    session.add(alert)  # a new alert is added once the step gave it a state
    if breached:
        alert.summary = rollout_summary(candidate, mode, reasons, action, production, dropped)
    _notify(session, alert, window, rules=rules, now=now)
    return alert


def resolve_ended_rollouts(session: Session, *, rules: AlertRules, now: datetime) -> list[Alert]:
    """Resolve active rollout alerts whose candidate is no longer the model's plan's (no commit)."""
    now = as_utc(now)
    ended = []
    for alert in session.scalars(select(Alert).where(Alert.detector == vocabulary.ROLLOUT,
                                                     Alert.state.in_(ACTIVE)).order_by(Alert.id)).all():
        plan = session.get(RolloutPlan, alert.model)
        if plan is not None and plan.plan.get("candidate") == alert.version:
            continue
        alert.consecutive_breaches = 0
        alert.resolved_at = now
        alert.state = RESOLVED
        reason = (f"the rollout of version {alert.version} ended" if plan is None
                  else f"the plan moved on to version {plan.plan.get('candidate')}")
        alert.details = {**(alert.details or {}), "resolved_reason": reason}
        details = alert.details
        _notify(session, alert, WindowKey(alert.model, alert.version, int(details.get("window_start_ms") or 0),
                                          int(details.get("window_end_ms") or 0)), rules=rules, now=now)
        ended.append(alert)
    return ended


def _notify(session: Session, alert: Alert, window: WindowKey, *, rules: AlertRules, now: datetime) -> None:
    silences = list(session.scalars(select(Silence).where(
        Silence.starts_at <= now, Silence.expires_at > now,
        or_(Silence.model.is_(None), Silence.model == alert.model))))
    notify_version(session, window, [alert], silences, rules=rules, now=now)
    session.flush()
