"""Multivariate drift: a correlation that flips while every marginal stays put is caught, batch and streaming."""
from __future__ import annotations

import json
import uuid

import numpy as np
import pandas as pd
import pytest

from driftline import vocabulary
from driftline.baseline import Baseline, compute_baseline, fit_reconstruction
from driftline.detectors.batch.engine import ColumnRoles, Judging, Windowing, detect
from driftline.detectors.stats.multivariate import (
    MultivariateThresholds,
    auc,
    aucs,
    bin_codes,
    bin_thresholds,
    classifier_threshold,
    domain_classifier,
    fold_thresholds,
    reconstruction_drift,
)
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.detectors.families.window import evaluate_window
from driftline.errors import UserError
from driftline.synthetic import correlated_features
from driftline.vocabulary import (
    DATASET_DRIFT,
    DATA_DRIFT,
    DOMAIN_CLASSIFIER_AUC,
    MULTIVARIATE_DRIFT,
    PCA_RECONSTRUCTION_ERROR,
)
from driftline.window_state import EventBatch, WindowState

T0 = 1_767_225_600_000


@pytest.fixture(scope="module")
def reference() -> pd.DataFrame:
    return correlated_features(5000, 0.8, seed=0)


def _multivariate(window: dict) -> tuple[dict, dict]:
    found = window["multivariate"]
    return found[PCA_RECONSTRUCTION_ERROR], found["domain_classifier"]


def _top_names(verdict: dict, count: int = 2) -> set[str]:
    return {f["name"] for f in verdict["top_features"][:count]}


def test_batch_correlation_flip_is_caught_by_both_and_by_no_single_feature(reference):
    current = correlated_features(1000, -0.8, seed=1)
    result = detect(reference, current, columns=ColumnRoles(categorical=["plan"]), windowing=Windowing(chunk_size=500))
    assert len(result["windows"]) == 2
    for window in result["windows"]:
        assert window["drifted_features"] == [] and not window[DATASET_DRIFT]
        pca, classifier = _multivariate(window)
        assert pca["drift"] and pca["value"] > pca["upper"] > pca["lower"]
        assert classifier["drift"] and classifier["auc"] > classifier["threshold"]
        # The two features whose relation changed are named first by both.
        assert _top_names(pca) == {"income", "spend"}
        assert _top_names(classifier) == {"income", "spend"}
    json.dumps(result, allow_nan=False)


def test_batch_windows_from_the_reference_distribution_stay_silent(reference):
    result = detect(reference, correlated_features(1500, 0.8, seed=2), columns=ColumnRoles(categorical=["plan"]),
                    windowing=Windowing(chunk_size=500))
    for window in result["windows"]:
        pca, classifier = _multivariate(window)
        assert pca["lower"] <= pca["value"] <= pca["upper"] and not pca["drift"]
        assert classifier["auc"] <= classifier["threshold"] and not classifier["drift"]


def test_batch_window_too_small_or_one_feature_is_insufficient_data(reference):
    small = detect(reference, correlated_features(30, -0.8, seed=3),
                   columns=ColumnRoles(categorical=["plan"]))["windows"][0]
    pca, classifier = _multivariate(small)
    assert pca["insufficient_data"] and classifier["insufficient_data"]
    assert not pca["drift"] and not classifier["drift"] and pca["value"] is None
    single = detect(reference[["income"]], correlated_features(500, -0.8, seed=3)[["income"]])["windows"][0]
    assert all(v["insufficient_data"] for v in single["multivariate"].values())


def test_batch_multivariate_can_be_left_out(reference):
    result = detect(reference, correlated_features(600, -0.8, seed=14), columns=ColumnRoles(categorical=["plan"]),
                    windowing=Windowing(chunk_size=300), judging=Judging(multivariate=False))
    assert len(result["windows"]) == 2 and not any("multivariate" in w for w in result["windows"])
    bounded = detect(reference, correlated_features(300, -0.8, seed=14), columns=ColumnRoles(categorical=["plan"]),
                     judging=Judging(multivariate=MultivariateThresholds(max_rows=100, pca_max_rows=100)))
    assert all(v["drift"] for v in bounded["windows"][0]["multivariate"].values())


def _state(baseline: Baseline, frame: pd.DataFrame, seed: int) -> WindowState:
    events = [{"event_id": uuid.UUID(int=(seed << 64) | i).hex, "ts": T0 + i, "features": record,
               "prediction": 0.5, "latency_ms": {"total": 10.0}, "status": "ok"}
              for i, record in enumerate(frame.to_dict(orient="records"))]
    return WindowState.empty(baseline).add_batch(EventBatch.from_events(events))


@pytest.fixture(scope="module")
def baseline(reference) -> Baseline:
    return compute_baseline(reference, categorical=["plan"])


def _by_metric(results) -> dict[str, object]:
    return {r.metric: r for r in results if r.detector == MULTIVARIATE_DRIFT}


def test_streaming_correlation_flip_is_caught_from_the_window_sample(baseline):
    state = _state(baseline, correlated_features(3000, -0.8, seed=4), seed=4)
    results = evaluate_window(baseline, state, families=[DATA_DRIFT, MULTIVARIATE_DRIFT]).results
    assert not any(r.breached for r in results if r.detector in (DATA_DRIFT, DATASET_DRIFT))
    found = _by_metric(results)
    assert set(found) == {PCA_RECONSTRUCTION_ERROR, DOMAIN_CLASSIFIER_AUC}
    for result in found.values():
        assert result.breached and result.value > result.threshold and not result.insufficient_data
        assert result.details["rows"] == len(state.sample)
        assert {f["name"] for f in result.details["top_features"][:2]} == {"income", "spend"}
        typed = vocabulary.details_of(MULTIVARIATE_DRIFT, result.details)
        assert typed.to_dict() == result.details
    json.dumps([r.to_dict() for r in results], allow_nan=False)


def test_streaming_windows_from_the_training_distribution_stay_silent(baseline):
    for seed in (5, 6, 7):
        results = evaluate_window(baseline, _state(baseline, correlated_features(1000, 0.8, seed=seed), seed=seed),
                                  families=[MULTIVARIATE_DRIFT]).results
        found = _by_metric(results)
        assert len(found) == 2
        assert not any(r.breached or r.insufficient_data for r in found.values()), seed


def test_a_baseline_registered_before_multivariate_drift_reports_insufficient_data(baseline):
    stored = baseline.to_dict()
    del stored["reconstruction"]
    old = Baseline.from_dict(stored)
    assert old.reconstruction is None and old.fingerprint == baseline.fingerprint
    results = evaluate_window(old, _state(old, correlated_features(500, -0.8, seed=8), seed=8)).results
    found = _by_metric(results)
    assert set(found) == {PCA_RECONSTRUCTION_ERROR, DOMAIN_CLASSIFIER_AUC}
    assert all(r.insufficient_data and not r.breached and r.value is None for r in found.values())
    assert "register it again" in found[PCA_RECONSTRUCTION_ERROR].details["reason"]


def test_a_small_window_sample_is_insufficient_data(baseline):
    found = _by_metric(evaluate_window(baseline, _state(baseline, correlated_features(20, -0.8, seed=9), seed=9),
                                       families=[MULTIVARIATE_DRIFT]).results)
    assert all(r.insufficient_data and not r.breached for r in found.values())
    assert found[DOMAIN_CLASSIFIER_AUC].details["rows"] == 20


def test_the_fit_round_trips_through_the_stored_json(baseline):
    fit = baseline.reconstruction
    assert fit is not None and fit.features == ("income", "spend", "age", "tenure", "plan")
    assert 0.65 <= fit.variance_share < 1.0 and 1 <= fit.components.shape[0] < len(fit.features)
    # The error statistics come from the half of the reference the components were not fitted on.
    assert fit.rows == 5000 and fit.error_rows == 2500
    restored = Baseline.from_dict(json.loads(json.dumps(baseline.to_dict(), allow_nan=False)))
    assert restored.reconstruction == fit
    frame = correlated_features(50, 0.8, seed=10)
    np.testing.assert_allclose(restored.reconstruction.errors(restored.reconstruction.encode(frame)),
                               fit.errors(fit.encode(frame)))


def test_encoding_tolerates_missing_unseen_and_non_finite_values(baseline):
    fit = baseline.reconstruction
    frame = pd.DataFrame({"income": [None, float("inf"), 55.0], "spend": ["x", 20.0, 21.0],
                          "plan": [None, "platinum", "basic"]})  # age and tenure absent
    encoded = fit.encode(frame)
    assert encoded.shape == (3, 5) and np.isfinite(encoded).all()
    # A missing number is the reference mean: zero once standardised.
    assert encoded[0, 0] == 0.0 and encoded[1, 0] == 0.0 and (encoded[:, 2:4] == 0.0).all()


def test_the_reconstruction_band_narrows_as_windows_grow(baseline):
    fit = baseline.reconstruction
    small = reconstruction_drift(fit, fit.encode(correlated_features(100, 0.8, seed=11)))
    large = reconstruction_drift(fit, fit.encode(correlated_features(2500, 0.8, seed=11)))
    assert large.upper - large.lower < small.upper - small.lower
    assert small.lower < fit.error_mean < small.upper
    # Windows from the reference distribution stay inside it (in-sample error statistics flagged several).
    inside = [reconstruction_drift(fit, fit.encode(correlated_features(1000, 0.8, seed=s))).drift for s in range(20, 40)]
    assert sum(inside) <= 1


def test_the_classifier_threshold_is_the_floor_for_large_samples_and_wider_for_small_ones():
    assert classifier_threshold(1000, 1000) == pytest.approx(0.55)
    assert classifier_threshold(1000, 60) > classifier_threshold(1000, 200) > 0.55


def test_auc_is_the_mann_whitney_statistic():
    positive = np.array([True, True, False, False, False])
    # 0.9 beats all three negatives; 0.4 beats 0.1 and ties 0.4 (half a win).
    assert auc(np.array([0.9, 0.4, 0.5, 0.1, 0.4]), positive) == pytest.approx((3 + 1.5) / 6)
    from sklearn.metrics import roc_auc_score
    rng = np.random.default_rng(13)
    scores, labels = rng.integers(0, 20, 300).astype(float), rng.random(300) < 0.3
    assert auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores))
    with pytest.raises(ValueError):
        auc(np.array([0.1, 0.2]), np.array([True, True]))


@pytest.mark.parametrize("values", [
    np.random.default_rng(0).normal(size=1_300),  # more distinct values than bins: quantiles
    np.round(np.random.default_rng(1).normal(size=997), 1),  # fewer: midpoints; ties
    np.random.default_rng(2).integers(0, 300, 1_000).astype(float),  # ties on the quantiles themselves
    np.concatenate((np.random.default_rng(3).exponential(size=600), [np.nan] * 40, [np.inf, -1e308])),
    np.full(50, 3.0),  # one value: no threshold
])
def test_the_classifier_bins_its_features_as_scikit_learn_would(values):
    # the fit gets bin codes binned here (faster); they must be scikit-learn's own bins, or the AUC would change
    from sklearn.ensemble._hist_gradient_boosting.binning import _BinMapper

    rng = np.random.default_rng(4)
    held_out = np.concatenate((rng.normal(size=200), [np.nan, 1e300, -np.inf], rng.choice(values, 50)))
    mapper = _BinMapper(n_bins=256).fit(values.reshape(-1, 1))
    np.testing.assert_array_equal(bin_thresholds(values), mapper.bin_thresholds_[0])
    codes = bin_codes(held_out.reshape(-1, 1), [bin_thresholds(values)]).ravel()
    expected = mapper.transform(held_out.reshape(-1, 1)).ravel().astype(float)
    expected[expected == mapper.missing_values_bin_idx_] = np.nan
    np.testing.assert_array_equal(codes, expected)
    # the fit's thresholds for every column come from one sort of them all: the same thresholds
    columns = (values, values[::-1], np.resize(held_out, values.size))
    for found, column in zip(fold_thresholds(np.column_stack(columns)), columns):
        np.testing.assert_array_equal(found, bin_thresholds(column))


def test_the_aucs_of_many_score_rows_are_each_rows_auc():
    rng = np.random.default_rng(5)
    scores, labels = rng.integers(0, 9, (7, 120)).astype(float), rng.random(120) < 0.4
    assert aucs(scores, labels).tolist() == pytest.approx([auc(row, labels) for row in scores], abs=1e-15)


def test_the_classifier_is_deterministic_and_bounds_its_samples():
    rng = np.random.default_rng(12)
    reference, current = rng.normal(size=(3000, 3)), rng.normal(size=(2500, 3)) + [0.0, 0.0, 1.0]
    bounded = MultivariateThresholds(max_rows=300)
    first = domain_classifier(reference, current, ["a", "b", "c"], bounded)
    assert first == domain_classifier(reference, current, ["a", "b", "c"], bounded)
    assert first.rows == first.reference_rows == 300 and first.drift
    assert first.top_features[0]["name"] == "c"


def test_importances_are_computed_for_a_drifted_verdict_only_and_change_nothing_else():
    # they only explain a drift, and cost a third of the test: an undrifted window skips them
    rng = np.random.default_rng(21)
    reference = rng.normal(size=(1500, 4))
    same, shifted = rng.normal(size=(200, 4)), rng.normal(size=(200, 4)) + [0.0, 0.0, 0.8, 0.0]
    names = ["a", "b", "c", "d"]
    for current, drifted in ((same, False), (shifted, True)):
        default, always, never = (domain_classifier(reference, current, names, importances=importances)
                                  for importances in (None, True, False))
        assert default.drift is always.drift is never.drift is drifted
        for verdict in (always, never):
            assert (verdict.auc, verdict.threshold, verdict.auc_std, verdict.rows, verdict.reference_rows) == \
                (default.auc, default.threshold, default.auc_std, default.rows, default.reference_rows)
        assert never.top_features == [] and always.top_features
        assert default.top_features == (always.top_features if drifted else [])
    assert default.top_features[0]["name"] == "c"


def test_an_undrifted_streaming_window_has_no_importances(baseline):
    state = _state(baseline, correlated_features(1000, 0.8, seed=5), seed=5)
    classifier = _by_metric(evaluate_window(baseline, state, families=[MULTIVARIATE_DRIFT]).results)[DOMAIN_CLASSIFIER_AUC]
    assert not classifier.breached and classifier.details["top_features"] == []


def test_hostile_magnitudes_neither_crash_the_fit_nor_overflow_the_error(reference):
    hostile = reference[["income", "spend", "age"]].copy()
    hostile.loc[:10, "age"] = 1e308
    fit = fit_reconstruction(hostile, {"income": "numeric", "spend": "numeric", "age": "numeric"})
    assert fit is not None and np.isfinite(fit.components).all() and np.isfinite(fit.error_mean)
    verdict = reconstruction_drift(fit, fit.encode(hostile.iloc[:100].assign(income=-1e308)))
    assert np.isfinite(verdict.value) and verdict.drift


def test_fit_needs_two_features_and_rejects_a_bad_share(reference):
    assert fit_reconstruction(reference[["income"]], {"income": "numeric"}) is None
    with pytest.raises(ValueError):
        fit_reconstruction(reference, {"income": "numeric", "spend": "numeric"}, variance_share=1.0)


def test_thresholds_come_from_the_multivariate_drift_section():
    thresholds = WindowThresholds.from_mapping({"multivariate_drift": {"pca_error_sigmas": 4.0, "min_rows": 80}})
    assert thresholds.multivariate.pca_error_sigmas == 4.0 and thresholds.multivariate.min_rows == 80
    assert WindowThresholds.from_mapping({}).multivariate == MultivariateThresholds()
    with pytest.raises(UserError, match="sigmas"):
        WindowThresholds.from_mapping({"multivariate_drift": {"sigmas": 4.0}})
    with pytest.raises(UserError, match="folds"):
        WindowThresholds.from_mapping({"multivariate_drift": {"folds": 1}})
