"""Thresholds, Benjamini-Hochberg and the per-feature / dataset decision rule."""
from __future__ import annotations

import numpy as np
import pytest

from driftline.vocabulary import INSUFFICIENT_DATA_REASON
from driftline.detectors.thresholds.decision import (
    DriftThresholds,
    annotate_tests,
    benjamini_hochberg,
    decide_dataset,
    decide_feature,
)
from driftline import defaults
from driftline.errors import UserError


def _bh_by_hand(p_values, alpha):
    """The textbook step-up procedure: reject the k smallest, k the largest i with p_(i) <= i alpha / m."""
    m = len(p_values)
    order = np.argsort(p_values)
    k = 0
    for rank, index in enumerate(order, start=1):
        if p_values[index] <= rank * alpha / m:
            k = rank
    rejected = np.zeros(m, dtype=bool)
    rejected[order[:k]] = True
    return rejected


def test_benjamini_hochberg_matches_the_textbook_procedure():
    rng = np.random.default_rng(0)
    for trial in range(200):
        m = int(rng.integers(1, 30))
        # A mix of nulls (uniform) and signals (tiny p-values), like a window with a few drifted features.
        p_values = np.where(rng.random(m) < 0.3, rng.random(m) * 1e-3, rng.random(m))
        rejected, adjusted = benjamini_hochberg(p_values, 0.05)
        assert rejected.tolist() == _bh_by_hand(p_values, 0.05).tolist()
        assert np.all(adjusted >= p_values - 1e-15) and np.all(adjusted <= 1.0)


def test_benjamini_hochberg_edge_cases():
    rejected, adjusted = benjamini_hochberg([], 0.05)
    assert rejected.size == 0 and adjusted.size == 0
    rejected, adjusted = benjamini_hochberg([np.nan, 0.001], 0.05)
    assert rejected.tolist() == [False, True] and adjusted[0] == 1.0


def test_thresholds_default_to_driftline_defaults():
    thresholds = DriftThresholds()
    assert thresholds.alpha == defaults.DRIFT_ALPHA
    assert thresholds.psi == defaults.PSI_THRESHOLD
    assert thresholds.wasserstein == defaults.WASSERSTEIN_THRESHOLD
    assert thresholds.jensenshannon == defaults.JENSENSHANNON_THRESHOLD
    assert thresholds.min_rows == defaults.DRIFT_MIN_ROWS
    assert thresholds.dataset_drift_share == defaults.DATASET_DRIFT_SHARE


def test_thresholds_per_model_and_per_feature_overrides():
    section = {
        "psi": 0.3,
        "features": {"age": {"wasserstein": 0.25}},
        "models": {"credit": {"alpha": 0.01, "features": {"age": {"psi": 0.5}, "income": {"min_rows": 500}}}},
    }
    plain = DriftThresholds.from_mapping(section)
    assert plain.psi == 0.3 and plain.alpha == defaults.DRIFT_ALPHA
    assert plain.for_feature("age").wasserstein == 0.25 and plain.for_feature("age").psi == 0.3
    credit = DriftThresholds.from_mapping(section, model="credit")
    assert credit.alpha == 0.01 and credit.psi == 0.3
    assert credit.for_feature("age").psi == 0.5 and credit.for_feature("age").wasserstein == 0.25
    assert credit.for_feature("income").min_rows == 500 and credit.for_feature("other").min_rows == defaults.DRIFT_MIN_ROWS
    assert DriftThresholds.from_mapping(section, model="unknown-model").alpha == defaults.DRIFT_ALPHA


@pytest.mark.parametrize("section", [
    {"pis": 0.2},
    {"features": {"age": {"bogus": 1}}},
    {"models": {"m": {"nope": 1}}},
    {"alpha": 2.0},
    {"psi": -1},
])
def test_bad_threshold_sections_are_user_errors(section):
    with pytest.raises(UserError):
        DriftThresholds.from_mapping(section, model="m")


@pytest.mark.parametrize("section, message", [
    ({"pis": 0.2}, r"\[drift\]: unknown key 'pis'"),
    ({"psi": "0.2"}, r"\[drift\] psi: "),  # a quoted number is a typo, not a number
    ({"min_rows": True}, r"\[drift\] min_rows: "),
    ({"features": {"age": {"bogus": 1}}}, "unknown key 'features.age.bogus'"),
])
def test_threshold_section_errors_name_the_section_and_key(section, message):
    with pytest.raises(UserError, match=message):
        DriftThresholds.from_mapping(section)


def _numeric_tests(p=1e-9, psi=0.3, wasserstein=0.2, js=0.05, missing=(0.0, 0.0, 1.0)):
    return {
        "psi": {"value": psi},
        "ks": {"statistic": 0.1, "p_value": p},
        "wasserstein": {"value": wasserstein},
        "jensenshannon": {"value": js},
        "missing": {"value": missing[0], "reference": missing[1], "p_value": missing[2]},
    }


def test_small_windows_are_insufficient_data_not_drift():
    drift, reason = decide_feature(_numeric_tests(), "numeric", 99, DriftThresholds(min_rows=100))
    assert drift is False and reason.startswith(INSUFFICIENT_DATA_REASON)
    drift, _ = decide_feature(_numeric_tests(), "numeric", 100, DriftThresholds(min_rows=100))
    assert drift is True


def test_significant_and_large_effect_is_drift():
    drift, reason = decide_feature(_numeric_tests(), "numeric", 5000, DriftThresholds())
    assert drift is True and "psi" in reason and "wasserstein" in reason


def test_not_significant_is_not_drift_whatever_the_effect():
    drift, reason = decide_feature(_numeric_tests(p=0.2, psi=5.0, wasserstein=5.0), "numeric", 5000,
                                   DriftThresholds())
    assert drift is False and "not significant" in reason


def test_significant_trivia_below_every_effect_floor_is_not_drift():
    tests = _numeric_tests(p=1e-30, psi=0.01, wasserstein=0.02, js=0.01)
    drift, reason = decide_feature(tests, "numeric", 1_000_000, DriftThresholds())
    assert drift is False and "below floor" in reason


def test_adjusted_p_value_wins_over_the_raw_one():
    tests = _numeric_tests(p=0.01)
    tests["ks"]["p_value_adjusted"] = 0.2
    assert decide_feature(tests, "numeric", 5000, DriftThresholds())[0] is False


def test_categorical_features_use_chi_square_and_their_effect_sizes():
    tests = {"chi2": {"statistic": 50.0, "p_value": 1e-8}, "jensenshannon": {"value": 0.15}, "psi": {"value": 0.05}}
    assert decide_feature(tests, "categorical", 1000, DriftThresholds())[0] is True
    tests["jensenshannon"]["value"] = 0.05
    assert decide_feature(tests, "categorical", 1000, DriftThresholds())[0] is False
    # A KS entry must not be consulted for a categorical feature.
    assert decide_feature({"ks": {"p_value": 0.0}, "psi": {"value": 9}}, "categorical", 1000,
                          DriftThresholds())[0] is False


def test_missing_rate_change_is_drift_when_large_and_significant():
    tests = _numeric_tests(p=0.5, missing=(0.2, 0.0, 1e-20))
    drift, reason = decide_feature(tests, "numeric", 5000, DriftThresholds())
    assert drift is True and "missing rate" in reason
    small = _numeric_tests(p=0.5, missing=(0.03, 0.0, 1e-5))
    assert decide_feature(small, "numeric", 5000, DriftThresholds())[0] is False


def test_per_feature_threshold_changes_the_verdict():
    thresholds = DriftThresholds.from_mapping({"features": {"age": {"psi": 1.0, "wasserstein": 1.0,
                                                                     "jensenshannon": 1.0}}})
    tests = _numeric_tests()
    assert decide_feature(tests, "numeric", 5000, thresholds.for_feature("income"))[0] is True
    assert decide_feature(tests, "numeric", 5000, thresholds.for_feature("age"))[0] is False


def test_annotate_tests_sets_each_tests_threshold_and_flag():
    tests = _numeric_tests(p=0.01, psi=0.1, wasserstein=0.3)
    annotate_tests(tests, "numeric", DriftThresholds())
    assert tests["ks"] == {"statistic": 0.1, "p_value": 0.01, "threshold": 0.05, "drift": True}
    assert tests["psi"]["drift"] is False and tests["psi"]["threshold"] == defaults.PSI_THRESHOLD
    assert tests["wasserstein"]["drift"] is True


def test_dataset_drift_share():
    thresholds = DriftThresholds(dataset_drift_share=0.5)
    assert decide_dataset(5, 10, thresholds) is True
    assert decide_dataset(4, 10, thresholds) is False
    assert decide_dataset(0, 0, thresholds) is False
