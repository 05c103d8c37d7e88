"""Multivariate drift of one `detect` window: the batch half of `driftline.detectors.families.multivariate`.

The window (at most ``pca_max_rows`` rows of it) for the reconstruction error, at most
``max_rows`` rows of it against as many reference rows for the classifier; the reference's
PCA fit and encoded sample are built once (`BatchReference`). Too few rows, or fewer than two
features, give results with ``insufficient_data``, never an error.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from driftline.detectors.families.multivariate import too_few, window_results
from driftline.detectors.stats.multivariate import MultivariateThresholds
from driftline.baseline import ReconstructionFit, fit_reconstruction
from driftline.vocabulary import INSUFFICIENT_DATA, INSUFFICIENT_DATA_REASON, PCA_RECONSTRUCTION_ERROR, REASON_KEY

__all__ = ["BatchReference", "batch_multivariate"]

NO_BATCH_FIT = f"{INSUFFICIENT_DATA_REASON}: fewer than two features, or fewer reference rows than features"


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
    flags = {"drift": False, "top_features": [], INSUFFICIENT_DATA: True, REASON_KEY: reason}
    return {PCA_RECONSTRUCTION_ERROR: {"value": None, "lower": None, "upper": None, **flags},
            "domain_classifier": {"auc": None, "threshold": None, **flags}}


def batch_multivariate(reference: BatchReference, frame: pd.DataFrame,
                       thresholds: MultivariateThresholds | None = None) -> dict[str, Any]:
    """One `detect` window's ``multivariate`` object (docs/detectors.md)."""
    thresholds = thresholds or MultivariateThresholds()
    if reference.fit is None:
        return _insufficient_json(NO_BATCH_FIT)
    if min(len(frame), reference.sample.shape[0]) < thresholds.min_rows:
        return _insufficient_json(too_few(len(frame), reference.sample.shape[0], thresholds.min_rows))
    if len(frame) > thresholds.pca_max_rows:
        take = np.random.default_rng(0).choice(len(frame), size=thresholds.pca_max_rows, replace=False)
        frame = frame.iloc[np.sort(take)]
    pca_result, classifier_result = window_results(reference.fit, reference.sample,
                                                   reference.fit.encode(frame), thresholds)
    return {
        PCA_RECONSTRUCTION_ERROR: {"value": pca_result.value, "lower": pca_result.details["lower"],
                                   "upper": pca_result.details["upper"], "drift": pca_result.breached,
                                   "top_features": pca_result.details["top_features"]},
        "domain_classifier": {"auc": classifier_result.value, "threshold": classifier_result.threshold,
                              "drift": classifier_result.breached,
                              "top_features": classifier_result.details["top_features"]},
    }
