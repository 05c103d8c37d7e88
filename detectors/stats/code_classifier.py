"""The domain classifier's model for features that are already bin codes: its own binning, done for integers.

`driftline.detectors.stats.multivariate` hands scikit-learn's ``HistGradientBoostingClassifier`` bin codes
(small non-negative integers, missing values NaN), binned as it would bin the raw values. The model bins
its input again anyway: per column a sort, ``np.unique`` and the midpoints of the distinct values, run
through joblib, about a third of each fit's CPU for 1 000 rows of 30 codes. For integer codes the same
result is a count per code: the thresholds are the midpoints of the codes present, and each code's bin is
its rank among them (``_BinMapper``: bin i holds thresholds[i - 1] < x <= thresholds[i], missing values
in the last bin). `code_classifier` returns a model that bins that way and is otherwise scikit-learn's.

That reaches into the model's private binning (``_bin_data``, ``_BinMapper``'s fitted attributes), so the
shortcut proves itself once per process: it fits both models on a small sample with empty bins, a
constant column and missing values, and is used only when their binning, trees and predictions are
identical; otherwise (another scikit-learn) every fit is the library's own.
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

__all__ = ["code_bins", "code_classifier"]

_LOCK = threading.Lock()
_CHOSEN: list[Any] = []  # the class in use, once checked


def code_bins(codes: np.ndarray, max_bins: int) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """scikit-learn's binning of integer `codes` (rows x columns, below `max_bins`, NaN missing): the
    binned rows (uint8, column-major, missing in bin `max_bins`) and each column's thresholds; None
    when a column has no value (the library's own binning then says what happens)."""
    rows, columns = codes.shape
    missing = np.isnan(codes)
    filled = np.where(missing, 0.0, codes).astype(np.intp)
    if filled.size and (filled.min() < 0 or filled.max() >= max_bins):
        return None
    offsets = np.arange(columns, dtype=np.intp) * max_bins
    present = np.bincount((filled + offsets)[~missing], minlength=columns * max_bins).reshape(columns, max_bins) > 0
    if not present.any(axis=1).all():
        return None
    ranks = np.cumsum(present, axis=1) - 1  # each present code's bin: its rank among the column's codes
    binned = np.asfortranarray(ranks.ravel()[filled + offsets].astype(np.uint8))
    binned[missing] = max_bins
    thresholds = []
    for j in range(columns):
        distinct = np.flatnonzero(present[j]).astype(np.float64)
        thresholds.append((distinct[:-1] + distinct[1:]) / 2 if distinct.size > 1 else np.asarray([]))
    return binned, thresholds


def _code_classifier_type() -> type:
    from sklearn.ensemble import HistGradientBoostingClassifier

    class CodeClassifier(HistGradientBoostingClassifier):
        """scikit-learn's classifier, binning integer codes by counting them."""

        def _bin_data(self, X: Any, sample_weight: Any = None, is_training_data: bool = True) -> Any:
            mapper = self._bin_mapper
            found = None
            categorical = mapper.is_categorical is not None and bool(np.any(mapper.is_categorical))
            subsampled = mapper.subsample is not None and X.shape[0] > mapper.subsample
            if is_training_data and sample_weight is None and not categorical and not subsampled:
                found = code_bins(np.asarray(X, dtype=np.float64), mapper.n_bins - 1)
            if found is None:
                return super()._bin_data(X, sample_weight, is_training_data)
            binned, thresholds = found
            mapper.is_categorical_ = np.zeros(binned.shape[1], dtype=np.uint8)
            mapper.missing_values_bin_idx_ = mapper.n_bins - 1
            mapper.bin_thresholds_ = thresholds
            mapper.n_bins_non_missing_ = np.array([t.shape[0] + 1 for t in thresholds], dtype=np.uint32)
            return binned

    return CodeClassifier


def _same_model(fast: Any, slow: Any, rows: np.ndarray) -> bool:
    ours, theirs = fast._bin_mapper, slow._bin_mapper
    return (np.array_equal(ours.n_bins_non_missing_, theirs.n_bins_non_missing_)
            and ours.missing_values_bin_idx_ == theirs.missing_values_bin_idx_
            and np.array_equal(ours.is_categorical_, theirs.is_categorical_)
            and all(np.array_equal(a, b) for a, b in zip(ours.bin_thresholds_, theirs.bin_thresholds_))
            and np.array_equal(fast.predict_proba(rows), slow.predict_proba(rows)))


def _checked_type() -> type:
    """`CodeClassifier` when it fits exactly the library's model on a sample, else the library's class."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(0)
    codes = rng.integers(0, 40, size=(300, 4)).astype(np.float64)
    codes[:, 1] = np.where(codes[:, 1] % 3 == 0, 250, codes[:, 1])  # empty bins between the present codes
    codes[:, 2] = 7.0  # one value: no threshold
    codes[rng.random(300) < 0.1, 3] = np.nan
    target = (codes[:, 0] + rng.normal(0, 10, size=300)) > 20
    params: dict[str, Any] = dict(max_iter=3, max_leaf_nodes=5, early_stopping=False, random_state=0)
    try:
        fast = _code_classifier_type()
        if _same_model(fast(**params).fit(codes, target),
                       HistGradientBoostingClassifier(**params).fit(codes, target), codes):
            return fast
    except Exception:  # noqa: BLE001 - another scikit-learn: its own binning, unchanged
        pass
    return HistGradientBoostingClassifier


def code_classifier(**params: Any) -> Any:
    """A ``HistGradientBoostingClassifier(**params)`` for bin-code features (see the module)."""
    with _LOCK:
        if not _CHOSEN:
            _CHOSEN.append(_checked_type())
    return _CHOSEN[0](**params)
