"""Scenario tests: `driftline up` with each replay scenario, checked through the store and the local sinks.

Short windows (4 s) and bounded runs keep each scenario near a minute.
"""
from __future__ import annotations

import pytest
from sqlalchemy import func, select

from driftline.alerts.fingerprint import group_key
from driftline.store.db import session_scope
from driftline.store.models import Alert, DetectorResult, RetrainRequest, WindowEvaluation

# Features the covariate_shift population changes directly (age, income, credit score, employment type,
# region) or through the generating process (worker/dataset.py); the others must not be reported as drifted.
COVARIATE_SHIFTED = {"age", "annual_income", "credit_score", "employment_type", "region"}
COVARIATE_DOWNSTREAM = {"loan_to_income", "employment_years", "num_credit_lines", "home_ownership"}
COVARIATE_UNAFFECTED = {"loan_amount", "loan_term_months", "debt_to_income", "credit_utilization",
                        "num_late_payments"}

MODEL = "credit-default"
pytestmark = pytest.mark.timeout(600)


def alerts(run, *states):
    """(detector, feature, state) of alerts that fired (a pending alert that never fired is no alert)."""
    with session_scope(run.db_url) as s:
        rows = s.scalars(select(Alert).where(Alert.state.in_(states or ("firing", "resolved")),
                                             Alert.fired_at.is_not(None))).all()
        return [(a.detector, a.feature, a.state) for a in rows]


def evaluated_windows(run) -> int:
    with session_scope(run.db_url) as s:
        return s.scalar(select(func.count()).select_from(WindowEvaluation).where(
            WindowEvaluation.model == MODEL, WindowEvaluation.status == "ok")) or 0


def assert_clean_exit(run):
    assert run.returncode == 0, run.output[-4000:]
    assert "Traceback" not in run.output, run.output[-4000:]


def test_none_raises_no_alert_over_many_windows(home, sink, run_up):
    run = run_up(home, "none", duration=70, sink=sink)
    assert_clean_exit(run)
    assert evaluated_windows(run) >= 10
    assert alerts(run) == []  # nothing fired at any point, not merely nothing firing at the end
    assert sink.requests == []


def test_covariate_shift_alerts_on_shifted_features_pages_and_retrains(home, sink, run_up):
    sink.fail_first["/pagerduty"] = 2  # PagerDuty answers 500 twice before it accepts
    # This team pages on drift warnings too (the default pages on errors: dataset drift, skew, latency).
    config = '[alerts.channels]\npagerduty = "warning"\n'
    run = run_up(home, "covariate_shift", duration=75, sink=sink, warmup=8, config=config)
    assert_clean_exit(run)
    drifted = {f for d, f, s in alerts(run, "firing", "resolved") if d == "data_drift" and f}
    assert COVARIATE_SHIFTED & drifted, drifted
    assert not drifted & COVARIATE_UNAFFECTED, drifted
    assert drifted <= COVARIATE_SHIFTED | COVARIATE_DOWNSTREAM
    assert sink.bodies("/slack"), "Slack received nothing"
    triggers = [b for b in sink.bodies("/pagerduty") if b["event_action"] == "trigger"]
    assert triggers and sink.attempts("/pagerduty") >= len(sink.bodies("/pagerduty")) + 2
    # One incident per alert group (a detector family of this model version): a trigger that adds features to
    # a group reuses its dedup_key, which PagerDuty folds into the open incident instead of paging again.
    # (Groups are read from the triggers, not from the store: an alert that resolved and began a new episode
    # before the run ended has no fired_at any more, yet its group was paged.)
    paged_groups = {(t["payload"]["group"], t["payload"]["class"]) for t in triggers}
    assert all(t["dedup_key"] == group_key(MODEL, t["payload"]["group"], t["payload"]["class"]) for t in triggers)
    assert len({t["dedup_key"] for t in triggers}) == len(paged_groups), paged_groups
    with session_scope(run.db_url) as s:
        versions_with_alerts = set(s.scalars(select(Alert.version).distinct()).all())
    assert {version for version, _ in paged_groups} <= versions_with_alerts
    with session_scope(run.db_url) as s:
        requests = s.scalars(select(RetrainRequest).where(RetrainRequest.model == MODEL)).all()
    assert requests, "persistent drift did not request a retrain"


def test_latency_breaches_the_p99_slo(home, sink, run_up):
    run = run_up(home, "latency", duration=45, sink=sink)
    assert_clean_exit(run)
    # Alerts that fired during the run; a retrained version promoted meanwhile resolves the old version's.
    assert any(d == "latency" for d, f, s in alerts(run)), alerts(run)
    with session_scope(run.db_url) as s:
        p99 = s.scalars(select(DetectorResult).where(DetectorResult.detector == "latency",
                                                     DetectorResult.metric == "p99_ms",
                                                     DetectorResult.breached)).all()
    assert p99 and all(r.value > r.threshold for r in p99)
    assert not [a for a in alerts(run, "firing") if a[0] == "data_drift"]


def test_data_quality_raises_data_quality_alerts(home, sink, run_up):
    run = run_up(home, "data_quality", duration=45, sink=sink)
    assert_clean_exit(run)
    quality = [a for a in alerts(run) if a[0] == "data_quality"]
    assert quality, alerts(run)


def test_skew_is_reported_as_skew_not_drift(home, sink, run_up):
    run = run_up(home, "skew", duration=45, sink=sink)
    assert_clean_exit(run)
    fired = alerts(run)
    assert [a for a in fired if a[:2] == ("skew", "debt_to_income")], fired
    assert not [a for a in fired if a[0] == "data_drift" and a[1] == "debt_to_income"], fired
    with session_scope(run.db_url) as s:
        parity = s.scalars(select(DetectorResult).where(DetectorResult.detector == "skew",
                                                        DetectorResult.feature == "debt_to_income",
                                                        DetectorResult.metric == "parity_mismatch_rate",
                                                        DetectorResult.breached)).all()
    assert parity and max(r.value for r in parity) > 0.5


def test_concept_drift_is_caught_by_model_quality_once_labels_arrive(home, sink, run_up):
    run = run_up(home, "concept_drift", duration=75, sink=sink)
    assert_clean_exit(run)
    firing = alerts(run, "firing", "resolved")
    assert [a for a in firing if a[0] == "model_quality"], firing
    # the inputs did not change: no input drift is reported
    assert not [a for a in alerts(run, "firing") if a[0] == "data_drift"], firing
