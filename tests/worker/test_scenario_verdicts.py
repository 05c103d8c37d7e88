"""The replay scenarios that only need a detector's verdict, judged at the evaluation level.

Each scenario's traffic goes through the production model, the collector's folding and the scheduler's
jobs (the real detectors, rules, lifecycle and outbox, delivered to local Slack and PagerDuty stand-ins),
window by window (`tests.support.scenario_windows`); the assertions are those a `driftline up` run of
the scenario is held to. The end-to-end paths themselves (no drift, covariate shift with paging and
retraining, faults, hostile traffic, a rollout) keep their `up` runs in tests/e2e.
"""
from __future__ import annotations

import json
import shutil

import pytest
from sqlalchemy import select

from driftline.store.db import session_scope
from driftline.store.models import Alert, DetectorResult
from driftline.vocabulary import DATA_DRIFT, DATASET_DRIFT, STALE_FEATURES
from tests.support.fake_services import Sink
from tests.support.scenario_windows import judge_scenario, trained_home

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A store and registry with `driftline train --size small`'s production version (trained once)."""
    return trained_home(tmp_path_factory.mktemp("verdict-home") / "home")


@pytest.fixture
def home(trained, tmp_path):
    target = tmp_path / "home"
    shutil.copytree(trained, target)
    return target


@pytest.fixture
def sink():
    s = Sink().start()
    yield s
    s.stop()


def alerts(db_url, *states):
    """(detector, feature, state) of alerts that fired (a pending alert that never fired is no alert)."""
    with session_scope(db_url) as s:
        rows = s.scalars(select(Alert).where(Alert.state.in_(states or ("firing", "resolved")),
                                             Alert.fired_at.is_not(None))).all()
        return [(a.detector, a.feature, a.state) for a in rows]


def test_latency_breaches_the_p99_slo(home, sink):
    run = judge_scenario(home, "latency", windows=8, sink=sink)
    assert any(d == "latency" for d, f, s in alerts(run.db_url)), alerts(run.db_url)
    with session_scope(run.db_url) as s:
        p99 = s.scalars(select(DetectorResult).where(DetectorResult.detector == "latency",
                                                     DetectorResult.metric == "p99_ms",
                                                     DetectorResult.breached)).all()
    assert p99 and all(r.value > r.threshold for r in p99)
    assert not [a for a in alerts(run.db_url, "firing") if a[0] == "data_drift"]
    assert sink.bodies("/slack"), "the latency alert reached no channel"


def test_data_quality_raises_data_quality_alerts(home, sink):
    run = judge_scenario(home, "data_quality", windows=8, sink=sink)
    quality = [a for a in alerts(run.db_url) if a[0] == "data_quality"]
    assert quality, alerts(run.db_url)


def test_skew_is_reported_as_skew_not_drift(home, sink):
    run = judge_scenario(home, "skew", windows=8, sink=sink)
    fired = alerts(run.db_url)
    assert [a for a in fired if a[:2] == ("skew", "debt_to_income")], fired
    assert not [a for a in fired if a[0] == "data_drift" and a[1] == "debt_to_income"], fired
    with session_scope(run.db_url) as s:
        parity = s.scalars(select(DetectorResult).where(DetectorResult.detector == "skew",
                                                        DetectorResult.feature == "debt_to_income",
                                                        DetectorResult.metric == "parity_mismatch_rate",
                                                        DetectorResult.breached)).all()
    assert parity and max(r.value for r in parity) > 0.5


def test_concept_drift_is_caught_by_model_quality_once_labels_arrive(home, sink):
    run = judge_scenario(home, "concept_drift", windows=14, sink=sink)
    firing = alerts(run.db_url, "firing", "resolved")
    assert [a for a in firing if a[0] == "model_quality"], firing
    # the inputs did not change: no input drift is reported
    assert not [a for a in alerts(run.db_url, "firing") if a[0] == "data_drift"], firing


def test_segment_shift_fires_in_region_north_and_not_for_the_whole_population(home, sink):
    # 8 s windows at 100 requests/s, as the e2e run had them: about 170 applicants from the north a window
    run = judge_scenario(home, "segment_shift", windows=8, window_seconds=8, rate=100.0, sink=sink)
    with session_scope(run.db_url) as s:
        fired = [(a.detector, a.feature, a.segment) for a in s.scalars(select(Alert).where(
            Alert.fired_at.is_not(None), Alert.detector.in_((DATA_DRIFT, DATASET_DRIFT))))]
        north_results = s.scalar(select(DetectorResult.id).where(DetectorResult.segment == "region=north").limit(1))
    assert north_results is not None, "no result stored for the segment region=north"
    assert any(segment == "region=north" for _, _, segment in fired), fired
    # The whole population's dataset-level verdict stays quiet (single features may drift there on windows this small).
    assert not [a for a in fired if a[2] == "" and a[0] == DATASET_DRIFT], fired
    # the segment's Slack notification names it
    assert any("region=north" in json.dumps(body) for body in sink.bodies("/slack")), sink.bodies("/slack")[:3]


def test_stale_features_are_caught_while_drift_stays_quiet(home, sink):
    # The online store's credit_score stops updating when the scenario starts: its served values keep their
    # distribution, their age (the events' feature_ts, folded by the collector) passes the configured max age.
    run = judge_scenario(home, "stale_features", windows=8, sink=sink)
    fired = alerts(run.db_url)
    assert ("data_quality", "credit_score", "firing") in fired or ("data_quality", "credit_score", "resolved") in fired, fired
    assert not [a for a in fired if a[0] in (DATA_DRIFT, DATASET_DRIFT)], fired
    with session_scope(run.db_url) as s:
        stale = s.scalars(select(DetectorResult).where(DetectorResult.metric == STALE_FEATURES)
                          .order_by(DetectorResult.window_start_ms)).all()
    by_feature: dict[str, list] = {}
    for r in stale:
        by_feature.setdefault(r.feature, []).append(r)
    assert set(by_feature) == {"credit_score", "num_late_payments"}
    # the other online feature stays fresh in every window; credit_score is fresh before, stale after
    assert not any(r.breached for r in by_feature["num_late_payments"])
    score = by_feature["credit_score"]
    assert not any(r.breached for r in score[:2]) and all(r.breached for r in score[-4:])
    assert all(r.value == 1.0 for r in score[-4:])
    assert score[-1].details["age_p50_ms"] > score[-1].details["max_age_ms"]
    assert any("credit_score" in json.dumps(body) for body in sink.bodies("/slack")), sink.bodies("/slack")[:3]


def test_embedding_shift_fires_embedding_drift_while_feature_drift_stays_quiet(home, sink):
    run = judge_scenario(home, "embedding_shift", windows=8, sink=sink, log_embeddings=True)
    fired = alerts(run.db_url)
    assert ("embedding_drift", "activations") in [a[:2] for a in fired], fired
    assert not [a for a in fired if a[0] in (DATA_DRIFT, DATASET_DRIFT)], fired
    with session_scope(run.db_url) as s:
        verdicts = s.scalars(select(DetectorResult).where(DetectorResult.detector == "embedding_drift")
                             .order_by(DetectorResult.window_start_ms)).all()
    assert [r.breached for r in verdicts[:2]] == [False, False]  # the two warm-up windows of `none` traffic
    assert sum(r.breached for r in verdicts[2:]) >= 4, [(r.value, r.threshold) for r in verdicts]
    moved = verdicts[-1].details["clusters"]["moved"][0]
    assert moved["examples"] and all(rid.startswith("r-") for rid in moved["examples"])
    assert any("embedding drift" in json.dumps(body) for body in sink.bodies("/slack")), sink.bodies("/slack")[:2]
