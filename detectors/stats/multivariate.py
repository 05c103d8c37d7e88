"""Multivariate drift: a change in the features' joint distribution that per-feature tests cannot see.

Two detectors, each a statistic, a threshold and a verdict kept apart:

* **PCA reconstruction error** (NannyML's "data reconstruction with PCA"): the
  reference's encoded features are fitted with a PCA keeping a share of their
  variance (`driftline.baseline.reconstruction`). A window whose features keep the
  reference's correlations is reconstructed as well as the reference was; when the
  relation between features changes, rows leave the components' subspace and the
  window's mean reconstruction error :math:`\\bar e_w` rises. Drift when
  :math:`\\bar e_w \\notin \\mu_{ref} \\pm k\\,\\sigma_{ref} \\sqrt{1/n_w + 1/n_{ref}}`: the
  spread of the mean error over reference chunks of the window's size (for
  independent rows, the standard error of a chunk's mean) widened by the error of
  the reference's own mean (held-out rows, see `driftline.baseline.reconstruction`),
  so it narrows as windows grow. Each feature's contribution is its share of the increase in mean squared
  residual over the reference's.
* **Domain classifier** (classifier two-sample test, Lopez-Paz & Oquab, "Revisiting
  classifier two-sample tests", ICLR 2017): a gradient-boosted tree classifier
  (scikit-learn's ``HistGradientBoostingClassifier``) learns to tell bounded samples of
  the reference from the window; its cross-validated ROC AUC is 0.5 when they
  cannot be told apart. Drift when the AUC exceeds
  :math:`\\max(a_{min},\\; 0.5 + z \\sqrt{(n_1 + n_2 + 1) / (12 n_1 n_2)})`, the AUC's
  standard deviation under no difference being Mann-Whitney's. Each feature's
  importance is the AUC lost, on held-out folds, when its column is permuted (for a
  drifted verdict only: they explain a drift).

>>> import numpy as np, pandas as pd
>>> from driftline.baseline import fit_reconstruction
>>> rng = np.random.default_rng(0)
>>> x = rng.normal(size=2000); ref = pd.DataFrame({"a": x, "b": x + 0.3 * rng.normal(size=2000)})
>>> fit = fit_reconstruction(ref, {"a": "numeric", "b": "numeric"})
>>> x = rng.normal(size=300); cur = pd.DataFrame({"a": x, "b": -x + 0.3 * rng.normal(size=300)})
>>> reconstruction_drift(fit, fit.encode(cur)).drift
True

Nothing here does I/O.
"""
from __future__ import annotations

import functools
import math
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from driftline.baseline import ReconstructionFit
from driftline.detectors.stats.code_classifier import code_classifier
from driftline.policies import MultivariateThresholds  # the [multivariate_drift] table

__all__ = ["ClassifierVerdict", "preload_classifier", "MultivariateThresholds", "ReconstructionVerdict", "auc", "classifier_threshold",
           "bin_codes", "bin_thresholds", "fold_thresholds", "domain_classifier", "reconstruction_drift"]


@dataclass(frozen=True)
class ReconstructionVerdict:
    """The window's mean reconstruction error against the reference band."""

    value: float
    lower: float
    upper: float
    drift: bool
    rows: int
    reference_mean: float
    top_features: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class ClassifierVerdict:
    """The domain classifier's cross-validated AUC against its threshold."""

    auc: float
    threshold: float
    drift: bool
    rows: int
    reference_rows: int
    folds: int
    auc_std: float
    top_features: list[dict[str, Any]] = field(default_factory=list)


def _top(names: Sequence[str], weights: np.ndarray, key: str, limit: int) -> list[dict[str, Any]]:
    """The `limit` features with the largest positive weights, largest first."""
    order = [int(i) for i in np.argsort(-weights, kind="stable") if weights[i] > 0][:limit]
    return [{"name": names[i], key: float(weights[i])} for i in order]


def reconstruction_drift(fit: ReconstructionFit, encoded: np.ndarray,
                         thresholds: MultivariateThresholds | None = None) -> ReconstructionVerdict:
    """Judge a window's encoded rows (`fit.encode(frame)`, at least one) against the fit's reference errors."""
    thresholds = thresholds or MultivariateThresholds()
    rows = int(encoded.shape[0])
    if rows == 0:
        raise ValueError("reconstruction_drift needs at least one row")
    residuals = np.square(fit.residuals(encoded))
    value = float(np.sqrt(residuals.sum(axis=1)).mean())
    # The difference of two means: the window's, and the reference's own estimate of it.
    spread = thresholds.pca_error_sigmas * fit.error_std * math.sqrt(1.0 / rows + 1.0 / max(fit.error_rows, 1))
    lower, upper = fit.error_mean - spread, fit.error_mean + spread
    increase = np.clip(residuals.mean(axis=0) - fit.residual_means, 0.0, None)
    total = float(increase.sum())
    shares = increase / total if total > 0 else np.zeros_like(increase)
    return ReconstructionVerdict(value=value, lower=float(lower), upper=float(upper),
                                 drift=bool(value < lower or value > upper), rows=rows,
                                 reference_mean=fit.error_mean,
                                 top_features=_top(fit.features, shares, "share", thresholds.top_features))


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """ROC AUC of `scores` for the boolean `positive` (Mann-Whitney U / (n1 n0), ties counted half)."""
    positives = int(positive.sum())
    negatives = positive.size - positives
    if positives == 0 or negatives == 0:
        raise ValueError("auc needs both classes")
    from scipy.stats import rankdata  # here: scipy.stats takes a second to import

    ranks = rankdata(scores)
    return float((ranks[positive].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def aucs(scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """`auc` of each row of `scores` (rows x len(positive)), ranked in one call."""
    positives = int(positive.sum())
    negatives = positive.size - positives
    if positives == 0 or negatives == 0:
        raise ValueError("auc needs both classes")
    from scipy.stats import rankdata  # here: scipy.stats takes a second to import

    ranks = rankdata(scores, axis=1)
    return (ranks[:, positive].sum(axis=1) - positives * (positives + 1) / 2) / (positives * negatives)


def classifier_threshold(reference_rows: int, rows: int, thresholds: MultivariateThresholds | None = None) -> float:
    """The AUC above which the samples differ: the floor, or 0.5 + z null standard deviations if higher."""
    thresholds = thresholds or MultivariateThresholds()
    null_std = math.sqrt((reference_rows + rows + 1) / (12.0 * reference_rows * rows))
    return max(thresholds.domain_classifier_auc, 0.5 + thresholds.domain_classifier_z * null_std)


def _bounded(rows: np.ndarray, limit: int, rng: np.random.Generator) -> np.ndarray:
    if rows.shape[0] <= limit:
        return rows
    return rows[np.sort(rng.choice(rows.shape[0], size=limit, replace=False))]


# HistGradientBoostingClassifier's binning: its number of bins for non-missing values, its largest threshold
_MAX_BINS = 255
_ALMOST_INF = 1e300
# the quantiles its thresholds are at, as np.percentile takes them (percent, then divided by 100)
_QUANTILES = np.true_divide(np.linspace(0, 100, num=_MAX_BINS + 1)[1:-1], 100)


def bin_thresholds(column: np.ndarray) -> np.ndarray:
    """The bin thresholds scikit-learn's gradient boosting finds for one column (`_find_binning_thresholds`):
    midpoints of the distinct values when there are at most 255, else the 254 inner quantiles (numpy's
    ``averaged_inverted_cdf``), computed here from one sort instead of a 254-way partition (ten times faster)."""
    return _sorted_thresholds(np.sort(column[~np.isnan(column)]))


def fold_thresholds(rows: np.ndarray) -> list[np.ndarray]:
    """`bin_thresholds` of each column of `rows`, from one sort of them all."""
    ordered = np.ascontiguousarray(rows.T)
    ordered.sort(axis=1)  # missing values (NaN) sort last
    present = rows.shape[0] - np.isnan(ordered).sum(axis=1)
    return [_sorted_thresholds(ordered[j, :present[j]]) for j in range(ordered.shape[0])]


@functools.lru_cache(maxsize=64)
def _quantile_positions(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where numpy's ``averaged_inverted_cdf`` reads the 254 quantiles of `n` sorted values: the lower and
    upper ranks and the weight (1 - gamma) of their difference; the same for every column of n values."""
    virtual = n * _QUANTILES - 1
    previous = np.floor(virtual)
    following = previous + 1
    above, below = virtual >= n - 1, virtual < 0
    previous[above] = following[above] = -1
    previous[below] = following[below] = 0
    gamma = np.where(virtual - previous == 0, 0.5, 1.0)  # averaged_inverted_cdf: halfway on an exact rank
    return previous.astype(np.intp), following.astype(np.intp), 1 - gamma


def _sorted_thresholds(values: np.ndarray) -> np.ndarray:
    """`bin_thresholds` of sorted values without missing ones."""
    if values.size == 0:
        return np.asarray([], dtype=np.float64)
    distinct = values[np.concatenate(([True], values[1:] != values[:-1]))]  # np.unique of sorted values
    if distinct.size <= 1:
        return np.asarray([], dtype=np.float64)
    if distinct.size <= _MAX_BINS:
        thresholds = (distinct[:-1] + distinct[1:]) / 2
    else:
        previous, following, weight = _quantile_positions(values.size)
        low, high = values[previous], values[following]
        thresholds = high - (high - low) * weight  # numpy's lerp for a weight of at least 0.5
        thresholds = np.unique(thresholds)
    return np.clip(thresholds, None, _ALMOST_INF)


def bin_codes(rows: np.ndarray, thresholds: Sequence[np.ndarray]) -> np.ndarray:
    """Each value replaced by its bin's index under `thresholds` (one array per column; bin i holds
    thresholds[i - 1] < x <= thresholds[i]), missing values (NaN) kept missing.

    >>> bin_codes(np.array([[0.5], [np.nan], [-2.0], [3.0]]), [np.array([0.0, 1.0])]).ravel().tolist()
    [1.0, nan, 0.0, 2.0]
    """
    columns = np.ascontiguousarray(rows.T)
    missing = np.isnan(columns)
    incomplete = missing.any(axis=1)
    codes = np.empty(columns.shape, dtype=np.float64)
    for j, edges in enumerate(thresholds):
        codes[j] = np.searchsorted(edges, np.where(missing[j], 0.0, columns[j]) if incomplete[j] else columns[j],
                                   side="left")
    codes[missing] = np.nan
    return np.ascontiguousarray(codes.T)


def _import_classifier() -> None:
    try:
        import sklearn.ensemble  # noqa: F401
        import sklearn.model_selection  # noqa: F401
        import threadpoolctl  # noqa: F401
    except Exception:  # noqa: BLE001 - `domain_classifier`'s own import says what is wrong
        pass


def preload_classifier() -> None:
    """Import scikit-learn in a background thread (about a second of CPU, mostly scipy.stats): a caller
    that will judge windows, such as `detect`, starts it before reading its files, so the import runs
    on the second core while the reads and sorts (which release the GIL) run on the first."""
    if "sklearn.model_selection" not in sys.modules:
        threading.Thread(target=_import_classifier, name="driftline-import-sklearn", daemon=True).start()


@functools.lru_cache(maxsize=64)
def _folds(reference_rows: int, rows: int, folds: int, seed: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The stratified shuffled folds (train, test indices) of `reference_rows` rows then `rows` rows: they
    depend on the two counts alone, the same for every window of a version's usual sample sizes."""
    from sklearn.model_selection import StratifiedKFold  # here: scikit-learn takes about a second to import

    target = np.concatenate((np.zeros(reference_rows, dtype=bool), np.ones(rows, dtype=bool)))
    found = tuple(StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(target, target))
    for train, test in found:
        train.flags.writeable = test.flags.writeable = False  # shared by every caller
    return found


_CONTROLLER: list[Any] = []  # threadpoolctl's view of the loaded thread pools, once scikit-learn is loaded


def _one_openmp_thread() -> Any:
    """A context limiting OpenMP to one thread. threadpoolctl's `threadpool_limits` scans every loaded
    library on each entry (3 ms); the controller scans once, after scikit-learn (and its OpenMP) is loaded."""
    if not _CONTROLLER:
        import sklearn.ensemble  # noqa: F401 - loads the OpenMP runtime the controller must see
        from threadpoolctl import ThreadpoolController

        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="openmp")


def domain_classifier(reference: np.ndarray, current: np.ndarray, names: Sequence[str],
                      thresholds: MultivariateThresholds | None = None, seed: int = 0,
                      importances: bool | None = None) -> ClassifierVerdict:
    """Cross-validated AUC of a classifier telling `current` rows from `reference` rows (same columns, `names`).

    Each side is cut to ``thresholds.max_rows`` by a seeded uniform sample; both need
    at least ``thresholds.folds`` rows. Deterministic for a given `seed`. The permutation
    importances (``top_features``) are computed when `importances` is true, or, when it is None,
    only for a drifted verdict (they explain a drift, and cost about a sixth of the test at 30
    features); otherwise ``top_features`` is empty. The AUC, threshold and verdict are the same either way.
    """
    thresholds = thresholds or MultivariateThresholds()
    rng = np.random.default_rng(seed)
    reference = _bounded(reference, thresholds.max_rows, rng)
    current = _bounded(current, thresholds.max_rows, rng)
    if min(reference.shape[0], current.shape[0]) < thresholds.folds:
        raise ValueError(f"domain_classifier needs at least {thresholds.folds} rows on each side")
    features = np.vstack((reference, current))
    target = np.concatenate((np.zeros(reference.shape[0], dtype=bool), np.ones(current.shape[0], dtype=bool)))
    fitted: list[tuple[Any, np.ndarray, np.ndarray]] = []  # per fold: the model, its held-out codes and truth
    scores = []
    # One thread: OpenMP workers spinning on a busy machine cost ten times the work itself.
    with _one_openmp_thread():
        for train, test in _folds(reference.shape[0], current.shape[0], thresholds.folds, seed):
            # The fit gets bin codes, binned here as it would bin the values: its own binning (a 254-way
            # partition per column per fit) was half the classifier's cost, paid for every window of every model.
            edges = fold_thresholds(features[train])
            train_codes, test_codes = bin_codes(features[train], edges), bin_codes(features[test], edges)
            # No class weights: AUC does not depend on the class ratio, and weighted fits bin
            # their features by weighted percentiles, ten times slower. The model bins the codes by
            # counting them (`code_classifier`): scikit-learn's model, without a third of its fit.
            model = code_classifier(max_iter=thresholds.trees, max_leaf_nodes=thresholds.leaves,
                                    learning_rate=thresholds.learning_rate, early_stopping=False,
                                    random_state=seed)
            model.fit(train_codes, target[train])
            truth = target[test]
            # ranked as a row of `aucs`, as the permuted copies are: the same floating-point sums
            scores.append(aucs(model.predict_proba(test_codes)[np.newaxis, :, 1], truth)[0])
            fitted.append((model, test_codes, truth))
        value = float(np.mean(scores))
        threshold = classifier_threshold(reference.shape[0], current.shape[0], thresholds)
        drift = bool(value > threshold)
        explain = drift if importances is None else importances
        top = (_top(list(names), _permutation_losses(fitted, scores, len(names), rng) / thresholds.folds,
                    "importance", thresholds.top_features) if explain else [])
    return ClassifierVerdict(auc=value, threshold=threshold, drift=drift,
                             rows=int(current.shape[0]), reference_rows=int(reference.shape[0]),
                             folds=thresholds.folds, auc_std=float(np.std(scores)), top_features=top)


def _permutation_losses(fitted: Sequence[tuple[Any, np.ndarray, np.ndarray]], scores: Sequence[float],
                        columns: int, rng: np.random.Generator) -> np.ndarray:
    """Each column's held-out AUC lost when it is permuted, summed over the folds (fold by fold, column by
    column, drawing the permutations from `rng` in that order)."""
    losses = np.zeros(columns)
    for (model, held_out, truth), score in zip(fitted, scores):
        copies = []
        for j in range(columns):
            permuted = held_out.copy()
            permuted[:, j] = rng.permutation(permuted[:, j])
            copies.append(permuted)
        # one prediction call for every permuted copy: each call has a fixed cost
        predicted = model.predict_proba(np.vstack(copies))[:, 1].reshape(columns, -1)
        losses += score - aucs(predicted, truth)
    return losses
