"""A failed canary pages and its rollback is announced: the rollout analysis' verdicts as `rollout` alerts,
delivered to local stand-ins for Slack and PagerDuty."""
from __future__ import annotations

import time
from datetime import datetime, timezone

import numpy as np
import pytest
from sqlalchemy import select

from driftline import vocabulary
from driftline.config import load_settings
from driftline.detectors.rollout.outcome import RolloutOutcome
from driftline.detectors.rollout.policy import Transition
from driftline.detectors.rollout.verdict import RolloutVerdict
from driftline.rollouts import canary_plan
from driftline.store.aliases import move_alias
from driftline.store.db import session_scope
from driftline.store.models import Alert, ModelVersion, WindowStateRecord
from driftline.store.rollouts import current_plan, set_plan
from driftline.window_state import EventBatch, WindowState
from driftline.alerts import AlertRules, fingerprint, process_rollout_verdict
from driftline.alerts.rollouts import rollout_summary
from driftline.scheduler.jobs import SchedulerJobs
from tests.alerts.conftest import ROUTING_KEY

MODEL = "m"
WINDOW_MS = 10_000
LATENESS_MS = 2_000
EVENTS = 1_000


def _start() -> int:
    """A window boundary after now: the plan set now covers every window the test writes."""
    return (int(time.time() * 1000) // WINDOW_MS + 1) * WINDOW_MS


def _jobs(db_url, tmp_path, slack, pagerduty, **rollouts) -> SchedulerJobs:
    values = {"windows": 3, "critical": ["error_rate_delta", "p99_delta_ms"], **rollouts}
    lines = [f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v).replace(chr(39), chr(34))}"
             for k, v in values.items()]
    toml = tmp_path / "driftline.toml"
    toml.write_text("[rollouts]\n" + "\n".join(lines) + "\n")
    return SchedulerJobs(load_settings(toml, db=db_url, window_seconds=10, allowed_lateness_seconds=2,
                                       slack_webhook_url=slack.url, pagerduty_routing_key=ROUTING_KEY,
                                       pagerduty_url=pagerduty.url))


def _registry(db_url) -> None:
    with session_scope(db_url) as s:
        for version in ("1", "2"):
            s.add(ModelVersion(model=MODEL, version=version))
        s.flush()
        move_alias(s, MODEL, "1", "promote", None)
        set_plan(s, canary_plan(MODEL, "2", 5))


def _write(db_url, rng, version, start, error_rate) -> None:
    errors = rng.uniform(size=EVENTS) < error_rate
    evs = [{"event_id": f"{version}-{start}-{i}", "ts_ms": start + i * WINDOW_MS // EVENTS, "model": MODEL,
            "version": version, "features": {"x": float(rng.normal())},
            "latency_ms": {"total": float(rng.uniform(5, 20))},
            **({"status": "error", "error": "boom"} if failed else {"prediction": float(rng.uniform())})}
           for i, failed in enumerate(errors)]
    state = WindowState.empty(None).add_batch(EventBatch.from_events(evs))
    with session_scope(db_url) as s:
        s.add(WindowStateRecord(model=MODEL, version=version, window_start_ms=start, window_end_ms=start + WINDOW_MS,
                                partition=0, events=EVENTS, state=state.to_bytes()))


def _windows(db_url, rng, t0, candidate_errors, count=3) -> int:
    for w in range(count):
        _write(db_url, rng, "1", t0 + w * WINDOW_MS, 0.01)
        _write(db_url, rng, "2", t0 + w * WINDOW_MS, candidate_errors)
    return t0 + (count - 1) * WINDOW_MS + WINDOW_MS + LATENESS_MS  # when the last one has closed


def _rollout_alert(db_url) -> Alert | None:
    with session_scope(db_url) as s:
        alert = s.scalar(select(Alert).where(Alert.fingerprint == fingerprint(MODEL, "2", vocabulary.ROLLOUT)))
        if alert is not None:
            s.expunge(alert)
        return alert


def test_a_failing_canary_pages_once_names_the_rollback_and_resolves_once_the_plan_is_gone(
        db_url, tmp_path, fake_slack, fake_pagerduty):
    _registry(db_url)
    jobs = _jobs(db_url, tmp_path, fake_slack, fake_pagerduty)
    now = _windows(db_url, np.random.default_rng(1), _start(), 0.2)
    outcomes = jobs.analyse_rollouts(now_ms=now)
    assert (outcomes[-1].verdict.verdict, outcomes[-1].transition.action) == ("fail", "rollback")
    jobs.deliver_notifications()

    alert = _rollout_alert(db_url)
    assert (alert.state, alert.severity, alert.version) == ("firing", "error", "2")
    assert alert.details["rolled_back"] is True and alert.details["action"] == vocabulary.STEP_ROLLBACK
    [page] = fake_pagerduty.events
    assert page["event_action"] == "trigger" and page["payload"]["severity"] == "error"
    [slack] = [r.json() for r in fake_slack.answered_ok]
    assert slack["text"].startswith(f"[FIRING] {MODEL} v2: failed rollout: canary of version 2 rolled back "
                                    "automatically to production version 1")
    assert "error_rate_delta" in slack["text"]
    assert any("rolled back automatically" in b.get("text", {}).get("text", "") for b in slack["blocks"]
               if b["type"] == "section")

    # the next run finds the plan cleared (the rollback): the incident closes, once
    jobs.analyse_rollouts(now_ms=now + WINDOW_MS)
    jobs.analyse_rollouts(now_ms=now + 2 * WINDOW_MS)
    jobs.deliver_notifications()
    alert = _rollout_alert(db_url)
    assert alert.state == "resolved" and "ended" in alert.details["resolved_reason"]
    assert [e["event_action"] for e in fake_pagerduty.events] == ["trigger", "resolve"]
    assert fake_pagerduty.open_incidents == {}
    assert [r.json()["text"].split("]")[0] for r in fake_slack.answered_ok] == ["[FIRING", "[RESOLVED"]


def test_a_failing_canary_held_by_the_policy_says_so_and_stays_firing(db_url, tmp_path, fake_slack, fake_pagerduty):
    _registry(db_url)
    jobs = _jobs(db_url, tmp_path, fake_slack, fake_pagerduty, auto_rollback=False)
    now = _windows(db_url, np.random.default_rng(2), _start(), 0.2)
    assert jobs.analyse_rollouts(now_ms=now)[-1].verdict.verdict == "fail"
    jobs.analyse_rollouts(now_ms=now + WINDOW_MS)  # the plan holds: nothing resolves it
    jobs.deliver_notifications()
    alert = _rollout_alert(db_url)
    assert alert.state == "firing" and "not rolled back (auto_rollback is off)" in alert.summary
    assert alert.details["rolled_back"] is False
    with session_scope(db_url) as s:
        assert current_plan(s, MODEL) is not None
    assert [e["event_action"] for e in fake_pagerduty.events] == ["trigger"]


def test_a_later_passing_verdict_resolves_and_an_inconclusive_one_holds(db_url):
    rules = AlertRules.from_mapping(None, channels=())
    now = datetime.now(timezone.utc)

    def verdict(window: int, value: str) -> Alert | None:
        with session_scope(db_url) as s:
            outcome = RolloutOutcome(
                model=MODEL, candidate="2", mode=vocabulary.ROLLOUT_CANARY, production="1",
                window_start_ms=window * WINDOW_MS, window_end_ms=(window + 1) * WINDOW_MS,
                verdict=RolloutVerdict(verdict=value, reasons=["error_rate_delta: fail"]),
                transition=Transition(vocabulary.STEP_HOLD, None, "held"))
            alert = process_rollout_verdict(s, outcome, rules=rules, now=now)
            return None if alert is None else alert.state

    assert verdict(0, "pass") is None  # nothing to resolve: no alert is opened
    assert verdict(1, "fail") == "firing"
    assert verdict(1, "pass") is None and _rollout_alert(db_url).state == "firing"  # a window seen already
    assert verdict(2, "inconclusive") is None and _rollout_alert(db_url).state == "firing"
    assert verdict(3, "pass") == "resolved"


def test_no_rollout_alert_for_passing_or_inconclusive_windows(db_url, tmp_path, fake_slack, fake_pagerduty):
    _registry(db_url)
    jobs = _jobs(db_url, tmp_path, fake_slack, fake_pagerduty)
    now = _windows(db_url, np.random.default_rng(3), _start(), 0.01)
    assert {o.verdict.verdict for o in jobs.analyse_rollouts(now_ms=now)} <= {"pass", "inconclusive"}
    jobs.deliver_notifications()
    assert _rollout_alert(db_url) is None
    assert fake_pagerduty.requests == [] and fake_slack.requests == []


def test_the_rollout_rule_is_an_error_firing_on_one_verdict_and_can_be_configured():
    rule = AlertRules.from_mapping(None).rule_for(MODEL, vocabulary.ROLLOUT)
    assert (rule.severity, rule.for_windows, rule.resolve_after_windows) == ("error", 1, 1)
    rules = AlertRules.from_mapping({"detectors": {vocabulary.ROLLOUT: {"severity": "critical"}}})
    assert rules.rule_for(MODEL, vocabulary.ROLLOUT).severity == "critical"
    assert "pagerduty" in rules.channels_for(rule.severity)


@pytest.mark.parametrize("reasons,expected", [
    ([], "failed rollout: canary of version 7 rolled back automatically to production version 3"),
    (["a", "b", "c", "d"], "; a; b; c and 1 more"),
])
def test_the_summary_names_candidate_outcome_and_reasons(reasons, expected):
    text = rollout_summary("7", vocabulary.ROLLOUT_CANARY, reasons, vocabulary.STEP_ROLLBACK, "3")
    assert text.endswith(expected)
    held = rollout_summary("7", vocabulary.ROLLOUT_CANARY, reasons, vocabulary.STEP_HOLD, "3")
    assert "not rolled back" in held and "rolled back automatically" not in held
    dropped = rollout_summary("3,7,8", vocabulary.ROLLOUT_AB, reasons, vocabulary.STEP_DROP_ARMS, "3", ["8"])
    assert "ab of version 3,7,8 without arm 8 from now on" in dropped and "the other arms go on" in dropped
    assert "rolled back" not in dropped


def test_retrain_rollout_is_parsed_checked_and_sent_with_the_request():
    from driftline.errors import UserError

    assert AlertRules.from_mapping(None).retrain.rollout == "promote"
    for value in ("shadow", "canary", "promote"):
        assert AlertRules.from_mapping({"retrain": {"rollout": value}}).retrain.rollout == value
    with pytest.raises(UserError, match=r"\[alerts.retrain\] rollout: must be one of promote, shadow, canary"):
        AlertRules.from_mapping({"retrain": {"rollout": "yolo"}})
    with pytest.raises(UserError, match="rollout_mode"):
        AlertRules.from_mapping({"retrain": {"rollout_mode": "shadow"}})
