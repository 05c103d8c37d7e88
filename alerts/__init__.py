"""Alerts: rules and lifecycle, deduplication, the outbox, delivery, and the retraining trigger.

Entry points for the scheduler (each does one kind of I/O; none schedules anything):

- `process_window(session, key, *, rules, now) -> list[Alert]` (`key`: the window's
  `driftline.windows.WindowKey`, as the scheduler judged it) advances alerts with one evaluated window and writes outbox rows (DB only; the
  caller's transaction commits state and notifications together);
- `apply_retrain_policy(session, key, *, policy, now) -> RetrainRequest | None` (DB only, same transaction rules);
- `process_rollout_verdict(session, outcome, *, rules, now)` (`outcome`: a judged window, the
  `RolloutOutcome` of driftline.detectors.rollout.outcome) and `resolve_ended_rollouts(session, *, rules, now)`:
  the rollout analysis' verdicts as alerts of the `rollout` family (DB only, same transaction rules);
- `repost_firing(session, *, rules, now) -> list[str]` re-posts firing groups to Alertmanager
  before their endsAt passes (DB only, same transaction rules);
- `deliver_due(url_or_session_factory, *, channels, now=None, limit=100, policy=None, lane=None)
  -> DeliveryReport` sends due notifications (DB + HTTP), each channel in its own lane
  (`delivery_lanes(channels)`; the scheduler runs one job per lane).

Configuration: `load_rules(settings, config_file)` -> `AlertRules` (with `.retrain`
and `.delivery`), `Channels.from_settings(settings)`. See docs/alerts.md.
"""
from __future__ import annotations

from driftline.alerts.channels import Channels
from driftline.alerts.channels.http import SendResult
from driftline.alerts.delivery import DeliveryReport, deliver_due, delivery_lanes
from driftline.alerts.fingerprint import fingerprint, group_key
from driftline.alerts.lifecycle import process_window
from driftline.alerts.outbox import requeue_failed
from driftline.alerts.reposts import repost_firing
from driftline.alerts.retraining import apply_retrain_policy
from driftline.alerts.rollouts import process_rollout_verdict, resolve_ended_rollouts
from driftline.alerts.rules import AlertRule, AlertRules, DeliveryPolicy, InhibitRule, RetrainPolicy, load_rules

__all__ = [
    "AlertRule", "AlertRules", "Channels", "DeliveryPolicy", "DeliveryReport", "InhibitRule", "RetrainPolicy",
    "SendResult", "apply_retrain_policy", "deliver_due", "delivery_lanes", "fingerprint", "group_key", "load_rules",
    "process_rollout_verdict", "process_window", "repost_firing", "requeue_failed", "resolve_ended_rollouts",
]
