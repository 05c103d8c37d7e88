"""Multivariate drift of one window, streaming: the ``multivariate_drift`` family.

It runs the two detectors of `driftline.detectors.stats.multivariate` on bounded samples: the
window state's uniform bottom-k event sample (``state.sample``, `defaults.WINDOW_SAMPLE_SIZE`
events) against the baseline's PCA fit (``baseline.reconstruction``) and its uniform training
sample (``baseline.sample``). `detect`'s batch half is `driftline.detectors.batch.multivariate`.

A window with fewer than ``min_rows`` rows, or a baseline without a PCA fit
(registered before multivariate drift existed; register it again to get one), gives
results with ``insufficient_data``, never an error.
"""
from __future__ import annotations

import weakref
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from driftline.vocabulary import INSUFFICIENT_DATA_REASON
from driftline.detectors.stats.multivariate import (
    MultivariateThresholds,
    domain_classifier,
    reconstruction_drift,
)
from driftline.detectors.families.results import WindowResult, insufficient
from driftline.baseline import Baseline, ReconstructionFit
from driftline.vocabulary import DOMAIN_CLASSIFIER_AUC, MULTIVARIATE_DRIFT, PCA_RECONSTRUCTION_ERROR
from driftline.window_state import WindowState

__all__ = ["multivariate_drift", "too_few", "window_results"]

NO_FIT = (f"{INSUFFICIENT_DATA_REASON}: the baseline has no PCA fit (registered before multivariate drift, "
          f"or fewer than two features); register it again")


# id(baseline) -> (the baseline, weakly; its training sample encoded): the same for every window of a version,
# and a tenth of a window's cost to rebuild. Entries go with their baselines.
_ENCODED_REFERENCE: dict[int, tuple[weakref.ref, np.ndarray]] = {}


def _encoded_reference(baseline: Baseline, fit: ReconstructionFit) -> np.ndarray:
    found = _ENCODED_REFERENCE.get(id(baseline))
    if found is not None and found[0]() is baseline:
        return found[1]
    encoded = fit.encode(_frame(baseline.sample))
    encoded.flags.writeable = False  # shared by every window of the version
    key = id(baseline)
    _ENCODED_REFERENCE[key] = (weakref.ref(baseline, lambda _: _ENCODED_REFERENCE.pop(key, None)), encoded)
    return encoded


def too_few(rows: int, reference_rows: int, minimum: int) -> str:
    """Why a window is not judged: too few rows on one side."""
    return f"{INSUFFICIENT_DATA_REASON}: {rows} window rows and {reference_rows} reference rows, {minimum} needed on each side"


def _frame(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The `features` of sampled events or training rows as a frame (a row without features is all missing)."""
    return pd.DataFrame.from_records([r.get("features") or {} for r in records], index=range(len(records)))


def multivariate_drift(baseline: Baseline, state: WindowState,
                       thresholds: MultivariateThresholds | None = None) -> list[WindowResult]:
    """The window's two multivariate results (PCA reconstruction error, domain classifier AUC), from samples."""
    thresholds = thresholds or MultivariateThresholds()
    fit = baseline.reconstruction
    rows, reference_rows = len(state.sample), len(baseline.sample)
    reason = (NO_FIT if fit is None else
              too_few(rows, reference_rows, thresholds.min_rows)
              if min(rows, reference_rows) < thresholds.min_rows else None)
    if reason is not None:
        details = {"rows": rows, "reference_rows": reference_rows}
        return [WindowResult(MULTIVARIATE_DRIFT, None, PCA_RECONSTRUCTION_ERROR, None, None, False,
                             insufficient(dict(details), reason)),
                WindowResult(MULTIVARIATE_DRIFT, None, DOMAIN_CLASSIFIER_AUC, None, None, False,
                             insufficient(dict(details), reason))]
    assert fit is not None
    window = fit.encode(_frame(state.sample))
    reference = _encoded_reference(baseline, fit)
    return window_results(fit, reference, window, thresholds)


def window_results(fit: ReconstructionFit, reference: np.ndarray, window: np.ndarray,
                   thresholds: MultivariateThresholds) -> list[WindowResult]:
    """Both detectors' results on encoded reference and window rows (the batch half shares them)."""
    pca = reconstruction_drift(fit, window, thresholds)
    classifier = domain_classifier(reference, window, fit.features, thresholds)
    return [
        WindowResult(MULTIVARIATE_DRIFT, None, PCA_RECONSTRUCTION_ERROR, pca.value, pca.upper, pca.drift,
                     {"rows": pca.rows, "reference_rows": fit.rows, "lower": pca.lower, "upper": pca.upper,
                      "reference_mean": pca.reference_mean, "components": int(fit.components.shape[0]),
                      "variance_share": fit.variance_share, "top_features": pca.top_features}),
        WindowResult(MULTIVARIATE_DRIFT, None, DOMAIN_CLASSIFIER_AUC, classifier.auc, classifier.threshold,
                     classifier.drift,
                     {"rows": classifier.rows, "reference_rows": classifier.reference_rows,
                      "folds": classifier.folds, "auc_std": classifier.auc_std,
                      "top_features": classifier.top_features}),
    ]

