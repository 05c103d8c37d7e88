"""The domain classifier's model bins its bin codes by counting them: the same model as scikit-learn's own."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier

from driftline.detectors.stats import code_classifier as module
from driftline.detectors.stats import multivariate
from driftline.detectors.stats.code_classifier import code_bins, code_classifier
from driftline.detectors.stats.multivariate import bin_codes, domain_classifier, fold_thresholds

PARAMS = dict(max_iter=15, max_leaf_nodes=7, learning_rate=0.3, early_stopping=False, random_state=0)


def _codes(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rows = np.column_stack((rng.normal(size=900), np.round(rng.normal(size=900), 1), rng.integers(0, 3, 900),
                            np.full(900, 2.0), rng.exponential(size=900)))
    rows[rng.random(900) < 0.05, 4] = np.nan
    target = rows[:, 0] + rng.normal(size=900) > 0.8
    return bin_codes(rows, fold_thresholds(rows)), target


def test_the_installed_scikit_learn_gets_the_counting_model():
    # otherwise every fit silently pays the library's own binning again (a third of the classifier's CPU)
    assert type(code_classifier(**PARAMS)).__name__ == "CodeClassifier"


@pytest.mark.parametrize("seed", [0, 1])
def test_the_counting_model_is_scikit_learns_model(seed):
    codes, target = _codes(seed)
    codes[::7, 1] = np.nan
    codes[:, 2] *= 40  # present codes 0, 40 and 80: empty bins between them
    ours, theirs = code_classifier(**PARAMS).fit(codes, target), HistGradientBoostingClassifier(**PARAMS).fit(codes, target)
    for a, b in zip(ours._bin_mapper.bin_thresholds_, theirs._bin_mapper.bin_thresholds_):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ours._bin_mapper.n_bins_non_missing_, theirs._bin_mapper.n_bins_non_missing_)
    np.testing.assert_array_equal(ours.predict_proba(codes), theirs.predict_proba(codes))
    binned, _ = code_bins(codes, 255)
    np.testing.assert_array_equal(binned, theirs._bin_mapper.transform(codes))


def test_codes_it_cannot_count_go_to_the_librarys_binning():
    assert code_bins(np.array([[0.0, np.nan], [1.0, np.nan]]), 255) is None  # a column without values
    assert code_bins(np.array([[300.0], [1.0]]), 255) is None  # not a code


def test_the_verdict_and_importances_are_those_of_the_librarys_own_binning(monkeypatch):
    rng = np.random.default_rng(3)
    reference, current = rng.normal(size=(1200, 5)), rng.normal(size=(200, 5)) + [0, 0.7, 0, 0, 0]
    names = list("abcde")
    ours = domain_classifier(reference, current, names, importances=True)
    monkeypatch.setattr(multivariate, "code_classifier", lambda **params: HistGradientBoostingClassifier(**params))
    assert domain_classifier(reference, current, names, importances=True) == ours and ours.drift


def test_a_model_that_differs_from_the_librarys_is_never_used(monkeypatch):
    monkeypatch.setattr(module, "_same_model", lambda fast, slow, rows: False)
    assert module._checked_type() is HistGradientBoostingClassifier
