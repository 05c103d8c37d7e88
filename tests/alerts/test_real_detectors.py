"""The names agree across stages: the real detectors' output, evaluated by the scheduler, drives the rules,
the inhibition, the lifecycle, the channels and the retraining policy (no hand-written result rows)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import select

from driftline.alerts import group_key
from driftline import vocabulary
from driftline.baseline import compute_baseline
from driftline.config import Settings
from driftline.store.db import session_scope
from driftline.store.models import Alert, BaselineRecord, DetectorResult, ModelVersion, RetrainRequest, WindowStateRecord
from driftline.window_state import EventBatch, WindowState
from driftline.scheduler.jobs import SchedulerJobs

WINDOW_MS = 10_000
T0 = 1_796_040_000_000  # a window boundary
EVENTS = 1_200


def inputs(rng, n, shift=0.0):
    """Three numeric features and a category; `shift` moves every one of them (a covariate shift)."""
    frame = pd.DataFrame({"income": rng.normal(50 + 20 * shift, 10, n), "age": rng.normal(40 + 12 * shift, 8, n),
                          "tenure": rng.exponential(5 * (1 + shift), n),
                          "region": rng.choice(["north", "south", "east"], n,
                                               p=[0.2, 0.3, 0.5] if shift else [0.5, 0.3, 0.2])})
    score = 1 / (1 + np.exp(-(frame["income"].to_numpy() - 50) / 10))
    return frame, score


@pytest.fixture
def store(db_url):
    rng = np.random.default_rng(11)
    frame, score = inputs(rng, 20_000)
    baseline = compute_baseline(frame, predictions=score, labels=(rng.random(score.size) < score).astype(int))
    with session_scope(db_url) as s:
        s.add(ModelVersion(model="m", version="1"))
        s.add(BaselineRecord(model="m", version="1", rows=len(frame), summary=baseline.to_dict()))
    return db_url, baseline, rng


def write_window(db_url, baseline, rng, index, *, shift=0.0, flip_labels=False):
    """One window of real events (and their labels) folded into a stored window state, as the collector does."""
    start = T0 + index * WINDOW_MS
    frame, score = inputs(rng, EVENTS, shift)
    events = [{"event_id": f"e{index}-{i}", "ts_ms": start + i * WINDOW_MS // EVENTS, "model": "m", "version": "1",
               "features": row, "prediction": float(score[i]), "latency_ms": {"total": 8.0}, "status": "ok"}
              for i, row in enumerate(frame.to_dict(orient="records"))]
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    labels = (rng.random(EVENTS) < score).astype(int)
    state.add_labels(score, 1 - labels if flip_labels else labels)  # flipped: the relation broke (concept drift)
    with session_scope(db_url) as s:
        s.add(WindowStateRecord(model="m", version="1", window_start_ms=start, window_end_ms=start + WINDOW_MS,
                                partition=0, events=EVENTS, state=state.to_bytes()))


def jobs_for(db_url, fake_slack, fake_pagerduty, fake_retrain=None, tmp_path=None, config=""):
    path = None
    if config:
        path = tmp_path / "driftline.toml"
        path.write_text(config)
    settings = Settings(db=db_url, window_seconds=10, allowed_lateness_seconds=2,
                        slack_webhook_url=fake_slack.url, pagerduty_routing_key="R0UT1NGKEY0123456789abcdefABCDEF",
                        pagerduty_url=fake_pagerduty.url, retrain_webhook_url=fake_retrain.url if fake_retrain else None,
                        retrain_webhook_token="retrain-token-for-tests")
    settings._config_path = path
    return SchedulerJobs(settings)


def evaluate(jobs, windows):
    assert jobs.evaluate_due_windows(now_ms=T0 + windows * WINDOW_MS + 2_000) == windows
    jobs.deliver_notifications()


def test_a_covariate_shift_fires_the_default_dataset_drift_rule_and_pages(store, fake_slack, fake_pagerduty):
    db_url, baseline, rng = store
    write_window(db_url, baseline, rng, 0)
    for i in (1, 2):
        write_window(db_url, baseline, rng, i, shift=1.0)
    jobs = jobs_for(db_url, fake_slack, fake_pagerduty)
    evaluate(jobs, 3)
    with session_scope(db_url) as s:
        dataset = s.scalars(select(DetectorResult).where(DetectorResult.metric == vocabulary.DRIFTED_SHARE)
                            .order_by(DetectorResult.window_start_ms)).all()
        alerts = {(a.detector, a.feature): a for a in s.scalars(select(Alert))}
    assert [(r.detector, r.breached) for r in dataset] == [(vocabulary.DATASET_DRIFT, False),
                                                           (vocabulary.DATASET_DRIFT, True),
                                                           (vocabulary.DATASET_DRIFT, True)]
    fired = alerts[(vocabulary.DATASET_DRIFT, "")]
    assert (fired.state, fired.severity) == ("firing", "error")  # the default rule: error, K = 2
    key = group_key("m", "1", vocabulary.DATASET_DRIFT)
    # (without raw inputs to check parity, distribution skew pages as well: its own group and dedup_key)
    pages = [e for e in fake_pagerduty.events if e["dedup_key"] == key]
    assert [(e["event_action"], e["payload"]["severity"]) for e in pages] == [("trigger", "error")]
    assert sorted(pages[0]["payload"]["custom_details"]["drifted_features"]) == ["age", "income", "region", "tenure"]
    # the default inhibition: per-feature drift is listed in the dataset message, not announced on its own
    slack = [r.json()["text"] for r in fake_slack.requests]
    assert [t for t in slack if "dataset drift" in t] == [
        "[FIRING] dataset drift on m v1: 4 features drifted (age, income, region, tenure)"]
    assert not [t for t in slack if "data drift" in t]
    assert alerts[(vocabulary.DATA_DRIFT, "income")].detector == vocabulary.DATA_DRIFT


@pytest.mark.parametrize("quality_drop, asks", [(0.1, True), (0.9, False)])
def test_a_quality_drop_makes_the_retrain_policy_ask_when_it_is_large_enough(
        store, fake_slack, fake_pagerduty, fake_retrain, tmp_path, quality_drop, asks):
    db_url, baseline, rng = store
    write_window(db_url, baseline, rng, 0)
    write_window(db_url, baseline, rng, 1, flip_labels=True)
    config = f'[alerts.retrain]\nquality_drop = {quality_drop}\nquality_metrics = ["accuracy", "roc_auc"]\n'
    jobs = jobs_for(db_url, fake_slack, fake_pagerduty, fake_retrain, tmp_path, config)
    evaluate(jobs, 2)
    with session_scope(db_url) as s:
        requests = s.scalars(select(RetrainRequest)).all()
        quality = {r.metric: r for r in s.scalars(select(DetectorResult).where(
            DetectorResult.detector == vocabulary.MODEL_QUALITY, DetectorResult.window_start_ms == T0 + WINDOW_MS))}
    assert quality["accuracy"].breached and quality["roc_auc"].breached
    # the model-quality alert pages either way (severity error); the retrain waits for a drop of quality_drop
    pages = [e for e in fake_pagerduty.events if e["dedup_key"] == group_key("m", "1", vocabulary.MODEL_QUALITY)]
    assert [e["event_action"] for e in pages] == ["trigger"]
    assert len(requests) == len(fake_retrain.requests) == int(asks)
    if asks:
        body = fake_retrain.requests[0].json()
        assert body["trigger"] == "quality" and body["quality"]["metric"] in ("accuracy", "roc_auc")
        assert quality_drop <= body["quality"]["drop"] < 0.9 and body["windows"][0]["start_ms"] == T0 + WINDOW_MS


def test_every_family_the_detectors_emit_is_one_the_rules_know(store):
    from driftline.detectors.families.window import evaluate_window

    db_url, baseline, rng = store
    frame, score = inputs(rng, EVENTS)
    events = [{"event_id": f"x{i}", "ts_ms": T0 + i, "model": "m", "version": "1", "features": row,
               "prediction": float(score[i]), "latency_ms": {"total": 8.0}, "status": "ok",
               "embeddings": {"query": [float(score[i]), 1.0]}}  # embedding drift reports on windows that carry one
              for i, row in enumerate(frame.to_dict(orient="records"))]
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    state.add_labels(score, (rng.random(EVENTS) < score).astype(int))
    results = evaluate_window(baseline, state).results
    assert {r.detector for r in results} == set(vocabulary.DETECTORS)
    compared = {r.metric for r in results if r.detector == vocabulary.MODEL_QUALITY and r.threshold is not None}
    assert compared and compared <= vocabulary.QUALITY_METRICS
