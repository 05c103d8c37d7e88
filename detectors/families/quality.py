"""Model quality of one window's joined labels against the model's reference, sample-size aware."""
from __future__ import annotations

import math
from typing import Any

from driftline.vocabulary import INSUFFICIENT_DATA_REASON
from driftline.detectors.stats.quality import (
    expected_binary_quality,
    null_third_cumulants,
    null_variances,
    quality_metrics,
    quality_supports,
    root_sum,
    skew_corrected_margin,
    training_calibration,
)
from driftline.detectors.families.results import WindowResult, insufficient
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.baseline import BINARY, Baseline, LabelSummary
from driftline.vocabulary import (
    ACCURACY,
    F1,
    LOG_LOSS,
    MACRO_F1,
    MAE,
    MODEL_QUALITY,
    PRECISION,
    QUALITY_ERRORS,
    QUALITY_SCORES,
    QUALITY_VS_CALIBRATION,
    QUALITY_VS_TRAINING,
    RECALL,
    RMSE,
    ROC_AUC,
)
from driftline.window_state import WindowState

__all__ = ["model_quality"]

# Metrics that are a proportion of, or a mean over, all labelled rows; the others rest on
# one class's rows (or the rarer class's) and also need `quality_min_class_count` of them.
_ROW_METRICS = frozenset((ACCURACY, LOG_LOSS, MAE, RMSE))
_SUPPORT_NAMES = {ACCURACY: "labels", LOG_LOSS: "labels", MAE: "labels", RMSE: "labels",
                  PRECISION: "predicted positives", RECALL: "actual positives",
                  F1: "predicted or actual positives (the fewer)", ROC_AUC: "rows of the rarer class",
                  MACRO_F1: "rows of the rarest label"}


def _references(reference: LabelSummary | None, current: LabelSummary, compare_with: str
                ) -> tuple[dict[str, float | None], dict[str, float | None], dict[str, float], bool]:
    """``(reference value, standard error of the difference, its third cumulant, calibrated?)`` per metric."""
    training = quality_metrics(reference)
    if reference is None or reference.task != current.task or not reference.n:
        return training, {}, {}, False
    variances = null_variances(reference, current)
    errors = {metric: root_sum(window, ref) for metric, (window, ref) in variances.items()}
    if compare_with != QUALITY_VS_CALIBRATION or current.task != BINARY:
        return training, errors, null_third_cumulants(reference, current), False
    calibration = training_calibration(reference)
    if calibration is None or calibration.size != current.bins:
        return training, errors, null_third_cumulants(reference, current), False
    values, calibrated_errors, cumulants = {}, {}, {}
    for metric, (value, window_se, third) in expected_binary_quality(calibration, current).items():
        values[metric] = value
        cumulants[metric] = third
        # The reference's own error (finite training labels behind the curve),
        # approximated by the training metric's sampling variance.
        training_variance = variances.get(metric, (None, None))[1]
        calibrated_errors[metric] = None if window_se is None or training_variance is None else \
            math.sqrt(window_se ** 2 + training_variance)
    own = expected_binary_quality(calibration, reference)[LOG_LOSS][0]
    if values.get(LOG_LOSS) is not None and own is not None and training.get(LOG_LOSS) is not None:
        # bin midpoints understate the loss of scores at 0 or 1: add the gap the reference itself shows
        values[LOG_LOSS] = float(values[LOG_LOSS]) + float(training[LOG_LOSS]) - own
    return values, calibrated_errors, cumulants, True


def model_quality(baseline: Baseline, state: WindowState, thresholds: WindowThresholds) -> list[WindowResult]:
    r"""Quality metrics of the window's joined labels against the model's reference, sample-size aware.

    The reference (the ``quality_compared_with`` setting): ``"calibration"`` (default, binary
    tasks) is the value each metric would have on *this window's scores* if the
    labels followed the training calibration (`expected_binary_quality`), so a
    covariate shift, which moves the scores but not the relation, does not read as a
    quality drop; ``"training"`` (and regression, multiclass) is the training metric.

    A score (higher is better) breaches when it falls below
    ``reference - margin``, an error (lower is better) when it rises above
    ``reference + margin``, with

    .. math::  \text{margin} = \max(\text{floor},\; z \cdot SE)

    where *SE* is the standard error of the difference under the null hypothesis
    (`expected_binary_quality`, `quality_standard_errors`), *z* is ``quality_z``
    (one-sided) and the floor is ``quality_max_drop`` (scores, absolute) or
    ``quality_max_error_increase`` × reference (errors, relative): the floor
    keeps huge windows from flagging trivial drops, the z-term keeps small
    windows from flagging noise. A metric with fewer than ``quality_min_labels``
    labels, or (precision, recall, F1, ROC AUC, macro F1) fewer than
    ``quality_min_class_count`` rows behind it (`quality_supports`), is
    insufficient data. Details carry ``training``, ``expected`` (calibration
    reference), ``compared_with``, ``support``, ``standard_error``, ``z``,
    ``margin``, ``minimum_margin``, ``chunk_spread`` (when the metric's spread over reference chunks of
    the window's labels, `Baseline.quality_spreads`, is wider than *SE*: *SE* is then that spread) and
    ``reference_rows`` (the baseline's ``quality_reference``).
    Paging is on the evidence accumulated over windows (`driftline.detectors.families.evidence`), not on
    one window's breach.
    """
    summary = state.labels
    if summary.task is None or summary.n == 0:
        return []
    current = quality_metrics(summary)
    reference_summary = baseline.quality if baseline.quality is not None and \
        baseline.quality.task == summary.task else None
    training = quality_metrics(reference_summary)
    reference, errors, cumulants, calibrated = _references(reference_summary, summary, thresholds.quality_compared_with)
    compared_with = QUALITY_VS_CALIBRATION if calibrated else QUALITY_VS_TRAINING
    supports = quality_supports(summary)
    z = thresholds.quality_z
    results = []
    for metric, value in current.items():
        if metric not in QUALITY_SCORES and metric not in QUALITY_ERRORS:
            details: dict[str, Any] = dict(task=summary.task, labels=summary.n)
            results.append(WindowResult(MODEL_QUALITY, None, metric, value, None, False, details))
            continue
        support = supports.get(metric, summary.n)
        # The keys are QualityDetails' fields (driftline.vocabulary), which alerts and the dashboard read.
        details = dict(task=summary.task, labels=summary.n, training=training.get(metric),
                       compared_with=compared_with, support=support, support_of=_SUPPORT_NAMES.get(metric, "labels"))
        if calibrated:
            details.update(expected=reference.get(metric))
        if summary.dropped:
            details.update(dropped_labels=summary.dropped)
        if baseline.quality_reference:  # in-sample or holdout: the sequential evidence reads it (evidence.py)
            details.update(reference_rows=baseline.quality_reference)
        target = reference.get(metric)
        threshold = None
        breached = False
        if target is not None and value is not None:
            standard_error = errors.get(metric)
            spread = None if baseline.quality_spreads is None else \
                baseline.quality_spreads.standard_deviation(metric, summary.n)
            if spread is not None and (standard_error is None or spread > standard_error):
                # the metric's observed spread over reference chunks: its per-row model understates a heavy tail
                details.update(chunk_spread=spread)
                standard_error = spread
            noise, skewness = skew_corrected_margin(standard_error, cumulants.get(metric, 0.0), z)
            floor = (thresholds.quality_max_drop if metric in QUALITY_SCORES
                     else target * thresholds.quality_max_error_increase)
            margin = floor if noise is None else max(floor, noise)
            details.update(standard_error=standard_error, z=z, skewness=skewness, margin=margin,
                           minimum_margin=floor)
            if metric in QUALITY_SCORES:
                threshold = target - margin
                breached = value < threshold
            else:
                threshold = target + margin
                breached = value > threshold
        if summary.n < thresholds.quality_min_labels:
            insufficient(details, f"{INSUFFICIENT_DATA_REASON}: {summary.n} labels < {thresholds.quality_min_labels}")
            breached = False
        elif metric not in _ROW_METRICS and support < thresholds.quality_min_class_count:
            insufficient(details, f"{INSUFFICIENT_DATA_REASON}: {support} {details['support_of']} "
                                   f"< {thresholds.quality_min_class_count}")
            breached = False
        results.append(WindowResult(MODEL_QUALITY, None, metric, value, threshold, bool(breached), details))
    return results
