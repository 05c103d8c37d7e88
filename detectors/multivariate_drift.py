"""Multivariate drift of one window, streaming (the ``multivariate_drift`` family) and batch (`detect`'s JSON).

Both run the two detectors of `driftline.detectors.multivariate` on bounded samples:

* streaming: the window state's uniform bottom-k event sample (``state.sample``,
  `defaults.WINDOW_SAMPLE_SIZE` events) against the baseline's PCA fit
  (``baseline.reconstruction``) and its uniform training sample (``baseline.sample``);
* batch: the window (at most ``pca_max_rows`` rows of it) for the reconstruction
  error, at most ``max_rows`` rows of it against as many reference rows for the classifier.

A window with fewer than ``min_rows`` rows, or a baseline without a PCA fit
(registered before multivariate drift existed; register it again to get one), gives
results with ``insufficient_data``, never an error.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from driftline.detectors.decision import INSUFFICIENT_DATA
from driftline.detectors.multivariate import (
    MultivariateThresholds,
    domain_classifier,
    reconstruction_drift,
)
from driftline.detectors.results import WindowResult, insufficient
from driftline.baseline import Baseline, ReconstructionFit, fit_reconstruction
from driftline.vocabulary import DOMAIN_CLASSIFIER_AUC, MULTIVARIATE_DRIFT, PCA_RECONSTRUCTION_ERROR
from driftline.window_state import WindowState

__all__ = ["BatchReference", "batch_multivariate", "multivariate_drift"]

NO_FIT = (f"{INSUFFICIENT_DATA}: the baseline has no PCA fit (registered before multivariate drift, "
          f"or fewer than two features); register it again")
NO_BATCH_FIT = f"{INSUFFICIENT_DATA}: fewer than two features, or fewer reference rows than features"


def _too_few(rows: int, reference_rows: int, minimum: int) -> str:
    return f"{INSUFFICIENT_DATA}: {rows} window rows and {reference_rows} reference rows, {minimum} needed on each side"


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
              _too_few(rows, reference_rows, thresholds.min_rows)
              if min(rows, reference_rows) < thresholds.min_rows else None)
    if reason is not None:
        details = {"rows": rows, "reference_rows": reference_rows}
        return [WindowResult(MULTIVARIATE_DRIFT, None, PCA_RECONSTRUCTION_ERROR, None, None, False,
                             insufficient(dict(details), reason)),
                WindowResult(MULTIVARIATE_DRIFT, None, DOMAIN_CLASSIFIER_AUC, None, None, False,
                             insufficient(dict(details), reason))]
    assert fit is not None
    window = fit.encode(_frame(state.sample))
    reference = fit.encode(_frame(baseline.sample))
    return _results(fit, reference, window, thresholds)


def _results(fit: ReconstructionFit, reference: np.ndarray, window: np.ndarray,
             thresholds: MultivariateThresholds) -> list[WindowResult]:
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


# --- batch ------------------------------------------------------------------------

@dataclass(frozen=True)
class BatchReference:
    """What every batch window is compared with: the PCA fit and the classifier's encoded reference sample."""

    fit: ReconstructionFit | None
    sample: np.ndarray

    @classmethod
    def build(cls, reference: pd.DataFrame, kinds: Mapping[str, str],
              thresholds: MultivariateThresholds | None = None, seed: int = 0) -> "BatchReference":
        thresholds = thresholds or MultivariateThresholds()
        fit = fit_reconstruction(reference, kinds, seed=seed)
        if fit is None:
            return cls(None, np.empty((0, 0)))
        rows = len(reference)
        take = np.arange(rows) if rows <= thresholds.max_rows else np.sort(
            np.random.default_rng(seed).choice(rows, size=thresholds.max_rows, replace=False))
        return cls(fit, fit.encode(reference.iloc[take]))


def _insufficient_json(reason: str) -> dict[str, Any]:
    flags = {"drift": False, "top_features": [], "insufficient_data": True, "reason": reason}
    return {PCA_RECONSTRUCTION_ERROR: {"value": None, "lower": None, "upper": None, **flags},
            "domain_classifier": {"auc": None, "threshold": None, **flags}}


def batch_multivariate(reference: BatchReference, frame: pd.DataFrame,
                       thresholds: MultivariateThresholds | None = None) -> dict[str, Any]:
    """One `detect` window's ``multivariate`` object (docs/detectors.md)."""
    thresholds = thresholds or MultivariateThresholds()
    if reference.fit is None:
        return _insufficient_json(NO_BATCH_FIT)
    if min(len(frame), reference.sample.shape[0]) < thresholds.min_rows:
        return _insufficient_json(_too_few(len(frame), reference.sample.shape[0], thresholds.min_rows))
    if len(frame) > thresholds.pca_max_rows:
        take = np.random.default_rng(0).choice(len(frame), size=thresholds.pca_max_rows, replace=False)
        frame = frame.iloc[np.sort(take)]
    pca_result, classifier_result = _results(reference.fit, reference.sample, reference.fit.encode(frame), thresholds)
    return {
        PCA_RECONSTRUCTION_ERROR: {"value": pca_result.value, "lower": pca_result.details["lower"],
                                   "upper": pca_result.details["upper"], "drift": pca_result.breached,
                                   "top_features": pca_result.details["top_features"]},
        "domain_classifier": {"auc": classifier_result.value, "threshold": classifier_result.threshold,
                              "drift": classifier_result.breached,
                              "top_features": classifier_result.details["top_features"]},
    }
