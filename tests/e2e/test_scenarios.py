"""Scenario tests: `driftline up` with the scenarios whose path runs end to end, checked through the store and
the local sinks: no drift (nothing may fire), a covariate shift that pages and asks for a retrain, and an
embedding shift (the worker logging its penultimate-layer activations) that only embedding drift sees.

Each run waits on its outcome in the store, then is stopped with Ctrl-C. The scenarios that only need a
detector's verdict (latency, data_quality, skew, concept_drift, segment_shift) are judged at the
evaluation level in tests/worker/test_scenario_verdicts.py.
"""
from __future__ import annotations

import pytest
from sqlalchemy import select

from driftline.alerts.fingerprint import group_key
from driftline.store.db import session_scope
from driftline.store.models import Alert, DetectorResult, RetrainRequest
from driftline.vocabulary import DATA_DRIFT, DATASET_DRIFT, EMBEDDING_DRIFT

from .conftest import assert_clean_exit, evaluated_windows

# Features the covariate_shift population changes directly (age, income, credit score, employment type,
# region) or through the generating process (worker/dataset.py); the others must not be reported as drifted.
COVARIATE_SHIFTED = {"age", "annual_income", "credit_score", "employment_type", "region"}
COVARIATE_DOWNSTREAM = {"loan_to_income", "employment_years", "num_credit_lines", "home_ownership"}
COVARIATE_UNAFFECTED = {"loan_amount", "loan_term_months", "debt_to_income", "credit_utilization",
                        "num_late_payments"}

MODEL = "credit-default"
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def alerts(run, *states):
    """(detector, feature, state) of alerts that fired (a pending alert that never fired is no alert)."""
    with session_scope(run.db_url) as s:
        rows = s.scalars(select(Alert).where(Alert.state.in_(states or ("firing", "resolved")),
                                             Alert.fired_at.is_not(None))).all()
        return [(a.detector, a.feature, a.state) for a in rows]


@pytest.mark.xdist_group("up_none")
def test_none_raises_no_alert_over_many_windows(none_run):
    run, sink = none_run
    assert_clean_exit(run)
    assert evaluated_windows(run.db_url) >= 10
    assert alerts(run) == []  # nothing fired at any point, not merely nothing firing at the end
    assert sink.requests == []


def test_covariate_shift_alerts_on_shifted_features_pages_and_retrains(home, sink, up):
    sink.fail_first["/pagerduty"] = 2  # PagerDuty answers 500 twice before it accepts
    # This team pages on drift warnings too (the default pages on errors: dataset drift, skew, latency).
    config = '[alerts.channels]\npagerduty = "warning"\n'
    running = up(home, "covariate_shift", sink=sink, warmup=8, config=config)

    def outcome() -> bool:
        with session_scope(running.db_url) as s:
            retrain = s.scalar(select(RetrainRequest.id).where(RetrainRequest.model == MODEL).limit(1))
        paged = [b for b in sink.bodies("/pagerduty") if b["event_action"] == "trigger"]
        return retrain is not None and bool(paged) and bool(sink.bodies("/slack"))

    running.wait_for(outcome, "a page, a Slack message and a retrain request")
    run = running.stop()
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


def results(run, detector):
    """The detector's results on the model's windows, oldest first."""
    with session_scope(run.db_url) as s:
        return s.scalars(select(DetectorResult).where(DetectorResult.model == MODEL, DetectorResult.detector == detector)
                         .order_by(DetectorResult.window_start_ms)).all()


def test_embedding_shift_fires_embedding_drift_while_feature_drift_stays_quiet(home, up):
    # `up` starts the worker with --log-embeddings for this scenario: each event carries the model's activations.
    running = up(home, "embedding_shift")  # shifted from the first request: nothing here needs a warm-up

    def fired_and_judged() -> bool:
        fired = any(d == EMBEDDING_DRIFT for d, _, _ in alerts(running))
        return fired and evaluated_windows(running.db_url) >= 6  # several shifted windows judged feature by feature

    running.wait_for(fired_and_judged, "embedding drift firing and six evaluated windows")
    run = running.stop()
    assert_clean_exit(run)
    fired = alerts(run)
    assert (EMBEDDING_DRIFT, "activations") in [a[:2] for a in fired], fired
    assert not [a for a in fired if a[0] in (DATA_DRIFT, DATASET_DRIFT)], fired
    # the dataset-level verdict (a share of drifted features) never breached in any window: each feature kept its
    # distribution, only their combination moved
    dataset = results(run, DATASET_DRIFT)
    assert len(dataset) >= 6 and not [r.value for r in dataset if r.breached], [r.value for r in dataset]
    judged = [r for r in results(run, EMBEDDING_DRIFT) if r.value is not None]
    breached = [r for r in judged if r.breached]
    assert len(breached) >= 2, [(r.value, r.threshold) for r in judged]
    moved = breached[-1].details["clusters"]["moved"][0]
    assert moved["examples"], moved  # the request ids of events in the cluster that moved most
