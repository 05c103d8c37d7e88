"""estimated_quality: a binary classifier's metrics estimated from one window's scores, judged against training."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from driftline.detectors.estimation.cbpe import (
    SUPPORT_OF,
    Estimate,
    Gap,
    calibrated_range,
    estimate_performance,
    estimation_gap,
    expected_class_counts,
    fine_bin_score_counts,
)
from driftline.detectors.stats.quality import quality_metrics, training_calibration
from driftline.detectors.families.results import WindowResult, insufficient
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.baseline import BINARY, CLASS, Baseline, LabelSummary
from driftline.vocabulary import ESTIMATED_METRICS, ESTIMATED_QUALITY, INSUFFICIENT_DATA, INSUFFICIENT_DATA_REASON
from driftline.window_state import WindowState

__all__ = ["estimated_quality", "judge_estimates"]


_SUPPORT_NAMES = {"predicted": "predicted positives", "positives": "expected positives",
                  "negatives": "expected negatives"}


def _support(metric: str, counts: Mapping[str, float]) -> tuple[float | None, str | None]:
    names = SUPPORT_OF[metric]
    if names is None:
        return None, None
    return min(counts[name] for name in names), " or ".join(_SUPPORT_NAMES[name] for name in names)


def judge_estimates(reference: LabelSummary, calibration: np.ndarray, rows: np.ndarray,
                    thresholds: WindowThresholds, labelled: LabelSummary | None = None,
                    training: Mapping[str, float | None] | None = None) -> list[WindowResult]:
    """One result per estimated metric for `rows` (window rows per score bin), with its verdict.

    Breached when the band's upper end lies below ``training - estimated_quality_max_drop``
    (the result's threshold). Untrusted (``insufficient_data`` with a reason, never
    breached): fewer than ``estimated_quality_min_rows`` scored rows, more than
    ``estimated_quality_max_outside_share`` of them outside the score range the training
    labels covered, or (all but accuracy) fewer than ``quality_min_class_count`` expected
    rows of the class the metric rests on. `labelled` (the window's joined labels, binary)
    adds ``realized``, ``gap`` and ``concept_drift`` (the gap beyond ``estimated_quality_z``
    standard errors, judged once ``quality_min_labels`` labels are in). `training`: the values
    the estimates are judged against, when not `reference`'s own metrics (a segment's).
    """
    z = thresholds.estimated_quality_z
    estimates = estimate_performance(reference, calibration, rows, z)
    training = quality_metrics(reference) if training is None else training
    n = float(rows.sum())
    counts = expected_class_counts(calibration, rows)
    span = calibrated_range(reference)
    bins = rows.size
    outside = 0.0 if span is None or not n else float(rows[:span[0]].sum() + rows[span[1] + 1:].sum()) / n
    gaps: dict[str, Gap] = {}
    if labelled is not None and labelled.task == BINARY and labelled.n:
        gaps = estimation_gap(reference, calibration, labelled)
    results = []
    for metric in ESTIMATED_METRICS:
        estimate: Estimate = estimates[metric]
        reference_value = training.get(metric)
        details: dict[str, Any] = dict(rows=int(n), training=reference_value, standard_error=estimate.standard_error,
                                       lower=estimate.lower, upper=estimate.upper, z=z,
                                       max_drop=thresholds.estimated_quality_max_drop,
                                       outside_calibrated_share=outside)
        if span is not None:
            details.update(calibrated_range=[span[0] / bins, (span[1] + 1) / bins])
        support, support_of = _support(metric, counts)
        if support is not None:
            details.update(support=support, support_of=support_of)
        threshold = None if reference_value is None else reference_value - thresholds.estimated_quality_max_drop
        breached = threshold is not None and estimate.upper is not None and estimate.upper < threshold
        if n < thresholds.estimated_quality_min_rows:
            insufficient(details, f"{INSUFFICIENT_DATA_REASON}: {int(n)} scored rows < {thresholds.estimated_quality_min_rows}")
        elif outside > thresholds.estimated_quality_max_outside_share:
            insufficient(details, f"untrusted: {outside:.1%} of scores outside the calibrated range "
                                  f"[{details['calibrated_range'][0]:.3f}, {details['calibrated_range'][1]:.3f}] "
                                  f"> {thresholds.estimated_quality_max_outside_share:.1%}")
        elif support is not None and support < thresholds.quality_min_class_count:
            insufficient(details, f"{INSUFFICIENT_DATA_REASON}: {support:.0f} {support_of} < {thresholds.quality_min_class_count}")
        elif estimate.value is None:
            insufficient(details, f"{INSUFFICIENT_DATA_REASON}: no estimate (one class expected only)")
        if details.get(INSUFFICIENT_DATA):
            breached = False
        gap = gaps.get(metric)
        if gap is not None:
            details.update(labels=int(labelled.n), realized=gap.realized, expected_on_labels=gap.expected,
                           gap=gap.gap, gap_standard_error=gap.standard_error)
            if gap.gap is not None and gap.standard_error and labelled.n >= thresholds.quality_min_labels:
                details.update(concept_drift=bool(abs(gap.gap) > z * gap.standard_error))
        results.append(WindowResult(ESTIMATED_QUALITY, None, metric, estimate.value, threshold, bool(breached), details))
    return results


def estimated_quality(baseline: Baseline, state: WindowState, thresholds: WindowThresholds) -> list[WindowResult]:
    """CBPE for one window (`driftline.detectors.estimation.cbpe`): results as `judge_estimates`.

    Needs a binary baseline with training labels (its calibration) and the window's
    prediction counted on the baseline's bins; nothing otherwise (multiclass and
    regression are not estimated).
    """
    reference = baseline.quality
    if reference is None or reference.task != BINARY or baseline.prediction_source in (None, CLASS):
        return []
    window = state.prediction
    if window is None or window.counts is None or window.sums is None:
        return []
    calibration = training_calibration(reference)
    if calibration is None:
        return []
    rows = fine_bin_score_counts(window.counts, window.sums, reference.bins)
    labelled = state.labels if state.labels.task == BINARY and state.labels.n else None
    return judge_estimates(reference, calibration, rows, thresholds, labelled)
