r"""Confidence-based performance estimation (CBPE): a binary classifier's metrics from its scores alone.

The method of NannyML's CBPE (NannyML documentation, "Confidence-based Performance
Estimation"; Kivimäki et al., "Confidence-based performance estimation", 2023): with
the training reliability curve :math:`c_b = P(\text{label} = 1 \mid \text{score bin } b)`
(`training_calibration`, an isotonic fit on the version's training labels), every
window row in bin *b* is a true positive with chance :math:`c_b` if it is predicted
positive, a false negative with chance :math:`c_b` if not, so the expected confusion
matrix, and every metric built on it, follows from the window's score histogram
(`expected_quality_of_scores`). Assumptions: the relation P(label | score) is the
training one (no concept drift) and the calibration learnt on the reference is right.

The model's own decisions: a window whose rows carried ``predicted_class`` (or a batch run with
``--prediction-class``) is estimated for those decisions, as NannyML's CBPE takes ``y_pred`` beside
``y_pred_proba``: a row predicted positive in bin *b* is a true positive with chance :math:`c_b`,
one predicted negative a false negative with that chance, whatever side of 0.5 its score lies
(`predicted_rows`); rows without a decision are decided by the threshold (0.5, or the model's
``[estimated_quality] threshold``). ROC AUC does not depend on a decision and is unchanged.

Band: the labels of a window's rows are independent Bernoulli(:math:`c_b`) under those
assumptions, so the realized metric scatters around the estimate with the standard
error of `expected_quality_of_scores` (per-row Bernoulli variance, delta method for
recall and F1, Hanley-McNeil for ROC AUC); the calibration's own error is approximated
by the training metric's sampling variance, and the two are added.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from driftline.detectors.stats.quality import (
    expected_binary_quality,
    expected_quality_of_scores,
    null_variances,
    quality_metrics,
    root_sum,
)
from driftline.baseline import BINARY, LabelSummary
from driftline.baseline.labels import decision_cut
from driftline.vocabulary import ACCURACY, ESTIMATED_METRICS, F1, PRECISION, RECALL, ROC_AUC

__all__ = ["SUPPORT_OF", "Estimate", "Gap", "calibrated_range", "estimate_performance", "estimation_gap",
           "expected_class_counts", "fine_bin_score_counts", "predicted_rows", "score_counts"]


@dataclass(frozen=True)
class Estimate:
    """One estimated metric: value, standard error of the realized metric around it, band at z."""

    value: float | None
    standard_error: float | None
    lower: float | None
    upper: float | None


@dataclass(frozen=True)
class Gap:
    """Realized minus estimated on the same (labelled) rows, and its standard error under no concept drift."""

    realized: float | None
    expected: float | None
    gap: float | None
    standard_error: float | None


def score_counts(scores: np.ndarray, bins: int) -> np.ndarray:
    """Rows per equal-width score bin of [0, 1] (the label summary's bins); NaN skipped, others clipped."""
    scores = np.asarray(scores, dtype=np.float64)
    scores = scores[np.isfinite(scores)]
    index = np.clip(np.floor(np.clip(scores, 0.0, 1.0) * bins), 0, bins - 1).astype(np.intp)
    return np.bincount(index, minlength=bins).astype(np.float64)


def fine_bin_score_counts(counts: np.ndarray, sums: np.ndarray, bins: int) -> np.ndarray:
    """`score_counts` from a window's prediction counted on the baseline's fine bins.

    Each fine bin's rows go to the score bin of their mean score (sum / count): the
    fine bins are training quantiles (a thousandth of the training rows each), so
    their rows lie close together.
    """
    counts = np.asarray(counts, dtype=np.float64)
    filled = counts > 0
    means = np.asarray(sums, dtype=np.float64)[filled] / counts[filled]
    index = np.clip(np.floor(np.clip(means, 0.0, 1.0) * bins), 0, bins - 1).astype(np.intp)
    return np.bincount(index, weights=counts[filled], minlength=bins)


def predicted_rows(rows: np.ndarray, cut: int, decided: np.ndarray | None = None,
                   called: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, predicted positive)`` per score bin: rows the model decided (`decided`, of which `called`
    positive; exact score bins) as it decided, the others positive in the bins at or above `cut`.

    `rows`: every scored row per score bin (`fine_bin_score_counts`: approximate at the bins' edges). With
    every row decided (the usual case once a model logs its decisions) the decided counts stand for the
    window; otherwise the undecided rows are `rows` less the decided ones per bin, rescaled to their number.
    """
    rows = np.asarray(rows, dtype=np.float64)
    above = np.arange(rows.size) >= cut
    if decided is None or called is None or not decided.sum():
        return rows, np.where(above, rows, 0.0)
    decided_rows, called_rows = decided.astype(np.float64), called.astype(np.float64)
    undecided = max(float(rows.sum() - decided_rows.sum()), 0.0)
    rest = np.clip(rows - decided_rows, 0.0, None)
    rest = rest * (undecided / rest.sum()) if rest.sum() > 0 else np.zeros_like(rest)
    return decided_rows + rest, called_rows + np.where(above, rest, 0.0)


def calibrated_range(reference: LabelSummary) -> tuple[int, int] | None:
    """``(first, last)`` score bin holding training labels: outside it the calibration is extrapolated."""
    if reference is None or reference.task != BINARY or reference.positives is None:
        return None
    filled = np.flatnonzero(reference.positives + reference.negatives)
    return (int(filled[0]), int(filled[-1])) if filled.size else None


def _training_variances(reference: LabelSummary, threshold: float | None = None) -> dict[str, float | None]:
    return {metric: training for metric, (_, training) in null_variances(reference, reference, threshold).items()}


def _band(value: float | None, standard_error: float | None, z: float) -> Estimate:
    if value is None or standard_error is None:
        return Estimate(value, standard_error, None, None)
    return Estimate(value, standard_error, max(0.0, value - z * standard_error), min(1.0, value + z * standard_error))


def estimate_performance(reference: LabelSummary, calibration: np.ndarray, rows: np.ndarray,
                         z: float, predicted: np.ndarray | None = None,
                         threshold: float | None = None) -> dict[str, Estimate]:
    """ROC AUC, accuracy, precision, recall and F1 estimated for `rows` per score bin, `predicted` of them
    predicted positive (default: those in bins at or above `threshold`, 0.5 by default; `predicted_rows`).

    Standard error :math:`\\sqrt{SE_{window}^2 + V_{training}}` (module docstring); band
    value ± z·SE, clipped to [0, 1].
    """
    cut = decision_cut(0.5 if threshold is None else threshold, rows.size)
    expected = expected_quality_of_scores(calibration, rows, predicted, cut)
    training = _training_variances(reference, threshold)
    out = {}
    for metric in ESTIMATED_METRICS:
        value, window_se, _ = expected[metric]
        training_variance = training.get(metric)
        se = root_sum(None if window_se is None else window_se ** 2, training_variance)
        out[metric] = _band(value, se, z)
    return out


def estimation_gap(reference: LabelSummary, calibration: np.ndarray, labelled: LabelSummary,
                   threshold: float | None = None) -> dict[str, Gap]:
    """Per metric, realized minus what CBPE expects on the same labelled rows' scores (and decisions).

    Under no concept drift the gap is noise of the standard error given; a gap
    many of them wide means labels stopped following the training calibration.
    """
    realized = quality_metrics(labelled, threshold)
    expected = expected_binary_quality(calibration, labelled, threshold)
    training = _training_variances(reference, threshold)
    out = {}
    for metric in ESTIMATED_METRICS:
        value, window_se, _ = expected[metric]
        actual = realized.get(metric)
        training_variance = training.get(metric)
        se = root_sum(None if window_se is None else window_se ** 2, training_variance)
        gap = None if actual is None or value is None else actual - value
        out[metric] = Gap(actual, value, gap, se)
    return out


def expected_class_counts(calibration: np.ndarray, rows: np.ndarray,
                          predicted: np.ndarray | None = None) -> dict[str, float]:
    """Rows behind each estimate: expected positives and negatives, predicted positives (`predicted` per bin;
    default: threshold 0.5)."""
    rows = np.asarray(rows, dtype=np.float64)
    positives = float(rows @ np.clip(calibration, 0.0, 1.0))
    called = float(rows[rows.size // 2:].sum()) if predicted is None else float(np.sum(predicted))
    return {"positives": positives, "negatives": float(rows.sum()) - positives, "predicted": called}


# What each metric rests on, as `expected_class_counts` keys: one class's rows for all but accuracy.
SUPPORT_OF = {ACCURACY: None, PRECISION: ("predicted",), RECALL: ("positives",),
              F1: ("predicted", "positives"), ROC_AUC: ("positives", "negatives")}
