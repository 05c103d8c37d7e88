"""evaluate_window: quiet on windows from the training distribution, loud on each kind of trouble."""
from __future__ import annotations

import json
import uuid

import numpy as np
import pandas as pd
import pytest

from driftline.detectors.thresholds.decision import benjamini_hochberg, significance_p_value
from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.detectors.stats.quality import quality_metrics
from driftline.detectors.families.results import WindowResult
from driftline.detectors.thresholds.levels import LatencySLO, WindowThresholds
from driftline.detectors.families.window import evaluate_window
from driftline import vocabulary
from driftline.baseline import LabelSummary, compute_baseline
from driftline.errors import UserError
from driftline.vocabulary import (
    DATASET_DRIFT,
    DATA_DRIFT,
    DATA_QUALITY,
    ESTIMATED_QUALITY,
    LATENCY,
    MODEL_QUALITY,
    MULTIVARIATE_DRIFT,
    PREDICTION_DRIFT,
    SKEW,
)
from driftline.window_state import EventBatch, WindowState

T0 = 1_767_225_600_000
REGIONS = ["north", "south", "east", "west"]
REGION_P = [0.4, 0.3, 0.2, 0.1]


def transform(inputs_records):
    """The 'training transform' of these tests: raw inputs -> features."""
    return [{"income": r["income"], "age": r["age"], "debt_ratio": r["debt"] / r["income"],
             "region": r["region"].strip().lower()} for r in inputs_records]


def draw(rng, n, *, income_shift=0.0, age_scale=1.0, region_p=REGION_P):
    income = rng.lognormal(10 + income_shift, 0.4, n)
    age = 45 + (rng.normal(0, 12, n)) * age_scale
    debt = income * rng.beta(2, 5, n)
    region = rng.choice(REGIONS, n, p=region_p)
    score = 1 / (1 + np.exp(-(np.log(debt / income + 1e-9) + 1.3)))
    return income, age, debt, region, score


@pytest.fixture(scope="module")
def baseline():
    rng = np.random.default_rng(0)
    income, age, debt, region, score = draw(rng, 20_000)
    frame = pd.DataFrame({"income": income, "age": age, "debt_ratio": debt / income,
                          "region": region.astype(object)})
    labels = (rng.random(score.size) < score).astype(int)
    return compute_baseline(frame, predictions=score, labels=labels)


def window(baseline, seed, n=2000, *, nulls=0.0, out_of_range=0.0, unseen=0.0, latency_ms=20.0, errors=0.0,
           parity_bug=0.0, label_flip=0.0, bad_debt=0.0, **shape):
    """A window of `n` events; each keyword injects one kind of trouble."""
    rng = np.random.default_rng(seed)
    income, age, debt, region, score = draw(rng, n, **shape)
    latency = rng.lognormal(np.log(latency_ms), 0.3, n)
    events = []
    for i in range(n):
        inputs = {"income": float(income[i]), "age": float(age[i]), "debt": float(debt[i]),
                  "region": " " + str(region[i]).upper()}
        if bad_debt and rng.random() < bad_debt:
            inputs["debt"] = 5 * inputs["income"]  # bad raw input: the training transform gives it too
        features = transform([inputs])[0]
        if rng.random() < parity_bug:
            features["debt_ratio"] = inputs["debt"] / (inputs["income"] / 12)  # monthly vs annual: a serving bug
        if rng.random() < nulls:
            features["income"] = None
        if rng.random() < out_of_range:
            features["age"] = 250.0
        if rng.random() < unseen:
            features["region"] = "atlantis"
        event = {"event_id": uuid.UUID(int=int(rng.integers(1 << 62)) << 64 | i).hex, "request_id": f"r{seed}-{i}",
                 "ts": T0 + i * 30, "features": features, "inputs": inputs, "prediction": float(score[i]),
                 "latency_ms": {"total": float(latency[i]), "queue": float(latency[i]) / 4,
                                "compute": float(latency[i]) / 2},
                 "status": "error" if rng.random() < errors else "ok"}
        events.append(event)
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    labels = (rng.random(n) < score).astype(int)
    flip = rng.random(n) < label_flip
    labels = np.where(flip, 1 - labels, labels)
    state.add_labels(score, labels)
    return state


def breached(results, detector=None, metric=None):
    return {(r.detector, r.feature, r.metric) for r in results if r.breached
            and (detector is None or r.detector == detector) and (metric is None or r.metric == metric)}


def test_no_false_alarms_on_windows_from_the_training_distribution(baseline):
    alarms = []
    verdicts = 0
    for seed in range(1, 16):
        results = evaluate_window(baseline, window(baseline, seed), transform=transform).results
        verdicts += len(results)
        alarms += [(seed, key) for key in breached(results)]
    # Every family ran and nothing fired across 15 windows.
    assert verdicts > 15 * 40
    assert alarms == []


def test_every_family_reports(baseline):
    results = evaluate_window(baseline, window(baseline, 99), transform=transform).results
    families = {r.detector for r in results}
    assert families == {DATA_DRIFT, DATASET_DRIFT, PREDICTION_DRIFT, DATA_QUALITY, SKEW, LATENCY, MODEL_QUALITY,
                        ESTIMATED_QUALITY, MULTIVARIATE_DRIFT}
    assert all(isinstance(r, WindowResult) for r in results)
    json.dumps([r.to_dict() for r in results], allow_nan=False)  # storable as JSON
    drift = next(r for r in results if r.detector == DATA_DRIFT and r.feature == "income")
    assert set(drift.details["tests"]) == {"psi", "ks", "wasserstein", "jensenshannon", "missing"}
    assert "p_value_adjusted" in drift.details["tests"]["ks"]
    assert drift.details["tests"]["wasserstein"]["noise"] > 0  # its sampling level at this window's size
    # the prediction is one more hypothesis of the features' family (Benjamini-Hochberg across them all)
    judged = [r for r in results if r.detector in (DATA_DRIFT, PREDICTION_DRIFT) and not r.insufficient_data]
    significance = [r.details["tests"]["chi2" if r.details["kind"] == "categorical" else "ks"] for r in judged]
    _, adjusted = benjamini_hochberg([significance_p_value(t) for t in significance])  # chi2: its pooled p-value
    assert [t["p_value_adjusted"] for t in significance] == pytest.approx(adjusted.tolist())
    metrics = {r.metric for r in results if r.detector == MODEL_QUALITY}
    assert metrics == {"accuracy", "precision", "recall", "f1", "roc_auc", "log_loss"}


@pytest.mark.parametrize("trouble", [{}, {"parity_bug": 0.3, "nulls": 0.2, "unseen": 0.1, "out_of_range": 0.1}])
def test_details_are_the_typed_details_of_their_family(baseline, trouble):
    """Every key a detector writes is a field of its family's details type, and reads back as written."""
    state = window(baseline, 5, **trouble)
    results = evaluate_window(baseline, state, transform=transform).results
    # embedding drift reports only on windows whose events carry embeddings (tests/detectors/test_embedding_drift.py)
    assert {r.detector for r in results} == set(vocabulary.DETECTORS) - {vocabulary.EMBEDDING_DRIFT}
    for r in results:
        assert r.metric in vocabulary.METRICS[r.detector], (r.detector, r.metric)
        stored = r.to_dict()["details"]
        typed = vocabulary.details_of(r.detector, stored)
        assert set(stored) <= type(typed).keys(), (r.detector, r.metric, set(stored) - type(typed).keys())
        assert typed.to_dict() == stored


def test_mean_shift_is_drift(baseline):
    results = evaluate_window(baseline, window(baseline, 3, income_shift=0.2)).results
    assert (DATA_DRIFT, "income", "psi") in breached(results)
    assert (DATA_DRIFT, "age", "psi") not in breached(results)
    assert (DATASET_DRIFT, None, "drifted_share") not in breached(results)  # 1 of 4 features


def test_scale_change_is_drift(baseline):
    results = evaluate_window(baseline, window(baseline, 4, age_scale=2.0)).results
    assert breached(results, DATA_DRIFT) >= {(DATA_DRIFT, "age", "psi")}
    age = next(r for r in results if r.detector == DATA_DRIFT and r.feature == "age")
    assert age.details["tests"]["wasserstein"]["value"] > 0.3


def test_category_mix_is_drift(baseline):
    results = evaluate_window(baseline, window(baseline, 5, region_p=[0.1, 0.2, 0.3, 0.4])).results
    assert (DATA_DRIFT, "region", "psi") in breached(results)
    region = next(r for r in results if r.detector == DATA_DRIFT and r.feature == "region")
    assert region.details["tests"]["chi2"]["drift"] and region.details["kind"] == "categorical"


def test_nulls_are_data_quality_and_drift(baseline):
    results = evaluate_window(baseline, window(baseline, 6, nulls=0.3)).results
    assert (DATA_QUALITY, "income", "missing_rate") in breached(results)
    assert (DATA_DRIFT, "income", "psi") in breached(results)
    quality = next(r for r in results if r.metric == "missing_rate" and r.feature == "income")
    assert 0.25 < quality.value < 0.35 and quality.details["reference"] == 0.0


def test_out_of_range_values(baseline):
    results = evaluate_window(baseline, window(baseline, 7, out_of_range=0.05)).results
    assert breached(results, DATA_QUALITY) == {(DATA_QUALITY, "age", "out_of_range_share")}
    result = next(r for r in results if r.metric == "out_of_range_share" and r.feature == "age")
    assert result.details["above_max"] == pytest.approx(100, abs=35) and result.details["window_max"] == 250.0


def test_unseen_categories(baseline):
    results = evaluate_window(baseline, window(baseline, 8, unseen=0.05)).results
    assert (DATA_QUALITY, "region", "unseen_category_share") in breached(results)
    result = next(r for r in results if r.metric == "unseen_category_share")
    assert list(result.details["unseen"]) == ["atlantis"]


def test_type_changes_missing_and_new_features(baseline):
    rng = np.random.default_rng(1)
    events = []
    for i in range(300):
        features = {"income": "52000" if i % 10 == 0 else float(rng.lognormal(10, 0.4)), "age": 40.0,
                    "region": "north", "loyalty_tier": "gold"}  # debt_ratio missing, loyalty_tier new
        events.append({"event_id": f"e{i}", "ts": T0 + i, "features": features, "prediction": 0.3,
                       "latency_ms": {"total": 5.0}, "status": "ok"})
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    results = evaluate_window(baseline, state).results
    quality = breached(results, DATA_QUALITY)
    assert (DATA_QUALITY, "income", "type_change_share") in quality
    assert (DATA_QUALITY, "debt_ratio", "missing_feature_share") in quality
    assert (DATA_QUALITY, "loyalty_tier", "new_feature_share") in quality
    change = next(r for r in results if r.metric == "type_change_share" and r.feature == "income")
    assert change.value == pytest.approx(0.1) and change.details["changed"] == {"string": 30}


def test_latency_over_slo_and_errors(baseline):
    slow = evaluate_window(baseline, window(baseline, 9, latency_ms=400.0, errors=0.05), window_seconds=60).results
    assert breached(slow, LATENCY) >= {(LATENCY, "total", "p50_ms"), (LATENCY, "total", "p95_ms"),
                                         (LATENCY, "total", "p99_ms"), (LATENCY, None, "error_rate")}
    assert not any(r.breached for r in slow if r.feature in ("queue", "compute"))  # no SLO on parts
    by_metric = {(r.feature, r.metric): r for r in slow if r.detector == LATENCY}
    assert by_metric[(None, "qps")].value == pytest.approx(2000 / 60)
    mean_ms = by_metric[(None, "concurrency")].details["mean_latency_ms"]
    assert by_metric[(None, "concurrency")].value == pytest.approx(2000 / 60 * mean_ms / 1000)
    relaxed = LatencySLO(p50_ms=1000, p95_ms=2000, p99_ms=3000, error_rate=0.2)
    assert breached(evaluate_window(baseline, window(baseline, 9, latency_ms=400.0, errors=0.05), slo=relaxed).results,
                    LATENCY) == set()
    capped = LatencySLO(max_qps=10.0)
    assert (LATENCY, None, "qps") in breached(evaluate_window(baseline, window(baseline, 2), slo=capped).results)


def test_parity_skew_finds_the_broken_feature(baseline):
    state = window(baseline, 10, parity_bug=0.3)
    results = evaluate_window(baseline, state, transform=transform).results
    assert breached(results, SKEW, "parity_mismatch_rate") == {(SKEW, "debt_ratio", "parity_mismatch_rate")}
    result = next(r for r in results if r.metric == "parity_mismatch_rate" and r.feature == "debt_ratio")
    assert 0.15 < result.value < 0.45 and result.details["examples"]
    # A transform that cannot handle served inputs is skew too, and says why.
    broken = evaluate_window(baseline, state, transform=lambda records: [{} for _ in records[:-1]]).results
    failure = next(r for r in broken if r.metric == "parity_mismatch_rate")
    assert failure.breached and "returned" in failure.details["error"]


def test_distribution_skew_on_a_large_shift(baseline):
    results = evaluate_window(baseline, window(baseline, 11, income_shift=0.6)).results
    assert (SKEW, "income", "distribution_psi") in breached(results)


def by_key(results):
    return {(r.detector, r.feature, r.metric): r for r in results}


def test_covariate_shift_is_drift_not_skew_when_parity_holds(baseline):
    state = window(baseline, 11, income_shift=0.6)
    results = by_key(evaluate_window(baseline, state, transform=transform).results)
    assert breached(results.values(), SKEW) == set()
    income_skew = results[(SKEW, "income", "distribution_psi")]
    # Still reported, with the value that would have fired it, but parity says serving is right.
    assert income_skew.value >= income_skew.threshold and income_skew.details["parity_checked"]
    assert "drift" in income_skew.details["reason"]
    assert results[(DATA_DRIFT, "income", "psi")].breached
    assert "explained_by" not in results[(DATA_DRIFT, "income", "psi")].details
    # Without raw inputs in the sample parity cannot be checked: distribution skew is the only evidence.
    for record in state.sample:
        record["inputs"] = None
    blind = by_key(evaluate_window(baseline, state, transform=transform).results)
    assert blind[(SKEW, "income", "distribution_psi")].breached
    assert not blind[(SKEW, "income", "distribution_psi")].details["parity_checked"]
    assert blind[(SKEW, None, "parity_mismatch_rate")].insufficient_data


def test_a_serving_bug_is_skew_not_drift(baseline):
    state = window(baseline, 15, parity_bug=1.0)  # every served debt_ratio is 12x the training transform's
    results = by_key(evaluate_window(baseline, state, transform=transform).results)
    assert breached(results.values(), SKEW) == {(SKEW, "debt_ratio", "parity_mismatch_rate")}
    drift = results[(DATA_DRIFT, "debt_ratio", "psi")]
    assert not drift.breached and drift.details["explained_by"] == SKEW
    assert drift.details["breached_without_skew"] and drift.value >= drift.threshold
    assert breached(results.values(), DATA_DRIFT) == set()
    dataset = results[(DATASET_DRIFT, None, "drifted_share")]
    assert dataset.details["explained_by_skew"] == ["debt_ratio"] and dataset.details["features"] == 3
    # 12x ratios leave the training range; the training transform's output for the same inputs does not.
    out_of_range = results[(DATA_QUALITY, "debt_ratio", "out_of_range_share")]
    assert out_of_range.value > out_of_range.threshold
    assert not out_of_range.breached and out_of_range.details["explained_by"] == SKEW
    assert out_of_range.details["recomputed_value"] <= out_of_range.threshold
    distribution = results[(SKEW, "debt_ratio", "distribution_psi")]
    assert distribution.value >= distribution.threshold and not distribution.breached
    assert results[(PREDICTION_DRIFT, "prediction", "psi")].details["explained_by"] == SKEW
    assert results[(MODEL_QUALITY, None, "accuracy")].details["skewed_features"] == ["debt_ratio"]
    # The sample's joint distribution holds the bug too: multivariate drift is skew's as well.
    multivariate = results[(MULTIVARIATE_DRIFT, None, "pca_reconstruction_error")]
    assert multivariate.details["explained_by"] == SKEW and multivariate.details["breached_without_skew"]
    assert breached(results.values()) == {(SKEW, "debt_ratio", "parity_mismatch_rate")}
    # The same window without a transform: nothing can tell skew from drift, so drift it is.
    plain = by_key(evaluate_window(baseline, state).results)
    assert plain[(DATA_DRIFT, "debt_ratio", "psi")].breached
    assert "explained_by" not in plain[(DATA_DRIFT, "debt_ratio", "psi")].details
    assert plain[(SKEW, "debt_ratio", "distribution_psi")].breached


def test_bad_inputs_stay_data_quality_even_with_skew(baseline):
    # A serving bug on debt_ratio and, separately, raw debts far out of range: the training
    # transform reproduces the out-of-range ratios, so they are a data-quality finding of their own.
    state = window(baseline, 16, parity_bug=0.5, bad_debt=0.05)
    results = by_key(evaluate_window(baseline, state, transform=transform).results)
    assert results[(SKEW, "debt_ratio", "parity_mismatch_rate")].breached
    out_of_range = results[(DATA_QUALITY, "debt_ratio", "out_of_range_share")]
    assert out_of_range.breached and "explained_by" not in out_of_range.details
    assert out_of_range.details["recomputed_value"] > out_of_range.threshold


def test_prediction_drift(baseline):
    results = evaluate_window(baseline, window(baseline, 12, income_shift=0.0, region_p=REGION_P)).results
    assert breached(results, PREDICTION_DRIFT) == set()
    state = window(baseline, 12)
    shifted = WindowState.empty(baseline)
    events = [{"event_id": f"p{i}", "ts": T0 + i, "features": {}, "prediction": 0.9,
               "latency_ms": {"total": 5.0}} for i in range(500)]
    shifted.add_batch(EventBatch.from_events(events))
    assert breached(evaluate_window(baseline, state.merge(shifted)).results, PREDICTION_DRIFT) == {
        (PREDICTION_DRIFT, "prediction", "psi")}


@pytest.mark.parametrize("reference", ["training", "calibration"])
def test_model_quality_drop(baseline, reference):
    thresholds = WindowThresholds(quality_compared_with=reference)
    results = evaluate_window(baseline, window(baseline, 13, label_flip=0.4), thresholds=thresholds).results
    quality = breached(results, MODEL_QUALITY)
    assert (MODEL_QUALITY, None, "accuracy") in quality and (MODEL_QUALITY, None, "roc_auc") in quality
    log_loss = next(r for r in results if r.metric == "log_loss")
    assert log_loss.value > log_loss.details["training"]
    assert log_loss.details["compared_with"] == reference
    # 2000 labels: the noise margin is below the floor, so the floor (+20 %) sets the threshold,
    # relative to the training value or to the value expected for these scores under the training calibration.
    target = log_loss.details["training"] if reference == "training" else log_loss.details["expected"]
    assert log_loss.threshold == pytest.approx(target * 1.2)
    if reference == "training":
        assert log_loss.threshold == pytest.approx(log_loss.details["training"] * 1.2)


def test_quality_metrics_match_direct_computation():
    rng = np.random.default_rng(2)
    scores = rng.random(3000)
    labels = (rng.random(3000) < scores).astype(int)
    metrics = quality_metrics(LabelSummary().add(scores, labels))
    predicted = scores >= 0.5
    tp = np.sum(predicted & (labels == 1))
    assert metrics["accuracy"] == pytest.approx(np.mean(predicted == labels))
    assert metrics["precision"] == pytest.approx(tp / predicted.sum())
    assert metrics["recall"] == pytest.approx(tp / labels.sum())
    # ROC AUC by its definition: P(score of a positive > score of a negative), ties half.
    pos, neg = scores[labels == 1], scores[labels == 0]
    exact_auc = (np.mean(pos[:, None] > neg[None, :]) + 0.5 * np.mean(pos[:, None] == neg[None, :]))
    assert metrics["roc_auc"] == pytest.approx(exact_auc, abs=1e-3)
    clipped = np.clip(scores, 1e-15, 1 - 1e-15)
    assert metrics["log_loss"] == pytest.approx(-np.mean(labels * np.log(clipped) + (1 - labels) * np.log(1 - clipped)))
    regression = quality_metrics(LabelSummary().add(np.array([1.0, 2.0, 4.5]), np.array([1.5, 2.0, 3.0])))
    assert regression["mae"] == pytest.approx(2 / 3) and regression["rmse"] == pytest.approx(np.sqrt(2.5 / 3))
    multiclass = quality_metrics(LabelSummary().add(["a", "b", "b", "c"], ["a", "b", "c", "c"]))
    assert multiclass["accuracy"] == pytest.approx(0.75)


def test_regression_quality_against_training():
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"x": rng.normal(size=3000)})
    y = 3 * frame["x"].to_numpy() + rng.normal(0, 0.5, 3000)
    baseline = compute_baseline(frame, predictions=3 * frame["x"].to_numpy(), labels=y)
    assert baseline.quality.task == "regression"
    good = WindowState.empty(baseline).add_labels(3 * frame["x"].to_numpy()[:500], y[:500])
    bad = WindowState.empty(baseline).add_labels(3 * frame["x"].to_numpy()[:500] + 1.0, y[:500])
    assert breached(evaluate_window(baseline, good).results, MODEL_QUALITY) == set()
    assert breached(evaluate_window(baseline, bad).results, MODEL_QUALITY) == {
        (MODEL_QUALITY, None, "mae"), (MODEL_QUALITY, None, "rmse")}


def test_small_windows_are_insufficient_data_not_alarms(baseline):
    state = window(baseline, 14, n=25, income_shift=1.0, nulls=0.5, latency_ms=900.0, label_flip=0.5)
    results = evaluate_window(baseline, state, transform=transform).results
    assert breached(results) == set()
    judged = [r for r in results if r.detector != LATENCY or r.metric not in ("qps", "concurrency")]
    assert all(r.insufficient_data for r in judged if r.detector in (DATA_DRIFT, DATA_QUALITY, LATENCY,
                                                                     MODEL_QUALITY))
    parity = [r for r in results if r.metric == "parity_mismatch_rate"]
    assert parity and all(r.insufficient_data for r in parity)


def test_without_baseline_only_latency(baseline):
    state = WindowState.empty(None).add_batch(EventBatch.from_events(
        [{"event_id": f"x{i}", "ts": T0 + i, "features": {"a": 1.0}, "prediction": 0.5,
          "latency_ms": {"total": 900.0}} for i in range(200)]))
    results = evaluate_window(None, state).results
    assert {r.detector for r in results} == {LATENCY}
    assert (LATENCY, "total", "p99_ms") in breached(results)


def test_state_without_bins_waits_for_the_baseline(baseline):
    unbinned = WindowState.empty(None).add_batch(EventBatch.from_events(
        [{"event_id": f"u{i}", "ts": T0 + i, "features": {"income": 1e9, "age": 40.0, "debt_ratio": 0.2,
                                                          "region": "north"},
          "prediction": 0.5, "latency_ms": {"total": 5.0}} for i in range(300)]))
    results = evaluate_window(baseline, WindowState.merge_all([unbinned], baseline)).results
    income = next(r for r in results if r.detector == DATA_DRIFT and r.feature == "income")
    assert not income.breached and income.insufficient_data
    assert "before the baseline" in income.details["reason"]


def test_thresholds_from_config_and_overrides(baseline):
    thresholds = WindowThresholds.from_mapping({
        "drift": {"psi": 0.3}, DATA_QUALITY: {"out_of_range_share": 0.5},
        "models": {"credit": {SKEW: {"parity_mismatch_rate": 0.9}}}}, model="credit")
    assert thresholds.drift.psi == 0.3 and thresholds.out_of_range_share == 0.5
    assert thresholds.parity_mismatch_rate == 0.9
    results = evaluate_window(baseline, window(baseline, 7, out_of_range=0.05), thresholds=thresholds).results
    assert breached(results, DATA_QUALITY) == set()
    # A bare DriftThresholds works too; per-feature overrides apply.
    strict = DriftThresholds(features={"income": {"min_rows": 10**9}})
    income = next(r for r in evaluate_window(baseline, window(baseline, 3, income_shift=0.2), thresholds=strict).results
                  if r.detector == DATA_DRIFT and r.feature == "income")
    assert not income.breached and income.insufficient_data
    with pytest.raises(UserError, match="unknown key"):
        WindowThresholds.from_mapping({"bogus": 1})
    slo = LatencySLO.from_mapping({"p99_ms": 100, "models": {"credit": {"p99_ms": 40}}}, model="credit")
    assert slo.p99_ms == 40 and slo.p50_ms == LatencySLO().p50_ms
    with pytest.raises(UserError, match="unknown key"):
        LatencySLO.from_mapping({"p98_ms": 1})


def test_a_state_from_another_baseline_is_refused(baseline):
    other = compute_baseline(pd.DataFrame({"income": np.arange(100.0)}))
    state = WindowState.empty(other)
    with pytest.raises(ValueError, match="binned on baseline"):
        evaluate_window(baseline, state).results
